-- The waiter registered longest ago whose entry has not ended (see
-- register_waiter), taken out of `registry`, and its wait's tag (0: it
-- may only be woken, not granted the lock); nil when there is none, or
-- when the registry cannot be read (redis.pcall: another type, or a key
-- not declared to a cluster node, such as one that moved away with a
-- migrating slot). Ended entries met on the way are dropped (a grant's
-- mark among them: its score is below 1, see grant_waiter); at most 8 are
-- looked at (the rest end with the key).
local function wake_one(registry)
    local now
    for _ = 1, 8 do
        local first = redis.pcall('zpopmin', registry)
        if first.err or first[1] == nil then
            return nil, 0
        end
        if now == nil then
            local t = redis.call('time')
            now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        end
        local score = tonumber(first[2])
        if score >= now then
            return first[1], math.floor((score % 1) * 1024 + 0.5)
        end
    end
    return nil, 0
end
