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
--
-- Returns  {holds, token} when acquired: holds = this owner's hold count
--          after the call (1 for a first hold), token = the hold's token (a
--          re-entry returns the current one; a re-entry never shortens the
--          expiry); {0, pttl} when another owner holds it: pttl bounds the wait.
--
-- The lock hash is exactly Redisson's RLock layout (exists / hexists /
-- hincrby / pexpire), so Java and Rust holders exclude each other.
-- Tokens: INCR of the counter, as Redisson's RFencedLock does. A counter that
-- is missing (new, or expired while idle) starts again at the server's TIME
-- in microseconds, above every earlier token as long as the clock does not
-- step back (a counter rises by one per acquire, far slower than the clock).
-- The counter is written first: if it fails (WRONGTYPE, say), the script
-- stops before the lock is touched, so no lock is left held by nobody.
if redis.call('exists', KEYS[1]) == 0 then
    local token = redis.call('incr', KEYS[2])
    if token == 1 then
        local t = redis.call('time')
        token = tonumber(t[1]) * 1000000 + tonumber(t[2])
        redis.call('set', KEYS[2], string.format('%.0f', token), 'px', ARGV[3])
    end
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, token}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    -- Read before anything is written: a counter of the wrong type fails
    -- the call here, with no count taken.
    local token = tonumber(redis.call('get', KEYS[2]) or '0') or 0
    local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    -- A re-entry only ever extends the expiry: a shorter lease must not cut
    -- short the holds already taken (and watched) with a longer one.
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {holds, token}
end
return {0, redis.call('pttl', KEYS[1])}
