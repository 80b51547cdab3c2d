//! Redisson's `RFairLock` as a Java client runs it, for tests that share a
//! fair lock with Java waiters: the four scripts of
//! `redisson/src/main/java/org/redisson/RedissonFairLock.java`, verbatim
//! (Redisson 4.7.0+, commit 66863978b4a92093b97c1f8c96f182a77e81d50e, the
//! file last changed in a5077398eb8707222deab0b3d54941c90801d801), and a
//! Java waiter driven the way `RedissonLock.lock()` / `tryLock(wait, …)`
//! drive them: try, subscribe to its own channel, try again, sleep on a
//! message or the returned ttl, and on giving up run "acquire failed".
//!
//! Included with `#[path]` by the fair-lock test files (not every file uses
//! every item).
#![allow(dead_code)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use keylatch_cluster::{Client, Commands, Event, PubSub, Subscription};
use keylatch_resp::Frame;

/// `tryLockInnerAsync` with `RedisCommands.EVAL_LONG` (`lock()` and
/// `tryLock(wait, …)`): KEYS name, queue, timeouts; ARGV lease ms, owner,
/// wait ms (`fairLockWaitTimeout`, 300000 by default, or the tryLock wait),
/// the client's `System.currentTimeMillis()`. Returns nil when acquired,
/// else a ttl in ms.
pub(crate) const REDISSON_FAIR_LOCK: &str = r#"while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0);if firstThreadId2 == false then break;end;local timeout = redis.call('zscore', KEYS[3], firstThreadId2);if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then redis.call('zrem', KEYS[3], firstThreadId2);redis.call('lpop', KEYS[2]);else break;end;end;if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0) or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then redis.call('lpop', KEYS[2]);redis.call('zrem', KEYS[3], ARGV[2]);local keys = redis.call('zrange', KEYS[3], 0, -1);for i = 1, #keys, 1 do redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);end;redis.call('hset', KEYS[1], ARGV[2], 1);redis.call('pexpire', KEYS[1], ARGV[1]);return nil;end;if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then redis.call('hincrby', KEYS[1], ARGV[2],1);redis.call('pexpire', KEYS[1], ARGV[1]);return nil;end;local timeout = redis.call('zscore', KEYS[3], ARGV[2]);if timeout ~= false then local ttl = redis.call('pttl', KEYS[1]);return math.max(0, ttl); end;local lastThreadId = redis.call('lindex', KEYS[2], -1);local ttl;if lastThreadId ~= false and lastThreadId ~= ARGV[2] and redis.call('zscore', KEYS[3], lastThreadId) ~= false then ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);else ttl = redis.call('pttl', KEYS[1]);end;local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then redis.call('rpush', KEYS[2], ARGV[2]);end;return ttl;"#;

/// `tryLockInnerAsync` with `RedisCommands.EVAL_NULL_BOOLEAN` (`tryLock()`
/// without a wait): KEYS name, queue, timeouts; ARGV lease ms, owner,
/// current ms, wait ms (note: the order of the last two differs from the
/// waiting variant). Returns nil when acquired, 1 when not; never queues.
pub(crate) const REDISSON_FAIR_TRY_ONCE: &str = r#"while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0);if firstThreadId2 == false then break;end;local timeout = redis.call('zscore', KEYS[3], firstThreadId2);if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[3]) then redis.call('zrem', KEYS[3], firstThreadId2);redis.call('lpop', KEYS[2]);else break;end;end;if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0) or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then redis.call('lpop', KEYS[2]);redis.call('zrem', KEYS[3], ARGV[2]);local keys = redis.call('zrange', KEYS[3], 0, -1);for i = 1, #keys, 1 do redis.call('zincrby', KEYS[3], -tonumber(ARGV[4]), keys[i]);end;redis.call('hset', KEYS[1], ARGV[2], 1);redis.call('pexpire', KEYS[1], ARGV[1]);return nil;end;if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1);redis.call('pexpire', KEYS[1], ARGV[1]);return nil;end;return 1;"#;

/// `acquireFailedAsync` (a waiter that gave up): KEYS queue, timeouts;
/// ARGV owner, wait ms. Subtracts the wait from every waiter behind it.
pub(crate) const REDISSON_FAIR_ACQUIRE_FAILED: &str = r#"local queue = redis.call('lrange', KEYS[1], 0, -1);local i = 1;while i <= #queue and queue[i] ~= ARGV[1] do i = i + 1;end;i = i + 1;while i <= #queue do redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i]);i = i + 1;end;redis.call('zrem', KEYS[2], ARGV[1]);redis.call('lrem', KEYS[1], 0, ARGV[1]);"#;

