-- owner_renew_node: owner_renew for holds in many slots of one cluster
-- node.
--
-- KEYS[1]     none: the call declares no keys and is sent to one node's
--             connection directly (declared keys would have to share a slot)
-- ARGV[1]     lease in milliseconds
-- ARGV[2i]    hold i's lock hash, ARGV[2i+1] its owner
--
-- Returns  as owner_renew: 1 held (and renewed), 0 gone, -1 unknown (a key
--          this node no longer serves: ask its slot's node).
--
-- Needs Redis 7 / Valkey (script flags); where it is refused, the engine
-- renews per slot with owner_renew.
-- The flag line, `#!lua flags=allow-cross-slot-keys`, is not in this file:
-- scripts.rs puts it first in the assembled script, where Redis wants it.

-- From lib/ (scripts.rs puts them first): stretch, renew_owner.

local out = {}
for i = 2, #ARGV, 2 do
    out[#out + 1] = renew_owner(ARGV[i], ARGV[i + 1], ARGV[1])
end
return out
