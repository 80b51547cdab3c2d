-- reentrant_renew_node: reentrant_renew for holds in many slots of one
-- cluster node, so 10,000 holds need about 100 calls, not one per slot.
--
-- KEYS[1]     none: the call declares no keys and is sent to one node's
--             connection directly (declared keys would have to share a slot)
-- ARGV[1]     lease in milliseconds; "0" only checks
-- ARGV[2]     idle expiry of the fencing counters, in milliseconds
-- ARGV[4i-1]  hold i's lock hash, ARGV[4i] its counter, ARGV[4i+1] its
--             owner, ARGV[4i+2] its token
--
-- Returns  as reentrant_renew: 1 held (and renewed), 0 gone, -1 unknown
--          (a key this node no longer serves: ask its slot's node).
--
-- Needs Redis 7 / Valkey (script flags); where it is refused, the engine
-- renews per slot with reentrant_renew.
-- The flag line, `#!lua flags=allow-cross-slot-keys`, is not in this file:
-- scripts.rs puts it first in the assembled script, where Redis wants it.

-- From lib/ (scripts.rs puts them first): judge_reentrant.

local lease = tonumber(ARGV[1])
local out = {}
for i = 3, #ARGV, 4 do
    out[#out + 1] = judge_reentrant(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], lease, ARGV[2])
end
return out
