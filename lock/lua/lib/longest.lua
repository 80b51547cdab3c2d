-- The longest remaining expiry of any hold key in the hash (read holds,
-- and keylatch write holds' keys): what the hash must live.
local function longest(hash, base)
    local out = -3
    for _, f in ipairs(redis.call('hkeys', hash)) do
        local n = tonumber(redis.call('hget', hash, f))
        if f ~= 'mode' and n then
            for i = n, 1, -1 do
                out = math.max(out, redis.call('pttl', base .. ':' .. f .. ':rwlock_timeout:' .. i))
            end
        end
    end
    return out
end
