-- fair_release: drop one hold of a Redisson-compatible fair lock, waking
-- the queue's head (only it, whoever it is: a Java or a keylatch waiter)
-- on the last one.
--
-- KEYS[1]  the lock hash (the user's lock name)
-- KEYS[2]  the fencing counter, redisson_lock_token:{name}
-- KEYS[3]  the queue, redisson_lock_queue:{name}
-- KEYS[4]  the deadlines, redisson_lock_timeout:{name}
-- KEYS[5]  keylatch's liveness records, keylatch_fair_alive:{name}
-- ARGV[1]  owner id
-- ARGV[2]  the unlock channel prefix, redisson_lock__channel:{name}; the
--          head is woken on "<prefix>:<head owner id>", as Redisson does
-- ARGV[3]  the publish command: "publish" or "spublish" (sharded, in a cluster)
-- ARGV[4]  the token of the hold being released, or "0" to release by owner
--          without the check
--
-- Returns  nil when ARGV[1] does not hold the lock or the counter names
--          another hold (as reentrant_release; a free lock still wakes the
--          head, whose waiter may be asleep); 0 when holds remain;
--          1 when this was the last hold: the key is deleted, dead heads
--          purged, and "0" published to the new head's own channel.
--          A name that now holds another type (the hold lost, the name
--          reused) is nil, never an error; a queue, deadlines or liveness
--          key of another type is left alone (nobody is woken through it).
--
-- A head is dead as fair_acquire judges it: a keylatch waiter (one with a
-- liveness record) by its liveness, a Java waiter by its Redisson deadline
-- (server time here; Redisson compares with its client's clock).
local function wake_head()
    if redis.call('type', KEYS[3]).ok ~= 'list' then
        return
    end
    for i = 4, 5 do
        local zt = redis.call('type', KEYS[i]).ok
        if zt ~= 'zset' and zt ~= 'none' then
            return
        end
    end
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    while true do
        local head = redis.call('lindex', KEYS[3], 0)
        if not head then
            return
        end
        local deadline = redis.call('zscore', KEYS[5], head)
        if not deadline then
            deadline = redis.call('zscore', KEYS[4], head)
        end
        if deadline and tonumber(deadline) > now then
            redis.call(ARGV[3], ARGV[2] .. ':' .. head, '0')
            return
        end
        redis.call('lpop', KEYS[3])
        redis.call('zrem', KEYS[4], head)
        redis.call('zrem', KEYS[5], head)
    end
end

local kt = redis.call('type', KEYS[1]).ok
if kt ~= 'hash' then
    if kt == 'none' then
        wake_head()
    end
    return nil
end
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if holds == nil then
    return nil
end
if ARGV[4] ~= '0' then
    local ct = redis.call('type', KEYS[2]).ok
    if ct ~= 'string' and ct ~= 'none' then
        return nil
    end
    local current = redis.call('get', KEYS[2])
    if current and current ~= ARGV[4] then
        return nil
    end
end
if holds > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
    return 0
end
redis.call('del', KEYS[1])
wake_head()
return 1
