//! An outside review of MultiLock and RedLock: adversarial tests against
//! real redis-server processes. Six failed on the first version: a
//! read-write lock's read and write sides in a multi-lock depended on the
//! order given (read first: a refused upgrade), a fixed-lease member
//! expired while a later one was waited for and the guard was returned
//! anyway, one name under two owners waited for itself for ever, a
//! `Duration::MAX` lease overflowed the drift arithmetic, a master paused
//! during a successful round kept the lock after resuming (its late acquire
//! was never released), and an unlock with a paused master waited a whole
//! lease.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::Soon;
use keylatch_cluster::{Client, ClientConfig, Commands};
use keylatch_harness::{Masters, RedisCluster, RedisServer};
use keylatch_lock::{LockError, Locks, LocksConfig, LossReason, MultiLock, RedLock};
use keylatch_resp::{Cmd, Frame};

const SOON: Soon = Soon::new(Duration::from_secs(10), Duration::from_millis(20));
const T: Duration = Duration::from_secs(20);

fn config(watchdog: Duration) -> LocksConfig {
    LocksConfig::default().watchdog_timeout(watchdog)
}

async fn exists(client: &Client, key: &str) -> bool {
    client
        .send(Cmd::new("EXISTS").key(key))
        .await
        .unwrap()
        .eq(&Frame::Integer(1))
}

async fn held_on(masters: &Masters, name: &str) -> Vec<usize> {
    let mut v = Vec::new();
    for (i, u) in masters.urls().iter().enumerate() {
        if let Ok(c) = Client::connect(u).await {
            if exists(&c, name).await {
                v.push(i);
            }
        }
    }
    v
}

async fn redlock_over(masters: &Masters, watchdog: Duration) -> RedLock {
    let mut nodes = Vec::new();
    for u in masters.urls() {
        nodes.push(Locks::new(
            Client::connect(&u).await.unwrap(),
            config(watchdog),
        ));
    }
    RedLock::new(nodes).node_timeout(Duration::from_millis(200))
}

fn sig(pid: u32, s: &str) {
    std::process::Command::new("kill")
        .args([s, &pid.to_string()])
        .status()
        .unwrap();
}

/// Resumes the process on drop, so a failing assertion never leaves a
/// server stopped.
struct Cont(Vec<u32>);
impl Drop for Cont {
    fn drop(&mut self) {
        for p in &self.0 {
            sig(*p, "-CONT");
        }
    }
}

// ---------------------------------------------------------------- MultiLock

/// The read and the write side of one rw lock, one owner: the writer may
/// also read (downgrade), so the multi-lock must get both whatever order
/// they are listed in ("taken in canonical order whatever the order given").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_rw_read_and_write_of_one_owner_is_order_independent() {
    let server = RedisServer::start();
    let locks = Locks::new(
        Client::connect(&server.url()).await.unwrap(),
        config(Duration::from_secs(5)),
    );
    let rw = locks.rw_lock("rw-both");
    let wr = MultiLock::new(vec![rw.write(), rw.read()]);
    let g = tokio::time::timeout(T, wr.try_acquire(Duration::from_secs(2), None))
        .await
        .unwrap();
    let wr_ok = matches!(g, Ok(Some(_)));
    if let Ok(Some(g)) = g {
        g.unlock().await.unwrap();
    }
    let rw2 = locks.rw_lock("rw-both2");
    let rd = MultiLock::new(vec![rw2.read(), rw2.write()]);
    let g2 = tokio::time::timeout(T, rd.try_acquire(Duration::from_secs(2), None))
        .await
        .unwrap();
    let rd_desc = format!("{g2:?}");
    let rd_ok = matches!(g2, Ok(Some(_)));
    if let Ok(Some(g)) = g2 {
        g.unlock().await.unwrap();
    }
    assert!(wr_ok, "[write, read] should be had");
    assert!(
        rd_ok,
        "[read, write] of the same rw lock and owner should be had as [write, read] is \
         (canonical order), got {rd_desc}"
    );
}

