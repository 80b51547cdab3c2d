-- One permit guard of permits_renew and permits_renew_node (see
-- permits_renew.lua's header): 1 standing (and renewed unless lease is 0),
-- 0 gone, -1 unknown. Calls raw (lib/raw.lua), which must come before it.
local function judge_permits(sem, zset, ids, lease, now)
    -- The count gone or overwritten (the name reused by another type):
    -- the permits are gone with it.
    local st = redis.pcall('type', sem)
    if type(st) == 'table' and st.err then
        return -1
    end
    if st.ok ~= 'string' then
        return 0
    end
    for hex in string.gmatch(ids, '[^,]+') do
        local score = redis.pcall('zscore', zset, raw(hex))
        if type(score) == 'table' then
            if string.find(score.err or '', 'WRONGTYPE', 1, true) then
                return 0
            end
            return -1
        end
        if not score or tonumber(score) <= now then
            return 0
        end
    end
    if lease > 0 then
        for hex in string.gmatch(ids, '[^,]+') do
            redis.call('zadd', zset, 'xx', 'gt', now + lease, raw(hex))
        end
    end
    return 1
end
