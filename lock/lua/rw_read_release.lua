-- rw_read_release: drop one read hold of a Redisson-compatible read-write
-- lock (RedissonReadLock's unlock).
--
-- KEYS[1]  the lock hash (the user's lock name)
-- KEYS[2]  this owner's read-hold prefix, {name}:<owner>:rwlock_timeout
-- KEYS[3]  the hold keys' base, {name} (hold i of field f is
--          KEYS[3] .. ':' .. f .. ':rwlock_timeout:' .. i)
-- ARGV[1]  owner id
-- ARGV[2]  the lock's channel, redisson_rwlock:{name} (not a key)
-- ARGV[3]  the publish command: "publish" or "spublish"
-- ARGV[4]  the read session's generation (rw_read_acquire's), or "0" to
--          release by owner without the check
--
-- Returns  nil when this owner has no live read hold of that session (not
--          held, expired, or a newer session's: nothing of it changes; a
--          count whose holds all ran out is cleared, and the lock freed if
--          nothing else holds it); 0 when the lock is still held (by this
--          owner's other holds or by others); 1 when this freed the lock:
--          the hash is deleted and "0" published (Redisson's read-unlock
--          message).

-- From lib/ (scripts.rs puts them first): end_lapsed_write, session, longest.

-- A name that now holds another type (the hold lost, the name reused):
-- nil, never an error.
if redis.call('type', KEYS[1]).ok ~= 'hash' then
    return nil
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'write' and end_lapsed_write(KEYS[1], KEYS[3], ARGV[1]) then
    redis.call(ARGV[3], ARGV[2], '1')
    mode = redis.call('hget', KEYS[1], 'mode')
end
if mode ~= 'read' and mode ~= 'write' then
    return nil
end
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '')
if not n then
    return nil
end
local g = session(KEYS[2], n)
local mine = g ~= nil and (ARGV[4] == '0' or g == ARGV[4])
if mine then
    n = redis.call('hincrby', KEYS[1], ARGV[1], -1)
    if n <= 0 then
        redis.call('hdel', KEYS[1], ARGV[1])
    end
    -- The session's holds expire together: any one of them may go.
    redis.call('del', KEYS[2] .. ':' .. (n + 1))
elseif not g then
    -- Every hold of this owner ran out: clear the stale count.
    redis.call('hdel', KEYS[1], ARGV[1])
else
    -- A newer session of this owner: not this release's to touch.
    return nil
end
if mode == 'write' then
    -- The owner's write hold keeps the lock (and its expiry).
    if mine then
        return 0
    end
    return nil
end
local left = longest(KEYS[1], KEYS[3])
if left > 0 then
    redis.call('pexpire', KEYS[1], left)
    if mine then
        return 0
    end
    return nil
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], ARGV[2], '0')
if mine then
    return 1
end
return nil
