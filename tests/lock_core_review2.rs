//! Findings of a second outside review of the lock core, each a test that
//! failed on e6b68c7 and passes since the fixes: our own writes to a held key
//! (a late-settled re-entry r1, `release_one` r2, `force_unlock` through the
//! same `Locks` r3) no longer leave it untracked or a loss unnoticed; a
//! cluster acquire answered after the request timeout is settled (r4); a
//! counter migrated before its lock's hash is no false loss (r5).

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::locks::{freed_within, poll_once, state, take};

use std::time::{Duration, Instant};

use common::Soon;
use keylatch_cluster::{Client, ClientConfig, Commands, Connection};
use keylatch_harness::{RedisCluster, RedisServer};
use keylatch_lock::{LockGuard, Locks, LocksConfig};
use keylatch_resp::Cmd;

/// Cluster tests one at a time: two cores run every node.
static GATE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Standalone server and a tracking `Locks` (the README path) with a 9 s
/// watchdog: the first renewal comes at ~3 s, so a loss noticed sooner came
/// from an invalidation.
async fn tracked_locks(server: &RedisServer) -> Locks {
    let cfg = LocksConfig::default().watchdog_timeout(Duration::from_secs(9));
    Locks::connect_with(ClientConfig::from_url(&server.url()).unwrap(), cfg)
        .await
        .unwrap()
}

async fn lost_within(g: &LockGuard, limit: Duration, what: &str) {
    if tokio::time::timeout(limit, g.lost()).await.is_err() {
        panic!(
            "{what}: lost() not fired within {limit:?} (is_lost={})",
            g.is_lost()
        );
    }
}

/// A re-entry whose caller left after it was written (its reply settled by
/// the late handler, which releases that count) writes the held key twice
/// (HINCRBY +1, then -1) on the tracking connection. NOLOOP only spares the
/// push: the server stops tracking the key. Nothing re-tracks it (neither
/// the late handler nor `settle_late` calls `Engine::retrack`), so a DEL by
/// anyone else afterwards is noticed only at the next renewal (lease/3).
#[tokio::test]
async fn r1_a_settled_late_reentry_does_not_end_tracking() {
    let server = RedisServer::start();
    let locks = tracked_locks(&server).await;
    let outsider = Connection::connect(&server.url()).await.unwrap();
    let lock = locks.lock("r2-r1");
    let g = take(&lock, None, "free").await;
    // Tracked (older than 2 ms).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let clone = lock.clone();
    let mut re = Box::pin(clone.try_acquire_now(None));
    assert!(poll_once(re.as_mut()).is_pending(), "re-entry queued");
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(re);
    // The late handler released that count.
    Soon::new(Duration::from_secs(2), Duration::from_millis(20))
        .until(|| async {
            match lock.hold_count().await {
                Ok(1) => Ok(()),
                other => Err(format!("count back to 1: {other:?}")),
            }
        })
        .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    // (The 9 s watchdog's first renewal is at ~3 s, after this test's
    // bound: no periodic renewal explains the loss. The engine's own check
    // after our write may have run.)
    outsider.del(["r2-r1"]).await.unwrap();
    lost_within(
        &g,
        Duration::from_millis(1500),
        "DEL after a settled late re-entry (the re-entry's own writes ended tracking)",
    )
    .await;
}

/// `Lock::release_one` on a hold that keeps a count (token 0, by owner)
/// writes the held key (HINCRBY -1) on the tracking connection without
/// re-tracking it: a DEL by anyone else afterwards is noticed only at the
/// next renewal.
#[tokio::test]
async fn r2_release_one_of_a_remaining_hold_does_not_end_tracking() {
    let server = RedisServer::start();
    let locks = tracked_locks(&server).await;
    let outsider = Connection::connect(&server.url()).await.unwrap();
    let lock = locks.lock("r2-r2");
    let g1 = take(&lock, None, "free").await;
    let g2 = take(&lock, None, "re-entry").await;
    assert_eq!(g2.hold_count(), 2);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!lock.release_one().await.unwrap(), "one count left");
    tokio::time::sleep(Duration::from_millis(100)).await;
    // (The 9 s watchdog's first renewal is at ~3 s, after this test's
    // bound: no periodic renewal explains the loss. The engine's own check
    // after our write may have run.)
    outsider.del(["r2-r2"]).await.unwrap();
    lost_within(
        &g1,
        Duration::from_millis(1500),
        "DEL after release_one (its own write ended tracking)",
    )
    .await;
    drop(g2);
}

