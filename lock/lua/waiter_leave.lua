-- waiter_leave: a waiter of an RLock hash that gave up (timed out,
-- cancelled, failed) leaves the registry its lock's releases wake waiters
-- from by name. If a release took it out already, that release's wake went
-- to nobody: then, if the lock is free, "0" is published on the lock's
-- channel so every waiter tries (once, instead of one sleeping until its
-- re-check).
--
-- KEYS[1]  the lock hash (the user's lock name)
-- ARGV[1]  owner id of the waiter leaving
-- ARGV[2]  the lock's channel, redisson_lock__channel:{name} (not a key)
-- ARGV[3]  the publish command: "publish" or "spublish"
-- ARGV[4]  the waiters, keylatch_lock_waiters:{name} (a zset owner -> end
--          in the lock's slot; not a key, see register_waiter: one that
--          cannot be read is taken as not holding the waiter)
--
-- Returns  1 when it was registered (removed, nothing published), else 0.
if redis.pcall('zrem', ARGV[4], ARGV[1]) == 1 then
    return 1
end
if redis.call('exists', KEYS[1]) == 0 then
    redis.call(ARGV[3], ARGV[2], '0')
end
return 0
