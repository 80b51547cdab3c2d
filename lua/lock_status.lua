-- lock_status: one owner's view of a lock, read atomically.
--
-- KEYS[1]  the lock hash
-- ARGV[1]  owner id
--
-- Returns  {locked, holds, pttl}: locked = 1 when any owner holds the lock,
--          holds = ARGV[1]'s hold count (0 if none), pttl = the lock's PTTL
--          in milliseconds (-2 when absent).
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0') or 0
return {redis.call('exists', KEYS[1]), holds, redis.call('pttl', KEYS[1])}
