-- leader_clear: a leader that resigned takes its proclamation back.
--
-- KEYS[1]  the proclamation, keylatch_leader:{name}, also the channel
-- ARGV[1]  the resigning leader's owner id
-- ARGV[2]  the publish command: "publish" or "spublish" (a cluster's)
-- ARGV[3]  (optional) the resigning term's fencing token: only a
--          proclamation of that term is taken back (the same owner, elected
--          again since, proclaims with a newer token); absent or "0": any
--          of the owner's
--
-- Returns  1 when the proclamation was this leader's: it is deleted, and
--          an empty message published on KEYS[1]'s name; 0 when it names
--          another leader (one elected since), another term, or none (or
--          the key holds another type): nothing changes.

local text = redis.pcall('get', KEYS[1])
if type(text) ~= 'string' then
    return 0
end
local _, owner_at = string.find(text, '\n', 1, true)
if not owner_at or string.sub(text, owner_at + 1, owner_at + #ARGV[1] + 1) ~= ARGV[1] .. '\n' then
    return 0
end
local token = ARGV[3] or '0'
if token ~= '0' and string.sub(text, 1, owner_at - 1) ~= token then
    return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[1], '')
return 1
