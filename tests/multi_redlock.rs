//! MultiLock and RedLock against real servers. MultiLock: exclusion
//! against single-lock holders of any member (and the rollback of a partial
//! acquire), contenders listing the same names in opposite orders both
//! finishing, a member deleted behind the guard firing its `lost()`,
//! cancellation at any point leaving nothing held past a lease, members of
//! one slot taken in one script call, and the same on a 6-node cluster.
//! RedLock on 5 independent masters: acquire and release, one master
//! killed (still acquires), three killed (typed quorum error, nothing left
//! held), a SIGSTOPped master not stalling an acquire past the per-node
//! timeout, two RedLock clients never overlapping (history), and `lost()`
//! once a quorum is gone.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Soon;
use keylatch_cluster::{Client, ClientConfig, Commands};
use keylatch_harness::{Masters, RedisCluster, RedisServer};
use keylatch_lock::{LockError, Locks, LocksConfig, LossReason, MultiLock, RedLock};
use keylatch_resp::{Cmd, Frame};

const SOON: Soon = Soon::new(Duration::from_secs(10), Duration::from_millis(20));

fn config() -> LocksConfig {
    LocksConfig::default().watchdog_timeout(Duration::from_secs(3))
}

async fn exists(client: &Client, key: &str) -> bool {
    client
        .send(Cmd::new("EXISTS").key(key))
        .await
        .unwrap()
        .eq(&Frame::Integer(1))
}

