-- permits_renew: extend (or only check) many permit guards' leased permits
-- of permit-expirable semaphores in one call (the lease engine, and a
-- guard's extend). A guard stands while every one of its permits is out
-- and unexpired.
--
-- KEYS[2i-1]  a semaphore (its count: gone or of another type, the guard's
--             permits are gone);
--             KEYS[2i] its permits, {name}:timeout (zset raw id -> expiry)
-- ARGV[1]     lease in ms: each permit now expires at least this long from
--             the server's now (never sooner than it did); "0" only checks
-- ARGV[2]     unused (the shape every renewal shares)
-- ARGV[3]     unused (flags: permit guards are never tracked)
-- ARGV[2i+2]  guard i's permit ids, 32 hex digits each, comma-separated;
--             ARGV[2i+3] its token (unused: "0")
--
-- Returns  an array: element i is 1 when guard i's permits all stand (and
--          are renewed), 0 when any is gone or expired (or the count is), -1 when the key
--          could not be read here (served elsewhere now).

-- From lib/ (scripts.rs puts them first): raw, judge_permits.

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS / 2 do
    out[i] = judge_permits(KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 * i + 2], lease, now)
end
return out
