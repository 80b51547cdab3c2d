-- reentrant_acquire: take or re-enter a Redisson-compatible reentrant lock.
-- Every first hold gets a token from the fencing counter: the token is the
-- hold's identity (renewals and releases name it), whether or not the
-- caller shows it as a fencing token.
--
-- KEYS[1]  the lock hash (the user's lock name): field = owner id, value = hold count
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
-- Returns  {holds, token} when acquired: holds = this owner's hold count
--          after the call (1 for a first hold), token = the hold's token (a
--          re-entry returns the current one; a re-entry never shortens the
--          expiry); {1, token, 1} for a first hold whose call made the
--          counter (it lives its whole idle expiry from now: the watchdog
--          need not refresh it at the hold's first renewal); {0, pttl}
--          when another owner holds it: pttl bounds the wait.
--
-- The lock hash is exactly Redisson's RLock layout (a hash, owner -> hold
-- count, with a PEXPIRE lease; its script reads it with exists / hexists),
-- so Java and Rust holders exclude each other.
-- Tokens: INCR of the counter, as Redisson's RFencedLock does. A counter that
-- is missing (new, or expired while idle) starts again at the server's TIME
-- in microseconds, above every earlier token as long as the clock does not
-- step back (a counter rises by one per acquire, far slower than the clock).
-- The counter is written first: if it fails (WRONGTYPE, say), the script
-- stops before the lock is touched, so no lock is left held by nobody.
-- A waiter's entry among the waiters is dropped first for the same reason.
--
-- From lib/ (scripts.rs puts them first): register_waiter, unregister_waiter, stretch, take_grant, counter_now.
local span = tonumber(ARGV[4] or '0') or 0
local tag = tonumber(ARGV[6] or '0') or 0
local others = false
-- PTTL answers -2 for a missing key, so it serves as EXISTS here and as
-- the held lock's time left below (every call a script makes costs the
-- server more than the command itself).
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
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    if others then
        redis.call('hset', KEYS[1], 'keylatch_waiters', 1)
    end
    if made then
        return {1, token, 1}
    end
    return {1, token}
end
-- One read for the owner's count (a re-entry), a read-write lock's `mode`
-- and the waiters' mark (register_waiter); another type fails it
-- (WRONGTYPE), before anything is written.
local fields = redis.call('hmget', KEYS[1], ARGV[2], 'mode', 'keylatch_waiters')
if fields[1] then
    if span > 0 then
        local granted = take_grant(KEYS[1], KEYS[2], ARGV[5], ARGV[2], tag, ARGV[1])
        if granted then
            return {1, granted}
        end
    end
    -- Read before anything is written: a counter of the wrong type fails
    -- the call here, with no count taken.
    local token = tonumber(redis.call('get', KEYS[2]) or '0') or 0
    if span > 0 and unregister_waiter(ARGV[5], ARGV[2]) then
        redis.call('hsetnx', KEYS[1], 'keylatch_waiters', 1)
    end
    local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    -- A re-entry only ever extends the expiry: a shorter lease must not cut
    -- short the holds already taken (and watched) with a longer one.
    -- (`pttl` is still the key's: nothing above changed its expiry.)
    if pttl < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {holds, token}
end
if span > 0 then
    register_waiter(KEYS[1], pttl, ARGV[5], ARGV[2], span, tag,
        { mode = fields[2] ~= false, marked = fields[3] ~= false })
    return {0, pttl, counter_now(KEYS[2]), tag}
end
return {0, pttl}
