-- reentrant_acquire: take or re-enter a Redisson-compatible reentrant lock,
-- with a fencing token.
--
-- KEYS[1]  the lock hash (the user's lock name): field = owner id, value = hold count
-- KEYS[2]  the fencing counter, redisson_lock_token:{name}
-- ARGV[1]  lease in milliseconds (PEXPIRE of the whole hash)
-- ARGV[2]  owner id, "<client uuid>:<handle id>"
-- ARGV[3]  idle expiry of the fencing counter in milliseconds
-- ARGV[4]  "1" to issue fencing tokens, "0" not to
--
-- Returns  {holds, token} when acquired (a re-entry never shortens the
--          expiry): holds = this owner's hold count after
--          the call (1 for a first hold), token = the fencing token of the
--          hold (0 when fencing is off; a re-entry returns the hold's token);
--          {0, pttl} when another owner holds it: pttl bounds the wait.
--
-- The lock hash is exactly Redisson's RLock layout (exists / hexists /
-- hincrby / pexpire), so Java and Rust holders exclude each other.
-- Tokens: max(previous + 1, server TIME in microseconds). They rise across
-- holders even after the counter expired while idle, provided the server's
-- clock does not step back; Redisson's INCR on the same key keeps rising too.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    if ARGV[4] ~= '1' then
        return {1, 0}
    end
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local prev = tonumber(redis.call('get', KEYS[2]) or '0') or 0
    local token = math.max(prev + 1, now)
    redis.call('set', KEYS[2], string.format('%.0f', token), 'px', ARGV[3])
    return {1, token}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    -- A re-entry only ever extends the expiry: a shorter lease must not cut
    -- short the holds already taken (and watched) with a longer one.
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    if ARGV[4] ~= '1' then
        return {holds, 0}
    end
    redis.call('pexpire', KEYS[2], ARGV[3])
    return {holds, tonumber(redis.call('get', KEYS[2]) or '0') or 0}
end
return {0, redis.call('pttl', KEYS[1])}
