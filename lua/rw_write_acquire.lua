-- rw_write_acquire: take or re-enter the write hold of a Redisson-compatible
-- read-write lock (RedissonWriteLock's layout), refusing an upgrade.
--
-- KEYS[1]  the lock hash (the user's lock name): 'mode', readers, and the
--          writer's field '<owner>:write' -> write count
-- KEYS[2]  the fencing counter, redisson_lock_token:{name}
-- KEYS[3]  the waiting-writer marker, {name}:rwlock_writer_waiting
-- ARGV[1]  lease in milliseconds (PEXPIRE of the whole hash)
-- ARGV[2]  owner id, "<client uuid>:<handle id>" (the field is ARGV[2]:write)
-- ARGV[3]  expiry of a fencing counter this call creates, in milliseconds
-- ARGV[4]  the marker's span in milliseconds: a waiting writer that does not
--          call again within it no longer holds new readers back
-- ARGV[5]  "1": this writer waits, so it sets the marker (new readers then
--          wait behind it); "0": only try
--
-- Returns  {holds, token} when acquired: holds = this owner's write count
--          (1 for a first hold), token = the hold's fencing token (INCR of
--          the counter, as reentrant_acquire; a re-entry returns the
--          current one and never shortens the expiry);
--          {-2, pttl} when this owner holds read holds but not the write:
--          an upgrade would wait for itself for ever, so it is refused and
--          nothing changes;
--          {0, pttl} when others hold it: pttl bounds the wait.
local field = ARGV[2] .. ':write'
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false and redis.call('exists', KEYS[1]) == 0 then
    local token = redis.call('incr', KEYS[2])
    if token == 1 then
        local t = redis.call('time')
        token = tonumber(t[1]) * 1000000 + tonumber(t[2])
        redis.call('set', KEYS[2], string.format('%.0f', token), 'px', ARGV[3])
    end
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], field, 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    if redis.call('get', KEYS[3]) == ARGV[2] then
        redis.call('del', KEYS[3])
    end
    return {1, token}
end
if mode == 'write' and redis.call('hexists', KEYS[1], field) == 1 then
    -- Read before anything is written: a broken counter fails the call here.
    local token = tonumber(redis.call('get', KEYS[2]) or '0') or 0
    local holds = redis.call('hincrby', KEYS[1], field, 1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {holds, token}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    return {-2, redis.call('pttl', KEYS[1])}
end
if ARGV[5] == '1' then
    redis.call('set', KEYS[3], ARGV[2], 'px', ARGV[4])
end
return {0, redis.call('pttl', KEYS[1])}
