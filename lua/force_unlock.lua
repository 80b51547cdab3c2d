-- force_unlock: delete a lock whoever holds it, and wake its waiters.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  (fair locks only) the queue, redisson_lock_queue:{name}: its
--          head is woken on its own channel "<ARGV[3]>:<head>", as
--          Redisson's fair lock does
-- ARGV[1]  the unlock message ("0")
-- ARGV[2]  the publish command: "publish" or "spublish"
-- ARGV[3]  the unlock channel, redisson_lock__channel:{name} (not a key)
--
-- Returns  1 when a lock was deleted (and the message published), 0 when
--          there was none.
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], ARGV[3], ARGV[1])
    if KEYS[2] then
        local head = redis.call('lindex', KEYS[2], 0)
        if head then
            redis.call(ARGV[2], ARGV[3] .. ':' .. head, ARGV[1])
        end
    end
    return 1
end
return 0
