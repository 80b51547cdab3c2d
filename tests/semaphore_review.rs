//! An outside review of the semaphores, the latch, the spin and the fenced
//! lock: adversarial tests against real servers (standalone and a 6-node
//! cluster). Four failed on the first design (a huge leased acquire cut
//! short and reported whole, a fenced counter left with another lock
//! kind's idle expiry and restarting at 1, `acquire(0)` waiting on a
//! negative count, `drain` leaving a negative count); the comments say
//! what went wrong then.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use keylatch_cluster::{Client, ClientConfig, Commands};
use keylatch_harness::{RedisCluster, RedisServer};
use keylatch_lock::{LockError, Locks, LocksConfig};
use keylatch_resp::{Cmd, Frame};

fn config() -> LocksConfig {
    LocksConfig::default()
        .watchdog_timeout(Duration::from_millis(1200))
        .recheck(Duration::from_millis(300))
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

async fn int(client: &Client, cmd: Cmd) -> i64 {
    match client.send(cmd).await.unwrap() {
        Frame::Integer(n) => n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

async fn get_i64(client: &Client, key: &str) -> Option<i64> {
    match client.send(Cmd::new("GET").key(key)).await.unwrap() {
        Frame::Null => None,
        f => Some(
            std::str::from_utf8(f.as_bytes().expect("bulk"))
                .unwrap()
                .parse()
                .unwrap(),
        ),
    }
}

async fn zcard(client: &Client, key: &str) -> i64 {
    int(client, Cmd::new("ZCARD").key(key)).await
}

async fn exists(client: &Client, key: &str) -> i64 {
    int(client, Cmd::new("EXISTS").key(key)).await
}

/// Polls `f` until true, at most `within`.
async fn eventually<F, Fut>(within: Duration, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = Instant::now() + within;
    loop {
        if f().await {
            return;
        }
        assert!(Instant::now() < end, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

const T: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------
// 1. More than 100,000 leased permits: all or nothing, never a silent part.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expirable_acquire_of_many_permits_takes_exactly_what_was_asked() {
    // (First design: a request above 100,000 was cut to 100,000 and
    // reported as success. Now a count past MAX_LEASED_PERMITS, or zero,
    // is a typed error and nothing is taken; within it, exactly n.)
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), config()).await;
    let admin = locks.client().clone();
    let sem = locks.expirable_semaphore("x-big");
    assert!(sem.try_set_permits(150_000).await.unwrap());
    for asked in [0, 120_000, u64::MAX] {
        let e = sem
            .try_acquire(asked, Duration::from_secs(1), None)
            .await
            .unwrap_err();
        assert!(
            matches!(e, LockError::PermitCount { asked: a, .. } if a == asked),
            "{e:?}"
        );
    }
    assert_eq!(
        get_i64(&admin, "x-big").await,
        Some(150_000),
        "nothing taken"
    );
    let max = keylatch_lock::MAX_LEASED_PERMITS;
    let g = tokio::time::timeout(
        Duration::from_secs(60),
        sem.try_acquire(max, Duration::from_secs(30), Some(Duration::from_secs(60))),
    )
    .await
    .expect("bounded")
    .unwrap()
    .expect("taken");
    assert_eq!(g.ids().len() as u64, max);
    assert_eq!(zcard(&admin, "{x-big}:timeout").await as u64, max);
    g.release().await.unwrap();
    assert_eq!(get_i64(&admin, "x-big").await, Some(150_000));
}

// ---------------------------------------------------------------------------
// 2. Zero permits and negative counts.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_permits_and_negative_counts() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), config()).await;
    let admin = locks.client().clone();

    // wait 0 on a missing semaphore: the typed error, at once.
    let started = Instant::now();
    let e = locks
        .expirable_semaphore("zmiss")
        .try_acquire(1, Duration::ZERO, None)
        .await
        .unwrap_err();
    assert!(matches!(e, LockError::NoSuchSemaphore { .. }), "{e:?}");
    let e = locks
        .semaphore("zmiss")
        .try_acquire_raw(1, Duration::ZERO)
        .await
        .unwrap_err();
    assert!(matches!(e, LockError::NoSuchSemaphore { .. }), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(5));

    // Zero leased permits: a typed error (there is nothing to lease), at
    // once and whatever the wait.
    let x = locks.expirable_semaphore("zx");
    x.try_set_permits(1).await.unwrap();
    let e = tokio::time::timeout(T, x.acquire(0))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(e, LockError::PermitCount { asked: 0, .. }),
        "{e:?}"
    );
    assert_eq!(x.available().await.unwrap(), 1);

    // Huge n on the plain semaphore: no panic, no change, a typed error
    // (no counter holds that many: past `MAX_COUNT` it is refused unsent).
    let s = locks.semaphore("zs");
    s.try_set_permits(3).await.unwrap();
    let e = s
        .try_acquire_raw(u64::MAX, Duration::ZERO)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            LockError::CountTooLarge {
                asked: u64::MAX,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(s.available().await.unwrap(), 3);

    // Below zero: a waiter for one permit waits until the count is back.
    assert_eq!(s.reduce_permits(5).await.unwrap(), -2);
    assert!(!s
        .try_acquire_raw(1, Duration::from_millis(300))
        .await
        .unwrap());
    let waiter = {
        let s = s.clone();
        tokio::spawn(async move { s.try_acquire_raw(1, Duration::from_secs(15)).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.release(3).await.unwrap();
    assert!(tokio::time::timeout(T, waiter).await.unwrap().unwrap());
    assert_eq!(get_i64(&admin, "zs").await, Some(0));
}

/// Redisson's `tryAcquire(0)` / `acquire(0)` succeed at once whatever the
/// count; ours waits for the count to be >= 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquiring_zero_permits_never_waits() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), config()).await;
    let s = locks.semaphore("zero-neg");
    s.try_set_permits(0).await.unwrap();
    s.reduce_permits(1).await.unwrap();
    let started = Instant::now();
    let ok = tokio::time::timeout(T, s.try_acquire_raw(0, Duration::from_secs(2)))
        .await
        .unwrap()
        .unwrap();
    assert!(
        ok,
        "try_acquire(0) on a count of -1 answered false after {:?}",
        started.elapsed()
    );
}

/// Redisson's drainPermits sets the count to 0 whatever it was (and
/// returns the old value); ours leaves a negative count as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_leaves_the_count_at_zero() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), config()).await;
    let admin = locks.client().clone();
    let s = locks.semaphore("drain-neg");
    s.try_set_permits(1).await.unwrap();
    assert_eq!(s.reduce_permits(3).await.unwrap(), -2);
    let drained = s.drain().await.unwrap();
    assert_eq!(drained, 0, "no permit was taken from a count below zero");
    let after = get_i64(&admin, "drain-neg").await;
    assert_eq!(
        after,
        Some(0),
        "drain() returned {drained} and left the counter at {after:?} (Redisson sets 0)"
    );
}

// ---------------------------------------------------------------------------
// 3. Leased permits taken back behind a guard's back.

async fn reclaimed_behind_the_back(locks: &Locks, name: &str) {
    let admin = locks.client().clone();
    let zset = if name.contains('{') {
        format!("{name}:timeout")
    } else {
        format!("{{{name}}}:timeout")
    };
    let sem = locks.expirable_semaphore(name);
    assert!(sem.try_set_permits(1).await.unwrap());

    // (a) A fixed lease runs out and another acquire reclaims it.
    let g1 = sem
        .try_acquire(1, Duration::ZERO, Some(Duration::from_millis(300)))
        .await
        .unwrap()
        .unwrap();
    let g2 = tokio::time::timeout(T, sem.try_acquire(1, Duration::from_secs(10), None))
        .await
        .unwrap()
        .unwrap()
        .expect("the expired permit was reclaimed");
    tokio::time::timeout(Duration::from_secs(10), g1.lost())
        .await
        .expect("g1 lost() fires");
    assert!(matches!(g1.release().await, Err(LockError::Expired { .. })));
    assert_eq!(
        get_i64(&admin, name).await,
        Some(0),
        "g1's release gave nothing back"
    );
    assert_eq!(zcard(&admin, &zset).await, 1);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!g2.is_lost(), "the reclaiming guard stands, renewed");
    g2.release().await.unwrap();
    assert_eq!(get_i64(&admin, name).await, Some(1));
    assert_eq!(zcard(&admin, &zset).await, 0);

    // (b) A watchdog guard whose permit is made expired on the server (a
    // paused process): reclaimed by another acquire; g1 learns it.
    let g1 = sem.acquire(1).await.unwrap();
    let raw = g1.ids()[0].as_bytes().to_vec();
    assert_eq!(
        int(
            &admin,
            Cmd::new("ZADD")
                .key(zset.as_str())
                .arg("XX")
                .arg("CH")
                .arg("1")
                .arg(raw)
        )
        .await,
        1
    );
    let g2 = tokio::time::timeout(T, sem.try_acquire(1, Duration::from_secs(10), None))
        .await
        .unwrap()
        .unwrap()
        .expect("reclaimed");
    tokio::time::timeout(Duration::from_secs(10), g1.lost())
        .await
        .expect("g1 lost() fires");
    assert!(g1.is_lost());
    assert!(g1.remaining_lease().is_none());
    assert!(matches!(
        g1.extend(Duration::from_secs(5)).await,
        Err(LockError::Expired { .. })
    ));
    assert!(matches!(g1.release().await, Err(LockError::Expired { .. })));
    assert_eq!(get_i64(&admin, name).await, Some(0));
    assert_eq!(zcard(&admin, &zset).await, 1);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!g2.is_lost());
    assert_eq!(zcard(&admin, &zset).await, 1);
    g2.release().await.unwrap();
    assert_eq!(get_i64(&admin, name).await, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reclaimed_permit_is_lost_and_counted_once_standalone() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), config()).await;
    reclaimed_behind_the_back(&locks, "x-reclaim").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reclaimed_permit_is_lost_and_counted_once_on_a_cluster() {
    let cluster = RedisCluster::start();
    let locks = cluster_locks(&cluster, config()).await;
    // Two names (one hash-tagged), so two keys and permits of their own:
    // both run at once.
    tokio::join!(
        reclaimed_behind_the_back(&locks, "x-reclaim-c"),
        reclaimed_behind_the_back(&locks, "{tag}x-reclaim-c"),
    );
}

// ---------------------------------------------------------------------------
// 4. A dropped guard: renewal stops, permits back; extend on a watchdog
// guard.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_guards_give_back_and_are_not_renewed() {
    let server = RedisServer::start();
    // A 3 s watchdog, renewed each second: the hold must outlive its lease
    // below, and a second's stall of a loaded CI machine (2 cores, many
    // servers) must not end it. With the file's 1.2 s, a stall past 800 ms
    // did (Valkey 9.1, in CI).
    let cfg = config().watchdog_timeout(Duration::from_secs(3));
    let locks = locks_with(&server.url(), cfg).await;
    let admin = locks.client().clone();
    let sem = locks.expirable_semaphore("x-drop");
    sem.try_set_permits(3).await.unwrap();
    let g = sem.acquire(2).await.unwrap();
    // extend on a watchdog guard is refused (the watchdog would renew with
    // the longer lease from then on); the watchdog goes on.
    assert!(matches!(
        g.extend(Duration::from_secs(30)).await,
        Err(LockError::WatchdogLease { .. })
    ));
    tokio::time::sleep(Duration::from_millis(4000)).await;
    assert!(!g.is_lost(), "renewed past its 3 s lease");
    let ids = g.ids().to_vec();
    drop(g);
    eventually(
        Duration::from_secs(10),
        "dropped guard's permits back",
        || async {
            get_i64(&admin, "x-drop").await == Some(3)
                && zcard(&admin, "{x-drop}:timeout").await == 0
        },
    )
    .await;
    assert!(matches!(
        sem.release_ids(&ids).await,
        Err(LockError::Expired { .. })
    ));
    assert_eq!(sem.available().await.unwrap(), 3);
    eventually(Duration::from_secs(10), "no hold watched", || async {
        locks.watched_holds() == 0
    })
    .await;
}

