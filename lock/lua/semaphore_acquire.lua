-- semaphore_acquire: take n permits of a Redisson-compatible semaphore
-- (RSemaphore: the key holds the number of available permits).
--
-- KEYS[1]  the semaphore (the user's name): a string, the available permits
-- ARGV[1]  n, the permits wanted (> 0)
--
-- Returns  {1, left} when taken (left = permits available after);
--          {0, available} when fewer than n are available (nothing changes);
--          {-1, 0} when the semaphore does not exist (never set: a wait
--          would wait for nothing, so the caller is told at once);
--          {-3, 0} when the key holds something else than a count (another
--          type, or a string that is no integer): no semaphore to wait for.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
    return {-1, 0}
end
local value = t == 'string' and tonumber(string.match(redis.call('get', KEYS[1]), '^%-?%d+$'))
if not value then
    return {-3, 0}
end
local n = tonumber(ARGV[1])
if value >= n then
    return {1, redis.call('decrby', KEYS[1], n)}
end
return {0, value}
