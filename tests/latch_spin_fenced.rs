//! The count-down latch, the spin lock and the fenced lock against real
//! servers, standalone and on a 6-node cluster: every latch operation,
//! waiters woken by the message and (message lost) by the re-check, and
//! Redisson's count-down script opening our latch; spin-lock exclusion from
//! a history with no subscription made; fenced-lock tokens from one counter
//! (a token per acquire, re-entries included), shared with a Java
//! `RFencedLock`'s acquire.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keylatch_cluster::{Client, ClientConfig, Commands};
use keylatch_harness::{RedisCluster, RedisServer};
use keylatch_lock::{Locks, LocksConfig};
use keylatch_resp::{Cmd, Frame};

fn config() -> LocksConfig {
    LocksConfig::default().watchdog_timeout(Duration::from_secs(3))
}

async fn locks_with(url: &str, cfg: LocksConfig) -> Locks {
    Locks::new(Client::connect(url).await.unwrap(), cfg)
}

async fn cluster_locks(cluster: &RedisCluster, cfg: LocksConfig) -> Locks {
    let urls = cluster.seed_urls();
    let seeds: Vec<&str> = urls.iter().map(String::as_str).take(2).collect();
    let client = Client::connect_with(ClientConfig::from_urls(&seeds).unwrap())
        .await
        .unwrap();
    assert!(client.is_cluster());
    Locks::new(client, cfg)
}

