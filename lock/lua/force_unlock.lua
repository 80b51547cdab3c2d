-- force_unlock: end whatever holds a name, whoever holds it, in the way its
-- type means (an operator's tool), and refuse what is no lock.
--
-- KEYS[1]  the name's key
-- KEYS[2]  a fair lock's queue, redisson_lock_queue:{name} (kept: only the
--          hold ends; its head is woken on its own channel "<ARGV[2]>:<head>")
-- KEYS[3]  a permit-expirable semaphore's leased permits, {name}:timeout
-- KEYS[4]  a read-write lock's hold keys' base, {name} (hold i of field f
--          is KEYS[4] .. ':' .. f .. ':rwlock_timeout:' .. i)
-- ARGV[1]  the publish command: "publish" or "spublish"
-- ARGV[2]  the lock channel, redisson_lock__channel:{name} (not a key)
-- ARGV[3]  the read-write lock channel, redisson_rwlock:{name}
-- ARGV[4]  the semaphore channel, redisson_sc:{name}
--
-- Returns  {kind, n}:
--          {0, 0}  nothing held (no key, no leased permits);
--          {1, 0}  a lock's hash (reentrant, fair, fenced, spin,
--                  non-reentrant, a multi-lock's or RedLock's member):
--                  deleted, "0" published, a fair queue's head woken (the
--                  queue and the fencing counter are kept);
--          {2, 0}  a read-write lock: the hash and every hold key of its
--                  readers and writer deleted, "1" published (wakes all);
--          {3, n}  a permit-expirable semaphore: its n leased permits are
--                  given back to the count (the leases deleted, so every
--                  holder's renewal finds its permits gone) and the new
--                  count published; a missing count is not re-created;
--          {-1, shape}  refused, nothing changed: shape as key_shape's
--                  (4: a semaphore's or latch's count with no leased
--                  permits: no holder to free; 3, 5..10: no lock at all).
local function lock_hash()
    local all = redis.call('hgetall', KEYS[1])
    local rw = false
    for i = 1, #all, 2 do
        local f, v = all[i], all[i + 1]
        if f == 'mode' then
            if v ~= 'read' and v ~= 'write' then
                return nil
            end
            rw = true
        elseif not string.match(v, '^%d+$') then
            return nil
        end
    end
    return rw, all
end

local t = redis.call('type', KEYS[1]).ok
local leases = redis.call('type', KEYS[3]).ok
if leases == 'zset' and (t == 'string' or t == 'none') then
    local n = redis.call('zcard', KEYS[3])
    redis.call('del', KEYS[3])
    if t == 'string' and string.match(redis.call('get', KEYS[1]), '^%-?%d+$') then
        local value = redis.call('incrby', KEYS[1], n)
        redis.call(ARGV[1], ARGV[4], value)
    end
    return {3, n}
end
if t == 'none' then
    return {0, 0}
end
if t == 'hash' then
    if redis.call('hlen', KEYS[1]) > 1000 then
        return {-1, 3}
    end
    local rw, all = lock_hash()
    if rw == nil then
        return {-1, 3}
    end
    if rw then
        for i = 1, #all, 2 do
            local f, n = all[i], tonumber(all[i + 1])
            if f ~= 'mode' and n then
                -- A write hold has one key (:1), read holds one each.
                for j = 1, math.max(1, math.min(n, 10000)) do
                    redis.call('del', KEYS[4] .. ':' .. f .. ':rwlock_timeout:' .. j)
                end
            end
        end
        redis.call('del', KEYS[1])
        redis.call(ARGV[1], ARGV[3], '1')
        return {2, 0}
    end
    redis.call('del', KEYS[1])
    redis.call(ARGV[1], ARGV[2], '0')
    if redis.call('type', KEYS[2]).ok == 'list' then
        local head = redis.call('lindex', KEYS[2], 0)
        if head then
            redis.call(ARGV[1], ARGV[2] .. ':' .. head, '0')
        end
    end
    return {1, 0}
end
if t == 'string' then
    if string.match(redis.call('get', KEYS[1]), '^%-?%d+$') then
        return {-1, 4}
    end
    return {-1, 5}
end
local shapes = {list = 6, set = 7, zset = 8, stream = 9}
return {-1, shapes[t] or 10}
