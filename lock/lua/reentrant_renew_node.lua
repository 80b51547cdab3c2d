#!lua flags=allow-cross-slot-keys
-- reentrant_renew_node: reentrant_renew for holds in many slots of one
-- cluster node, so 10,000 holds need about 100 calls, not one per slot.
--
-- KEYS[1]     none: the call declares no keys and is sent to one node's
--             connection directly (declared keys would have to share a slot)
-- ARGV[1]     lease in milliseconds; "0" only checks
-- ARGV[2]     idle expiry of the fencing counters, in milliseconds
-- ARGV[4i-1]  hold i's lock hash, ARGV[4i] its counter, ARGV[4i+1] its
--             owner, ARGV[4i+2] its token
--
-- Returns  as reentrant_renew: 1 held (and renewed), 0 gone, -1 unknown
--          (a key this node no longer serves: ask its slot's node).
--
-- Needs Redis 7 / Valkey (script flags); where it is refused, the engine
-- renews per slot with reentrant_renew.
local function judge(key, counter, owner, token, lease, idle)
    local held = redis.pcall('hexists', key, owner)
    if type(held) == 'table' then
        if string.find(held.err or '', 'WRONGTYPE', 1, true) then
            return 0
        end
        return -1
    end
    if held == 0 then
        return 0
    end
    -- Token "0": unknown (taken while the counter was missing); judged by
    -- the owner alone, and never written into the counter.
    local current = token
    if token ~= '0' then
        current = redis.pcall('get', counter)
    end
    if type(current) == 'table' then
        -- Another type: this hold's counter is broken, the hold gone. Any
        -- other error (a counter served elsewhere, mid-migration): unknown.
        if string.find(current.err or '', 'WRONGTYPE', 1, true) then
            return 0
        end
        return -1
    end
    if current == false then
        if lease > 0 then
            redis.call('set', counter, token, 'px', idle)
        end
    elseif current ~= token then
        return 0
    end
    if lease > 0 then
        if redis.call('pttl', key) < lease then
            redis.call('pexpire', key, lease)
        end
        if redis.call('pttl', counter) >= 0 then
            redis.call('pexpire', counter, idle)
        end
    end
    return 1
end

local lease = tonumber(ARGV[1])
local out = {}
for i = 3, #ARGV, 4 do
    out[#out + 1] = judge(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], lease, ARGV[2])
end
return out
