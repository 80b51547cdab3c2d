-- rw_read_release: drop one read hold of a Redisson-compatible read-write
-- lock (RedissonReadLock's unlock).
--
-- KEYS[1]  the lock hash (the user's lock name)
-- KEYS[2]  this owner's read-hold prefix, {name}:<owner>:rwlock_timeout
-- KEYS[3]  the read-hold base, {name} (read hold i of owner o is
--          KEYS[3] .. ':' .. o .. ':rwlock_timeout:' .. i)
-- ARGV[1]  owner id
-- ARGV[2]  the lock's channel, redisson_rwlock:{name} (not a key)
-- ARGV[3]  the publish command: "publish" or "spublish"
-- ARGV[4]  ignored (read holds have no token; kept so every release has
--          the same shape)
--
-- Returns  nil when this owner holds no read hold, or when every read hold
--          it had has expired (their stale count is cleared, and the lock
--          freed if nothing else holds it); 0 when the lock is still held
--          (by this owner's other holds or by others); 1 when this freed
--          the lock: the hash is deleted and "0" published (Redisson's
--          read-unlock message).
local function longest_read()
    local longest = -3
    for _, f in ipairs(redis.call('hkeys', KEYS[1])) do
        local n = tonumber(redis.call('hget', KEYS[1], f))
        if f ~= 'mode' and n then
            for i = n, 1, -1 do
                local left = redis.call('pttl', KEYS[3] .. ':' .. f .. ':rwlock_timeout:' .. i)
                longest = math.max(longest, left)
            end
        end
    end
    return longest
end

local mode = redis.call('hget', KEYS[1], 'mode')
if mode ~= 'read' and mode ~= 'write' then
    return nil
end
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if n == nil then
    return nil
end
local alive = false
for i = 1, n do
    if redis.call('exists', KEYS[2] .. ':' .. i) == 1 then
        alive = true
        break
    end
end
local out = 0
if alive then
    n = redis.call('hincrby', KEYS[1], ARGV[1], -1)
    if n <= 0 then
        redis.call('hdel', KEYS[1], ARGV[1])
    end
    redis.call('del', KEYS[2] .. ':' .. (n + 1))
else
    -- Every read hold of this owner ran out: clear the stale count.
    redis.call('hdel', KEYS[1], ARGV[1])
    out = nil
end
if mode == 'write' then
    -- The owner's write hold keeps the lock (and its expiry).
    return out
end
local longest = longest_read()
if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    return out
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], ARGV[2], '0')
if out == nil then
    return nil
end
return 1
