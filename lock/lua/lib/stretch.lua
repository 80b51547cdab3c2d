-- A key made to live at least ms from now; a longer expiry is
-- kept, and a key without one keeps none. PEXPIRE ... GT (Redis 7,
-- Valkey) does that in one call; Redis 6.2 refuses GT, and the first
-- refusal switches the rest of the call to the same rule by hand.
local gt_ok = true
local function stretch(key, ms)
    if gt_ok then
        local r = redis.pcall('pexpire', key, ms, 'GT')
        if type(r) ~= 'table' then
            return
        end
        gt_ok = false
    end
    local left = redis.call('pttl', key)
    if left >= 0 and left < tonumber(ms) then
        redis.call('pexpire', key, ms)
    end
end
