#!lua flags=allow-cross-slot-keys
-- permits_renew_node: permits_renew for permit guards in many slots of one
-- cluster node (no KEYS: sent to the node's connection directly).
--
-- KEYS[1]     none
-- ARGV[1]     lease in ms; "0" only checks
-- ARGV[2]     unused
-- ARGV[4i-1]  guard i's semaphore, ARGV[4i] its permits zset, ARGV[4i+1]
--             its permit ids (hex, comma-separated), ARGV[4i+2] its token
--             (unused)
--
-- Returns  as permits_renew: 1 standing (and renewed), 0 gone, -1 unknown.
--
-- Needs Redis 7 / Valkey (script flags); where it is refused, the engine
-- renews per slot with permits_renew.
local function raw(hex)
    return (hex:gsub('..', function(h) return string.char(tonumber(h, 16)) end))
end

local function judge(sem, zset, ids, lease, now)
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

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
local out = {}
for i = 3, #ARGV, 4 do
    out[#out + 1] = judge(ARGV[i], ARGV[i + 1], ARGV[i + 2], lease, now)
end
return out