/// A fixed lease: the first member's lease must not run out while the
/// multi-lock waits for a later member (Redisson takes members with a longer
/// lease and sets the lease on all once every member is had).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_fixed_lease_first_member_not_expired_while_waiting_for_later_one() {
    let server = RedisServer::start();
    let a = Locks::new(
        Client::connect(&server.url()).await.unwrap(),
        config(Duration::from_secs(5)),
    );
    let b = Locks::new(
        Client::connect(&server.url()).await.unwrap(),
        config(Duration::from_secs(5)),
    );
    let admin = Client::connect(&server.url()).await.unwrap();
    let m = a.multi_lock(&["fl-one", "fl-two"]);
    let first = m.members()[0].name().to_owned();
    let second = m.members()[1].name().to_owned();
    // Someone else holds the member taken second, for 1.2 s.
    let other = b
        .lock(&second)
        .try_acquire_now(Some(Duration::from_millis(1200)))
        .await
        .unwrap()
        .unwrap();
    let g = tokio::time::timeout(
        T,
        m.try_acquire(Duration::from_secs(5), Some(Duration::from_millis(400))),
    )
    .await
    .unwrap()
    .unwrap()
    .expect("acquired after the other's lease ended");
    let first_exists = exists(&admin, &first).await;
    let lost = g.is_lost();
    drop(other);
    let _ = g.unlock().await;
    assert!(
        first_exists && !lost,
        "the multi guard was returned with member {first} already expired \
         (exists={first_exists}, is_lost={lost}): not all held"
    );
}

/// Same name twice, same owner (and twice in a slot group): re-entry, not a
/// self-deadlock; unlock leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_duplicate_names_same_owner() {
    let server = RedisServer::start();
    let locks = Locks::new(
        Client::connect(&server.url()).await.unwrap(),
        config(Duration::from_secs(5)),
    );
    let admin = Client::connect(&server.url()).await.unwrap();
    let names = ["dup", "dup", "{d}x", "{d}x", "{d}y"];
    let m = locks.multi_lock(&names);
    let g = tokio::time::timeout(T, m.try_acquire(Duration::from_secs(3), None))
        .await
        .expect("no hang")
        .unwrap()
        .expect("same owner twice is a re-entry");
    assert_eq!(g.guards().len(), 5);
    let other = locks.lock("dup");
    assert!(other.try_acquire_now(None).await.unwrap().is_none());
    g.unlock().await.unwrap();
    for n in ["dup", "{d}x", "{d}y"] {
        assert!(!exists(&admin, n).await, "{n} released");
    }
}

/// The same name through two owners (two clients) in one MultiLock: the
/// second member waits for the first forever; `acquire()` never returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_same_name_two_owners_does_not_hang_acquire() {
    let server = RedisServer::start();
    let a = Locks::new(
        Client::connect(&server.url()).await.unwrap(),
        config(Duration::from_secs(5)),
    );
    let b = Locks::new(
        Client::connect(&server.url()).await.unwrap(),
        config(Duration::from_secs(5)),
    );
    let m = MultiLock::new(vec![a.lock("same"), b.lock("same")]);
    let r = tokio::time::timeout(Duration::from_secs(8), m.acquire()).await;
    match r {
        Err(_) => panic!(
            "MultiLock::acquire over one name held by two owners self-deadlocks (no error, \
             no return after 8 s)"
        ),
        Ok(Ok(g)) => {
            let _ = g.unlock().await;
            panic!("two owners both hold one exclusive lock");
        }
        Ok(Err(e)) => eprintln!("rejected: {e}"),
    }
}

/// No members: acquire and unlock work, lost() stays pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_zero_members() {
    let m = MultiLock::new(Vec::new());
    let g = tokio::time::timeout(T, m.try_acquire(Duration::from_secs(1), None))
        .await
        .unwrap()
        .unwrap()
        .expect("nothing to take");
    assert!(!g.is_lost());
    assert!(
        tokio::time::timeout(Duration::from_millis(200), g.lost())
            .await
            .is_err(),
        "nothing lost"
    );
    g.unlock().await.unwrap();
}

