-- permits_renew_node: permits_renew for permit guards in many slots of one
-- cluster node (no KEYS: sent to the node's connection directly).
--
-- KEYS[1]     none
-- ARGV[1]     lease in ms; "0" only checks
-- ARGV[2]     unused
-- ARGV[3]     unused (flags)
-- ARGV[4i]    guard i's semaphore, ARGV[4i+1] its permits zset, ARGV[4i+2]
--             its permit ids (hex, comma-separated), ARGV[4i+3] its token
--             (unused)
--
-- Returns  as permits_renew: 1 standing (and renewed), 0 gone, -1 unknown.
--
-- Needs Redis 7 / Valkey (script flags); where it is refused, the engine
-- renews per slot with permits_renew.
-- The flag line, `#!lua flags=allow-cross-slot-keys`, is not in this file:
-- scripts.rs puts it first in the assembled script, where Redis wants it.

-- From lib/ (scripts.rs puts them first): raw, judge_permits.

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
local out = {}
for i = 4, #ARGV, 4 do
    out[#out + 1] = judge_permits(ARGV[i], ARGV[i + 1], ARGV[i + 2], lease, now)
end
return out
