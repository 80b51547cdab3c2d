-- multi_acquire: take (or re-enter) several Redisson-compatible reentrant
-- locks of one slot at once, all or none (a multi-lock's members that
-- share a hash tag: one call instead of one per member).
--
-- KEYS[2i-1]  member i's lock hash; KEYS[2i] its fencing counter,
--             redisson_lock_token:{name} (all in one slot)
-- ARGV[1]     lease in milliseconds (PEXPIRE of each hash)
-- ARGV[2]     owner id, "<client uuid>:<handle id>"
-- ARGV[3]     expiry of a fencing counter this call creates, in milliseconds
--
-- Returns  {1, holds1, token1, holds2, token2, ...} when every member was
--          taken (each as reentrant_acquire would answer it);
--          {0, i, pttl} when member i is held by another owner: nothing
--          was taken; pttl bounds the wait.
local n = #KEYS / 2
for i = 1, n do
    local key = KEYS[2 * i - 1]
    if redis.call('exists', key) == 1 and redis.call('hexists', key, ARGV[2]) == 0 then
        return {0, i, redis.call('pttl', key)}
    end
end
local out = {1}
local t = nil
for i = 1, n do
    local key, counter = KEYS[2 * i - 1], KEYS[2 * i]
    if redis.call('exists', key) == 0 then
        local token = redis.call('incr', counter)
        if token == 1 then
            t = t or redis.call('time')
            token = tonumber(t[1]) * 1000000 + tonumber(t[2])
            redis.call('set', counter, string.format('%.0f', token), 'px', ARGV[3])
        end
        redis.call('hincrby', key, ARGV[2], 1)
        redis.call('pexpire', key, ARGV[1])
        out[#out + 1] = 1
        out[#out + 1] = token
    else
        local token = tonumber(redis.call('get', counter) or '0') or 0
        local holds = redis.call('hincrby', key, ARGV[2], 1)
        if redis.call('pttl', key) < tonumber(ARGV[1]) then
            redis.call('pexpire', key, ARGV[1])
        end
        out[#out + 1] = holds
        out[#out + 1] = token
    end
end
return out
