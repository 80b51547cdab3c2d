-- reentrant_release: drop one hold of a Redisson-compatible reentrant lock.
--
-- KEYS[1]  the lock hash (the user's lock name)
-- KEYS[2]  the fencing counter, redisson_lock_token:{name}
-- ARGV[1]  owner id
-- ARGV[2]  the unlock channel, redisson_lock__channel:{name} (a channel, not
--          a key: declared as a key, a migrating slot would refuse the call)
-- ARGV[3]  the publish command: "publish" or "spublish" (sharded, in a cluster)
-- ARGV[4]  the waiters woken by name, keylatch_lock_waiters:{name} (a zset,
--          owner -> end, see register_waiter; in the lock's slot), also the
--          channel they are woken on. Not declared as a key: it is mostly
--          missing, and a migrating slot answers TRYAGAIN to a call
--          declaring a missing key; it is read only when the hash says
--          waiters registered, through redis.pcall (an error, such as the
--          key having moved with a migrating slot, reads as none)
-- ARGV[5]  the token of the hold being released, or "0" to release by owner
--          without the check (last, so a prepared command head is reused)
--
-- Returns  nil when ARGV[1] does not hold the lock (not owner, expired), or
--          when the counter names another hold than ARGV[5] (a late or
--          retried release must not end a hold taken after it): nothing changes;
--          0 when holds remain (the expiry is left alone: it is the holds'
--          own, kept by their acquires and renewals);
--          1 when this was the last hold: the key is deleted, and
--          waiters are woken on the channel. When keylatch waiters are
--          registered (the hash's keylatch_waiters field says so, see
--          register_waiter), the longest registered is taken out
--          (wake_one), its owner id published on ARGV[4] and "00" on
--          ARGV[2]: Redisson reads that as the number 0, its unlock
--          message, so Java waiters wake as ever, while registered
--          keylatch waiters leave the lock to the one woken by name (no
--          herd). Else "0", as Redisson publishes, wakes every waiter.
--          A name that now holds another type (the hold was lost and the
--          name reused: a semaphore's string, an application's list) is
--          nil too, never an error: the hold is gone, nothing changes.
--
-- From lib/ (scripts.rs puts them first): wake_one.
--
-- One call reads the hold and the waiters' mark; a key of another type
-- answers it with an error, which redis.pcall hands back as a table with
-- `err` (no TYPE call first: the release is on every pair's path).
local got = redis.pcall('hmget', KEYS[1], ARGV[1], 'keylatch_waiters')
if got.err then
    return nil
end
local holds = tonumber(got[1])
if holds == nil then
    return nil
end
if ARGV[5] ~= '0' then
    local current = redis.pcall('get', KEYS[2])
    if type(current) == 'table' and current.err then
        -- A counter overwritten with another type: the renewal judges
        -- such a hold gone, and so does its release.
        return nil
    end
    if current and current ~= ARGV[5] then
        return nil
    end
end
if holds > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
    return 0
end
-- (A registry that cannot be read, of another type or moved away with a
-- migrating slot, is none: every waiter is woken by "0".)
local woken = got[2] and wake_one(ARGV[4])
redis.call('del', KEYS[1])
if woken then
    redis.call(ARGV[3], ARGV[4], woken)
    redis.call(ARGV[3], ARGV[2], '00')
else
    redis.call(ARGV[3], ARGV[2], '0')
end
return 1
