-- reentrant_release: drop one hold of a Redisson-compatible reentrant lock.
--
-- KEYS[1]  the lock hash (the user's lock name)
-- KEYS[2]  the fencing counter, redisson_lock_token:{name}
-- ARGV[1]  owner id
-- ARGV[2]  the unlock channel, redisson_lock__channel:{name} (a channel, not
--          a key: declared as a key, a migrating slot would refuse the call)
-- ARGV[3]  the publish command: "publish" or "spublish" (sharded, in a cluster)
-- ARGV[4]  the token of the hold being released, or "0" to release by owner
--          without the check (last, so a prepared command head is reused)
--
-- Returns  nil when ARGV[1] does not hold the lock (not owner, expired), or
--          when the counter names another hold than ARGV[4] (a late or
--          retried release must not end a hold taken after it): nothing changes;
--          0 when holds remain (the expiry is left alone: it is the holds'
--          own, kept by their acquires and renewals);
--          1 when this was the last hold: the key is deleted and "0"
--          published on the channel, as Redisson does, so waiters wake.
--          A name that now holds another type (the hold was lost and the
--          name reused: a semaphore's string, an application's list) is
--          nil too, never an error: the hold is gone, nothing changes.
if redis.call('type', KEYS[1]).ok ~= 'hash' then
    return nil
end
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if holds == nil then
    return nil
end
if ARGV[4] ~= '0' then
    local ct = redis.call('type', KEYS[2]).ok
    if ct ~= 'string' and ct ~= 'none' then
        -- A counter overwritten with another type: the renewal judges
        -- such a hold gone, and so does its release.
        return nil
    end
    local current = redis.call('get', KEYS[2])
    if current and current ~= ARGV[4] then
        return nil
    end
end
if holds > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
    return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], ARGV[2], '0')
return 1
