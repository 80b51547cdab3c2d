-- rw_read_renew: extend (or only check) many owners' read holds of
-- read-write locks in one call (the lease engine). Each owner is judged on
-- its own; only its own read holds are extended (Redisson extends every
-- reader's, so a crashed reader lives on while another renews).
--
-- KEYS[2i-1]  a lock hash; KEYS[2i] the owner's read-hold prefix,
--             {name}:<owner>:rwlock_timeout (hold j is KEYS[2i] .. ':' .. j);
--             any keys of a standalone server, in a cluster keys of one slot
-- ARGV[1]     lease in milliseconds; "0" only checks (fixed leases)
-- ARGV[2]     unused (the counters' idle expiry, for the shape every
--             renewal shares)
-- ARGV[2i+1]  the owner id of hold i; ARGV[2i+2] its token (unused: "0")
--
-- Returns  an array: element i is 1 when owner i still has a read count and
--          at least one of its read holds is alive (each alive one now lives
--          at least the lease, and the hash as long); 0 when its holds are
--          gone; -1 when the key could not be read here (served elsewhere
--          now): unknown, ask again.
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
for i = 1, #KEYS / 2 do
    out[i] = judge(KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 * i + 1], lease)
end
return out
