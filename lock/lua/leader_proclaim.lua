-- leader_proclaim: the leader says who it is and what it offers (its
-- address, say), if it still leads.
--
-- KEYS[1]  the leadership lock's hash (the election's name)
-- KEYS[2]  the proclamation, keylatch_leader:{name} (a string; in the
--          lock's slot), also the channel changes are published on
-- ARGV[1]  the leader's owner id (its hash field)
-- ARGV[2]  the proclamation: "<fencing token>\n<owner id>\n<value>"
-- ARGV[3]  the publish command: "publish" or "spublish" (a cluster's)
--
-- Returns  1 when ARGV[1] holds the lock: the proclamation is written
--          (no expiry: a reader trusts it only while its owner holds the
--          lock) and published on KEYS[2]'s name; 0 when it does not
--          (lost, or never held): nothing changes.

if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return 0
end
redis.call('set', KEYS[2], ARGV[2])
redis.call(ARGV[3], KEYS[2], ARGV[2])
return 1