async fn multi_exclusion(a: &Locks, b: &Locks, names: [&'static str; 3]) {
    let admin = a.client();
    // A single-lock holder of one member keeps the multi-lock out, and the
    // members taken before it are given back.
    let single = b.lock(names[1]).acquire().await.unwrap();
    let m = a.multi_lock(&names);
    assert!(m
        .try_acquire(Duration::from_millis(300), None)
        .await
        .unwrap()
        .is_none());
    for n in [names[0], names[2]] {
        assert!(!exists(admin, n).await, "{n} rolled back");
    }
    single.unlock().await.unwrap();
    let g = m
        .try_acquire(Duration::from_secs(5), None)
        .await
        .unwrap()
        .expect("all free now");
    assert_eq!(g.guards().len(), 3);
    for n in names {
        assert!(
            b.lock(n).try_acquire_now(None).await.unwrap().is_none(),
            "{n} held"
        );
    }
    g.unlock().await.unwrap();
    for n in names {
        assert!(!exists(admin, n).await, "{n} released");
    }

    // Opposite orders, two clients, many rounds: both finish.
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (locks, order) in [
        (a.clone(), [names[0], names[1], names[2]]),
        (b.clone(), [names[2], names[1], names[0]]),
    ] {
        let done = Arc::clone(&done);
        tasks.push(tokio::spawn(async move {
            let m = locks.multi_lock(&order);
            for _ in 0..25 {
                let g = m
                    .try_acquire(Duration::from_secs(20), None)
                    .await
                    .unwrap()
                    .expect("no deadlock: acquired within 20 s");
                tokio::time::sleep(Duration::from_millis(1)).await;
                g.unlock().await.unwrap();
                done.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("both contenders finished")
            .unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_excludes_single_holders_and_opposite_orders_finish() {
    let server = RedisServer::start();
    let a = Locks::new(Client::connect(&server.url()).await.unwrap(), config());
    let b = Locks::new(Client::connect(&server.url()).await.unwrap(), config());
    multi_exclusion(&a, &b, ["m-a", "m-b", "m-c"]).await;
    // Members that share a hash tag, the same way.
    multi_exclusion(&a, &b, ["{t}a", "{t}b", "{t}c"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_of_one_slot_go_in_one_script_call() {
    let server = RedisServer::start();
    let locks = Locks::new(Client::connect(&server.url()).await.unwrap(), config());
    let admin = Client::connect(&server.url()).await.unwrap();
    // Warm: scripts loaded.
    let g = locks.multi_lock(&["{w}1", "{w}2"]).acquire().await.unwrap();
    g.unlock().await.unwrap();
    admin
        .send(Cmd::new("CONFIG").arg("RESETSTAT"))
        .await
        .unwrap();
    let g = locks
        .multi_lock(&["{t}c", "{t}a", "{t}b", "{t}d"])
        .acquire()
        .await
        .unwrap();
    let reply = admin
        .send(Cmd::new("INFO").arg("commandstats"))
        .await
        .unwrap();
    let info = String::from_utf8_lossy(reply.as_bytes().expect("INFO text")).into_owned();
    let calls = common::info_count(&info, "cmdstat_evalsha:calls=");
    assert_eq!(
        calls, 1,
        "four members of one slot, one script call:\n{info}"
    );
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_member_fires_the_multi_guard_and_cancellation_leaves_nothing() {
    let server = RedisServer::start();
    let locks = Locks::connect(&server.url()).await.unwrap();
    let admin = Client::connect(&server.url()).await.unwrap();
    let g = locks.multi_lock(&["l-a", "l-b"]).acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await; // tracked by now
    assert!(!g.is_lost());
    admin.del(["l-b"]).await.unwrap();
    let why = tokio::time::timeout(Duration::from_secs(5), g.lost())
        .await
        .expect("a member's loss fires the multi guard");
    assert_eq!(why, LossReason::Gone);
    assert!(g.is_lost());
    assert!(
        g.unlock().await.is_err(),
        "the lost member's release says so"
    );
    assert!(!exists(&admin, "l-a").await, "the others released anyway");

    // Dropped at many points: whatever was taken ends (released in the
    // background, or with its 1 s lease).
    let m = locks.multi_lock(&["c-a", "{c}x", "{c}y", "c-z"]);
    for i in 0..30u64 {
        let _ = tokio::time::timeout(
            Duration::from_micros(150 * i),
            m.try_acquire(Duration::from_secs(5), Some(Duration::from_secs(1))),
        )
        .await;
    }
    SOON.eventually("nothing held after the cancelled acquires", || {
        let admin = admin.clone();
        async move {
            let mut any = false;
            for n in ["c-a", "{c}x", "{c}y", "c-z"] {
                any |= exists(&admin, n).await;
            }
            !any
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_on_a_cluster() {
    let cluster = RedisCluster::start();
    let urls = cluster.seed_urls();
    let seeds: Vec<&str> = urls.iter().map(String::as_str).take(2).collect();
    let mk = || async {
        Locks::new(
            Client::connect_with(ClientConfig::from_urls(&seeds).unwrap())
                .await
                .unwrap(),
            config(),
        )
    };
    let (a, b) = (mk().await, mk().await);
    // Members across slots and nodes, and members sharing a slot.
    multi_exclusion(&a, &b, ["mc-1", "mc-2", "mc-3"]).await;
    multi_exclusion(&a, &b, ["{mt}1", "{mt}2", "other"]).await;
    // Members of other kinds and clients.
    let m = MultiLock::new(vec![a.lock("mix-1"), b.fair_lock("mix-2")]);
    let g = m.acquire().await.unwrap();
    assert!(b
        .lock("mix-1")
        .try_acquire_now(None)
        .await
        .unwrap()
        .is_none());
    g.unlock().await.unwrap();
}

async fn redlock_over(masters: &Masters) -> RedLock {
    let mut nodes = Vec::new();
    for u in masters.urls() {
        nodes.push(Locks::new(Client::connect(&u).await.unwrap(), config()));
    }
    RedLock::new(nodes).node_timeout(Duration::from_millis(300))
}

async fn held_on(masters: &Masters, name: &str) -> usize {
    let mut n = 0;
    for u in masters.urls() {
        if let Ok(c) = Client::connect(&u).await {
            if exists(&c, name).await {
                n += 1;
            }
        }
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_on_five_masters_rides_out_dead_and_paused_ones() {
    let mut masters = Masters::start(5);
    let redlock = redlock_over(&masters).await;
    assert_eq!(redlock.quorum(), 3);

    let g = redlock.lock("rl-basic").acquire().await.unwrap();
    assert_eq!(g.holding(), 5);
    assert!(g.validity() > Duration::from_secs(2));
    assert_eq!(held_on(&masters, "rl-basic").await, 5);
    g.unlock().await.unwrap();
    assert_eq!(held_on(&masters, "rl-basic").await, 0);

    // A paused master costs the per-node timeout, not the lease.
    let pid = masters.get(4).pid().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap();
    let started = Instant::now();
    let g = redlock
        .lock("rl-paused")
        .try_acquire(Duration::from_secs(5), None)
        .await
        .unwrap()
        .expect("a quorum without the paused master");
    let took = started.elapsed();
    std::process::Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .unwrap();
    eprintln!("acquire with one master paused took {took:?} (node timeout 300 ms)");
    assert!(took < Duration::from_secs(3), "stalled {took:?}");
    assert_eq!(g.holding(), 4);
    g.unlock().await.unwrap();

    // One master dead: still a quorum.
    masters.get_mut(0).kill();
    let g = redlock
        .lock("rl-one-dead")
        .try_acquire(Duration::from_secs(5), None)
        .await
        .unwrap()
        .expect("four of five");
    assert_eq!(g.holding(), 4);
    g.unlock().await.unwrap();

    // Three dead: a typed quorum error, nothing left on the two alive.
    masters.get_mut(1).kill();
    masters.get_mut(2).kill();
    let err = redlock
        .lock("rl-three-dead")
        .try_acquire(Duration::from_millis(500), None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            LockError::Quorum {
                answered: 2,
                needed: 3
            }
        ),
        "{err:?}"
    );
    SOON.eventually("nothing held on the alive masters", || async {
        let mut n = 0;
        for i in 3..5 {
            let c = Client::connect(&masters.get(i).url()).await.unwrap();
            if exists(&c, "rl-three-dead").await {
                n += 1;
            }
        }
        n == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_redlock_clients_never_overlap_and_lost_fires_without_a_quorum() {
    let masters = Masters::start(5);
    let a = redlock_over(&masters).await;
    let b = redlock_over(&masters).await;
    let history = Arc::new(Mutex::new(Vec::new()));
    let shared = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (t, r) in [a.clone(), b.clone(), a.clone(), b.clone()]
        .into_iter()
        .enumerate()
    {
        let (history, shared) = (Arc::clone(&history), Arc::clone(&shared));
        tasks.push(tokio::spawn(async move {
            for _ in 0..15 {
                let g = r
                    .lock("rl-history")
                    .try_acquire(Duration::from_secs(30), None)
                    .await
                    .unwrap()
                    .unwrap_or_else(|| panic!("task {t}: not in 30 s"));
                let from = Instant::now();
                let v = shared.load(Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                shared.store(v + 1, Ordering::SeqCst);
                history.lock().unwrap().push((from, Instant::now()));
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
    h.sort();
    for w in h.windows(2) {
        assert!(w[0].1 <= w[1].0, "two RedLock holds overlap: {w:?}");
    }

    // Keys deleted on three masters: renewals find them gone, and the
    // guard is lost once fewer than a quorum stand.
    let g = a.lock("rl-lost").acquire().await.unwrap();
    for i in 0..3 {
        let c = Client::connect(&masters.get(i).url()).await.unwrap();
        c.del(["rl-lost"]).await.unwrap();
    }
    let why = tokio::time::timeout(Duration::from_secs(10), g.lost())
        .await
        .expect("lost within a renewal interval or two");
    assert_eq!(why, LossReason::Gone);
    assert!(g.is_lost());
    assert!(matches!(g.unlock().await, Err(LockError::Expired { .. })));
    assert_eq!(held_on(&masters, "rl-lost").await, 0);
}

/// A RedLock acquire dropped mid-round (a program interrupted while it
/// waits) leaves the members it took, and the try a paused master has yet
/// to run, to background releases: `RedLock::settle` waits for them, so a
/// program that settles and exits leaves no member held by nobody.
#[test]
fn a_round_dropped_mid_way_is_released_on_every_master_once_settled() {
    let masters = Masters::start(3);
    let urls = masters.urls();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut nodes = Vec::new();
            for u in &urls {
                nodes.push(Locks::new(Client::connect(u).await.unwrap(), config()));
            }
            let redlock = RedLock::new(nodes).node_timeout(Duration::from_millis(1000));
            let pause = Client::connect(&urls[2]).await.unwrap();
            let _: Frame = pause
                .cmd(Cmd::new("CLIENT").arg("PAUSE").arg("1500").arg("ALL"))
                .await
                .unwrap();
            let handle = redlock.lock("dropped-round");
            let wait = handle.try_acquire(Duration::from_secs(5), None);
            // Masters 0 and 1 answer at once; master 2 is paused.
            assert!(tokio::time::timeout(Duration::from_millis(300), wait)
                .await
                .is_err());
            assert!(redlock.settle(Duration::from_secs(10)).await);
        });
        // The runtime ends here, as a process's does at exit.
    })
    .join()
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    assert_eq!(rt.block_on(held_on(&masters, "dropped-round")), 0);
}