/// A member already held by the same owner (re-entry), grouped and single:
/// unlocking the multi guard leaves the outer hold standing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_reentry_of_held_member_leaves_outer_hold() {
    let server = RedisServer::start();
    let locks = Locks::new(
        Client::connect(&server.url()).await.unwrap(),
        config(Duration::from_secs(3)),
    );
    let other = Locks::new(
        Client::connect(&server.url()).await.unwrap(),
        config(Duration::from_secs(3)),
    );
    let admin = Client::connect(&server.url()).await.unwrap();
    // Grouped and single use names of their own: both run at once.
    let case = |outer_name: &'static str, second: &'static str| {
        let (locks, other, admin) = (&locks, &other, &admin);
        async move {
            let l = locks.lock(outer_name);
            let outer = l.acquire().await.unwrap();
            let m = MultiLock::new(vec![l.clone(), locks.lock_with_owner(second, l.owner())]);
            let g = tokio::time::timeout(T, m.try_acquire(Duration::from_secs(2), None))
                .await
                .unwrap()
                .unwrap()
                .expect("re-entry");
            g.unlock().await.unwrap();
            assert!(!exists(admin, second).await, "{second} released");
            assert!(
                exists(admin, outer_name).await,
                "{outer_name}: outer hold stands"
            );
            assert!(!outer.is_lost(), "{outer_name}: outer guard not lost");
            // The outer hold is still renewed past a watchdog lease.
            tokio::time::sleep(Duration::from_secs(4)).await;
            assert!(
                other
                    .lock(outer_name)
                    .try_acquire_now(None)
                    .await
                    .unwrap()
                    .is_none(),
                "{outer_name}: still held by the outer guard after a lease"
            );
            assert!(!outer.is_lost());
            outer.unlock().await.unwrap();
            assert!(!exists(admin, outer_name).await);
        }
    };
    tokio::join!(case("{r}a", "{r}b"), case("r-single-a", "r-single-b"));
}

/// One member force-unlocked behind the guard: unlock reports it and still
/// releases the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_unlock_with_force_unlocked_member() {
    let server = RedisServer::start();
    let locks = Locks::new(
        Client::connect(&server.url()).await.unwrap(),
        config(Duration::from_secs(30)),
    );
    let admin = Client::connect(&server.url()).await.unwrap();
    let names = ["fu-a", "{fu}b", "{fu}c", "fu-d"];
    let g = locks.multi_lock(&names).acquire().await.unwrap();
    assert!(locks.lock("{fu}b").force_unlock().await.unwrap());
    let r = tokio::time::timeout(T, g.unlock()).await.unwrap();
    assert!(r.is_err(), "the force-unlocked member is reported: {r:?}");
    for n in names {
        assert!(!exists(&admin, n).await, "{n} released");
    }
}

