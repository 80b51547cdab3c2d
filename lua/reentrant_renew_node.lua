#!lua flags=allow-cross-slot-keys
-- reentrant_renew_node: reentrant_renew for holds in many slots of one
-- cluster node, so 10,000 holds need about 100 calls, not one per slot.
--
-- KEYS[1]    none: the call declares no keys and is sent to one node's
--            connection directly (declared keys would have to share a slot)
-- ARGV[1]    lease in milliseconds
-- ARGV[2i]   a lock hash served by this node; ARGV[2i+1] its owner id
--
-- Returns  an array: element i is 1 when the i-th lock is still held by its
--          owner and now lives at least the lease (a longer expiry is kept),
--          0 when that hold is gone.
--
-- Needs Redis 7 / Valkey (script flags). A node that no longer serves one of
-- the keys fails the whole call; the watchdog then renews per slot.
local out = {}
for i = 2, #ARGV, 2 do
    local key = ARGV[i]
    if redis.call('hexists', key, ARGV[i + 1]) == 1 then
        if redis.call('pttl', key) < tonumber(ARGV[1]) then
            redis.call('pexpire', key, ARGV[1])
        end
        out[#out + 1] = 1
    else
        out[#out + 1] = 0
    end
end
return out
