-- The common renewal of reentrant_renew and reentrant_renew_node, in as
-- few calls as it allows: a hold whose owner is in its hash and whose
-- counter names its token, made to live at least `lease_ms` (a string, as
-- PEXPIRE takes it: no number formatted per hold) with PEXPIRE ... GT.
-- true when it judged the hold held and renewed it; false leaves the hold
-- to judge_reentrant, which judges every other case (gone, unknown, a
-- counter to put back or refresh, a token "0", Redis 6.2's missing GT) and
-- repeats the reads it needs. The order of the reads is judge_reentrant's.
-- `seen`: the counter as read in bulk, or nil to read it here.
local function renew_current(key, counter, owner, token, lease_ms, seen)
    if not gt_ok or token == '0' then
        return false
    end
    if redis.pcall('hexists', key, owner) ~= 1 then
        return false
    end
    if seen == nil then
        seen = redis.pcall('get', counter)
    end
    if seen ~= token then
        return false
    end
    return type(redis.pcall('pexpire', key, lease_ms, 'GT')) ~= 'table'
end
