-- nonreentrant_acquire: take a non-reentrant lock in Redisson's RLock layout
-- (the same hash, so RLock holders of either kind exclude each other); a
-- second acquire by the holding owner is refused, not counted.
--
-- KEYS[1]  the lock hash (the user's lock name): field = owner id, value = 1
-- KEYS[2]  the fencing counter, redisson_lock_token:{name}
-- ARGV[1]  lease in milliseconds (PEXPIRE of the whole hash)
-- ARGV[2]  owner id, "<client uuid>:<handle id>"
-- ARGV[3]  expiry of a fencing counter this call creates, in milliseconds
--
-- Returns  {1, token} when acquired (token: the hold's identity, as in
--          reentrant_acquire); {-1, pttl} when this owner holds it already
--          (a re-entry: refused, nothing changes); {0, pttl} when another
--          owner holds it: pttl bounds the wait.
if redis.call('exists', KEYS[1]) == 0 then
    local token = redis.call('incr', KEYS[2])
    if token == 1 then
        local t = redis.call('time')
        token = tonumber(t[1]) * 1000000 + tonumber(t[2])
        redis.call('set', KEYS[2], string.format('%.0f', token), 'px', ARGV[3])
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, token}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    return {-1, redis.call('pttl', KEYS[1])}
end
return {0, redis.call('pttl', KEYS[1])}
