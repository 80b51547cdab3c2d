-- reentrant_renew_node: reentrant_renew for holds in many slots of one
-- cluster node, so 10,000 holds need about 100 calls, not one per slot.
--
-- KEYS[1]     none: the call declares no keys and is sent to one node's
--             connection directly (declared keys would have to share a slot)
-- ARGV[1]     lease in milliseconds; "0" only checks
-- ARGV[2]     idle expiry of the fencing counters, in milliseconds
-- ARGV[3]     flags, as reentrant_renew's ("c" refresh the counters)
-- ARGV[4i]    hold i's lock hash, ARGV[4i+1] its counter, ARGV[4i+2] its
--             owner, ARGV[4i+3] its token
--
-- Returns  as reentrant_renew: 1 held (and renewed), 0 gone, -1 unknown
--          (a key this node no longer serves: ask its slot's node).
--
-- Needs Redis 7 / Valkey (script flags); where it is refused, the engine
-- renews per slot with reentrant_renew.
-- The flag line, `#!lua flags=allow-cross-slot-keys`, is not in this file:
-- scripts.rs puts it first in the assembled script, where Redis wants it.

-- From lib/ (scripts.rs puts them first): stretch, judge_reentrant, renew_current.

local lease = tonumber(ARGV[1])
local refresh = string.find(ARGV[3], 'c', 1, true) ~= nil
local common = lease > 0 and not refresh
local out = {}
for i = 4, #ARGV, 4 do
    if common and renew_current(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[1], nil) then
        out[#out + 1] = 1
    else
        out[#out + 1] = judge_reentrant(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], lease, ARGV[2], refresh, nil)
    end
end
return out
