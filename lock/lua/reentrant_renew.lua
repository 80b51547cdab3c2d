-- reentrant_renew: extend (or only check) many holds in one call (the
-- lease engine). Each hold is judged on its own: a key overwritten with
-- another type, a missing owner or a newer token is that hold's loss, never
-- the whole call's.
--
-- KEYS[2i-1]  a lock hash; KEYS[2i] its fencing counter (any keys of a
--             standalone server; in a cluster, keys of one slot)
-- ARGV[1]     lease in milliseconds; "0" only checks (fixed leases)
-- ARGV[2]     idle expiry of the fencing counters, in milliseconds
-- ARGV[3]     flags: "c" refresh the counters' idle expiry (due every few
--             hours, not every renewal)
-- ARGV[2i+2]  the owner id of hold i; ARGV[2i+3] its token ("0": unknown,
--             judged by the owner alone)
--
-- Returns  an array: element i is 1 when hold i still stands (the owner's
--          field is there, the counter names its token, the key is a hash)
--          and, unless checking, now lives at least the lease (a longer
--          expiry is kept, and a key without one keeps none); 0 when that hold is gone; -1 when a key could not be
--          read here (e.g. served by another node now): unknown, ask again.

-- From lib/ (scripts.rs puts them first): stretch, judge_reentrant, renew_current.

local lease = tonumber(ARGV[1])
local refresh = string.find(ARGV[3], 'c', 1, true) ~= nil
-- Renewing without a counter refresh due: the common case goes through
-- renew_current (two calls per hold), the rest through judge_reentrant.
local common = lease > 0 and not refresh
local n = #KEYS / 2
-- Every counter in one read: one call, not one per hold. An error (a
-- counter served elsewhere, mid-migration) leaves each to be read alone.
local counters = {}
for i = 1, n do
    counters[i] = KEYS[2 * i]
end
local seen = redis.pcall('mget', unpack(counters))
if type(seen) ~= 'table' or seen.err then
    seen = {}
end
local out = {}
for i = 1, n do
    local key, counter, owner, token = KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 * i + 2], ARGV[2 * i + 3]
    -- A counter missing from the bulk read is false, never nil: only a
    -- failed MGET leaves renew_current to read it.
    if common and renew_current(key, counter, owner, token, ARGV[1], seen[i]) then
        out[i] = 1
    else
        out[i] = judge_reentrant(key, counter, owner, token, lease, ARGV[2], refresh, seen[i])
    end
end
return out
