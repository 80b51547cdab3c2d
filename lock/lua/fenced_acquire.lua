-- fenced_acquire: take or re-enter a Redisson-compatible fenced lock
-- (RFencedLock): the RLock hash, and a token from INCR of
-- redisson_lock_token:{name} on every acquire, re-entries included.
--
-- KEYS[1]  the lock hash (the user's lock name): field = owner id, value = hold count
-- KEYS[2]  the token counter, redisson_lock_token:{name} (no expiry, as
--          Redisson's: a Java RFencedLock and this lock count on one counter;
--          an expiry another lock kind of this name gave it is removed, so
--          tokens never start again below earlier ones)
-- ARGV[1]  lease in milliseconds (PEXPIRE of the whole hash)
-- ARGV[2]  owner id, "<client uuid>:<handle id>"
-- ARGV[3]  (unused: the other RLock acquires' counter expiry)
-- ARGV[4]  when the caller will wait: how long (ms) this call registers
--          the owner among the waiters a release wakes by name; absent or
--          "0" (a try without a wait: ARGV[5] absent too) registers nothing
-- ARGV[5]  with ARGV[4]: the waiters, keylatch_lock_waiters:{name} (a
--          zset owner -> end in the lock's slot; not a key, see
--          register_waiter)
-- ARGV[6]  with ARGV[4]: the wait's tag, 1..1023 when a release may grant
--          this waiter the lock (see grant_waiter), "0" when not; a try
--          that finds the lock granted to this very wait (take_grant)
--          answers it as its first hold, with the grant's token; a
--          waiter's try that finds the lock held answers {0, pttl,
--          counter, tag} (see reentrant_acquire)
--
-- Returns  {holds, token} when acquired (holds = this owner's count after;
--          token = this acquire's INCR, greater than every token before);
--          {0, pttl} when another owner holds it.
--
-- From lib/ (scripts.rs puts them first): register_waiter, unregister_waiter, stretch, take_grant, counter_now.
local span = tonumber(ARGV[4] or '0') or 0
local tag = tonumber(ARGV[6] or '0') or 0
-- PTTL answers -2 for a missing key: EXISTS and the held lock's time left
-- in one call; one HMGET reads the owner, a read-write lock's `mode` and
-- the waiters' mark (each call a script makes costs the server more than
-- the command itself; another type fails the HMGET: WRONGTYPE).
local pttl = redis.call('pttl', KEYS[1])
local free = pttl == -2
local fields = free and {}
    or redis.call('hmget', KEYS[1], ARGV[2], 'mode', 'keylatch_waiters')
if not free and not fields[1] then
    if span > 0 then
        register_waiter(KEYS[1], pttl, ARGV[5], ARGV[2], span, tag,
            { mode = fields[2] ~= false, marked = fields[3] ~= false })
        return {0, pttl, counter_now(KEYS[2]), tag}
    end
    return {0, pttl}
end
if not free and span > 0 then
    local granted = take_grant(KEYS[1], KEYS[2], ARGV[5], ARGV[2], tag, ARGV[1])
    if granted then
        return {1, granted}
    end
end
-- Before anything is written: a registry of the wrong type fails the
-- call with nothing taken.
local others = span > 0 and unregister_waiter(ARGV[5], ARGV[2])
-- The counter first: if it fails (another type), nothing is taken.
local token = redis.call('incr', KEYS[2])
if token == 1 then
    -- New (or gone): start above any token an earlier counter gave, at the
    -- server's time in µs, as the other lock kinds do.
    local t = redis.call('time')
    token = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('set', KEYS[2], string.format('%.0f', token))
else
    redis.call('persist', KEYS[2])
end
local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
-- (`pttl` is still the key's, -2 when free: nothing above changed its
-- expiry.)
if pttl < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
if others then
    redis.call('hsetnx', KEYS[1], 'keylatch_waiters', 1)
end
return {holds, token}
