-- leader_proclaim: the leader says who it is and what it offers (its
-- address, say), if it still leads in this very term.
--
-- KEYS[1]  the leadership lock's hash (the election's name)
-- KEYS[2]  the proclamation, keylatch_leader:{name} (a string; in the
--          lock's slot), also the channel changes are published on
-- KEYS[3]  the lock's fencing counter, redisson_lock_token:{name} (in the
--          lock's slot)
-- ARGV[1]  the leader's owner id (its hash field)
-- ARGV[2]  the proclamation: "<fencing token>\n<owner id>\n<value>"
-- ARGV[3]  the publish command: "publish" or "spublish" (a cluster's)
-- ARGV[4]  the term's fencing token ("0": unknown, judged by the owner
--          alone)
--
-- Returns  1 when ARGV[1] holds the lock in the term ARGV[4] names (the
--          counter still names that token: the same owner elected again
--          since has a newer one): the proclamation is written (no expiry:
--          a reader trusts it only while its owner holds the lock) and
--          published on KEYS[2]'s name; 0 when it does not (lost, never
--          held, an older term of this owner, or the name holding another
--          type now): nothing changes.

local held = redis.pcall('hexists', KEYS[1], ARGV[1])
if type(held) ~= 'number' or held == 0 then
    return 0
end
local token = ARGV[4] or '0'
if token ~= '0' then
    local current = redis.pcall('get', KEYS[3])
    -- A missing counter (deleted alone) is no newer term: as the renewal
    -- judges it.
    if type(current) == 'table' or (current and current ~= token) then
        return 0
    end
end
redis.call('set', KEYS[2], ARGV[2])
redis.call(ARGV[3], KEYS[2], ARGV[2])
return 1