/// `force_unlock` through another handle of the same `Locks` deletes a held
/// lock on the holder's own tracking connection: with NOLOOP the server
/// sends no invalidation for it, so the victim hold is not checked. Another
/// owner then takes the lock while the first guard still reports itself
/// held (not lost) until the next renewal (lease/3).
#[tokio::test]
async fn r3_force_unlock_from_the_same_locks_is_noticed() {
    let server = RedisServer::start();
    let locks = tracked_locks(&server).await;
    let lock = locks.lock("r2-r3");
    let g = take(&lock, None, "free").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let admin = locks.lock("r2-r3");
    assert!(admin.force_unlock().await.unwrap(), "deleted");
    let other = locks.lock("r2-r3");
    let g2 = take(&other, None, "free after force_unlock").await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // (The 9 s watchdog's first renewal is at ~3 s, after this test's
    // bound: no periodic renewal explains the loss. The engine's own check
    // after our write may have run.)
    assert!(
        g.is_lost(),
        "another owner holds the lock (force-unlocked through the same Locks) \
         while the first guard still reports it held; state {}",
        state(&other).await
    );
    drop(g2);
}

/// Control for r1–r3: a DEL by another connection is noticed at once.
#[tokio::test]
async fn r_control_an_outside_del_is_noticed_at_once() {
    let server = RedisServer::start();
    let locks = tracked_locks(&server).await;
    let outsider = Connection::connect(&server.url()).await.unwrap();
    let lock = locks.lock("r2-rc");
    let g = take(&lock, None, "free").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    outsider.del(["r2-rc"]).await.unwrap();
    lost_within(&g, Duration::from_millis(500), "outside DEL").await;
}

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// A cluster client whose requests time out after `timeout`.
async fn cluster_client(cluster: &RedisCluster, timeout: Option<Duration>) -> Client {
    let urls = cluster.seed_urls();
    let seeds: Vec<&str> = urls.iter().map(String::as_str).take(2).collect();
    let mut cfg = ClientConfig::from_urls(&seeds).unwrap();
    for s in &mut cfg.seeds {
        *s = s.clone().request_timeout(timeout);
    }
    let client = Client::connect_with(cfg).await.unwrap();
    assert!(client.is_cluster());
    client
}

/// In a cluster, an acquire whose reply comes after the client's request
/// timeout is never settled: `send_routed` keeps the routed future to settle
/// a late reply, but each routed attempt (`router::run` →
/// `Connection::send_shared`) carries the request timeout, so the future
/// itself ends in `Error::Timeout` and the connection discards the reply
/// when it comes. The attempt's bound is at most that timeout (`reply_bound`),
/// so any acquire that outlives it leaves the lock held by nobody for the
/// whole lease (30 s here). Standalone, the same acquire is settled (the
/// control below passes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r4_cluster_acquire_answered_after_the_request_timeout_is_settled() {
    let _gate = GATE.lock().await;
    let cluster = RedisCluster::start();
    let slot = 1234u16;
    let name = RedisCluster::key_for_slot(slot);
    let master = cluster.master_for_slot(slot);
    let client = cluster_client(&cluster, Some(Duration::from_millis(500))).await;
    let locks = Locks::new(client, LocksConfig::default());
    let lock = locks.lock(&name);
    take(&lock, None, "warm-up").await.unlock().await.unwrap();
    blocking(|| {
        let out = cluster
            .node(master)
            .cli(&["CLIENT", "PAUSE", "1500", "WRITE"])
            .unwrap();
        assert_eq!(out.trim(), "OK");
    });
    let t0 = Instant::now();
    let r = lock.try_acquire(Duration::from_secs(5), None).await;
    eprintln!("acquire during the pause: {r:?} after {:?}", t0.elapsed());
    assert!(r.is_err(), "timed out: {r:?}");
    // The pause ends at 1.5 s; the script then takes the lock.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    freed_within(
        &lock,
        Duration::from_secs(4),
        "a cluster acquire answered after the request timeout (nobody settled it)",
    )
    .await;
}

