-- rw_write_leave: a writer that gave up waiting (timed out, cancelled,
-- failed) takes its waiting-writer marker back, so new readers need not
-- wait for the marker to run out.
--
-- KEYS[1]  the waiting-writer marker, {name}:rwlock_writer_waiting
-- ARGV[1]  owner id of the writer leaving
-- ARGV[2]  the lock's channel, redisson_rwlock:{name} (not a key)
-- ARGV[3]  the publish command: "publish" or "spublish"
--
-- Returns  1 when the marker was this writer's (deleted, and "1" published
--          so readers held back by it try again), else 0 (another writer's
--          marker stays).
if redis.call('get', KEYS[1]) == ARGV[1] then
    redis.call('del', KEYS[1])
    redis.call(ARGV[3], ARGV[2], '1')
    return 1
end
return 0
