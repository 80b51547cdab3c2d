-- rw_read_acquire: take (or add) a read hold of a Redisson-compatible
-- read-write lock (RedissonReadLock's layout).
--
-- KEYS[1]  the lock hash (the user's lock name): 'mode' = 'read'/'write',
--          reader owner id -> read count, '<owner>:write' -> write count
-- KEYS[2]  this owner's read-hold prefix, {name}:<owner>:rwlock_timeout:
--          read hold i is the string KEYS[2] .. ':' .. i (value 1, PEXPIRE
--          = its lease), in KEYS[1]'s slot by construction
-- KEYS[3]  the waiting-writer marker, {name}:rwlock_writer_waiting (owner
--          id of a writer that waits; keylatch's own addition)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id, "<client uuid>:<handle id>"
--
-- Returns  {n, 0} when acquired: n = this owner's read count after the call
--          (read holds carry no fencing token);
--          {0, wait} when not: the lock is written by another owner, or a
--          writer waits (the marker) and this owner holds nothing here yet;
--          wait (ms) bounds the sleep: the hash's or the marker's PTTL,
--          -1 when it has no expiry.
--
-- As Redisson: a read is taken when 'mode' is absent or 'read', or 'write'
-- held by this very owner (a writer may take read holds: downgrade). The
-- hash lives as long as its longest hold (a shorter lease never cuts it).
-- Beyond Redisson (writer preference): while a writer's marker stands, a
-- new reader waits; readers already in (re-entries) and the writer itself
-- are let through, so nobody waits for a hold it has.
local mode = redis.call('hget', KEYS[1], 'mode')
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
if mode ~= 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    local marker = redis.call('pttl', KEYS[3])
    if marker ~= -2 then
        return {0, marker}
    end
end
local lease = tonumber(ARGV[1])
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
end
local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', lease)
if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
end
return {n, 0}
