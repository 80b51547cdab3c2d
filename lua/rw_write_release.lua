-- rw_write_release: drop one write hold of a Redisson-compatible read-write
-- lock; on the last one free the lock, or downgrade it to the owner's reads.
--
-- KEYS[1]  the lock hash (the user's lock name)
-- KEYS[2]  the fencing counter, redisson_lock_token:{name}
-- KEYS[3]  the read-hold base, {name} (read hold i of owner o is
--          KEYS[3] .. ':' .. o .. ':rwlock_timeout:' .. i)
-- ARGV[1]  owner id (the field is ARGV[1]:write)
-- ARGV[2]  the lock's channel, redisson_rwlock:{name} (not a key)
-- ARGV[3]  the publish command: "publish" or "spublish"
-- ARGV[4]  the token of the hold being released, or "0" to release by owner
--          without the check
--
-- Returns  nil when this owner holds no write hold, or the counter names
--          another hold than ARGV[4] (nothing changes); 0 when write holds
--          remain; 1 for the last one: the hash is deleted, or, when this
--          owner still has read holds, 'mode' becomes 'read' and the hash
--          lives as long as its longest read hold (downgrade). Either way
--          "1" is published (Redisson's write-unlock message, which wakes
--          every waiter; Redisson publishes nothing on a downgrade and
--          leaves waiting readers asleep).
local field = ARGV[1] .. ':write'
if redis.call('hget', KEYS[1], 'mode') ~= 'write' then
    return nil
end
local holds = tonumber(redis.call('hget', KEYS[1], field))
if holds == nil then
    return nil
end
if ARGV[4] ~= '0' then
    local current = redis.call('get', KEYS[2])
    if current and current ~= ARGV[4] then
        return nil
    end
end
if holds > 1 then
    redis.call('hincrby', KEYS[1], field, -1)
    return 0
end
redis.call('hdel', KEYS[1], field)
local longest = -3
if redis.call('hlen', KEYS[1]) > 1 then
    redis.call('hset', KEYS[1], 'mode', 'read')
    for _, f in ipairs(redis.call('hkeys', KEYS[1])) do
        local n = tonumber(redis.call('hget', KEYS[1], f))
        if f ~= 'mode' and n then
            for i = n, 1, -1 do
                local left = redis.call('pttl', KEYS[3] .. ':' .. f .. ':rwlock_timeout:' .. i)
                longest = math.max(longest, left)
            end
        end
    end
end
if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
else
    redis.call('del', KEYS[1])
end
redis.call(ARGV[3], ARGV[2], '1')
return 1