async fn cancel_many(locks: &Locks, admin: &Client, names: &[&str]) {
    let m = locks.multi_lock(names);
    // A long fixed lease, so only a release (not the lease) can clear them.
    for i in 0..40u64 {
        let _ = tokio::time::timeout(
            Duration::from_micros(200 * i),
            m.try_acquire(Duration::from_secs(5), Some(Duration::from_secs(60))),
        )
        .await;
    }
    // And under the watchdog.
    for i in 0..40u64 {
        let _ = tokio::time::timeout(
            Duration::from_micros(200 * i),
            m.try_acquire(Duration::from_secs(5), None),
        )
        .await;
    }
    let mut left = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        left.clear();
        for n in names {
            if exists(admin, n).await {
                left.push((*n).to_owned());
            }
        }
        if left.is_empty() || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        left.is_empty(),
        "cancelled multi acquires left {left:?} held 10 s later (lease 60 s / watchdog 30 s)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_cancel_leaves_nothing_held_standalone_long_lease() {
    let server = RedisServer::start();
    let locks = Locks::new(
        Client::connect(&server.url()).await.unwrap(),
        config(Duration::from_secs(30)),
    );
    let admin = Client::connect(&server.url()).await.unwrap();
    cancel_many(&locks, &admin, &["cx-a", "{cx}1", "{cx}2", "{cx}3", "cx-z"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_cancel_leaves_nothing_held_cluster_long_lease() {
    let cluster = RedisCluster::start();
    let urls = cluster.seed_urls();
    let seeds: Vec<&str> = urls.iter().map(String::as_str).take(2).collect();
    let locks = Locks::new(
        Client::connect_with(ClientConfig::from_urls(&seeds).unwrap())
            .await
            .unwrap(),
        config(Duration::from_secs(30)),
    );
    let admin = Client::connect_with(ClientConfig::from_urls(&seeds).unwrap())
        .await
        .unwrap();
    cancel_many(&locks, &admin, &["cc-a", "{cc}1", "{cc}2", "{cc}3", "cc-z"]).await;
}

/// Members of many kinds and two clients: exclusion and full release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_mixed_kinds() {
    let server = RedisServer::start();
    let a = Locks::new(
        Client::connect(&server.url()).await.unwrap(),
        config(Duration::from_secs(5)),
    );
    let b = Locks::new(
        Client::connect(&server.url()).await.unwrap(),
        config(Duration::from_secs(5)),
    );
    let admin = Client::connect(&server.url()).await.unwrap();
    let m = MultiLock::new(vec![
        a.lock("mk-plain"),
        b.fair_lock("mk-fair"),
        a.fenced_lock("mk-fenced"),
        b.rw_lock("mk-rw").write(),
        a.rw_lock("mk-rw2").read(),
        a.spin_lock("mk-spin"),
        a.non_reentrant_lock("mk-nr"),
    ]);
    // Hold one member elsewhere briefly: the others are rolled back.
    let blocker = b
        .fair_lock("mk-fair")
        .try_acquire_now(Some(Duration::from_millis(800)))
        .await
        .unwrap()
        .unwrap();
    assert!(
        tokio::time::timeout(T, m.try_acquire(Duration::from_millis(100), None))
            .await
            .unwrap()
            .unwrap()
            .is_none()
    );
    let g = tokio::time::timeout(T, m.try_acquire(Duration::from_secs(5), None))
        .await
        .unwrap()
        .unwrap()
        .expect("all members once the blocker's lease ends");
    drop(blocker);
    assert_eq!(g.guards().len(), 7);
    assert!(b
        .lock("mk-plain")
        .try_acquire_now(None)
        .await
        .unwrap()
        .is_none());
    assert!(b
        .rw_lock("mk-rw2")
        .write()
        .try_acquire_now(None)
        .await
        .unwrap()
        .is_none());
    g.unlock().await.unwrap();
    SOON.eventually("all released", || {
        let admin = admin.clone();
        async move {
            let mut any = false;
            for n in [
                "mk-plain",
                "mk-fair",
                "mk-fenced",
                "mk-rw",
                "mk-rw2",
                "mk-spin",
                "mk-nr",
            ] {
                any |= exists(&admin, n).await;
            }
            !any
        }
    })
    .await;
}

// ------------------------------------------------------------------ RedLock

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_one_and_two_masters() {
    let mut masters = Masters::start(2);
    let one = RedLock::new(vec![Locks::new(
        Client::connect(&masters.urls()[0]).await.unwrap(),
        config(Duration::from_secs(5)),
    )]);
    assert_eq!(one.quorum(), 1);
    let g = tokio::time::timeout(T, one.lock("r1").try_acquire(Duration::ZERO, None))
        .await
        .unwrap()
        .unwrap()
        .expect("one master");
    let one_b = RedLock::new(vec![Locks::new(
        Client::connect(&masters.urls()[0]).await.unwrap(),
        config(Duration::from_secs(5)),
    )]);
    assert!(one_b
        .lock("r1")
        .try_acquire(Duration::from_millis(300), None)
        .await
        .unwrap()
        .is_none());
    g.unlock().await.unwrap();

    let two = redlock_over(&masters, Duration::from_secs(5)).await;
    assert_eq!(two.quorum(), 2);
    let g = two
        .lock("r2")
        .try_acquire(Duration::ZERO, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(g.holding(), 2);
    g.unlock().await.unwrap();
    masters.get_mut(1).kill();
    let r = tokio::time::timeout(
        T,
        two.lock("r2").try_acquire(Duration::from_millis(300), None),
    )
    .await
    .unwrap();
    assert!(
        matches!(
            r,
            Err(LockError::Quorum {
                answered: 1,
                needed: 2
            })
        ),
        "{r:?}"
    );
    SOON.eventually("nothing held on the alive master", || async {
        let c = Client::connect(&masters.get(0).url()).await.unwrap();
        !exists(&c, "r2").await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_with_no_masters_errors_without_panic() {
    let r = RedLock::new(Vec::new());
    let out = tokio::time::timeout(T, r.lock("x").try_acquire(Duration::from_millis(100), None))
        .await
        .unwrap();
    assert!(matches!(out, Err(LockError::Quorum { .. })), "{out:?}");
}

/// A master paused while a round is in flight, and the round succeeds with
/// the other four: once the master resumes, its late acquire takes the lock
/// there. The unlock (and the late reply's finisher) must clear it; nothing
/// should be left on that master under an owner nobody holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_late_acquire_on_paused_master_of_a_successful_round_is_released() {
    let masters = Masters::start(5);
    // Default 30 s watchdog: what RedLock::connect gives.
    let redlock = redlock_over(&masters, Duration::from_secs(30)).await;
    // Warm every master (scripts loaded).
    redlock
        .lock("warm")
        .acquire()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let pid = masters.get(0).pid().unwrap();
    sig(pid, "-STOP");
    let cont = Cont(vec![pid]);
    let g = tokio::time::timeout(
        T,
        redlock
            .lock("late-ok")
            .try_acquire(Duration::from_secs(5), None),
    )
    .await
    .unwrap()
    .unwrap()
    .expect("a quorum of four");
    assert_eq!(g.holding(), 4);
    g.unlock().await.unwrap();
    drop(cont); // resume: the buffered acquire runs now
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut left;
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        left = held_on(&masters, "late-ok").await;
        if left.is_empty() || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pttl = Client::connect(&masters.get(0).url())
        .await
        .unwrap()
        .send(Cmd::new("PTTL").key("late-ok"))
        .await
        .unwrap();
    assert!(
        left.is_empty(),
        "after unlock, the RedLock key is still held on masters {left:?} 8.5 s later \
         (PTTL there {pttl:?}): the late acquire of the successful round was never released"
    );
}

/// Unlock while one of five masters is paused: bounded (the per-node timeout
/// is 200 ms), not the whole watchdog lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_unlock_with_a_paused_master_is_bounded() {
    let masters = Masters::start(5);
    let redlock = redlock_over(&masters, Duration::from_secs(30)).await;
    let g = redlock.lock("ul-paused").acquire().await.unwrap();
    assert_eq!(g.holding(), 5);
    let pid = masters.get(2).pid().unwrap();
    sig(pid, "-STOP");
    let cont = Cont(vec![pid]);
    let started = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(45), g.unlock()).await;
    let took = started.elapsed();
    drop(cont);
    eprintln!("unlock with a paused master took {took:?}: {r:?}");
    assert!(r.is_ok(), "unlock hung past 45 s");
    assert!(
        took < Duration::from_secs(5),
        "RedLockGuard::unlock with one paused master of five took {took:?} \
         (node timeout 200 ms): it waits for the paused member's release"
    );
}

/// A huge lease is a legal Duration: nothing may panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_huge_lease_does_not_panic() {
    let masters = Masters::start(3);
    let redlock = redlock_over(&masters, Duration::from_secs(5)).await;
    let h = tokio::spawn(async move {
        let r = redlock
            .lock("huge")
            .try_acquire(Duration::ZERO, Some(Duration::MAX))
            .await;
        if let Ok(Some(g)) = r {
            let _ = g.unlock().await;
        }
    });
    let out = tokio::time::timeout(T, h).await.unwrap();
    assert!(
        out.is_ok(),
        "RedLock::try_acquire with lease Some(Duration::MAX) panicked: {out:?}"
    );
}

/// A lease too short for any validity, and a node timeout at least the lease
/// with one master paused: no panic, no guard without validity, nothing left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_tiny_lease_and_node_timeout_beyond_lease() {
    let masters = Masters::start(5);
    let redlock = redlock_over(&masters, Duration::from_secs(5)).await;
    for (name, lease) in [("tiny1", 1u64), ("tiny5", 5), ("tiny20", 20)] {
        let r = tokio::time::timeout(
            T,
            redlock.lock(name).try_acquire(
                Duration::from_millis(300),
                Some(Duration::from_millis(lease)),
            ),
        )
        .await
        .unwrap()
        .unwrap();
        if let Some(g) = r {
            eprintln!("{name}: held, validity {:?}", g.validity());
            let _ = g.unlock().await;
        }
    }
    let slow = redlock.clone().node_timeout(Duration::from_millis(600));
    let pid = masters.get(0).pid().unwrap();
    sig(pid, "-STOP");
    let cont = Cont(vec![pid]);
    let r = tokio::time::timeout(
        T,
        slow.lock("slowlease").try_acquire(
            Duration::from_millis(1500),
            Some(Duration::from_millis(500)),
        ),
    )
    .await
    .expect("bounded")
    .unwrap();
    assert!(
        r.is_none(),
        "validity is gone every round (node timeout > lease)"
    );
    drop(cont);
    tokio::time::sleep(Duration::from_secs(1)).await;
    for name in ["tiny1", "tiny5", "tiny20", "slowlease"] {
        assert!(held_on(&masters, name).await.is_empty(), "{name} left held");
    }
}

/// Wait 0 while another owner holds it on three masters: Ok(None) at once,
/// the two members taken are released, the other's holds untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_wait_zero_while_held_elsewhere() {
    let masters = Masters::start(5);
    let redlock = redlock_over(&masters, Duration::from_secs(30)).await;
    let mut holds = Vec::new();
    for i in 0..3 {
        let l = Locks::connect(&masters.get(i).url()).await.unwrap();
        holds.push(l.lock("w0").try_acquire_now(None).await.unwrap().unwrap());
    }
    let r = tokio::time::timeout(T, redlock.lock("w0").try_acquire(Duration::ZERO, None))
        .await
        .unwrap()
        .unwrap();
    assert!(r.is_none());
    SOON.eventually("the two members released", || async {
        held_on(&masters, "w0").await == vec![0, 1, 2]
    })
    .await;
    for g in holds {
        assert!(!g.is_lost());
        g.unlock().await.unwrap();
    }
}

