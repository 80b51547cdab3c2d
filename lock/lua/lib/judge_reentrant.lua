-- One hold of reentrant_renew and reentrant_renew_node (see
-- reentrant_renew.lua's header): 1 held (and renewed unless lease is 0),
-- 0 gone, -1 unknown.

-- `seen`: the counter's value as the caller read it in bulk (MGET), or
-- nil when it did not; false (missing, or not a string) is asked again
-- here, where the two differ.
-- `refresh`: the counter's idle expiry is due again. It is not done on
-- every renewal: the counter lives a day unused, so once every few hours
-- per hold keeps it (the engine says when), and a counter that expired
-- anyway is put back below.
local function judge_reentrant(key, counter, owner, token, lease, idle, refresh, seen)
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
        current = seen
        if not current then
            current = redis.pcall('get', counter)
        end
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
        -- Deleted alone (or expired): no first hold was taken since (that
        -- would have made it again), so this hold is still the newest.
        -- Put it back.
        if lease > 0 then
            redis.call('set', counter, token, 'px', idle)
        end
    elseif current ~= token then
        return 0
    elseif lease > 0 and refresh then
        stretch(counter, idle)
    end
    if lease > 0 then
        stretch(key, lease)
    end
    return 1
end
