-- owner_renew: the lease engine's common renewal of RLock-hash holds, each
-- judged by its owner alone: no fencing counter read, two calls per hold
-- (Redisson's renewal does the same two). The engine sends only holds no
-- other request can have taken again as the same owner (an owner this
-- client made, never handed out, whose handle has no acquire of unknown
-- outcome); every other hold, a check, and a round that refreshes the
-- counters go to reentrant_renew, which reads the counter.
--
-- KEYS[i]     a lock hash (any keys of a standalone server; in a cluster,
--             keys of one slot)
-- ARGV[1]     lease in milliseconds (never "0": checks read the counter)
-- ARGV[i+1]   the owner id of hold i
--
-- Returns  an array: element i is 1 when hold i's owner is in its hash
--          (which now lives at least the lease; a longer expiry is kept,
--          and a key without one keeps none), 0 when it is not (or the key
--          is another type), -1 when its key could not be read here.

-- From lib/ (scripts.rs puts them first): stretch, renew_owner.

local out = {}
for i = 1, #KEYS do
    out[i] = renew_owner(KEYS[i], ARGV[i + 1], ARGV[1])
end
return out
