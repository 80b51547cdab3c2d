-- The generation of an owner's live read holds (the value of any of its
-- hold keys still there), or nil when they all ran out.
local function session(prefix, n)
    for i = 1, n do
        local v = redis.call('get', prefix .. ':' .. i)
        if v then
            return v
        end
    end
    return nil
end
