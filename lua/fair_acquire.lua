-- fair_acquire: take or re-enter a Redisson-compatible fair lock, or queue.
-- The lock hash and its fencing counter are the reentrant lock's; the queue
-- is Redisson's RedissonFairLock layout: a list of waiting owners in arrival
-- order and a zset of each waiter's deadline.
--
-- KEYS[1]  the lock hash (the user's lock name): field = owner id, value = hold count
-- KEYS[2]  the fencing counter, redisson_lock_token:{name}
-- KEYS[3]  the queue, redisson_lock_queue:{name} (list of owner ids)
-- KEYS[4]  the deadlines, redisson_lock_timeout:{name} (zset owner id -> ms)
-- ARGV[1]  lease in milliseconds (PEXPIRE of the whole hash)
-- ARGV[2]  owner id, "<client uuid>:<handle id>"
-- ARGV[3]  expiry of a fencing counter this call creates, in milliseconds
-- ARGV[4]  a waiter's deadline span in milliseconds: a queued owner that
--          does not call again within it is taken for dead and purged
-- ARGV[5]  "1": join (or stay in) the queue when the lock cannot be taken
--          now, renewing this owner's deadline; "0": only try
--
-- Returns  {holds, token} when acquired (as reentrant_acquire);
--          {0, wait} when not: wait (ms, > 0) bounds how long to sleep
--          before trying again (the holder's PTTL, or the queue head's
--          deadline when the lock is free but another owner is first;
--          -1 when the hash has no expiry).
--
-- Deadlines come from the server's TIME, never a client's clock. Unlike
-- Redisson, a waiter's deadline is "now + span" each time it calls (a live
-- waiter keeps its place however long it waits; a dead one is purged within
-- the span), and taking the lock does not shorten the other waiters'
-- deadlines (Redisson subtracts its wait time from each: with deadlines
-- renewed by their owners there is nothing to correct).
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Purge dead waiters at the head (a head with no deadline is dead too).
while true do
    local head = redis.call('lindex', KEYS[3], 0)
    if not head then
        break
    end
    local deadline = tonumber(redis.call('zscore', KEYS[4], head))
    if deadline and deadline > now then
        break
    end
    redis.call('lpop', KEYS[3])
    redis.call('zrem', KEYS[4], head)
end

if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    -- A re-entry, as in reentrant_acquire.
    local token = tonumber(redis.call('get', KEYS[2]) or '0') or 0
    local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {holds, token}
end

local head = redis.call('lindex', KEYS[3], 0)
if redis.call('exists', KEYS[1]) == 0 and ((not head) or head == ARGV[2]) then
    local token = redis.call('incr', KEYS[2])
    if token == 1 then
        token = tonumber(t[1]) * 1000000 + tonumber(t[2])
        redis.call('set', KEYS[2], string.format('%.0f', token), 'px', ARGV[3])
    end
    if head then
        redis.call('lpop', KEYS[3])
    end
    redis.call('zrem', KEYS[4], ARGV[2])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, token}
end

local span = tonumber(ARGV[4])
if ARGV[5] == '1' then
    if redis.call('zadd', KEYS[4], now + span, ARGV[2]) == 1 then
        redis.call('rpush', KEYS[3], ARGV[2])
    end
end
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 then
    -- Free, but another owner is first: until its deadline at most.
    local deadline = tonumber(redis.call('zscore', KEYS[4], head)) or now
    pttl = math.max(1, deadline - now)
end
return {0, pttl}
