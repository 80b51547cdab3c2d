-- semaphore_change: release permits to, or add permits to, a
-- Redisson-compatible semaphore, and tell waiters the new count.
--
-- KEYS[1]  the semaphore (a string, the available permits)
-- ARGV[1]  the change (release n: +n; add_permits(d): d, may be negative)
-- ARGV[2]  the semaphore's channel, redisson_sc:{name} (not a key)
-- ARGV[3]  the publish command: "publish" or "spublish"
--
-- Returns  the permits available after. The key's expiry is kept (INCRBY;
--          Redisson's addPermits uses SET and drops it); the new count is
--          published, as Redisson's release does, so waiters try again.
--          nil when the key holds something else than a count (another
--          type, or a string that is no integer): nothing changes.
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and (t ~= 'string' or not string.match(redis.call('get', KEYS[1]), '^%-?%d+$')) then
    return nil
end
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[3], ARGV[2], value)
return value
