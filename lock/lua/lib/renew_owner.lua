-- One hold of owner_renew and owner_renew_node, judged by its owner alone:
-- 1 the owner's field is in the hash (now living at least `lease_ms`, a
-- string as PEXPIRE takes it; a longer expiry is kept), 0 gone (no field,
-- or the key is another type), -1 unknown (the key could not be read here:
-- served by another node now, mid-migration).
local function renew_owner(key, owner, lease_ms)
    local held = redis.pcall('hexists', key, owner)
    if held == 1 then
        stretch(key, lease_ms)
        return 1
    end
    if type(held) == 'table' then
        if string.find(held.err or '', 'WRONGTYPE', 1, true) then
            return 0
        end
        return -1
    end
    return 0
end