/// A guard dropped without unlock: released everywhere in the background.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_guard_dropped_is_released() {
    let masters = Masters::start(5);
    let redlock = redlock_over(&masters, Duration::from_secs(30)).await;
    let g = redlock.lock("dropped").acquire().await.unwrap();
    drop(g);
    SOON.eventually("released on every master", || async {
        held_on(&masters, "dropped").await.is_empty()
    })
    .await;
    let g = tokio::time::timeout(T, redlock.lock("dropped").try_acquire(Duration::ZERO, None))
        .await
        .unwrap()
        .unwrap();
    assert!(g.is_some());
}

/// Three of five masters paused during a watchdog hold and resumed after the
/// lease: lost() fires; after resume nothing is left past a lease, and the
/// lock can be had again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_masters_paused_during_hold_and_resumed_after_lease() {
    let masters = Masters::start(5);
    let redlock = redlock_over(&masters, Duration::from_secs(2)).await;
    let g = redlock.lock("ph").acquire().await.unwrap();
    let pids: Vec<u32> = (0..3).map(|i| masters.get(i).pid().unwrap()).collect();
    // Only one paused first: not lost.
    sig(pids[0], "-STOP");
    let cont = Cont(pids.clone());
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!g.is_lost(), "four of five stand");
    for p in &pids[1..] {
        sig(*p, "-STOP");
    }
    let why = tokio::time::timeout(Duration::from_secs(8), g.lost()).await;
    assert!(
        why.is_ok(),
        "lost() fired once three of five paused past the lease"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(cont);
    let r = tokio::time::timeout(T, g.unlock()).await.unwrap();
    assert!(matches!(r, Err(LockError::Expired { .. })), "{r:?}");
    SOON.eventually("nothing held after resume", || async {
        held_on(&masters, "ph").await.is_empty()
    })
    .await;
    let g = tokio::time::timeout(
        T,
        redlock.lock("ph").try_acquire(Duration::from_secs(5), None),
    )
    .await
    .unwrap()
    .unwrap()
    .expect("free again");
    assert_eq!(g.holding(), 5);
    g.unlock().await.unwrap();
}

