-- nonreentrant_acquire: take a non-reentrant lock in Redisson's RLock layout
-- (the same hash, so RLock holders of either kind exclude each other); a
-- second acquire by the holding owner is refused, not counted.
--
-- KEYS[1]  the lock hash (the user's lock name): field = owner id, value = 1
-- KEYS[2]  the fencing counter, redisson_lock_token:{name}
-- ARGV[1]  lease in milliseconds (PEXPIRE of the whole hash)
-- ARGV[2]  owner id, "<client uuid>:<handle id>"
-- ARGV[3]  expiry of a fencing counter this call creates, in milliseconds
-- ARGV[4]  when the caller will wait: how long (ms) this call registers
--          the owner among the waiters a release wakes by name; absent or
--          "0" (a try without a wait, the hot path: ARGV[5] absent too)
--          registers nothing
-- ARGV[5]  with ARGV[4]: the waiters, keylatch_lock_waiters:{name} (a
--          zset owner -> end in the lock's slot; not a key, see
--          register_waiter)
-- ARGV[6]  with ARGV[4]: the wait's tag, 1..1023 when a release may grant
--          this waiter the lock (see grant_waiter), "0" when not; a try
--          that finds the lock granted to this very wait (take_grant)
--          answers it as its first hold; a waiter's try that finds the
--          lock held answers {0, pttl, counter, tag}: the fencing
--          counter's value then (0 when missing), so a grant message with
--          a token not above it is one made before this try ran, and
--          undone since (else this try would have taken it); and the tag
--          it registered with, so a reply that comes after its wait gave
--          up takes that registration back
--
-- Returns  {1, token} when acquired (token: the hold's identity, as in
--          reentrant_acquire; {1, token, 1} when the call made the counter,
--          as there); {-1, pttl} when this owner holds it already
--          (a re-entry: refused, nothing changes); {0, pttl} when another
--          owner holds it: pttl bounds the wait.
--
-- From lib/ (scripts.rs puts them first): register_waiter, unregister_waiter, stretch, take_grant, counter_now.
local span = tonumber(ARGV[4] or '0') or 0
local tag = tonumber(ARGV[6] or '0') or 0
local others = false
-- PTTL answers -2 for a missing key: EXISTS and the held lock's time left
-- in one call (each call a script makes costs the server more than the
-- command itself).
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 then
    if span > 0 then
        others = unregister_waiter(ARGV[5], ARGV[2])
    end
    local token = redis.call('incr', KEYS[2])
    local made = token == 1
    if made then
        local t = redis.call('time')
        token = tonumber(t[1]) * 1000000 + tonumber(t[2])
        redis.call('set', KEYS[2], string.format('%.0f', token), 'px', ARGV[3])
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    if others then
        redis.call('hset', KEYS[1], 'keylatch_waiters', 1)
    end
    if made then
        return {1, token, 1}
    end
    return {1, token}
end
-- One read for the owner (a re-entry), a read-write lock's `mode` and the
-- waiters' mark (register_waiter); another type fails it (WRONGTYPE).
local fields = redis.call('hmget', KEYS[1], ARGV[2], 'mode', 'keylatch_waiters')
if fields[1] then
    if span > 0 then
        local granted = take_grant(KEYS[1], KEYS[2], ARGV[5], ARGV[2], tag, ARGV[1])
        if granted then
            return {1, granted}
        end
    end
    return {-1, pttl}
end
if span > 0 then
    register_waiter(KEYS[1], pttl, ARGV[5], ARGV[2], span, tag,
        { mode = fields[2] ~= false, marked = fields[3] ~= false })
    return {0, pttl, counter_now(KEYS[2]), tag}
end
return {0, pttl}
