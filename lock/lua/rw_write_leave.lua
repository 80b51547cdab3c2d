-- rw_write_leave: a writer that gave up waiting (timed out, cancelled,
-- failed) leaves the waiting writers, so new readers need not wait for its
-- entry to run out.
--
-- KEYS[1]  the waiting writers, {name}:rwlock_writers_waiting (zset owner
--          -> deadline)
-- ARGV[1]  owner id of the writer leaving
-- ARGV[2]  the lock's channel, redisson_rwlock:{name} (not a key)
-- ARGV[3]  the publish command: "publish" or "spublish"
--
-- Returns  1 when it was waiting (removed, and "1" published so readers
--          held back try again; other writers still waiting keep them
--          back), else 0.
if redis.call('zrem', KEYS[1], ARGV[1]) == 1 then
    redis.call(ARGV[3], ARGV[2], '1')
    return 1
end
return 0
