-- `owner` takes the lock: its entry among the waiters (see
-- register_waiter) is taken out. Returns whether others are still
-- registered: the caller marks the hash it takes, so its release looks
-- for them. A registry that cannot be read (redis.pcall) has none.
local function unregister_waiter(registry, owner)
    if type(redis.pcall('zrem', registry, owner)) ~= 'number' then
        return false
    end
    return redis.call('zcard', registry) > 0
end
