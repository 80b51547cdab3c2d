//! A dead fair-lock waiter: how long it blocks the queue, keylatch vs
//! Redisson, in one run against one local redis-server.
//!
//! A waiter that joined the queue and then died (its process gone) is the
//! head when the holder releases; a live waiter is second. Measured: the
//! time from the release until the live waiter holds the lock.
//! - keylatch: `Locks::connect(url)` as the README shows, default
//!   `LocksConfig` (`fair_waiter_timeout` 5 s); the dead waiter is one call
//!   of `fair_acquire.lua` that joined the queue and never called again.
//!   (The Redisson constants below are an older Redisson's scripts; the
//!   current ones are in `tests/common/redisson_fair.rs`.)
//! - Redisson: its own fair-lock scripts (`RedissonFairLock`, as in
//!   `tests/fair_lock.rs`), default thread wait time 300 s, the client's
//!   clock; the live waiter waits as Redisson's `tryLock` does: on its own
//!   channel for the TTL the script returned, then calls again. Capped at
//!   `--cap` seconds (default 15): past it the row reads "> cap", with the
//!   wait the script last told the live waiter to sleep (nobody wakes it
//!   earlier: the release woke the dead head's channel).
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin fair -- [--cap 15]
//! ```

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use keylatch_benches::{arg, url_or_local_server};
use keylatch_cluster::{Client, Commands};
use keylatch_lock::scripts::FAIR_ACQUIRE;
use keylatch_lock::{Locks, LocksConfig};
use keylatch_resp::Frame;

/// Redisson's `RedissonFairLock.tryLockInnerAsync`, waiting variant (KEYS
/// name, queue, timeouts; ARGV lease ms, owner, wait ms, client now ms).
const REDISSON_FAIR_LOCK: &str = "while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0);if firstThreadId2 == false then break;end;local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));if timeout <= tonumber(ARGV[4]) then redis.call('zrem', KEYS[3], firstThreadId2);redis.call('lpop', KEYS[2]);else break;end;end;if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0) or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then redis.call('lpop', KEYS[2]);redis.call('zrem', KEYS[3], ARGV[2]);local keys = redis.call('zrange', KEYS[3], 0, -1);for i = 1, #keys, 1 do redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);end;redis.call('hset', KEYS[1], ARGV[2], 1);redis.call('pexpire', KEYS[1], ARGV[1]);return nil;end;if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then redis.call('hincrby', KEYS[1], ARGV[2],1);redis.call('pexpire', KEYS[1], ARGV[1]);return nil;end;while true do local firstThreadId = redis.call('lindex', KEYS[2], 0);if (firstThreadId == false) or (firstThreadId == ARGV[2]) then break;end;local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId));if (timeout > tonumber(ARGV[4])) and (redis.call('exists', KEYS[1]) ==0) then redis.call('lpop', KEYS[2]);redis.call('zrem', KEYS[3], firstThreadId);else break;end;end;local timeout = redis.call('zscore', KEYS[3], ARGV[2]);if timeout ~= false then return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4]);end;local lastThreadId = redis.call('lindex', KEYS[2], -1);local ttl;if lastThreadId ~= false and lastThreadId ~= ARGV[2] then ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);else ttl = redis.call('pttl', KEYS[1]);end;local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then redis.call('rpush', KEYS[2], ARGV[2]);end;return ttl;";

/// Redisson's `RedissonFairLock.unlockInnerAsync` (KEYS name, queue,
/// timeouts, channel prefix; ARGV message, lease ms, owner, client now ms).
const REDISSON_FAIR_UNLOCK: &str = "while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0);if firstThreadId2 == false then break;end; local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));if timeout <= tonumber(ARGV[4]) then redis.call('zrem', KEYS[3], firstThreadId2); redis.call('lpop', KEYS[2]); else break;end; end;if (redis.call('exists', KEYS[1]) == 0) then local nextThreadId = redis.call('lindex', KEYS[2], 0); if nextThreadId ~= false then redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; return 1; end;if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; end; redis.call('del', KEYS[1]); local nextThreadId = redis.call('lindex', KEYS[2], 0); if nextThreadId ~= false then redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; return 1; ";

fn keys(name: &str) -> [String; 3] {
    [
        name.to_owned(),
        format!("redisson_lock_queue:{{{name}}}"),
        format!("redisson_lock_timeout:{{{name}}}"),
    ]
}

fn now_ms() -> String {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis()
        .to_string()
}

