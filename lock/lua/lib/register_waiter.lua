-- `owner` waits for the lock `hash` (held by another, `pttl` ms left) and
-- is to be woken by name by the next release (see wake_one), for `span`
-- milliseconds of server time from now; a later call moves its end on.
-- `registry` is a zset, owner id -> the server time in ms its entry ends,
-- plus `tag` / 1024: a waiter that may be granted the lock by the release
-- (see grant_waiter) names its wait with a tag from 1 to 1023, a fraction
-- that an end in ms (below 2^41) keeps exactly in a double; 0 is a
-- waiter only woken. An earlier keylatch compares the score with its
-- clock as before, and never grants;
-- the key lives `span` from the last registration. It is passed as an
-- argument, not a key (mostly missing: a migrating slot answers TRYAGAIN to
-- a call declaring a missing key), so it is written through redis.pcall:
-- if it cannot be (another type, or moved away with a migrating slot),
-- nothing is registered and the waiter wakes as any other. The hash gets
-- the field keylatch_waiters (once per hold, so the holder's tracking is
-- not disturbed by every waiter): the release reads it with the hold, in
-- the one call it makes anyway, and looks for registered waiters only
-- when it is there. Redisson never reads fields but its own, and the field
-- goes with the hash. Only an RLock hash with an expiry is marked: not a
-- read-write lock's (its `mode` field), and not a hash without an expiry
-- (an application's: the caller finds out what it is).
-- `read`: when the caller read the hash's `mode` and `keylatch_waiters`
-- fields in this call (HMGET answers, false when missing), they are not
-- asked again (each call a script makes costs the server more than the
-- command); nil asks.
local function register_waiter(hash, pttl, registry, owner, span, tag, read)
    if pttl <= 0 then
        return
    end
    local mode, marked
    if read then
        mode, marked = read.mode, read.marked
    else
        mode, marked = redis.call('hexists', hash, 'mode') == 1, false
    end
    if mode then
        return
    end
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    if type(redis.pcall('zadd', registry, now + span + tag / 1024, owner)) ~= 'number' then
        return
    end
    redis.call('pexpire', registry, span)
    if not marked then
        redis.call('hsetnx', hash, 'keylatch_waiters', 1)
    end
end
