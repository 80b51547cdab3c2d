-- force_unlock: delete a lock whoever holds it, and wake its waiters.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the unlock channel, redisson_lock__channel:{name}
-- ARGV[1]  the unlock message ("0")
-- ARGV[2]  the publish command: "publish" or "spublish"
--
-- Returns  1 when a lock was deleted (and the message published), 0 when
--          there was none.
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
