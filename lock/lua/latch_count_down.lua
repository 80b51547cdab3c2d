-- latch_count_down: count a Redisson-compatible count-down latch down by
-- one (RCountDownLatch.countDown).
--
-- KEYS[1]  the latch (the user's name): a string, the remaining count
-- ARGV[1]  the latch's channel, redisson_countdownlatch__channel__{name}
--          (not a key)
-- ARGV[2]  the publish command: "publish" or "spublish"
--
-- Returns  the count after (≤ 0: the latch is open and its key deleted;
--          exactly 0: "0" published, so waiters wake, as Redisson does);
--          nil when the key holds something else than a count (another
--          type, a string that is no integer): nothing changes.
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and (t ~= 'string' or not string.match(redis.call('get', KEYS[1]), '^%-?%d+$')) then
    return nil
end
local v = redis.call('decr', KEYS[1])
if v <= 0 then
    redis.call('del', KEYS[1])
end
if v == 0 then
    redis.call(ARGV[2], ARGV[1], '0')
end
return v
