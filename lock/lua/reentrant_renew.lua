-- reentrant_renew: extend (or only check) many holds in one call (the
-- lease engine). Each hold is judged on its own: a key overwritten with
-- another type, a missing owner or a newer token is that hold's loss, never
-- the whole call's.
--
-- KEYS[2i-1]  a lock hash; KEYS[2i] its fencing counter (any keys of a
--             standalone server; in a cluster, keys of one slot)
-- ARGV[1]     lease in milliseconds; "0" only checks (fixed leases)
-- ARGV[2]     idle expiry of the fencing counters, in milliseconds
-- ARGV[2i+1]  the owner id of hold i; ARGV[2i+2] its token ("0": unknown,
--             judged by the owner alone)
--
-- Returns  an array: element i is 1 when hold i still stands (the owner's
--          field is there, the counter names its token, the key is a hash)
--          and, unless checking, now lives at least the lease (a longer
--          expiry is kept) with its counter kept alive as long as the idle
--          expiry; 0 when that hold is gone; -1 when a key could not be
--          read here (e.g. served by another node now): unknown, ask again.
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
        -- Deleted alone: no first hold was taken since (that would have
        -- made it again), so this hold is still the newest. Put it back.
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
for i = 1, #KEYS / 2 do
    out[i] = judge(KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 * i + 1], ARGV[2 * i + 2], lease, ARGV[2])
end
return out
