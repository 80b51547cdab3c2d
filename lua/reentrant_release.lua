-- reentrant_release: drop one hold of a Redisson-compatible reentrant lock.
--
-- KEYS[1]  the lock hash (the user's lock name)
-- KEYS[2]  the unlock channel, redisson_lock__channel:{name}
-- KEYS[3]  the fencing counter, redisson_lock_token:{name}
-- ARGV[1]  the unlock message ("0", as Redisson sends)
-- ARGV[2]  lease in milliseconds: while holds remain, the key lives at least
--          this long (a longer expiry, from a re-entry with a longer lease,
--          is kept: cutting it short would end that hold early)
-- ARGV[3]  owner id
-- ARGV[4]  the publish command: "publish" or "spublish" (sharded, in a cluster)
-- ARGV[5]  the fencing token of the hold being released, or "0" to skip the check
--
-- Returns  nil when ARGV[3] does not hold the lock (not owner, expired), or
--          when the counter shows a newer hold than ARGV[5] (a late or
--          retried release must not end a hold taken after it): nothing changes;
--          0 when holds remain (lease renewed);
--          1 when this was the last hold: the key is deleted and the unlock
--          message published so waiters wake.
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
if ARGV[5] ~= '0' then
    local current = redis.call('get', KEYS[3])
    if current and current ~= ARGV[5] then
        return nil
    end
end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
        redis.call('pexpire', KEYS[1], ARGV[2])
    end
    return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
return 1
