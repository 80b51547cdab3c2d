-- A try of `owner`'s wait tagged `tag` that finds `owner` holding `hash`:
-- whether that is a grant of this wait (see grant_waiter: a release took
-- the waiter out and handed it the lock while this try was on its way).
-- If so the mark is taken out, the hash lives at least `lease` ms (never
-- shortened), and the token is returned: the caller answers it as a first
-- hold. nil when it is not (tag 0, no mark, another wait's mark: a
-- re-entry as ever).
local function take_grant(hash, counter, registry, owner, tag, lease)
    if tag <= 0 then
        return nil
    end
    local mark = redis.pcall('zscore', registry, owner)
    if type(mark) ~= 'string' or tonumber(mark) ~= tag / 1024 then
        return nil
    end
    redis.pcall('zrem', registry, owner)
    stretch(hash, lease)
    local token = redis.pcall('get', counter)
    return tonumber(type(token) == 'string' and token or '0') or 0
end
