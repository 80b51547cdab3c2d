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
-- The owner's write hold ran out (its expiry key is gone) while the hash
-- lived on (its reads keep it): end the write now, as its lease says. Only
-- a keylatch write has that key, and only its own owner's calls end it.
local function end_lapsed_write(hash, base, owner)
    local field = owner .. ':write'
    if redis.call('hexists', hash, field) == 0 then
        return false
    end
    if redis.call('exists', base .. ':' .. field .. ':rwlock_timeout:1') == 1 then
        return false
    end
    redis.call('hdel', hash, field)
    if redis.call('hlen', hash) <= 1 then
        redis.call('del', hash)
    else
        redis.call('hset', hash, 'mode', 'read')
    end
    return true
end

-- The generation of an owner's live read holds (the value of any of its
-- hold keys still there), or nil when they all ran out.
local function session(prefix, n)
    for i = 1, n do
        local v = redis.call('get', prefix .. ':' .. i)
        if v then
            return v
        end
    end
    return nil
end

-- The longest remaining expiry of any hold key in the hash (read holds,
-- and keylatch write holds' keys): what the hash must live.
local function longest(hash, base)
    local out = -3
    for _, f in ipairs(redis.call('hkeys', hash)) do
        local n = tonumber(redis.call('hget', hash, f))
        if f ~= 'mode' and n then
            for i = n, 1, -1 do
                out = math.max(out, redis.call('pttl', base .. ':' .. f .. ':rwlock_timeout:' .. i))
            end
        end
    end
    return out
end

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