// ---------------------------------------------------------------------------
// 5. The counter key with a TTL while leased permits are out.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_counters_ttl_while_permits_are_out() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), config()).await;
    let admin = locks.client().clone();
    let sem = locks.expirable_semaphore("x-ttl");
    sem.try_set_permits(2).await.unwrap();
    admin
        .send(Cmd::new("PEXPIRE").key("x-ttl").arg("2500"))
        .await
        .unwrap();
    let g = sem.acquire(1).await.unwrap();
    let zttl = int(&admin, Cmd::new("PTTL").key("{x-ttl}:timeout")).await;
    assert!(zttl > 0 && zttl <= 2500, "zset pttl {zttl}");
    tokio::time::timeout(Duration::from_secs(10), g.lost())
        .await
        .expect("lost once the semaphore expired");
    assert!(matches!(g.release().await, Err(LockError::Expired { .. })));
    assert_eq!(
        exists(&admin, "x-ttl").await,
        0,
        "not resurrected by the release"
    );
    let e = sem
        .try_acquire(1, Duration::from_secs(2), None)
        .await
        .unwrap_err();
    assert!(matches!(e, LockError::NoSuchSemaphore { .. }), "{e:?}");
}

// ---------------------------------------------------------------------------
// 6. Cancelled acquires under contention leak nothing.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_waiting_acquires_leak_nothing() {
    let server = RedisServer::start();
    let a = locks_with(&server.url(), config()).await;
    let b = locks_with(&server.url(), config()).await;
    let admin = a.client().clone();
    a.semaphore("c-plain").try_set_permits(2).await.unwrap();
    a.semaphore("c-x").try_set_permits(2).await.unwrap();
    // A releaser that keeps moving permits, so waiters get messages.
    let churn = {
        let b = b.clone();
        tokio::spawn(async move {
            for _ in 0..60 {
                if b.semaphore("c-plain")
                    .try_acquire_raw(1, Duration::from_millis(50))
                    .await
                    .unwrap()
                {
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    b.semaphore("c-plain").release(1).await.unwrap();
                }
                if let Some(g) = b
                    .expirable_semaphore("c-x")
                    .try_acquire(1, Duration::from_millis(50), None)
                    .await
                    .unwrap()
                {
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    g.release().await.unwrap();
                }
            }
        })
    };
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        let a = a.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..25u64 {
                let cut = Duration::from_micros((i * 397 + t * 131) % 4000);
                if (i + t) % 2 == 0 {
                    let s = a.semaphore("c-plain");
                    if let Ok(Ok(())) = tokio::time::timeout(cut, s.acquire_raw(2)).await {
                        s.release(2).await.unwrap();
                    }
                } else {
                    let _ =
                        tokio::time::timeout(cut, a.expirable_semaphore("c-x").acquire(2)).await;
                }
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .unwrap()
            .unwrap();
    }
    tokio::time::timeout(Duration::from_secs(60), churn)
        .await
        .unwrap()
        .unwrap();
    eventually(
        Duration::from_secs(10),
        "plain permits all back",
        || async { get_i64(&admin, "c-plain").await == Some(2) },
    )
    .await;
    eventually(
        Duration::from_secs(10),
        "leased permits all back",
        || async {
            get_i64(&admin, "c-x").await == Some(2) && zcard(&admin, "{c-x}:timeout").await == 0
        },
    )
    .await;
}