/// Control for r4: the same on a standalone server is settled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r4_control_standalone_acquire_answered_after_the_request_timeout_is_settled() {
    let server = RedisServer::start();
    let mut cfg = ClientConfig::from_url(&server.url()).unwrap();
    cfg.seeds[0] = cfg.seeds[0]
        .clone()
        .request_timeout(Some(Duration::from_millis(500)));
    let locks = Locks::new(
        Client::connect_with(cfg).await.unwrap(),
        LocksConfig::default(),
    );
    let lock = locks.lock("r2-r4c");
    take(&lock, None, "warm-up").await.unlock().await.unwrap();
    let out = blocking(|| server.cli(&["CLIENT", "PAUSE", "1500", "WRITE"]).unwrap());
    assert_eq!(out.trim(), "OK");
    let r = lock.try_acquire(Duration::from_secs(5), None).await;
    assert!(r.is_err(), "timed out: {r:?}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    freed_within(&lock, Duration::from_secs(4), "standalone control").await;
}

/// During a slot migration whose keys move in batches, a lock's counter can
/// reach the target before its hash. The hold still stands (the hash with
/// the owner on the source, the counter with its token on the target), but
/// the node renewal script (`reentrant_renew_node.lua`) reads the counter
/// with `pcall('get')`, which the source refuses (a non-local key: ASK), and
/// treats any error there as "gone" (`return 0`), not as "unknown" (-1, ask
/// the slot's node): the hold is reported lost (`Gone`) and renewal stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r5_cluster_counter_migrated_before_the_hash_is_not_a_loss() {
    let _gate = GATE.lock().await;
    let cluster = RedisCluster::start();
    let slot = 4000u16;
    let name = RedisCluster::key_for_slot(slot);
    let counter = format!("redisson_lock_token:{{{name}}}");
    let from = cluster.master_for_slot(slot);
    let to = *cluster.masters().iter().find(|&&m| m != from).unwrap();
    let client = cluster_client(&cluster, Some(Duration::from_secs(2))).await;
    let cfg = LocksConfig::default().watchdog_timeout(Duration::from_secs(6));
    let locks = Locks::new(client, cfg);
    let lock = locks.lock(&name);
    let g = take(&lock, None, "free").await;
    let to_port = cluster.node(to).port().to_string();
    blocking(|| {
        cluster.begin_migration(slot, from, to).unwrap();
        let out = cluster
            .node(from)
            .cli(&["MIGRATE", "127.0.0.1", &to_port, &counter, "0", "5000"])
            .unwrap();
        assert_eq!(out.trim(), "OK", "the counter alone moved");
    });
    // First renewal at ~2 s; the local deadline is ~5.9 s after the acquire.
    tokio::time::sleep(Duration::from_millis(3000)).await;
    // Sent (its completion may wait on the migration: TRYAGAIN).
    assert!(locks.renewal_rounds() >= 1, "a renewal was sent");
    let lost = tokio::time::timeout(Duration::from_millis(1), g.lost())
        .await
        .ok();
    let on_source = blocking(|| {
        cluster
            .node(from)
            .cli(&["HGETALL", &name])
            .unwrap_or_default()
    });
    // The target is importing: ASKING first.
    let target = Connection::connect(&cluster.node(to).url()).await.unwrap();
    let mut p = keylatch_cluster::Pipeline::new();
    p.add(Cmd::new("ASKING")).add(Cmd::new("GET").key(&counter));
    let on_target = target.pipeline(p).await.unwrap().pop();
    assert_eq!(
        lost,
        None,
        "the hold still stands (source HGETALL {on_source:?}, target counter {on_target:?}, \
         token {:?}) but was reported lost",
        g.fencing_token()
    );
}

