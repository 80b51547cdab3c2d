-- semaphore_drain: take every available permit of a semaphore at once
-- (drainPermits); for a permit-expirable one, expired permits are returned
-- to the pool first.
--
-- KEYS[1]  the semaphore (a string, the available permits)
-- KEYS[2]  (permit-expirable only) its permits, {name}:timeout (zset: raw
--          permit id -> expiry in ms)
-- ARGV[1]  "1": only count (availablePermits), take nothing; "0": drain
--
-- Returns  the permits available, as the counter's text (drained: the
--          count is now 0 whatever it was, even below zero, as Redisson's
--          drainPermits; its expiry kept); 0 when the semaphore does not
--          exist; nil when its key holds something else than a count
--          (nothing changes).
local st = redis.call('type', KEYS[1]).ok
if st ~= 'none' and (st ~= 'string' or not string.match(redis.call('get', KEYS[1]), '^%-?%d+$')) then
    return nil
end
if KEYS[2] and redis.call('type', KEYS[2]).ok == 'zset' then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    -- Every expired permit at once (see permits_acquire).
    local back = redis.call('zremrangebyscore', KEYS[2], 0, now)
    if back > 0 then
        redis.call('incrby', KEYS[1], back)
    end
end
local value = redis.call('get', KEYS[1])
if value == false then
    return 0
end
if ARGV[1] == '0' then
    redis.call('set', KEYS[1], 0, 'keepttl')
end
-- The count as stored (a string of digits, checked above): a Lua number
-- would round a count past 2^53, and Redis would turn one past 2^63 − 1
-- into -2^63.
return value
