-- rw_renew_node: rw_renew for read-write lock holds in many slots of one
-- cluster node (no KEYS: sent to the node's connection directly).
--
-- KEYS[1]     none
-- ARGV[1]     lease in milliseconds; "0" only checks
-- ARGV[2]     unused
-- ARGV[3]     unused (flags)
-- ARGV[4i]    hold i's lock hash, ARGV[4i+1] its key prefix, ARGV[4i+2]
--             its hash field, ARGV[4i+3] its token
--
-- Returns  as rw_renew: 1 held (and renewed), 0 gone, -1 unknown.
--
-- Needs Redis 7 / Valkey (script flags); where it is refused, the engine
-- renews per slot with rw_renew.
-- The flag line, `#!lua flags=allow-cross-slot-keys`, is not in this file:
-- scripts.rs puts it first in the assembled script, where Redis wants it.

-- From lib/ (scripts.rs puts them first): end_lapsed_write, judge_rw.

local lease = tonumber(ARGV[1])
local out = {}
for i = 4, #ARGV, 4 do
    out[#out + 1] = judge_rw(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], lease)
end
return out
