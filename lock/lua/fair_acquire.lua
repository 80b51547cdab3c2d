-- fair_acquire: take or re-enter a Redisson-compatible fair lock, or queue.
-- The lock hash and its fencing counter are the reentrant lock's; the queue
-- is Redisson's RedissonFairLock layout: a list of waiting owners in arrival
-- order and a zset of each waiter's deadline. keylatch adds one key of its
-- own beside it: a zset of its waiters' liveness deadlines.
--
-- KEYS[1]  the lock hash (the user's lock name): field = owner id, value = hold count
-- KEYS[2]  the fencing counter, redisson_lock_token:{name}
-- KEYS[3]  the queue, redisson_lock_queue:{name} (list of owner ids)
-- KEYS[4]  the deadlines, redisson_lock_timeout:{name} (zset owner id -> ms)
-- KEYS[5]  keylatch's liveness records, keylatch_fair_alive:{name} (zset
--          owner id -> ms, server time; only keylatch waiters are in it)
-- ARGV[1]  lease in milliseconds (PEXPIRE of the whole hash)
-- ARGV[2]  owner id, "<client uuid>:<handle id>"
-- ARGV[3]  expiry of a fencing counter this call creates, in milliseconds
-- ARGV[4]  a waiter's liveness span in milliseconds: a queued keylatch
--          owner that does not call again within it is taken for dead
-- ARGV[5]  "1": join (or stay in) the queue when the lock cannot be taken
--          now, renewing this owner's deadline and liveness; "0": only try
-- ARGV[6]  the wait allowance in milliseconds (Redisson's
--          fairLockWaitTimeout, 300000 by default): at least the largest
--          wait a Java waiter on this lock subtracts
-- ARGV[7]  the unlock channel prefix, redisson_lock__channel:{name}
-- ARGV[8]  the publish command: "publish" or "spublish"
--
-- Returns  {holds, token} when acquired (as reentrant_acquire);
--          {0, wait} when not: wait (ms, > 0) bounds how long to sleep
--          before trying again (the holder's PTTL, or the queue head's
--          deadline when the lock is free but another owner is first;
--          -1 when the hash has no expiry).
--
-- Why the queue looks like this. Java waiters (Redisson) share the queue
-- and run their own arithmetic on every deadline in it: a Redisson acquire
-- subtracts its wait (W, 300 s by default, or its tryLock wait) from every
-- queued deadline, a Redisson waiter that gives up subtracts W from the
-- ones behind it, a new Java waiter chains its deadline from the last one
-- (last + W), and any Redisson call purges heads whose deadline <= its
-- client's clock, without a message. So a keylatch entry must be a
-- deadline Redisson's arithmetic cannot push under "now" while its waiter
-- lives, and keylatch needs another way to find its dead waiters:
--
-- * Deadline (KEYS[4]), in Redisson's chained form, renewed at every call:
--   max(now + A * (position + 1), deadline of the one ahead + A), with A =
--   ARGV[6]. Each entry ahead subtracts at most once (when it takes the
--   lock or gives up), so while every W <= A the deadline stays at least
--   A - (time since the last call) above now: a live waiter (calling every
--   third of ARGV[4]) is never purged by Redisson, whatever order Java and
--   keylatch waiters are in, and a Java client clock may be off by nearly
--   A. A Java waiter behind it chains from it as from a Java waiter.
-- * Liveness (KEYS[5]): now + ARGV[4], renewed at every call. keylatch's
--   scripts judge a keylatch entry by it (dead within ARGV[4], anywhere in
--   the queue, instead of Redisson's A), and a Java entry (no liveness
--   record) by its deadline, as Redisson does, in server time.
-- * Taking the lock subtracts A from every deadline, as Redisson's acquire
--   subtracts W: a Java waiter behind keeps the deadline it would have had
--   behind a Java waiter (W past its turn), neither shortened nor growing
--   stale-high; keylatch entries counted this subtraction in their
--   position term. Purging a dead waiter subtracts nothing (as Redisson).
-- * When a purge leaves a free lock to a new head other than the caller,
--   that head is woken on its own channel (a Java head sleeps otherwise).
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local allowance = tonumber(ARGV[6])

local function forget(owner)
    redis.call('zrem', KEYS[4], owner)
    redis.call('zrem', KEYS[5], owner)
end

-- The deadline that ends an entry's turn: a keylatch entry's liveness, a
-- Java entry's Redisson deadline; nil when it has neither (dead).
local function deadline_of(owner)
    local alive = redis.call('zscore', KEYS[5], owner)
    if alive then
        return tonumber(alive)
    end
    return tonumber(redis.call('zscore', KEYS[4], owner))
end

-- Dead keylatch waiters leave from anywhere in the queue (nobody waits
-- behind a dead one until it reaches the head; the others keep their
-- order). A few per call bound the script's time.
local purged = false
local dead = redis.call('zrangebyscore', KEYS[5], '-inf', now, 'LIMIT', 0, 16)
for _, owner in ipairs(dead) do
    redis.call('lrem', KEYS[3], 0, owner)
    forget(owner)
    purged = true
end

-- Dead heads of either kind (a head with no deadline is dead too).
while true do
    local head = redis.call('lindex', KEYS[3], 0)
    if not head then
        break
    end
    local deadline = deadline_of(head)
    if deadline and deadline > now then
        break
    end
    redis.call('lpop', KEYS[3])
    forget(head)
    purged = true
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
local free = redis.call('exists', KEYS[1]) == 0
if free and ((not head) or head == ARGV[2]) then
    local token = redis.call('incr', KEYS[2])
    if token == 1 then
        token = tonumber(t[1]) * 1000000 + tonumber(t[2])
        redis.call('set', KEYS[2], string.format('%.0f', token), 'px', ARGV[3])
    end
    if head then
        redis.call('lpop', KEYS[3])
    end
    forget(ARGV[2])
    -- Redisson's accounting: this waiter's allowance leaves the chain.
    local rest = redis.call('zrange', KEYS[4], 0, -1)
    for i = 1, #rest do
        redis.call('zincrby', KEYS[4], -allowance, rest[i])
    end
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, token}
end

if free and purged and head then
    -- The head changed under a free lock: wake the new one.
    redis.call(ARGV[8], ARGV[7] .. ':' .. head, '0')
end

if ARGV[5] == '1' then
    local pos = redis.call('lpos', KEYS[3], ARGV[2])
    local ahead
    if pos then
        if pos > 0 then
            ahead = redis.call('lindex', KEYS[3], pos - 1)
        end
    else
        pos = redis.call('llen', KEYS[3])
        ahead = redis.call('lindex', KEYS[3], -1)
    end
    local deadline = now + allowance * (pos + 1)
    if ahead then
        local chained = tonumber(redis.call('zscore', KEYS[4], ahead))
        if chained and chained + allowance > deadline then
            deadline = chained + allowance
        end
    end
    if redis.call('zadd', KEYS[4], deadline, ARGV[2]) == 1 then
        redis.call('rpush', KEYS[3], ARGV[2])
    end
    local span = tonumber(ARGV[4])
    redis.call('zadd', KEYS[5], now + span, ARGV[2])
    -- The records outlive no keylatch waiter by much: a record whose
    -- waiter is gone while no keylatch script runs expires with the key.
    if redis.call('pttl', KEYS[5]) < 2 * span then
        redis.call('pexpire', KEYS[5], 2 * span)
    end
end
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 then
    -- Free, but another owner is first: until its deadline at most.
    local deadline = (head and deadline_of(head)) or now
    pttl = math.max(1, deadline - now)
end
return {0, pttl}
