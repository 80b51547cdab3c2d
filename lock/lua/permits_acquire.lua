-- permits_acquire: take n leased permits of a Redisson-compatible
-- permit-expirable semaphore (RPermitExpirableSemaphore).
--
-- KEYS[1]  the semaphore (the user's name): a string, the available permits
-- KEYS[2]  its permits, {name}:timeout: zset raw permit id (16 bytes) ->
--          expiry in ms (Redisson: 922337203685477 = no lease)
-- ARGV[1]  n, the permits wanted (> 0)
-- ARGV[2]  lease in ms: each permit expires this long from now unless
--          renewed
-- ARGV[3]  the semaphore's channel, redisson_sc:{name} (not a key)
-- ARGV[4]  the publish command: "publish" or "spublish"
-- ARGV[5..4+n]  the new permits' ids, 32 hex digits each (stored raw, as
--          Redisson stores them)
--
-- Returns  {1, lease} when taken; {0, wait} when fewer than n are
--          available: wait (ms) until the nearest permit expires, -1 when
--          none will; {-1, 0} when the semaphore does not exist; {-3, 0}
--          when its key (or its permits key) holds something else (another
--          type, a string that is no integer): nothing changes.
--
-- Expired permits go back to the pool first (and the new count is
-- published). Expiries come from the server's TIME, never a client's
-- clock (Redisson uses the client's; the stored shape is the same).
local st = redis.call('type', KEYS[1]).ok
local zt = redis.call('type', KEYS[2]).ok
if (st ~= 'none' and (st ~= 'string' or not string.match(redis.call('get', KEYS[1]), '^%-?%d+$')))
    or (zt ~= 'none' and zt ~= 'zset') then
    return {-3, 0}
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Every expired permit at once (ZREMRANGEBYSCORE counts them; no ids are
-- read into Lua, whose unpack of a long list fails): a dead holder's
-- permits are all back after its lease, not a thousand per call.
local back = redis.call('zremrangebyscore', KEYS[2], 0, now)
if back > 0 then
    local value = redis.call('incrby', KEYS[1], back)
    if value > 0 then
        redis.call(ARGV[4], ARGV[3], value)
    end
end
local value = redis.call('get', KEYS[1])
if value == false then
    return {-1, 0}
end
local n = tonumber(ARGV[1])
if (tonumber(value) or 0) >= n then
    redis.call('decrby', KEYS[1], n)
    local lease = tonumber(ARGV[2])
    for i = 5, 4 + n do
        local raw = ARGV[i]:gsub('..', function(h) return string.char(tonumber(h, 16)) end)
        redis.call('zadd', KEYS[2], now + lease, raw)
    end
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl)
    end
    return {1, lease}
end
local nearest = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if nearest[1] and tonumber(nearest[2]) < 922337203685477 then
    return {0, math.max(1, tonumber(nearest[2]) - now)}
end
return {0, -1}