/// lost() counts from the masters the guard holds: 2 of 5 deleted does not
/// fire, the third does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_lost_counts_quorum() {
    let masters = Masters::start(5);
    let redlock = redlock_over(&masters, Duration::from_secs(2)).await;
    let g = redlock.lock("lq").acquire().await.unwrap();
    for i in 0..2 {
        let c = Client::connect(&masters.get(i).url()).await.unwrap();
        c.del(["lq"]).await.unwrap();
    }
    assert!(
        tokio::time::timeout(Duration::from_secs(3), g.lost())
            .await
            .is_err(),
        "three of five still stand"
    );
    assert_eq!(g.holding(), 3);
    let c = Client::connect(&masters.get(2).url()).await.unwrap();
    c.del(["lq"]).await.unwrap();
    let why = tokio::time::timeout(Duration::from_secs(5), g.lost())
        .await
        .expect("lost once fewer than a quorum stand");
    assert_eq!(why, LossReason::Gone);
    let _ = g.unlock().await;
    assert!(held_on(&masters, "lq").await.is_empty());
}

/// Found by an outside review (both failed before the fix): a RedLock's
/// release counts what the members' releases found. With the keys deleted
/// on 2 of 3 masters (fewer than a quorum still held it), `unlock` answered
/// `Ok` and `run` its work's output, as if the RedLock had held all along.
mod release_counts_the_members {
    use std::time::Duration;

