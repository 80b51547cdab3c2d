#!lua flags=allow-cross-slot-keys
-- rw_renew_node: rw_renew for read-write lock holds in many slots of one
-- cluster node (no KEYS: sent to the node's connection directly).
--
-- KEYS[1]     none
-- ARGV[1]     lease in milliseconds; "0" only checks
-- ARGV[2]     unused
-- ARGV[4i-1]  hold i's lock hash, ARGV[4i] its key prefix, ARGV[4i+1] its
--             hash field, ARGV[4i+2] its token
--
-- Returns  as rw_renew: 1 held (and renewed), 0 gone, -1 unknown.
--
-- Needs Redis 7 / Valkey (script flags); where it is refused, the engine
-- renews per slot with rw_renew.
-- The owner's write hold ran out (its expiry key is gone) while the hash
-- lived on (its reads keep it): end the write now, as its lease says. Only
-- a keylatch write has that key, and only its own owner's calls end it.
local function end_lapsed_write(hash, base, owner)
    local field = owner .. ':write'
    if redis.call('hexists', hash, field) == 0 then
        return false
    end
    if redis.call('exists', base .. ':' .. field .. ':rwlock_timeout:1') == 1 then
        return false
    end
    redis.call('hdel', hash, field)
    if redis.call('hlen', hash) <= 1 then
        redis.call('del', hash)
    else
        redis.call('hset', hash, 'mode', 'read')
    end
    return true
end

local function judge(key, prefix, field, token, lease)
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

local lease = tonumber(ARGV[1])
local out = {}
for i = 3, #ARGV, 4 do
    out[#out + 1] = judge(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], lease)
end
return out
