-- The release of `releaser`'s last hold of `hash` hands the lock to
-- `owner`, the waiter wake_one took out of `registry`, whose wait is
-- tagged `tag` (1..1023): the hash becomes `owner`'s first hold for
-- `grant` ms (its field set before the releaser's goes, never deleted and
-- made again: a slot that is migrating refuses to make a key that is not
-- there, as another node may have it), with the next token of `counter`
-- (the key's fencing counter, declared by the caller), so the waiter holds
-- it without an acquire of its own (one round trip less per handoff, and
-- no other contender can take it in between). `registry` keeps a mark, `owner` at
-- score `tag` / 1024 (below any end, so wake_one drops it): a try of
-- that very wait that was already on its way when the grant came takes
-- the grant as its first hold (take_grant), and a wait that gave up
-- gives the lock back (waiter_leave). `grant` is the releaser's watchdog
-- lease: only a waiter under the watchdog is tagged, and it renews the
-- hold as its own from then on. A waiter that died while registered (its
-- entry lasts its span past its last try) and is granted the lock holds
-- it for that one lease, as a holder that dies does.
--
-- `counted`: the caller read `counter` in this call and found it there
-- (so it is not asked again: every call a script makes costs the server
-- more than the command itself). The hash's `keylatch_waiters` field is
-- the caller's reason to wake anyone, so it is there, and stays: the
-- holder's release reads the registry, drops the mark and serves whoever
-- waits behind.
--
-- Returns the message that names the waiter on `registry`'s channel,
-- "<owner> <tag> <token> <grant>", or nil when nothing was granted (no
-- counter, or one that cannot be counted: then the waiter is only woken,
-- and must try as ever; the caller deletes the hash). A counter that is
-- missing is not made here: a new one starts at the server's time (the
-- acquires do that).
local function grant_waiter(hash, releaser, counter, registry, owner, tag, grant, counted)
    -- (The releaser itself registered, acting as the same owner from
    -- elsewhere: its field would go; it is only woken.)
    if tag <= 0 or owner == releaser or tonumber(grant) <= 0 then
        return nil
    end
    if not counted and redis.call('exists', counter) == 0 then
        return nil
    end
    -- The mark first: without it a try of this wait on its way would take
    -- the grant for a re-entry (a count nobody releases), so no mark, no
    -- grant (a migrating slot refuses to make the registry again once
    -- wake_one took its last entry: the waiter is then only woken). It
    -- lives at least as long as the grant.
    if type(redis.pcall('zadd', registry, tag / 1024, owner)) ~= 'number' then
        return nil
    end
    -- At least the grant's lease. The mark may have made the registry again
    -- (wake_one took its last entry, which deletes a zset), without an
    -- expiry: left so, it lived on after a granted hold that expired
    -- unreleased (one key per such name, for good).
    local left = redis.pcall('pttl', registry)
    if type(left) == 'number' and (left == -1 or left < tonumber(grant)) then
        redis.pcall('pexpire', registry, grant)
    end
    local token = redis.pcall('incr', counter)
    if type(token) ~= 'number' then
        redis.pcall('zrem', registry, owner)
        return nil
    end
    redis.call('hset', hash, owner, 1)
    redis.call('hdel', hash, releaser)
    redis.call('pexpire', hash, grant)
    -- (Lua writes a number above 1e14 in exponent form: %.0f keeps every
    -- digit, exact below 2^53.)
    return string.format('%s %d %.0f %s', owner, tag, token, grant)
end
