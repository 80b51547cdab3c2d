-- reentrant_renew: extend the leases of many holds in one call (the watchdog).
--
-- KEYS[i]    lock hashes: any keys of a standalone server; in a cluster, keys
--            of one slot (reentrant_renew_node covers a whole node)
-- ARGV[1]    lease in milliseconds
-- ARGV[1+i]  the owner id holding KEYS[i]
--
-- Returns  an array: element i is 1 when KEYS[i] is still held by ARGV[1+i]
--          and now lives at least the lease (a longer expiry, from a
--          re-entry with a longer lease, is kept), 0 when that hold is gone (expired,
--          deleted, or taken by another owner): the holder has lost it.
local out = {}
for i, key in ipairs(KEYS) do
    if redis.call('hexists', key, ARGV[i + 1]) == 1 then
        if redis.call('pttl', key) < tonumber(ARGV[1]) then
            redis.call('pexpire', key, ARGV[1])
        end
        out[i] = 1
    else
        out[i] = 0
    end
end
return out
