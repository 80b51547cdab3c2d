#!lua flags=allow-cross-slot-keys
-- rw_read_renew_node: rw_read_renew for read holds in many slots of one
-- cluster node (no KEYS: sent to the node's connection directly).
--
-- KEYS[1]     none
-- ARGV[1]     lease in milliseconds; "0" only checks
-- ARGV[2]     unused
-- ARGV[4i-1]  hold i's lock hash, ARGV[4i] its owner's read-hold prefix,
--             ARGV[4i+1] its owner, ARGV[4i+2] its token (unused)
--
-- Returns  as rw_read_renew: 1 held (and renewed), 0 gone, -1 unknown.
--
-- Needs Redis 7 / Valkey (script flags); where it is refused, the engine
-- renews per slot with rw_read_renew.
local function judge(key, prefix, owner, lease)
    local n = redis.pcall('hget', key, owner)
    if type(n) == 'table' then
        if string.find(n.err or '', 'WRONGTYPE', 1, true) then
            return 0
        end
        return -1
    end
    n = tonumber(n)
    if not n or n <= 0 then
        return 0
    end
    local alive = false
    for i = 1, n do
        local k = prefix .. ':' .. i
        local left = redis.call('pttl', k)
        if left ~= -2 then
            alive = true
            if lease > 0 and left >= 0 and left < lease then
                redis.call('pexpire', k, lease)
            end
        end
    end
    if not alive then
        return 0
    end
    if lease > 0 and redis.call('pttl', key) < lease then
        redis.call('pexpire', key, lease)
    end
    return 1
end

local lease = tonumber(ARGV[1])
local out = {}
for i = 3, #ARGV, 4 do
    out[#out + 1] = judge(ARGV[i], ARGV[i + 1], ARGV[i + 2], lease)
end
return out