// ---------------------------------------------------------------------------
// 7. The latch.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_below_zero_and_reset() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), config()).await;
    let admin = locks.client().clone();
    let l = locks.latch("l1");
    assert_eq!(l.count_down().await.unwrap(), 0);
    assert_eq!(exists(&admin, "l1").await, 0);
    assert_eq!(l.count().await.unwrap(), 0);
    assert!(l.try_set_count(2).await.unwrap());
    assert_eq!(l.count().await.unwrap(), 2);
    assert_eq!(l.count_down().await.unwrap(), 1);
    assert_eq!(l.count_down().await.unwrap(), 0);
    assert_eq!(l.count_down().await.unwrap(), 0);
    assert!(l.wait_zero_for(Duration::ZERO).await.unwrap());
    assert!(l.try_set_count(1).await.unwrap(), "re-set after open");
    // A waiter across a delete and re-set: not opened by the re-set, opened
    // by the next count-down.
    let waiter = {
        let l = l.clone();
        tokio::spawn(async move { l.wait_zero_for(Duration::from_secs(15)).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished());
    assert_eq!(l.count_down().await.unwrap(), 0);
    assert!(tokio::time::timeout(T, waiter).await.unwrap().unwrap());
}

/// A latch whose name holds a hash tag, on a cluster (sharded pub/sub): the
/// latch channel `redisson_countdownlatch__channel__{<name>}` gets braces
/// around a name that has braces already, so its slot is not the key's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_tagged_latch_works_on_a_cluster() {
    let cluster = RedisCluster::start();
    let locks = cluster_locks(&cluster, config()).await;
    let admin = locks.client().clone();
    let name = "{grp}latch";
    let l = locks.latch(name);
    let set = l.try_set_count(2).await;
    let after_set = get_i64(&admin, name).await;
    assert!(
        matches!(set, Ok(true)),
        "try_set_count: {set:?}; the key now holds {after_set:?}"
    );
    let waiter = {
        let l = l.clone();
        tokio::spawn(async move { l.wait_zero_for(Duration::from_secs(15)).await })
    };
    let down = l.count_down().await;
    let after = get_i64(&admin, name).await;
    assert!(
        matches!(down, Ok(1)),
        "count_down: {down:?}; the key now holds {after:?} (decremented despite the error?)"
    );
    assert!(matches!(l.count_down().await, Ok(0)));
    assert!(tokio::time::timeout(T, waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap());
}

/// Same, with the key set behind the library's back (so only count_down is
/// judged): an error must not have counted down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_count_down_does_not_count_on_a_cluster() {
    let cluster = RedisCluster::start();
    let locks = cluster_locks(&cluster, config()).await;
    let admin = locks.client().clone();
    let name = "{grp2}latch";
    admin
        .send(Cmd::new("SET").key(name).arg("3"))
        .await
        .unwrap();
    let l = locks.latch(name);
    let down = l.count_down().await;
    let after = get_i64(&admin, name).await;
    match down {
        Ok(n) => assert_eq!((n, after), (2, Some(2))),
        Err(e) => panic!("count_down failed ({e}) yet the latch now holds {after:?} (was 3)"),
    }
}