    use keylatch_cluster::{Client, Commands};
    use keylatch_harness::Masters;
    use keylatch_lock::{LockError, Locks, LocksConfig, RedLock, RedLockGuard};

    const T: Duration = Duration::from_secs(10);

    async fn held(masters: &Masters, name: &str) -> RedLockGuard {
        let mut nodes = Vec::new();
        for u in masters.urls() {
            nodes.push(Locks::new(
                Client::connect(&u).await.unwrap(),
                LocksConfig::default(),
            ));
        }
        let g = tokio::time::timeout(
            T,
            RedLock::new(nodes)
                .lock(name)
                .try_acquire(Duration::from_secs(2), Some(Duration::from_secs(30))),
        )
        .await
        .unwrap()
        .unwrap()
        .expect("free");
        assert_eq!(g.holding(), 3);
        g
    }

    async fn del_on(masters: &Masters, idx: &[usize], key: &str) {
        for &i in idx {
            let c = Client::connect(&masters.get(i).url()).await.unwrap();
            c.del([key]).await.unwrap();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unlock_with_a_quorum_already_gone_is_expired_and_one_gone_is_not() {
        let masters = Masters::start(3);
        let g = held(&masters, "rl1").await;
        del_on(&masters, &[0, 1], "rl1").await;
        let out = tokio::time::timeout(T, g.unlock()).await.unwrap();
        assert!(matches!(out, Err(LockError::Expired { .. })), "{out:?}");
        // One of three gone: two still held it, a quorum.
        let g = held(&masters, "rl2").await;
        del_on(&masters, &[2], "rl2").await;
        let out = tokio::time::timeout(T, g.unlock()).await.unwrap();
        assert!(out.is_ok(), "{out:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn run_whose_release_finds_the_quorum_gone_is_lost() {
        let masters = Masters::start(3);
        let g = held(&masters, "rl3").await;
        let urls = masters.urls();
        let out = tokio::time::timeout(
            T,
            g.run(|| async move {
                for u in &urls[..2] {
                    let c = Client::connect(u).await.unwrap();
                    c.del(["rl3"]).await.unwrap();
                }
            }),
        )
        .await
        .unwrap();
        assert!(matches!(out, Err(LockError::Lost { .. })), "{out:?}");
    }
}

/// A master down when the RedLock is made counts as a failed master, not
/// as an error of the whole RedLock (`RedLock::connect_lazily`,
/// `RedLock::connecting`), and joins once it answers.
mod a_master_down_at_start {
    use super::*;
    use keylatch_harness::free_port;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn is_a_failed_master_and_joins_once_it_answers() {
        let masters = Masters::start(2);
        let port = free_port().unwrap();
        let mut urls = masters.urls();
        urls.push(format!("redis://127.0.0.1:{port}"));
        let configs = urls
            .iter()
            .map(|u| {
                (
                    ClientConfig::from_url(u).unwrap(),
                    config(Duration::from_secs(3)),
                )
            })
            .collect();
        let redlock = RedLock::connecting(configs).node_timeout(Duration::from_millis(300));
        let first = redlock.connect_masters(Duration::from_secs(5)).await;
        assert!(first[0].is_ok() && first[1].is_ok(), "{first:?}");
        assert!(first[2].is_err(), "nothing listens there: {first:?}");

        // Two of three: held, and each member is renewed by its master.
        let g = tokio::time::timeout(
            T,
            redlock
                .lock("rl-late-master")
                .try_acquire(Duration::from_secs(5), None),
        )
        .await
        .unwrap()
        .unwrap()
        .expect("a quorum of the two that answer");
        assert_eq!(g.holding(), 2);
        assert_eq!(held_on(&masters, "rl-late-master").await, vec![0, 1]);
        g.unlock().await.unwrap();

        // The third comes up: a later round connects it and holds there too.
        let third = RedisServer::builder().port(port).start().unwrap();
        SOON.eventually("the third master joins", || async {
            let g = redlock
                .lock("rl-late-master")
                .try_acquire(Duration::from_secs(2), None)
                .await
                .unwrap()
                .expect("held");
            let n = g.holding();
            g.unlock().await.unwrap();
            n == 3
        })
        .await;
        let c = Client::connect(&third.url()).await.unwrap();
        assert!(!exists(&c, "rl-late-master").await, "released there too");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_of_three_down_is_a_quorum_error_and_a_bad_url_is_refused() {
        let masters = Masters::start(1);
        let a = format!("redis://127.0.0.1:{}", free_port().unwrap());
        let b = format!("redis://127.0.0.1:{}", free_port().unwrap());
        let url = masters.get(0).url();
        let redlock = RedLock::connect_lazily(&[url.as_str(), a.as_str(), b.as_str()])
            .unwrap()
            .node_timeout(Duration::from_millis(300));
        let err = tokio::time::timeout(
            T,
            redlock
                .lock("rl-two-down")
                .try_acquire(Duration::from_millis(800), None),
        )
        .await
        .unwrap()
        .unwrap_err();
        assert!(
            matches!(
                err,
                LockError::Quorum {
                    answered: 1,
                    needed: 2
                }
            ),
            "{err:?}"
        );
        assert_eq!(held_on(&masters, "rl-two-down").await, Vec::<usize>::new());
        assert!(RedLock::connect_lazily(&["redis://127.0.0.1:notaport"]).is_err());
    }
}
