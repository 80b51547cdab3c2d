-- rw_renew: extend (or only check) many read-write lock holds in one call
-- (the lease engine): an owner's read session, or its write hold. Each is
-- judged on its own, and only its own hold keys are extended (Redisson
-- extends every reader's, so a crashed reader lives on while another
-- renews).
--
-- KEYS[2i-1]  a lock hash; KEYS[2i] the hold's key prefix: the owner's
--             read prefix {name}:<owner>:rwlock_timeout, or its write prefix
--             {name}:<owner>:write:rwlock_timeout (hold key j is
--             KEYS[2i] .. ':' .. j); any keys of a standalone server, in a
--             cluster keys of one slot
-- ARGV[1]     lease in milliseconds; "0" only checks (fixed leases)
-- ARGV[2]     unused (the counters' idle expiry, for the shape every
--             renewal shares)
-- ARGV[3]     unused (flags, for the shape every renewal shares)
-- ARGV[2i+2]  hold i's hash field (the owner id, or "<owner>:write");
--             ARGV[2i+3] its token: the read session's generation or the
--             write hold's fencing token, which its hold keys hold
--
-- Returns  an array: element i is 1 when hold i still stands (its field
--          is there and a hold key holds its token; each such key now
--          lives at least the lease, and the hash as long); 0 when it is
--          gone; -1 when the key could not be read here (served elsewhere
--          now): unknown, ask again. A write hold whose key ran out is
--          ended on the way (the hash then reads 'read', or is deleted).

-- From lib/ (scripts.rs puts them first): end_lapsed_write, judge_rw.

local lease = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS / 2 do
    out[i] = judge_rw(KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 * i + 2], ARGV[2 * i + 3], lease)
end
return out
