-- key_shape: what a name's key holds, read only. A call that met a key of
-- the wrong kind (a script that found no lock of its kind there, or a
-- server error) asks this to give a typed answer that says what it is.
--
-- KEYS[1]  the name's key
-- ARGV[1]  unused ("0"; every script has the same call shape)
--
-- Returns  one integer:
--          0 no key; 1 a lock's hash (every field a hold count: Redisson's
--          RLock, fair, fenced, spin, non-reentrant lock); 2 a read-write
--          lock's hash ('mode' read or write, the other fields counts);
--          3 a hash of another shape (more than 1,000 fields is never a
--          lock's); 4 a string holding an integer (a semaphore's permits
--          or a latch's count); 5 another string; 6 a list; 7 a set;
--          8 a sorted set; 9 a stream; 10 any other type.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
    return 0
elseif t == 'hash' then
    if redis.call('hlen', KEYS[1]) > 1000 then
        return 3
    end
    local all = redis.call('hgetall', KEYS[1])
    local rw = false
    for i = 1, #all, 2 do
        local f, v = all[i], all[i + 1]
        if f == 'mode' then
            if v ~= 'read' and v ~= 'write' then
                return 3
            end
            rw = true
        elseif not string.match(v, '^%d+$') then
            return 3
        end
    end
    if rw then
        return 2
    end
    return 1
elseif t == 'string' then
    if string.match(redis.call('get', KEYS[1]), '^%-?%d+$') then
        return 4
    end
    return 5
elseif t == 'list' then
    return 6
elseif t == 'set' then
    return 7
elseif t == 'zset' then
    return 8
elseif t == 'stream' then
    return 9
end
return 10