// ---------------------------------------------------------------------------
// 8. Fenced lock.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_release_of_one_guard_while_a_reentry_lives() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), config()).await;
    let admin = locks.client().clone();
    let lock = locks.fenced_lock("f1");
    let g1 = lock.acquire().await.unwrap();
    let g2 = lock.acquire().await.unwrap();
    let (t1, t2) = (g1.fencing_token().unwrap(), g2.fencing_token().unwrap());
    assert!(t2 > t1);
    g1.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert!(!g2.is_lost(), "the re-entry is still renewed");
    assert_eq!(exists(&admin, "f1").await, 1);
    let other = locks.fenced_lock("f1");
    assert!(other
        .try_acquire(Duration::ZERO, None)
        .await
        .unwrap()
        .is_none());
    g2.unlock().await.unwrap();
    assert_eq!(exists(&admin, "f1").await, 0);
    let g3 = other.acquire().await.unwrap();
    assert!(g3.fencing_token().unwrap() > t2);
    g3.unlock().await.unwrap();
}

/// The fenced counter "never expires, as Redisson's", but a keylatch
/// reentrant lock of the same name creates it with an idle expiry; the
/// fenced INCR keeps that expiry and restarts at 1 once it ran out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_tokens_never_go_back_after_a_plain_lock_of_the_same_name() {
    let server = RedisServer::start();
    let mut cfg = config();
    cfg.token_idle_ttl = Duration::from_millis(1000);
    let locks = locks_with(&server.url(), cfg).await;
    let admin = locks.client().clone();
    let plain = locks.lock("f2");
    plain.acquire().await.unwrap().unlock().await.unwrap();
    let fenced = locks.fenced_lock("f2");
    let g = fenced.acquire().await.unwrap();
    let t1 = g.fencing_token().unwrap();
    g.unlock().await.unwrap();
    let pttl = int(&admin, Cmd::new("PTTL").key("redisson_lock_token:{f2}")).await;
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let g = fenced.acquire().await.unwrap();
    let t2 = g.fencing_token().unwrap();
    g.unlock().await.unwrap();
    assert!(
        t2 > t1,
        "fenced token went back: {t1} then {t2} (counter pttl after the first fenced acquire: {pttl})"
    );
}

