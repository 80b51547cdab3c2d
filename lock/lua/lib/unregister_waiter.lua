-- `owner` takes the lock: its entry among the waiters (see
-- register_waiter) is taken out. A grant's mark (score below 1, see
-- grant_waiter) stays: it names another wait of this owner, which a try of
-- its own takes (take_grant), and wake_one drops it. Returns whether
-- others are still registered: the caller marks the hash it takes, so its
-- release looks for them. A registry that cannot be read (redis.pcall)
-- has none.
local function unregister_waiter(registry, owner)
    local entry = redis.pcall('zscore', registry, owner)
    if type(entry) == 'table' then
        return false
    end
    if entry and tonumber(entry) >= 1 then
        redis.call('zrem', registry, owner)
    end
    return redis.call('zcard', registry) > 0
end
