-- fair_leave: a waiter that gave up (timed out, cancelled, failed) leaves a
-- Redisson-compatible fair lock's queue, and wakes the next head if the
-- lock is free (Redisson leaves it asleep until its own timeout).
--
-- KEYS[1]  the lock hash (the user's lock name)
-- KEYS[2]  the queue, redisson_lock_queue:{name}
-- KEYS[3]  the deadlines, redisson_lock_timeout:{name}
-- KEYS[4]  keylatch's liveness records, keylatch_fair_alive:{name}
-- ARGV[1]  owner id of the waiter leaving
-- ARGV[2]  the unlock channel prefix, redisson_lock__channel:{name}
-- ARGV[3]  the publish command: "publish" or "spublish"
-- ARGV[4]  the wait allowance in milliseconds (fair_acquire's ARGV[6])
--
-- Returns  1 when the owner was queued (and is not any more), else 0.
--
-- As Redisson's "acquire failed" does with its wait, the leaving waiter's
-- allowance leaves the chain: the deadlines behind it drop by ARGV[4]
-- (keylatch's own entries counted it when they last called; see
-- fair_acquire.lua).
local queue = redis.call('lrange', KEYS[2], 0, -1)
local allowance = tonumber(ARGV[4])
local found = false
for i = 1, #queue do
    if found then
        -- ZINCRBY would create a missing entry (Redisson's does).
        if redis.call('zscore', KEYS[3], queue[i]) then
            redis.call('zincrby', KEYS[3], -allowance, queue[i])
        end
    elseif queue[i] == ARGV[1] then
        found = true
    end
end
local removed = redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('zrem', KEYS[4], ARGV[1])
if removed > 0 and redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head then
        redis.call(ARGV[3], ARGV[2] .. ':' .. head, '0')
    end
end
if removed > 0 then
    return 1
end
return 0
