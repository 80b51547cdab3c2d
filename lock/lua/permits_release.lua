-- permits_release: give leased permits of a Redisson-compatible
-- permit-expirable semaphore back, by id.
--
-- KEYS[1]  the semaphore (a string, the available permits)
-- KEYS[2]  its permits, {name}:timeout (zset raw id -> expiry ms)
-- ARGV[1]  the semaphore's channel, redisson_sc:{name} (not a key)
-- ARGV[2]  the publish command: "publish" or "spublish"
-- ARGV[3..]  permit ids, 32 hex digits each
--
-- Returns  {released, expired}: released = ids that were still out (each
--          goes back to the pool, and the new count is published);
--          expired = of those, ids whose lease had already run out (back in
--          the pool all the same, as Redisson does). An id not out any more
--          (released before, or expired and taken back by an acquire) is in
--          neither count. A count that is gone or now holds another type
--          (the name reused), or a permits key of another type: {0, 0},
--          never an error; ids still in the permits are removed, and no
--          count is made up from them (a release must not re-create a
--          semaphore with only its own permits).
local st = redis.call('type', KEYS[1]).ok
local zt = redis.call('type', KEYS[2]).ok
if zt ~= 'zset' then
    return {0, 0}
end
if st ~= 'string' or not string.match(redis.call('get', KEYS[1]), '^%-?%d+$') then
    for i = 3, #ARGV do
        local raw = ARGV[i]:gsub('..', function(h) return string.char(tonumber(h, 16)) end)
        redis.call('zrem', KEYS[2], raw)
    end
    return {0, 0}
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local released, expired = 0, 0
for i = 3, #ARGV do
    local raw = ARGV[i]:gsub('..', function(h) return string.char(tonumber(h, 16)) end)
    local score = redis.call('zscore', KEYS[2], raw)
    if score and redis.call('zrem', KEYS[2], raw) == 1 then
        released = released + 1
        if tonumber(score) <= now then
            expired = expired + 1
        end
    end
end
if released > 0 then
    local value = redis.call('incrby', KEYS[1], released)
    redis.call(ARGV[2], ARGV[1], value)
end
return {released, expired}
