-- rw_write_acquire: take or re-enter the write hold of a Redisson-compatible
-- read-write lock (RedissonWriteLock's layout), refusing an upgrade.
--
-- KEYS[1]  the lock hash (the user's lock name): 'mode', readers, and the
--          writer's field '<owner>:write' -> write count
-- KEYS[2]  the fencing counter, redisson_lock_token:{name}
-- KEYS[3]  the waiting writers, {name}:rwlock_writers_waiting (zset owner
--          -> deadline, server ms)
-- KEYS[4]  this owner's read-hold prefix, {name}:<owner>:rwlock_timeout
-- KEYS[5]  the hold keys' base, {name}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id, "<client uuid>:<handle id>" (the field is ARGV[2]:write)
-- ARGV[3]  expiry of a fencing counter this call creates, in milliseconds
-- ARGV[4]  a waiting writer's span in milliseconds: one that does not call
--          again within it no longer holds new readers back
-- ARGV[5]  "1": this writer waits, so it joins KEYS[3] (new readers then
--          wait behind it); "0": only try
--
-- Returns  {holds, token} when acquired: holds = this owner's write count
--          (1 for a first hold), token = the hold's fencing token (INCR of
--          the counter, as reentrant_acquire; a re-entry returns the
--          current one and never shortens the expiry);
--          {-2, pttl} when this owner has live read holds but not the
--          write: an upgrade would wait for itself for ever, so it is
--          refused and nothing changes;
--          {0, pttl} when others hold it: pttl bounds the wait.
--
-- The write hold's lease is its own key, {name}:<owner>:write:rwlock_timeout:1
-- (value: its token), beside the hash's expiry: the owner's read holds
-- keep the hash alive, not the write. (Redisson's own read unlock already
-- counts keys of that shape when it sets the hash's expiry.)

-- From lib/ (scripts.rs puts them first): end_lapsed_write, session.

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local field = ARGV[2] .. ':write'
local wkey = KEYS[5] .. ':' .. field .. ':rwlock_timeout:1'
local lease = tonumber(ARGV[1])
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'write' and end_lapsed_write(KEYS[1], KEYS[5], ARGV[2]) then
    mode = redis.call('hget', KEYS[1], 'mode')
end
-- This owner's read holds: live ones make this an upgrade; a count whose
-- holds all ran out is stale, and cleared.
local reading = false
local n = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '')
if n then
    if session(KEYS[4], n) then
        reading = true
    else
        redis.call('hdel', KEYS[1], ARGV[2])
        if redis.call('hlen', KEYS[1]) <= 1 then
            redis.call('del', KEYS[1])
            mode = false
        end
    end
end
if mode == false and redis.call('exists', KEYS[1]) == 0 then
    local token = redis.call('incr', KEYS[2])
    if token == 1 then
        token = tonumber(t[1]) * 1000000 + tonumber(t[2])
        redis.call('set', KEYS[2], string.format('%.0f', token), 'px', ARGV[3])
    end
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], field, 1)
    redis.call('set', wkey, string.format('%.0f', token), 'px', lease)
    redis.call('pexpire', KEYS[1], lease)
    redis.call('zrem', KEYS[3], ARGV[2])
    return {1, token}
end
if mode == 'write' and redis.call('hexists', KEYS[1], field) == 1 then
    -- Read before anything is written: a broken key fails the call here.
    local token = tonumber(redis.call('get', wkey) or '0') or 0
    local holds = redis.call('hincrby', KEYS[1], field, 1)
    if redis.call('pttl', wkey) < lease then
        redis.call('pexpire', wkey, lease)
    end
    if redis.call('pttl', KEYS[1]) < lease then
        redis.call('pexpire', KEYS[1], lease)
    end
    return {holds, token}
end
if reading then
    return {-2, redis.call('pttl', KEYS[1])}
end
if ARGV[5] == '1' then
    redis.call('zadd', KEYS[3], now + tonumber(ARGV[4]), ARGV[2])
    redis.call('pexpire', KEYS[3], ARGV[4])
end
return {0, redis.call('pttl', KEYS[1])}
