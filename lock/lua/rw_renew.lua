-- rw_renew: extend (or only check) many read-write lock holds in one call
-- (the lease engine): an owner's read session, or its write hold. Each is
-- judged on its own, and only its own hold keys are extended (Redisson
-- extends every reader's, so a crashed reader lives on while another
-- renews).
--
-- KEYS[2i-1]  a lock hash; KEYS[2i] the hold's key prefix: the owner's
--             read prefix {name}:<owner>:rwlock_timeout, or its write prefix
--             {name}:<owner>:write:rwlock_timeout (hold key j is
--             KEYS[2i] .. ':' .. j); any keys of a standalone server, in a
--             cluster keys of one slot
-- ARGV[1]     lease in milliseconds; "0" only checks (fixed leases)
-- ARGV[2]     unused (the counters' idle expiry, for the shape every
--             renewal shares)
-- ARGV[2i+1]  hold i's hash field (the owner id, or "<owner>:write");
--             ARGV[2i+2] its token: the read session's generation or the
--             write hold's fencing token, which its hold keys hold
--
-- Returns  an array: element i is 1 when hold i still stands (its field
--          is there and a hold key holds its token; each such key now
--          lives at least the lease, and the hash as long); 0 when it is
--          gone; -1 when the key could not be read here (served elsewhere
--          now): unknown, ask again. A write hold whose key ran out is
--          ended on the way (the hash then reads 'read', or is deleted).
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
for i = 1, #KEYS / 2 do
    out[i] = judge(KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 * i + 1], ARGV[2 * i + 2], lease)
end
return out
