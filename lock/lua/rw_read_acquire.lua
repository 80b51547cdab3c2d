-- rw_read_acquire: take (or add) a read hold of a Redisson-compatible
-- read-write lock (RedissonReadLock's layout).
--
-- KEYS[1]  the lock hash (the user's lock name): 'mode' = 'read'/'write',
--          reader owner id -> read count, '<owner>:write' -> write count
-- KEYS[2]  this owner's read-hold prefix, {name}:<owner>:rwlock_timeout:
--          read hold i is the string KEYS[2] .. ':' .. i, in KEYS[1]'s slot
--          by construction
-- KEYS[3]  the waiting writers, {name}:rwlock_writers_waiting (keylatch's
--          own addition: zset owner -> deadline, server ms)
-- KEYS[4]  the hold keys' base, {name}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id, "<client uuid>:<handle id>"
--
-- Returns  {n, generation} when acquired: n = this owner's read count
--          after the call; generation = the owner's read session (server
--          TIME in µs when its first read hold was taken; every hold key
--          of the session holds it, Redisson writes 1 there and never reads
--          it): the hold's identity, which releases and renewals name;
--          {0, wait} when not: the lock is written by another owner, or
--          writers wait and this owner holds nothing here yet; wait (ms)
--          bounds the sleep (-1: the hash has no expiry).
--
-- As Redisson: a read is taken when 'mode' is absent or 'read', or 'write'
-- held by this very owner (a writer may take read holds: downgrade). The
-- hash lives as long as its longest hold. One owner's read holds form one
-- session and expire together, at the latest of their leases (a re-entry
-- never shortens the holds already taken, as with the reentrant lock).
-- Beyond Redisson (writer preference): while a writer waits (a live entry
-- in KEYS[3]), a new reader waits; readers already in (re-entries) and the
-- writer itself are let through, so nobody waits for a hold it has.

-- From lib/ (scripts.rs puts them first): end_lapsed_write, session.

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'write' and end_lapsed_write(KEYS[1], KEYS[4], ARGV[2]) then
    mode = redis.call('hget', KEYS[1], 'mode')
end
if mode == false then
    if redis.call('exists', KEYS[1]) == 1 then
        -- A hash of another kind (a plain lock of this name): held.
        return {0, redis.call('pttl', KEYS[1])}
    end
elseif mode == 'write' then
    if redis.call('hexists', KEYS[1], ARGV[2] .. ':write') == 0 then
        return {0, redis.call('pttl', KEYS[1])}
    end
elseif mode ~= 'read' then
    return {0, redis.call('pttl', KEYS[1])}
end
local n = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '') or 0
local g = nil
if n > 0 then
    g = session(KEYS[2], n)
    if not g then
        -- Its holds ran out: a stale count, not a session to join.
        redis.call('hdel', KEYS[1], ARGV[2])
        n = 0
    end
end
if not g and mode ~= 'write' then
    redis.call('zremrangebyscore', KEYS[3], 0, now)
    local first = redis.call('zrange', KEYS[3], 0, 0, 'withscores')
    if first[1] then
        return {0, math.max(1, tonumber(first[2]) - now)}
    end
end
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
end
if not g then
    g = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
end
n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
local expiry = lease
for i = 1, n - 1 do
    expiry = math.max(expiry, redis.call('pttl', KEYS[2] .. ':' .. i))
end
for i = 1, n - 1 do
    local k = KEYS[2] .. ':' .. i
    local left = redis.call('pttl', k)
    if left >= 0 and left < expiry then
        redis.call('pexpire', k, expiry)
    end
end
redis.call('set', KEYS[2] .. ':' .. n, g, 'px', expiry)
if redis.call('pttl', KEYS[1]) < expiry then
    redis.call('pexpire', KEYS[1], expiry)
end
return {n, tonumber(g)}
