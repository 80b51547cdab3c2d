-- One hold of reentrant_renew and reentrant_renew_node (see
-- reentrant_renew.lua's header): 1 held (and renewed unless lease is 0),
-- 0 gone, -1 unknown.
local function judge_reentrant(key, counter, owner, token, lease, idle)
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
