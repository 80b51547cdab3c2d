-- latch_count_down: count a Redisson-compatible count-down latch down by
-- one (RCountDownLatch.countDown).
--
-- KEYS[1]  the latch (the user's name): a string, the remaining count
-- ARGV[1]  the latch's channel, redisson_countdownlatch__channel__{name}
--          (not a key)
-- ARGV[2]  the publish command: "publish" or "spublish"
--
-- Returns  the count after (≤ 0: the latch is open and its key deleted;
--          exactly 0: "0" published, so waiters wake, as Redisson does).
local v = redis.call('decr', KEYS[1])
if v <= 0 then
    redis.call('del', KEYS[1])
end
if v == 0 then
    redis.call(ARGV[2], ARGV[1], '0')
end
return v
