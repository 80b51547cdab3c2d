-- semaphore_set: set a Redisson-compatible semaphore's (or count-down
-- latch's) count when it does not exist yet (trySetPermits / trySetCount).
--
-- KEYS[1]  the semaphore or latch (a string)
-- ARGV[1]  the count
-- ARGV[2]  the channel (not a key)
-- ARGV[3]  the publish command: "publish" or "spublish"
-- ARGV[4]  the message: the count for a semaphore (Redisson's), "1" for a
--          latch (Redisson's new-count message)
--
-- Returns  1 when set (and the message published), 0 when it existed
--          (nothing changes), -1 when the key holds something that is no
--          count (another type, or a string that is no number: a name
--          reused; nothing changes).
local t = redis.call('type', KEYS[1]).ok
if t == 'string' then
    if tonumber(redis.call('get', KEYS[1])) == nil then
        return -1
    end
    return 0
end
if t ~= 'none' then
    return -1
end
redis.call('set', KEYS[1], ARGV[1])
redis.call(ARGV[3], ARGV[2], ARGV[4])
return 1