/// Found by an outside review (both failed before the fix): a fixed-lease
/// re-entry of a watchdog hold (or its `extend`) raised the lease the
/// watchdog renews with for the rest of the hold, so after the re-entry was
/// released a crash kept the lock for the re-entry's lease (8 s in the
/// review; 4 s here), not one watchdog lease (1.5 s).
mod a_fixed_reentry_is_not_the_watchdogs_lease {
    use std::time::Duration;

    use keylatch_cluster::{Client, Commands};
    use keylatch_harness::RedisServer;
    use keylatch_lock::{Locks, LocksConfig};
    use keylatch_resp::{Cmd, Frame};

    const T: Duration = Duration::from_secs(10);
    const WATCHDOG: Duration = Duration::from_millis(1500);
    /// The re-entry's fixed lease (or what it is extended to): well over
    /// the watchdog's, so a watchdog renewing with it leaves the key more
    /// than 2.6 s to live (a renewal every third of it), not 1.5 s at most.
    const REENTRY: Duration = Duration::from_secs(4);

    async fn pttl(c: &Client, key: &str) -> i64 {
        match c
            .send(Cmd::new("PTTL").key(key))
            .await
            .unwrap()
            .into_value()
        {
            Frame::Integer(n) => n,
            other => panic!("{other:?}"),
        }
    }

    async fn setup() -> (RedisServer, Locks, Client) {
        let server = RedisServer::start();
        let locks = Locks::new(
            Client::connect(&server.url()).await.unwrap(),
            LocksConfig::default().watchdog_timeout(WATCHDOG),
        );
        let admin = Client::connect(&server.url()).await.unwrap();
        (server, locks, admin)
    }

    async fn after_reentry(
        name: &str,
        extend_to: Option<Duration>,
        reentry_lease: Duration,
    ) -> i64 {
        let (_s, locks, admin) = setup().await;
        let lock = locks.lock(name);
        let w = tokio::time::timeout(T, lock.acquire())
            .await
            .unwrap()
            .unwrap();
        let f = tokio::time::timeout(T, lock.try_acquire_now(Some(reentry_lease)))
            .await
            .unwrap()
            .unwrap()
            .expect("re-entry of the same owner");
        assert_eq!(f.hold_count(), 2);
        if let Some(d) = extend_to {
            tokio::time::timeout(T, f.extend(d)).await.unwrap().unwrap();
        }
        tokio::time::timeout(T, f.unlock()).await.unwrap().unwrap();
        // Only the watchdog hold is left. Wait past the re-entry's lease
        // (`REENTRY`, 4 s): renewals with the watchdog's 1.5 s lease would
        // leave the key at most 1.5 s to live by now.
        tokio::time::sleep(REENTRY + Duration::from_secs(1)).await;
        assert!(!w.is_lost());
        let left = pttl(&admin, name).await;
        w.unlock().await.unwrap();
        left
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_released_fixed_lease_reentry_does_not_become_the_watchdogs_lease() {
        let left = after_reentry("wd-reentry", None, REENTRY).await;
        eprintln!("PTTL of the watchdog hold 5 s after a 4 s re-entry was released: {left} ms (watchdog {WATCHDOG:?})");
        assert!(
            left <= 1600,
            "the watchdog renews with the released re-entry's 4 s lease: PTTL {left} ms; a crash now keeps the lock that long"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn extending_a_fixed_lease_reentry_does_not_become_the_watchdogs_lease() {
        let left = after_reentry("wd-extend", Some(REENTRY), Duration::from_secs(2)).await;
        eprintln!("PTTL of the watchdog hold 5 s after a re-entry extended to 4 s was released: {left} ms (watchdog {WATCHDOG:?})");
        assert!(
            left <= 1600,
            "the watchdog renews with the re-entry's extended 4 s lease: PTTL {left} ms; a crash now keeps the lock that long"
        );
    }
}
