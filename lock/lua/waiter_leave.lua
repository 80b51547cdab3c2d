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
-- ARGV[5]  the wait's tag (see register_waiter), "0" or absent when none
--
-- Returns  2 when a release had granted this wait the lock (grant_waiter)
--          and the waiter never took it: the grant is given back (its one
--          count; the last: the key deleted and "0" published, so every
--          waiter tries); 1 when it was registered (removed, nothing
--          published), else 0.
--
-- Only this wait's own entry is touched (its tag in the score's fraction):
-- another wait of the same owner (a clone of the handle) may have
-- registered since, or been granted the lock, and its entry is its own.
local tag = tonumber(ARGV[5] or '0') or 0
local entry = redis.pcall('zscore', ARGV[4], ARGV[1])
local score = type(entry) == 'string' and tonumber(entry)
if score and math.floor((score % 1) * 1024 + 0.5) == tag then
    redis.pcall('zrem', ARGV[4], ARGV[1])
    if score >= 1 or tag == 0 then
        return 1
    end
    -- This wait's grant's mark: it never took the grant.
    local holds = redis.pcall('hget', KEYS[1], ARGV[1])
    holds = type(holds) == 'string' and tonumber(holds) or 0
    if holds > 1 then
        redis.call('hincrby', KEYS[1], ARGV[1], -1)
    elseif holds == 1 then
        redis.call('del', KEYS[1])
        redis.call(ARGV[3], ARGV[2], '0')
    end
    return 2
end
if redis.call('exists', KEYS[1]) == 0 then
    redis.call(ARGV[3], ARGV[2], '0')
end
return 0