async fn keylatch_dead_waiter(url: &str) -> Duration {
    let locks = Locks::connect(url).await.expect("keylatch");
    let config = LocksConfig::default();
    let name = "dead-waiter-keylatch";
    let holder = locks.fair_lock(name).acquire().await.expect("holder");
    // The dead waiter: one queued call, then silence.
    let [hash, queue, timeouts] = keys(name);
    let waiter_ms = config.fair_waiter_timeout.as_millis().to_string();
    let allowance_ms = config.fair_wait_allowance.as_millis().to_string();
    let _ = locks
        .client()
        .eval_script(
            &FAIR_ACQUIRE,
            &[
                hash.as_str(),
                &format!("redisson_lock_token:{{{name}}}"),
                &queue,
                &timeouts,
                &format!("keylatch_fair_alive:{{{name}}}"),
            ],
            &[
                "30000",
                "dead:1",
                "86400000",
                &waiter_ms,
                "1",
                &allowance_ms,
                &format!("redisson_lock__channel:{{{name}}}"),
                "publish",
            ],
        )
        .await
        .expect("dead waiter queued");
    let live = locks.fair_lock(name);
    let waiter = tokio::spawn(async move {
        let g = live
            .try_acquire(Duration::from_secs(60), None)
            .await
            .expect("live waiter")
            .expect("acquired within 60 s");
        (Instant::now(), g)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let released = Instant::now();
    holder.unlock().await.expect("release");
    let (at, g) = waiter.await.expect("task");
    g.unlock().await.expect("release");
    at.duration_since(released)
}

/// `Some(time)` when the live Redisson-style waiter got the lock within
/// `cap`, else `None`; and the wait (ms) the script last returned to it.
async fn redisson_dead_waiter(url: &str, cap: Duration) -> (Option<Duration>, i64) {
    let client = Client::connect(url).await.expect("client");
    let name = "dead-waiter-redisson";
    let [hash, queue, timeouts] = keys(name);
    let k = [hash.as_str(), queue.as_str(), timeouts.as_str()];
    let try_as = |owner: &'static str| {
        let client = client.clone();
        let k = k.map(str::to_owned);
        async move {
            client
                .eval(
                    REDISSON_FAIR_LOCK,
                    &k,
                    &["30000", owner, "300000", &now_ms()],
                )
                .await
                .expect("redisson script")
        }
    };
    assert_eq!(try_as("holder:1").await, Frame::Null, "holder acquired");
    let _ = try_as("dead:1").await;
    let hub = keylatch_cluster::PubSub::from_client_with(&client, Default::default())
        .await
        .expect("hub");
    let mut woken = hub
        .subscribe(&format!("redisson_lock__channel:{{{name}}}:live:1"))
        .await
        .expect("subscribe");
    let mut ttl = match try_as("live:1").await {
        Frame::Integer(ms) => ms,
        other => panic!("the live waiter was not queued: {other:?}"),
    };
    let released = Instant::now();
    let channel = format!("redisson_lock__channel:{{{name}}}");
    client
        .eval(
            REDISSON_FAIR_UNLOCK,
            &[hash.as_str(), &queue, &timeouts, &channel],
            &["0", "30000", "holder:1", &now_ms()],
        )
        .await
        .expect("redisson unlock");
    while released.elapsed() < cap {
        let left = cap.saturating_sub(released.elapsed());
        let nap = Duration::from_millis(ttl.max(0).unsigned_abs()).min(left);
        let _ = tokio::time::timeout(nap, woken.recv()).await;
        match try_as("live:1").await {
            Frame::Null => return (Some(released.elapsed()), ttl),
            Frame::Integer(ms) => ttl = ms,
            other => panic!("unexpected reply {other:?}"),
        }
    }
    (None, ttl)
}

fn main() {
    let cap = Duration::from_secs(arg("--cap", 15));
    let (url, server) = url_or_local_server(None);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let ours = keylatch_dead_waiter(&url).await;
        let (theirs, left) = redisson_dead_waiter(&url, cap).await;
        println!("dead fair-lock waiter at the head: time from the release until the next (live) waiter holds the lock");
        println!(
            "keylatch (fair_waiter_timeout {:?}): {:.2} s",
            LocksConfig::default().fair_waiter_timeout,
            ours.as_secs_f64()
        );
        match theirs {
            Some(t) => println!("Redisson scripts (wait 300 s): {:.2} s", t.as_secs_f64()),
            None => println!(
                "Redisson scripts (wait 300 s): > {:.0} s (gave up at the cap); the script's last answer told the live waiter to sleep {:.0} s more",
                cap.as_secs_f64(),
                left as f64 / 1000.0
            ),
        }
    });
    drop(server);
}