/// Every latch operation; `deaf` re-checks only after a minute, so its
/// waiter can be woken in time by the message alone.
async fn latch_operations(deaf: &Locks, name: &str) {
    let latch = deaf.latch(name);
    assert_eq!(latch.count().await.unwrap(), 0);
    assert!(
        latch.wait_zero_for(Duration::ZERO).await.unwrap(),
        "never set: open"
    );
    assert!(latch.try_set_count(2).await.unwrap());
    assert!(!latch.try_set_count(5).await.unwrap(), "set only once");
    assert_eq!(latch.count().await.unwrap(), 2);
    assert!(!latch
        .wait_zero_for(Duration::from_millis(200))
        .await
        .unwrap());
    let waiter = {
        let latch = latch.clone();
        tokio::spawn(async move {
            latch.wait_zero().await.unwrap();
            Instant::now()
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(latch.count_down().await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "one to go");
    let opened = Instant::now();
    assert_eq!(latch.count_down().await.unwrap(), 0);
    let woke = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken by the message, not the 60 s re-check")
        .unwrap();
    assert!(woke >= opened);
    assert_eq!(
        deaf.client()
            .send(Cmd::new("EXISTS").key(name))
            .await
            .unwrap(),
        Frame::Integer(0),
        "key gone"
    );
    assert_eq!(latch.count_down().await.unwrap(), 0, "already open");
    assert_eq!(latch.count().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_operations_standalone_and_a_lost_message() {
    let server = RedisServer::start();
    let deaf = locks_with(&server.url(), config().recheck(Duration::from_secs(60))).await;
    latch_operations(&deaf, "latch-ops").await;

    // The message lost (the count zeroed behind the latch's back, nothing
    // published): the waiter sees it at its bounded re-check.
    let checking = locks_with(&server.url(), config().recheck(Duration::from_millis(300))).await;
    let latch = checking.latch("latch-lost");
    latch.try_set_count(1).await.unwrap();
    let waiter = {
        let latch = latch.clone();
        tokio::spawn(async move { latch.wait_zero_for(Duration::from_secs(30)).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    checking.client().del(["latch-lost"]).await.unwrap();
    assert!(tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken by the re-check")
        .unwrap());

    // Redisson's countDown (as a Java client sends it) opens our latch and
    // wakes our waiter.
    let latch = deaf.latch("latch-java");
    latch.try_set_count(1).await.unwrap();
    let waiter = {
        let latch = latch.clone();
        tokio::spawn(async move { latch.wait_zero_for(Duration::from_secs(30)).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let java_count_down = "local v = redis.call('decr', KEYS[1]);if v <= 0 then redis.call('del', KEYS[1]) end;if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;";
    deaf.client()
        .eval(
            java_count_down,
            &[
                "latch-java",
                "redisson_countdownlatch__channel__{latch-java}",
            ],
            &["0", "publish"],
        )
        .await
        .unwrap();
    assert!(tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the Java count-down's message woke us")
        .unwrap());
}

/// Spin-lock exclusion from a history (tasks on two clients), with no
/// pub/sub subscription made while they wait.
async fn spin_exclusion(clients: &[Locks], name: &str) {
    let history = Arc::new(Mutex::new(Vec::new()));
    let shared = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..6 {
        let lock = clients[t % clients.len()].spin_lock(name);
        let (history, shared) = (Arc::clone(&history), Arc::clone(&shared));
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                let g = lock
                    .try_acquire(Duration::from_secs(30), None)
                    .await
                    .unwrap()
                    .expect("acquired within 30 s");
                let from = Instant::now();
                let v = shared.load(Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                shared.store(v + 1, Ordering::SeqCst);
                let to = Instant::now();
                history.lock().unwrap().push((from, to, g.fencing_token()));
                g.unlock().await.unwrap();
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(shared.load(Ordering::SeqCst), 60, "no lost update");
    let mut h = history.lock().unwrap().clone();
    h.sort_by_key(|x| x.0);
    for w in h.windows(2) {
        assert!(w[0].1 <= w[1].0, "holds overlap: {w:?}");
        assert!(w[1].2 > w[0].2, "tokens rise: {w:?}");
    }
}

/// Fenced-lock tokens: one per acquire, re-entries included, from
/// `redisson_lock_token:{name}` without expiry; a Java `RFencedLock`
/// acquire (the RLock script, then INCR of the same counter) in between
/// keeps them rising.
async fn fenced_tokens(locks: &Locks, name: &str) {
    let counter = format!("redisson_lock_token:{{{name}}}");
    let lock = locks.fenced_lock(name);
    let a = lock.acquire().await.unwrap();
    let b = lock.acquire().await.unwrap();
    let (ta, tb) = (a.fencing_token().unwrap(), b.fencing_token().unwrap());
    assert!(
        tb > ta,
        "a re-entry gets a token of its own: {ta} then {tb}"
    );
    assert_eq!(b.hold_count(), 2);
    let ttl = match locks
        .client()
        .send(Cmd::new("PTTL").key(counter.as_str()))
        .await
        .unwrap()
    {
        Frame::Integer(n) => n,
        other => panic!("{other:?}"),
    };
    assert_eq!(ttl, -1, "the counter never expires, as Redisson's");
    // Another owner waits; the first hold's release by owner keeps the
    // re-entry's count (renewals and releases judge the owner).
    assert!(locks
        .fenced_lock(name)
        .try_acquire_now(None)
        .await
        .unwrap()
        .is_none());
    a.unlock().await.unwrap();
    assert!(!b.is_lost());
    b.unlock().await.unwrap();
    // A Java RFencedLock acquire, as its script does it.
    let java = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return redis.call('incr', KEYS[2]); end; return nil;";
    let reply = locks
        .client()
        .eval(java, &[name, counter.as_str()], &["30000", "java-uuid:1"])
        .await
        .unwrap();
    let tj = match reply {
        Frame::Integer(n) => n.unsigned_abs(),
        other => panic!("Java acquire: {other:?}"),
    };
    assert!(tj > tb);
    locks.client().del([name]).await.unwrap();
    let c = lock.acquire().await.unwrap();
    assert!(c.fencing_token().unwrap() > tj, "ours after Java's");
    c.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_and_fenced_locks_standalone() {
    let server = RedisServer::start();
    let clients = [
        locks_with(&server.url(), config()).await,
        locks_with(&server.url(), config()).await,
    ];
    let admin = clients[0].client().clone();
    // While a spinner waits, nobody subscribes.
    let holder = clients[0].lock("spin-excl").acquire().await.unwrap();
    let spinner = {
        let lock = clients[1].spin_lock("spin-excl");
        tokio::spawn(async move {
            lock.try_acquire(Duration::from_secs(20), None)
                .await
                .unwrap()
                .map(drop)
                .is_some()
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let channels = admin
        .send(Cmd::new("PUBSUB").arg("CHANNELS").arg("*"))
        .await
        .unwrap();
    assert_eq!(channels, Frame::Array(Vec::new()), "no subscription");
    holder.unlock().await.unwrap();
    assert!(tokio::time::timeout(Duration::from_secs(10), spinner)
        .await
        .expect("the spinner got in after the release")
        .unwrap());
    spin_exclusion(&clients, "spin-excl").await;
    fenced_tokens(&clients[0], "fenced").await;
}

/// The lease of the client whose fenced hold must outlive three of them.
const RENEW_LEASE: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_spin_and_fenced_on_a_cluster() {
    let cluster = RedisCluster::start();
    // Fenced holds are renewed by owner on the cluster past three leases:
    // a hold of a client with a 2 s lease (renewed every 667 ms), taken
    // first and checked last, at least 6.7 s later (past three leases) while
    // the other cases run on other names.
    let renewing = cluster_locks(&cluster, config().watchdog_timeout(RENEW_LEASE)).await;
    let renewed = renewing.fenced_lock("fenced-renew");
    let g = renewed.acquire().await.unwrap();
    let past_three_leases = Instant::now() + RENEW_LEASE * 3 + RENEW_LEASE / 3;
    let deaf = cluster_locks(&cluster, config().recheck(Duration::from_secs(60))).await;
    latch_operations(&deaf, "latch-ops-c").await;
    // A name with a hash tag of its own: Redisson's channel
    // (`…__{{c1}x}`) then hashes to another slot than the key, so a
    // sharded publish from the key's script was refused ("non local
    // key"); the latch publishes and listens unsharded then, and its
    // waiter is still woken by the message.
    latch_operations(&deaf, "{c1}x").await;
    let clients = [
        cluster_locks(&cluster, config()).await,
        cluster_locks(&cluster, config()).await,
    ];
    spin_exclusion(&clients, "spin-excl-c").await;
    fenced_tokens(&clients[0], "fenced-c").await;
    tokio::time::sleep_until(past_three_leases.into()).await;
    assert!(!g.is_lost());
    assert!(
        renewed.is_held_by_me().await.unwrap(),
        "still held on the server"
    );
    g.unlock().await.unwrap();
}

/// Outside review (session 25): misuse of the lighter lock kinds.
mod misuse_review {
    use super::*;
    use keylatch_lock::{Lock, LockError};

    /// Each kind's handle on `name`, labelled.
    fn kinds(locks: &Locks, name: &str) -> Vec<(&'static str, Lock)> {
        vec![
            ("reentrant", locks.lock(&format!("{name}-re"))),
            (
                "non-reentrant",
                locks.non_reentrant_lock(&format!("{name}-nr")),
            ),
            ("spin", locks.spin_lock(&format!("{name}-spin"))),
            ("fenced", locks.fenced_lock(&format!("{name}-fenced"))),
            ("fair", locks.fair_lock(&format!("{name}-fair"))),
        ]
    }

    /// A guard whose fixed lease ran out, unlocked after the same handle
    /// took the lock again: the late unlock must be refused
    /// (`Expired`/`NotOwner`) and must not end the newer hold (README: "a
    /// late or retried release ... never touches a newer hold of the same
    /// owner"; `LockGuard::unlock`'s rustdoc: "a late or retried release
    /// can never end a newer hold").
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_late_unlock_of_an_expired_guard_never_ends_the_newer_hold() {
        every_kind_at_once("late-unlock", late_unlock).await;
    }

    /// Runs `case` for each kind's handle (on distinct names, each as its
    /// own task, at once) and fails with every kind's failure.
    async fn every_kind_at_once<F, Fut>(name: &str, case: F)
    where
        F: Fn(&'static str, Lock) -> Fut,
        Fut: std::future::Future<Output = Option<String>> + Send + 'static,
    {
        let server = RedisServer::start();
        let locks = locks_with(&server.url(), config()).await;
        let cases: Vec<_> = kinds(&locks, name)
            .into_iter()
            .map(|(kind, lock)| tokio::spawn(case(kind, lock)))
            .collect();
        let mut failures = Vec::new();
        for case in cases {
            failures.extend(case.await.unwrap());
        }
        assert!(failures.is_empty(), "{failures:#?}");
    }

    /// One kind's case of the test above: its failure, if any.
    async fn late_unlock(kind: &'static str, lock: Lock) -> Option<String> {
        let old = lock
            .try_acquire(Duration::from_secs(5), Some(Duration::from_millis(300)))
            .await
            .unwrap()
            .expect("free");
        // Well past the 300 ms lease: gone on the server.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        assert!(!lock.is_locked().await.unwrap(), "{kind}: lease ran out");
        let new = lock.acquire().await.unwrap();
        let late = old.unlock().await;
        assert!(
            matches!(
                late,
                Err(LockError::Expired { .. } | LockError::NotOwner { .. })
            ),
            "{kind}: {late:?}"
        );
        let still = lock.is_held_by_me().await.unwrap();
        let failure = (!still || new.is_lost()).then(|| {
            format!(
                "{kind}: the late unlock ({late:?}) ended the newer hold (held on server: {still})"
            )
        });
        drop(new.unlock().await);
        failure
    }

    /// The same, with the expired guard dropped instead of unlocked (the
    /// background release of a drop).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_an_expired_guard_never_ends_the_newer_hold() {
        every_kind_at_once("late-drop", late_drop).await;
    }

    /// One kind's case of the test above: its failure, if any.
    async fn late_drop(kind: &'static str, lock: Lock) -> Option<String> {
        let old = lock
            .try_acquire(Duration::from_secs(5), Some(Duration::from_millis(300)))
            .await
            .unwrap()
            .expect("free");
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let new = lock.acquire().await.unwrap();
        drop(old);
        // The dropped guard's background release has long run by then.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let still = lock.is_held_by_me().await.unwrap();
        let failure = (!still || new.is_lost()).then(|| {
            format!(
                "{kind}: dropping the expired guard ended the newer hold (held on server: {still})"
            )
        });
        drop(new.unlock().await);
        failure
    }
}

/// Outside review (session 25): release by owner id of the lighter
/// lock kinds (passes on main).
mod release_by_owner_review {
    use super::*;
    use keylatch_lock::{Lock, LockError};

    fn kinds(locks: &Locks, name: &str) -> Vec<(&'static str, Lock)> {
        vec![
            ("reentrant", locks.lock(name)),
            ("non-reentrant", locks.non_reentrant_lock(name)),
            ("spin", locks.spin_lock(name)),
            ("fenced", locks.fenced_lock(name)),
        ]
    }

    /// `release_one` by a handle that holds nothing is `NotOwner` and
    /// changes nothing; a second `release_one` after the last hold too.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn release_one_by_a_non_owner_or_twice_is_not_owner() {
        let server = RedisServer::start();
        let locks = locks_with(&server.url(), config()).await;
        for k in 0..4 {
            let name = format!("release-one-{k}");
            let (label, a) = kinds(&locks, &name).swap_remove(k);
            let (_, b) = kinds(&locks, &name).swap_remove(k);
            let g = a.acquire().await.unwrap();
            let r = b.release_one().await;
            assert!(
                matches!(r, Err(LockError::NotOwner { .. })),
                "{label}: {r:?}"
            );
            assert!(a.is_held_by_me().await.unwrap(), "{label}");
            assert!(!g.is_lost(), "{label}");
            g.unlock().await.unwrap();
            let r = a.release_one().await;
            assert!(
                matches!(r, Err(LockError::NotOwner { .. })),
                "{label}: {r:?}"
            );
        }
    }
}

/// Outside review (session 25): an acquire cancelled with its reply
/// on the way whose `Lock` handle is dropped with it, as in the everyday
/// `tokio::time::timeout(d, locks.spin_lock(name).try_acquire(..))` or a
/// task that made the handle being aborted.
mod dropped_handle_review {
    use super::*;
    use keylatch_lock::Lock;

    type Make = fn(&Locks, &str) -> Lock;

    fn kinds() -> Vec<(&'static str, Make)> {
        vec![
            ("reentrant", |l, n| l.lock(n)),
            ("non-reentrant", |l, n| l.non_reentrant_lock(n)),
            ("spin", |l, n| l.spin_lock(n)),
            ("fenced", |l, n| l.fenced_lock(n)),
            ("fair", |l, n| l.fair_lock(n)),
        ]
    }

    /// A Lua script that keeps the server busy for 400 ms (every request
    /// queued behind it answers after it).
    const BUSY: &str = "local t = redis.call('time') local s = t[1]*1000000+t[2] \
        while true do local n = redis.call('time') \
        if n[1]*1000000+n[2] - s > 400000 then break end end return 1";

    /// The acquires of free locks, one per case (how its handle is made,
    /// its name, whether its handle is kept), are all written while the
    /// server is busy, cancelled 100 ms in (their replies on the way), and
    /// their handles dropped (`keep_handle` false) or kept; for each case,
    /// whether its lock is held by nobody 500 ms after the server answered.
    /// (The cases hold distinct names: they share one busy spell.)
    async fn orphans(
        server: &RedisServer,
        locks: &Locks,
        cases: &[(Make, String, bool)],
    ) -> Vec<bool> {
        let port = server.port();
        let busy =
            std::thread::spawn(move || keylatch_harness::redis_cli(port, &["EVAL", BUSY, "0"]));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let attempts: Vec<_> = cases
            .iter()
            .map(|&(make, ref name, keep_handle)| {
                let lock = make(locks, name);
                tokio::spawn(async move {
                    let r = tokio::time::timeout(
                        Duration::from_millis(100),
                        lock.try_acquire(Duration::from_secs(5), None),
                    )
                    .await;
                    assert!(r.is_err(), "cancelled while the server was busy");
                    if keep_handle {
                        Some(lock)
                    } else {
                        drop(lock);
                        None
                    }
                })
            })
            .collect();
        let mut kept = Vec::new();
        for attempt in attempts {
            kept.push(attempt.await.unwrap());
        }
        busy.join().unwrap().unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(locks.settle(Duration::from_secs(5)).await);
        let mut held = Vec::new();
        for (_, name, _) in cases {
            held.push(locks.lock(name).is_locked().await.unwrap());
        }
        drop(kept);
        held
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_acquire_is_settled_even_when_its_handle_is_dropped() {
        let server = RedisServer::start();
        let locks = locks_with(&server.url(), config()).await;
        let mut cases = Vec::new();
        for (label, make) in kinds() {
            // Each script loaded first (a first call would be a NOSCRIPT).
            make(&locks, &format!("warm-{label}"))
                .acquire()
                .await
                .unwrap()
                .unlock()
                .await
                .unwrap();
            cases.push((make, format!("keep-{label}"), true));
            cases.push((make, format!("drop-{label}"), false));
        }
        let held = orphans(&server, &locks, &cases).await;
        let mut orphans = Vec::new();
        for ((label, _), pair) in kinds().into_iter().zip(held.chunks(2)) {
            let (kept, dropped) = (pair[0], pair[1]);
            if kept || dropped {
                orphans.push(format!(
                    "{label}: the cancelled acquire's hold is left to its lease, held by nobody \
                     (handle kept: {kept}, handle dropped: {dropped})"
                ));
            }
        }
        assert!(orphans.is_empty(), "{orphans:#?}");
    }
}

/// Outside review (session 25): fenced tokens across holders, force
/// unlock and a counter gone (passes on main).
mod fenced_tokens_review {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tokens_rise_across_force_unlock_and_a_lost_counter() {
        let server = RedisServer::start();
        let a = Locks::connect(&server.url()).await.unwrap();
        let b = locks_with(&server.url(), config()).await;
        let name = "ft-rise";
        let mut seen = Vec::new();
        let g = a.fenced_lock(name).acquire().await.unwrap();
        seen.push(g.fencing_token().unwrap());
        // A waiter of another process, then a force unlock: the holder is
        // told, the waiter gets in with a larger token.
        let waiter = {
            let l = b.fenced_lock(name);
            tokio::spawn(async move { l.try_acquire(Duration::from_secs(20), None).await })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        b.force_unlock(name).await.unwrap();
        let reason = tokio::time::timeout(Duration::from_secs(10), g.lost()).await;
        assert!(reason.is_ok(), "holder told of the force unlock");
        let w = tokio::time::timeout(Duration::from_secs(20), waiter)
            .await
            .unwrap()
            .unwrap()
            .unwrap()
            .expect("the waiter got the lock");
        seen.push(w.fencing_token().unwrap());
        w.unlock().await.unwrap();
        // The counter lost (deleted as an expiry or a flush of it would).
        b.client()
            .del([format!("redisson_lock_token:{{{name}}}").as_str()])
            .await
            .unwrap();
        let g = a.fenced_lock(name).acquire().await.unwrap();
        seen.push(g.fencing_token().unwrap());
        g.unlock().await.unwrap();
        // A reentrant holder of the same name, then fenced again.
        let g = b.lock(name).acquire().await.unwrap();
        seen.push(g.fencing_token().unwrap());
        g.unlock().await.unwrap();
        let g = b.fenced_lock(name).acquire().await.unwrap();
        seen.push(g.fencing_token().unwrap());
        g.unlock().await.unwrap();
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    }
}
