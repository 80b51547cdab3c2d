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
