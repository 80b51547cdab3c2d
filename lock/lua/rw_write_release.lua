-- rw_write_release: drop one write hold of a Redisson-compatible read-write
-- lock; on the last one free the lock, or downgrade it to the owner's reads.
--
-- KEYS[1]  the lock hash (the user's lock name)
-- KEYS[2]  the fencing counter, redisson_lock_token:{name} (unused; kept so
--          every release has the same shape)
-- KEYS[3]  the hold keys' base, {name} (hold i of field f is
--          KEYS[3] .. ':' .. f .. ':rwlock_timeout:' .. i)
-- ARGV[1]  owner id (the field is ARGV[1]:write)
-- ARGV[2]  the lock's channel, redisson_rwlock:{name} (not a key)
-- ARGV[3]  the publish command: "publish" or "spublish"
-- ARGV[4]  the token of the hold being released (its key holds it), or "0"
--          to release by owner without the check
--
-- Returns  nil when this owner holds no write hold, its write key holds
--          another token (a newer hold: nothing changes), or its lease had
--          run out (it is ended now: the owner's reads keep a 'read' lock,
--          or it is deleted, and "1" published); 0 when write holds remain;
--          1 for the last one: the hash is deleted, or, when this owner
--          still has read holds, 'mode' becomes 'read' and the hash lives as
--          long as its longest hold (downgrade). Either way "1" is published
--          (Redisson's write-unlock message, which wakes every waiter;
--          Redisson publishes nothing on a downgrade and leaves waiting
--          readers asleep).

-- From lib/ (scripts.rs puts them first): end_lapsed_write, longest.

local field = ARGV[1] .. ':write'
local wkey = KEYS[3] .. ':' .. field .. ':rwlock_timeout:1'
-- A name that now holds another type (the hold lost, the name reused):
-- nil, never an error.
if redis.call('type', KEYS[1]).ok ~= 'hash' then
    return nil
end
if redis.call('hget', KEYS[1], 'mode') ~= 'write' then
    return nil
end
local holds = tonumber(redis.call('hget', KEYS[1], field))
if holds == nil then
    return nil
end
local current = redis.call('get', wkey)
if not current then
    end_lapsed_write(KEYS[1], KEYS[3], ARGV[1])
    redis.call(ARGV[3], ARGV[2], '1')
    return nil
end
if ARGV[4] ~= '0' and current ~= ARGV[4] then
    return nil
end
if holds > 1 then
    redis.call('hincrby', KEYS[1], field, -1)
    return 0
end
redis.call('hdel', KEYS[1], field)
redis.call('del', wkey)
local left = -3
if redis.call('hlen', KEYS[1]) > 1 then
    redis.call('hset', KEYS[1], 'mode', 'read')
    left = longest(KEYS[1], KEYS[3])
end
if left > 0 then
    redis.call('pexpire', KEYS[1], left)
else
    redis.call('del', KEYS[1])
end
redis.call(ARGV[3], ARGV[2], '1')
return 1
