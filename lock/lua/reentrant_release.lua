-- reentrant_release: drop one hold of a Redisson-compatible reentrant lock.
--
-- KEYS[1]  the lock hash (the user's lock name)
-- KEYS[2]  the fencing counter, redisson_lock_token:{name}
-- ARGV[1]  owner id
-- ARGV[2]  the unlock channel, redisson_lock__channel:{name} (a channel, not
--          a key: declared as a key, a migrating slot would refuse the call)
-- ARGV[3]  the publish command: "publish" or "spublish" (sharded, in a cluster)
-- ARGV[4]  the waiters woken by name, keylatch_lock_waiters:{name} (a zset,
--          owner -> end, see register_waiter; in the lock's slot); with
--          ':<client id>' after it, the channel a waiting process is woken
--          on (in the same slot: the hash tag comes first). Not declared as a key: it is mostly
--          missing, and a migrating slot answers TRYAGAIN to a call
--          declaring a missing key; it is read only when the hash says
--          waiters registered, through redis.pcall (an error, such as the
--          key having moved with a migrating slot, reads as none)
-- ARGV[5]  the lease (ms) of a hold granted to a waiter: the releaser's
--          watchdog lease, which the waiter's watchdog then renews (see
--          grant_waiter); "0" grants nothing
-- ARGV[6]  the token of the hold being released, or "0" to release by owner
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
--          (wake_one). Its process hears it on a channel of its own,
--          ARGV[4] .. ':' .. <client id> (the owner id up to its last ':').
--          A waiter whose wait is tagged (a watchdog wait) is granted the
--          lock (grant_waiter: the hash made again as its first hold, for
--          ARGV[5] ms) and named with the grant, "<owner> <tag> <token>
--          <ms>": the lock is held again at once, so nobody else is
--          woken. An untagged one is woken by its owner id, also on
--          ARGV[4] (an earlier keylatch's waiters listen there), and
--          tries; then "00" goes on ARGV[2]: Redisson reads that as the
--          number 0, its unlock message, so Java waiters wake as ever,
--          while registered keylatch waiters leave the lock to the one
--          named (no herd). Else "0", as Redisson publishes, wakes every
--          waiter. (So a Java waiter takes a lock that keylatch waiters
--          keep busy only when a release finds none registered.)
--          A name that now holds another type (the hold was lost and the
--          name reused: a semaphore's string, an application's list) is
--          nil too, never an error: the hold is gone, nothing changes.
--
-- From lib/ (scripts.rs puts them first): wake_one, grant_waiter.
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
local token = ARGV[6] or '0'
-- Whether this call saw the counter (then grant_waiter need not ask).
local counted = false
if token ~= '0' then
    local current = redis.pcall('get', KEYS[2])
    if type(current) == 'table' and current.err then
        -- A counter overwritten with another type: the renewal judges
        -- such a hold gone, and so does its release.
        return nil
    end
    if current and current ~= token then
        return nil
    end
    counted = current ~= false
end
if holds > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
    return 0
end
-- (A registry that cannot be read, of another type or moved away with a
-- migrating slot, is none: every waiter is woken by "0".)
local woken, tag = nil, 0
if got[2] then
    woken, tag = wake_one(ARGV[4])
end
local granted = woken
    and grant_waiter(KEYS[1], ARGV[1], KEYS[2], ARGV[4], woken, tag, ARGV[5] or '0', counted)
if not granted then
    redis.call('del', KEYS[1])
end
if woken then
    -- The waiter's process listens on a channel of its own (the registry's
    -- name, ':', its owner id up to the last ':', the client id), so a
    -- release wakes that process alone, not every waiting one.
    local process = ARGV[4] .. ':' .. (string.match(woken, '^(.*):') or woken)
    -- (redis.pcall: a name whose registry has no hash tag of its own, such
    -- as "a{b", may put the channel in another slot; a wake that cannot be
    -- said leaves the waiter to its next try, which takes a grant.)
    if granted then
        -- Held again at once: no other waiter could take it, so nobody
        -- else is woken.
        redis.pcall(ARGV[3], process, granted)
    else
        redis.pcall(ARGV[3], process, woken)
        -- (An earlier keylatch's waiters listen on the registry's name.)
        redis.call(ARGV[3], ARGV[4], woken)
        redis.call(ARGV[3], ARGV[2], '00')
    end
else
    redis.call(ARGV[3], ARGV[2], '0')
end
return 1
