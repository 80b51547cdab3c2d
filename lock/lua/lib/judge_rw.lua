-- One read session or write hold of rw_renew and rw_renew_node (see
-- rw_renew.lua's header): 1 held (and renewed unless lease is 0), 0 gone,
-- -1 unknown. Calls end_lapsed_write (lib/end_lapsed_write.lua), which
-- must come before it.
local function judge_rw(key, prefix, field, token, lease)
    local n = redis.pcall('hget', key, field)
    if type(n) == 'table' then
        if string.find(n.err or '', 'WRONGTYPE', 1, true) then
            return 0
        end
        return -1
    end
    n = tonumber(n)
    local suffix = ':' .. field .. ':rwlock_timeout'
    local base = string.sub(prefix, 1, #prefix - #suffix)
    local writer = string.sub(field, -6) == ':write'
    local owner = field
    if writer then
        owner = string.sub(field, 1, #field - 6)
    end
    if redis.call('hget', key, 'mode') == 'write' then
        -- A write of this owner that ran out ends here, even while its
        -- reads keep the hash alive.
        end_lapsed_write(key, base, owner)
    end
    if not n or n <= 0 or redis.call('hexists', key, field) == 0 then
        return 0
    end
    local alive = false
    for i = 1, n do
        local k = prefix .. ':' .. i
        local v = redis.call('get', k)
        if v and (token == '0' or v == token) then
            alive = true
            local left = redis.call('pttl', k)
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