// ---------------------------------------------------------------------------
// 9. Fenced and spin locks under cancellation.

async fn cancelled_lock_acquires(locks: &Locks, name: &str, spin: bool) {
    let admin = locks.client().clone();
    let holder = if spin {
        locks.spin_lock(name)
    } else {
        locks.fenced_lock(name)
    };
    let mut last_token = 0;
    let mut tasks = Vec::new();
    for t in 0..6u64 {
        let locks = locks.clone();
        let name = name.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut tokens = Vec::new();
            for i in 0..20u64 {
                let lock = if spin {
                    locks.spin_lock(&name)
                } else {
                    locks.fenced_lock(&name)
                };
                let cut = Duration::from_micros((i * 523 + t * 211) % 5000);
                if let Ok(Ok(g)) = tokio::time::timeout(cut, lock.acquire()).await {
                    if let Some(tk) = g.fencing_token() {
                        tokens.push(tk);
                    }
                    if i % 3 == 0 {
                        drop(g);
                    } else {
                        let _ = g.unlock().await;
                    }
                }
            }
            tokens
        }));
    }
    for t in tasks {
        let tokens = tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .unwrap()
            .unwrap();
        for w in tokens.windows(2) {
            assert!(
                w[1] > w[0],
                "tokens not increasing within a task: {tokens:?}"
            );
        }
        if let Some(m) = tokens.iter().max() {
            last_token = last_token.max(*m);
        }
    }
    // Nothing held past one lease (1.2 s) after all this.
    eventually(
        Duration::from_secs(6),
        "no hold left on the server",
        || async { exists(&admin, name).await == 0 },
    )
    .await;
    let g = tokio::time::timeout(T, holder.try_acquire(Duration::from_secs(5), None))
        .await
        .unwrap()
        .unwrap()
        .expect("free");
    if !spin {
        assert!(g.fencing_token().unwrap() > last_token);
    }
    g.unlock().await.unwrap();
    eventually(Duration::from_secs(6), "no watched hold", || async {
        locks.watched_holds() == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_and_spin_cancelled_acquires_leave_nothing_held() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), config()).await;
    cancelled_lock_acquires(&locks, "cf-fenced", false).await;
    cancelled_lock_acquires(&locks, "cf-spin", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_and_spin_cancelled_acquires_leave_nothing_held_on_a_cluster() {
    let cluster = RedisCluster::start();
    let locks = cluster_locks(&cluster, config()).await;
    cancelled_lock_acquires(&locks, "cf-fenced-c", false).await;
    cancelled_lock_acquires(&locks, "cf-spin-c", true).await;
}

// ---------------------------------------------------------------------------
// 10. Cluster: leased permits of a hash-tagged and a plain name renewed per
// node, and a waiter woken across nodes.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_permits_renewal_and_wake() {
    let cluster = RedisCluster::start();
    let locks = cluster_locks(&cluster, config().recheck(Duration::from_secs(60))).await;
    let other = cluster_locks(&cluster, config().recheck(Duration::from_secs(60))).await;
    for name in ["{t}xs-1", "xs-2", "{t}xs-3"] {
        let sem = locks.expirable_semaphore(name);
        assert!(sem.try_set_permits(1).await.unwrap());
    }
    let mut guards = Vec::new();
    for name in ["{t}xs-1", "xs-2", "{t}xs-3"] {
        guards.push(locks.expirable_semaphore(name).acquire(1).await.unwrap());
    }
    let waiter = tokio::spawn({
        let other = other.clone();
        async move {
            other
                .expirable_semaphore("xs-2")
                .try_acquire(1, Duration::from_secs(15), None)
                .await
                .unwrap()
                .map(drop)
                .is_some()
        }
    });
    tokio::time::sleep(Duration::from_millis(4000)).await;
    for g in &guards {
        assert!(!g.is_lost(), "renewed past three leases");
    }
    assert!(!waiter.is_finished());
    let mut guards = guards.into_iter();
    let g1 = guards.next().unwrap();
    let g2 = guards.next().unwrap();
    g2.release().await.unwrap();
    assert!(tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken by the message (re-check is 60 s)")
        .unwrap());
    g1.release().await.unwrap();
    for g in guards {
        g.release().await.unwrap();
    }
}
