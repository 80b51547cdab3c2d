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
--          (nothing changes).
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
redis.call('set', KEYS[1], ARGV[1])
redis.call(ARGV[3], ARGV[2], ARGV[4])
return 1
