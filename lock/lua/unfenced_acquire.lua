-- unfenced_acquire: take or re-enter a Redisson-compatible reentrant lock
-- without a fencing counter (a RedLock member: Redisson's RedLock takes
-- plain RLocks on each master; the member's owner id is unique to one
-- acquire, so the owner alone names the hold).
--
-- KEYS[1]  the lock hash (the user's lock name): field = owner id, value = hold count
-- KEYS[2]  unused (the counter every lock kind declares, for one shape)
-- ARGV[1]  lease in milliseconds (PEXPIRE of the whole hash)
-- ARGV[2]  owner id
--
-- Returns  {holds, 0} when acquired (holds = this owner's count after; no
--          token); {0, pttl} when another owner holds it.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, 0}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {holds, 0}
end
return {0, redis.call('pttl', KEYS[1])}