/// `unlockInnerAsync`: KEYS name, queue, timeouts, channel prefix, unlock
/// latch `redisson_unlock_latch:{name}:<request id>`; ARGV message "0",
/// lease ms, owner, current ms, publish command, latch expiry ms.
pub(crate) const REDISSON_FAIR_UNLOCK: &str = r#"local val = redis.call('get', KEYS[5]); if val ~= false then return tonumber(val);end; while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0);if firstThreadId2 == false then break;end; local timeout = redis.call('zscore', KEYS[3], firstThreadId2);if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then redis.call('zrem', KEYS[3], firstThreadId2); redis.call('lpop', KEYS[2]); else break;end; end;if (redis.call('exists', KEYS[1]) == 0) then local nextThreadId = redis.call('lindex', KEYS[2], 0); if nextThreadId ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; redis.call('set', KEYS[5], 1, 'px', ARGV[6]); return 1; end;if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[5], 0, 'px', ARGV[6]); return 0; end; redis.call('del', KEYS[1]); redis.call('set', KEYS[5], 1, 'px', ARGV[6]); local nextThreadId = redis.call('lindex', KEYS[2], 0); if nextThreadId ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; return 1; "#;

/// The client clock in ms, as `System.currentTimeMillis()`.
pub(crate) fn now_ms() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

pub(crate) fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

pub(crate) fn timeout_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

pub(crate) fn channel_prefix(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

/// Redisson's default `fairLockWaitTimeout`.
pub(crate) const DEFAULT_WAIT_MS: i64 = 300_000;

/// One Java thread's view of a Redisson fair lock: its owner id
/// (`<client uuid>:<thread id>`), its own wake-up channel, and the scripts
/// above with the arguments `RedissonFairLock` passes.
pub(crate) struct JavaWaiter {
    pub(crate) client: Client,
    pub(crate) hub: PubSub,
    pub(crate) name: String,
    pub(crate) owner: String,
    /// Calls of the lock script (each a try; a waiter that spins when the
    /// script answers 0 shows here).
    pub(crate) tries: u64,
}

/// How a Java acquire ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JavaOutcome {
    /// Acquired; when the script's nil reply arrived.
    Acquired(Instant),
    /// `tryLock`'s wait ran out: "acquire failed" ran.
    GaveUp,
}

impl JavaWaiter {
    pub(crate) async fn new(client: &Client, name: &str, thread: u32) -> Self {
        let hub = PubSub::from_client_with(client, Default::default())
            .await
            .unwrap();
        Self {
            client: client.clone(),
            hub,
            name: name.to_owned(),
            owner: format!("6f1c2d4e-0000-4000-8000-0000000{thread:05}:{thread}"),
            tries: 0,
        }
    }

    /// One `tryAcquire` (EVAL_LONG): `None` when acquired, else the ttl.
    pub(crate) async fn try_once(&mut self, wait_ms: i64) -> Option<i64> {
        self.tries += 1;
        let name = self.name.clone();
        let reply = self
            .client
            .eval(
                REDISSON_FAIR_LOCK,
                &[name.as_str(), &queue_key(&name), &timeout_key(&name)],
                &[
                    "30000".to_owned(),
                    self.owner.clone(),
                    wait_ms.to_string(),
                    now_ms().to_string(),
                ],
            )
            .await
            .unwrap();
        match reply {
            Frame::Null => None,
            Frame::Integer(ttl) => Some(ttl),
            other => panic!("Redisson's fair lock script answered {other:?}"),
        }
    }

    /// `tryLock()` without a wait (EVAL_NULL_BOOLEAN): true when acquired.
    pub(crate) async fn try_lock_now(&self) -> bool {
        let name = &self.name;
        let reply = self
            .client
            .eval(
                REDISSON_FAIR_TRY_ONCE,
                &[name.as_str(), &queue_key(name), &timeout_key(name)],
                &[
                    "30000".to_owned(),
                    self.owner.clone(),
                    now_ms().to_string(),
                    DEFAULT_WAIT_MS.to_string(),
                ],
            )
            .await
            .unwrap();
        match reply {
            Frame::Null => true,
            Frame::Integer(1) => false,
            other => panic!("Redisson's tryLock() script answered {other:?}"),
        }
    }

