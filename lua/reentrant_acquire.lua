-- reentrant_acquire: take or re-enter a Redisson-compatible reentrant lock.
--
-- KEYS[1]  the lock hash (the user's lock name): field = owner id, value = hold count
-- ARGV[1]  lease in milliseconds (PEXPIRE of the whole hash)
-- ARGV[2]  owner id, "<client uuid>:<handle id>"
--
-- Returns  nil when acquired (first hold or re-entry; the lease is reset),
--          else the lock's PTTL in milliseconds, which bounds how long a
--          waiter needs to wait before trying again.
--
-- Same data and logic as Redisson's RLock tryLockInnerAsync, so Java and Rust
-- holders exclude each other.
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