    /// Subscribes to its own channel, as `RedissonFairLock.subscribe`.
    pub(crate) async fn subscribe(&self) -> Subscription {
        self.hub
            .subscribe(format!("{}:{}", channel_prefix(&self.name), self.owner))
            .await
            .unwrap()
    }

    /// `lock()` (wait `None`: `fairLockWaitTimeout`, no time limit) or
    /// `tryLock(wait, -1, ms)` as `RedissonLock` runs them: a first try,
    /// then subscribe, then try / sleep on the latch (a message, or the
    /// returned ttl; a negative ttl waits for a message only) until
    /// acquired or the wait runs out (then "acquire failed").
    pub(crate) async fn lock(&mut self, wait: Option<Duration>) -> JavaOutcome {
        let wait_ms = wait.map_or(DEFAULT_WAIT_MS, |w| i64::try_from(w.as_millis()).unwrap());
        let deadline = wait.map(|w| Instant::now() + w);
        if self.try_once(wait_ms).await.is_none() {
            return JavaOutcome::Acquired(Instant::now());
        }
        let mut sub = self.subscribe().await;
        loop {
            let Some(ttl) = self.try_once(wait_ms).await else {
                return JavaOutcome::Acquired(Instant::now());
            };
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                self.acquire_failed(wait_ms).await;
                return JavaOutcome::GaveUp;
            }
            let nap = match (ttl, left) {
                (t, Some(l)) if t >= 0 && Duration::from_millis(t.unsigned_abs()) < l => {
                    Some(Duration::from_millis(t.unsigned_abs()))
                }
                (_, Some(l)) => Some(l),
                (t, None) if t >= 0 => Some(Duration::from_millis(t.unsigned_abs())),
                (_, None) => None,
            };
            latch(&mut sub, nap).await;
        }
    }

    /// `acquireFailedAsync`: leave the queue, subtracting `wait_ms` from
    /// every waiter behind.
    pub(crate) async fn acquire_failed(&self, wait_ms: i64) {
        let name = &self.name;
        let reply = self
            .client
            .eval(
                REDISSON_FAIR_ACQUIRE_FAILED,
                &[queue_key(name), timeout_key(name)],
                &[self.owner.clone(), wait_ms.to_string()],
            )
            .await
            .unwrap();
        assert_eq!(reply, Frame::Null, "acquire failed answered {reply:?}");
    }

    /// `unlockInnerAsync` with a fresh request id; the reply (1: released,
    /// 0: holds left, nil: not the holder).
    pub(crate) async fn unlock(&self) -> Frame {
        let name = &self.name;
        let latch = format!(
            "redisson_unlock_latch:{{{name}}}:{:032x}",
            uuid_like(&self.owner)
        );
        self.client
            .eval(
                REDISSON_FAIR_UNLOCK,
                &[
                    name.clone(),
                    queue_key(name),
                    timeout_key(name),
                    channel_prefix(name),
                    latch,
                ],
                &[
                    "0".to_owned(),
                    "30000".to_owned(),
                    self.owner.clone(),
                    now_ms().to_string(),
                    "publish".to_owned(),
                    "10000".to_owned(),
                ],
            )
            .await
            .unwrap()
    }
}

/// A request id for the unlock latch: unique per call.
fn uuid_like(owner: &str) -> u128 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    owner.hash(&mut h);
    let n = std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    (u128::from(h.finish()) << 64) ^ n
}

/// The latch wait of `RedissonLockEntry`: until an unlock message on the
/// waiter's channel (a permit, kept if it came while the waiter was not
/// asleep) or `nap` (`None`: a message only). A zero nap only takes a
/// permit already there, as `Semaphore.tryAcquire(0)` does; Redisson then
/// tries again at once.
async fn latch(sub: &mut Subscription, nap: Option<Duration>) {
    let got = match nap {
        Some(d) => tokio::time::timeout(d, sub.recv()).await.ok().flatten(),
        None => sub.recv().await,
    };
    if let Some(Event::Message { payload, .. }) = got {
        assert_eq!(&payload[..], b"0", "Redisson's unlock message");
    }
    // A spinning waiter must not starve the runtime it shares.
    tokio::task::yield_now().await;
}
