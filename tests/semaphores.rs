//! The semaphores against real servers: every operation of `Semaphore`
//! (`RSemaphore` layout) and `ExpirableSemaphore` (`RPermitExpirableSemaphore`
//! layout), standalone and on a 6-node cluster; waiters woken by the
//! release message and, with the message lost, by the bounded re-check; a
//! wait on a missing semaphore failing at once; at most N holders at once
//! (from a history); a crashed holder's leased permits back within a lease;
//! renewal, expiry, `extend` and `lost()` of leased permits; and Redisson's
//! own semaphore scripts sharing the counters with ours.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Soon;
use keylatch_cluster::{Client, ClientConfig, Commands};
use keylatch_harness::{RedisCluster, RedisServer};
use keylatch_lock::{LockError, Locks, LocksConfig, LossReason, PermitId};
use keylatch_resp::{Cmd, Frame};

const SOON: Soon = Soon::new(Duration::from_secs(10), Duration::from_millis(20));

fn config() -> LocksConfig {
    LocksConfig::default().watchdog_timeout(Duration::from_millis(1500))
}

async fn locks_with(url: &str, cfg: LocksConfig) -> Locks {
    Locks::new(Client::connect(url).await.unwrap(), cfg)
}

async fn cluster_locks(cluster: &RedisCluster) -> Locks {
    let urls = cluster.seed_urls();
    let seeds: Vec<&str> = urls.iter().map(String::as_str).take(2).collect();
    let client = Client::connect_with(ClientConfig::from_urls(&seeds).unwrap())
        .await
        .unwrap();
    assert!(client.is_cluster());
    Locks::new(client, config())
}

async fn pttl(client: &Client, key: &str) -> i64 {
    match client.send(Cmd::new("PTTL").key(key)).await.unwrap() {
        Frame::Integer(n) => n,
        other => panic!("PTTL answered {other:?}"),
    }
}

async fn zcard(client: &Client, key: &str) -> i64 {
    match client.send(Cmd::new("ZCARD").key(key)).await.unwrap() {
        Frame::Integer(n) => n,
        other => panic!("ZCARD answered {other:?}"),
    }
}

/// Every operation of the plain semaphore, on any deployment.
async fn plain_operations(locks: &Locks, name: &str) {
    let sem = locks.semaphore(name);
    let admin = locks.client();
    // A wait on a missing semaphore says so at once.
    let started = Instant::now();
    let err = sem
        .try_acquire_raw(1, Duration::from_secs(20))
        .await
        .unwrap_err();
    assert!(
        matches!(err, LockError::NoSuchSemaphore { ref name } if name == sem.name()),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "at once");
    assert_eq!(sem.available().await.unwrap(), 0);

    assert!(sem.try_set_permits(3).await.unwrap());
    assert!(!sem.try_set_permits(9).await.unwrap(), "set only once");
    assert_eq!(sem.available().await.unwrap(), 3);
    assert!(sem.try_acquire_raw(2, Duration::ZERO).await.unwrap());
    assert!(
        !sem.try_acquire_raw(2, Duration::ZERO).await.unwrap(),
        "one left"
    );
    sem.acquire_raw(1).await.unwrap();
    assert_eq!(sem.available().await.unwrap(), 0);
    assert_eq!(sem.release(3).await.unwrap(), 3);
    // add_permits keeps the key's expiry (Redisson's SET drops it).
    admin
        .send(Cmd::new("PEXPIRE").key(name).arg("60000"))
        .await
        .unwrap();
    assert_eq!(sem.add_permits(2).await.unwrap(), 5);
    assert_eq!(sem.reduce_permits(1).await.unwrap(), 4);
    assert!(pttl(admin, name).await > 0, "the expiry stays");
    assert_eq!(sem.drain().await.unwrap(), 4);
    assert_eq!(sem.available().await.unwrap(), 0);
    assert!(pttl(admin, name).await > 0, "drain keeps the expiry too");
    assert_eq!(sem.drain().await.unwrap(), 0);
    sem.release(1).await.unwrap();
}

/// Every operation of the permit-expirable semaphore, on any deployment.
async fn expirable_operations(locks: &Locks, name: &str) {
    let sem = locks.expirable_semaphore(name);
    let admin = locks.client();
    let timeouts = format!("{{{name}}}:timeout");
    let err = sem
        .try_acquire(1, Duration::from_secs(20), None)
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::NoSuchSemaphore { .. }), "{err:?}");

    assert!(sem.try_set_permits(3).await.unwrap());
    let g = sem.acquire(2).await.unwrap();
    assert_eq!(g.ids().len(), 2);
    assert_eq!(zcard(admin, &timeouts).await, 2, "two leased permits");
    assert_eq!(sem.available().await.unwrap(), 1);
    assert!(sem
        .try_acquire(2, Duration::ZERO, None)
        .await
        .unwrap()
        .is_none());
    // Renewed past several watchdog leases (1.5 s).
    tokio::time::sleep(Duration::from_millis(4000)).await;
    assert!(!g.is_lost(), "the watchdog keeps leased permits");
    assert_eq!(zcard(admin, &timeouts).await, 2);
    let ids: Vec<PermitId> = g.ids().to_vec();
    g.release().await.unwrap();
    assert_eq!(sem.available().await.unwrap(), 3);
    assert_eq!(zcard(admin, &timeouts).await, 0);
    // Released twice: a typed error, nothing counted twice.
    assert!(matches!(
        sem.release_ids(&ids).await,
        Err(LockError::Expired { .. })
    ));
    assert_eq!(sem.available().await.unwrap(), 3);

    // A fixed lease runs out: lost(), the permit back in the pool at the
    // next look, and releasing it is `Expired`.
    let short = sem
        .try_acquire(1, Duration::ZERO, Some(Duration::from_millis(400)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), short.lost())
            .await
            .unwrap(),
        LossReason::Expired
    );
    SOON.eventually("the expired permit is back", || async {
        sem.available().await.unwrap() == 3
    })
    .await;
    assert!(matches!(
        short.release().await,
        Err(LockError::Expired { .. })
    ));
    assert_eq!(sem.available().await.unwrap(), 3, "not counted twice");

    // extend: a fixed lease made longer on the server and locally.
    let g = sem
        .try_acquire(1, Duration::ZERO, Some(Duration::from_millis(600)))
        .await
        .unwrap()
        .unwrap();
    g.extend(Duration::from_secs(5)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(!g.is_lost(), "extended past its first lease");
    assert_eq!(sem.available().await.unwrap(), 2);
    // Gone behind its back: lost at the next renewal or check, and extend
    // says so.
    admin.del([timeouts.as_str()]).await.unwrap();
    assert!(matches!(
        g.extend(Duration::from_secs(5)).await,
        Err(LockError::Expired { .. })
    ));
    assert!(g.is_lost());
    drop(g);
    assert_eq!(sem.drain().await.unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_semaphore_operation_standalone() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), config()).await;
    plain_operations(&locks, "sem-ops").await;
    expirable_operations(&locks, "xsem-ops").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_semaphore_operation_on_a_cluster() {
    let cluster = RedisCluster::start();
    let locks = cluster_locks(&cluster).await;
    // Leased permits in many slots, renewed per node past three leases:
    // taken first, checked 5 s later, while the operations run on other
    // names.
    let mut guards = Vec::new();
    for i in 0..12 {
        let sem = locks.expirable_semaphore(&format!("xsem-many-{i}"));
        sem.try_set_permits(1).await.unwrap();
        guards.push(sem.acquire(1).await.unwrap());
    }
    let past_three_leases = Instant::now() + Duration::from_secs(5);
    plain_operations(&locks, "sem-ops-c").await;
    expirable_operations(&locks, "xsem-ops-c").await;
    tokio::time::sleep_until(past_three_leases.into()).await;
    for g in guards {
        assert!(!g.is_lost());
        g.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_wake_on_the_message_and_without_it() {
    let server = RedisServer::start();
    // A re-check far beyond the test's bounds: only the message can wake
    // these waiters in time.
    let deaf = locks_with(&server.url(), config().recheck(Duration::from_secs(60))).await;
    let admin = deaf.client().clone();
    for expirable in [false, true] {
        let name = format!("sem-wake-{expirable}");
        let sem = deaf.semaphore(&name);
        let xsem = deaf.expirable_semaphore(&name);
        sem.try_set_permits(0).await.unwrap();
        let waiter = {
            let (sem, xsem) = (sem.clone(), xsem.clone());
            tokio::spawn(async move {
                if expirable {
                    let g = xsem
                        .try_acquire(1, Duration::from_secs(30), None)
                        .await
                        .unwrap();
                    g.map(drop).is_some()
                } else {
                    sem.try_acquire_raw(1, Duration::from_secs(30))
                        .await
                        .unwrap()
                }
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        sem.release(1).await.unwrap();
        assert!(
            tokio::time::timeout(Duration::from_secs(10), waiter)
                .await
                .expect("woken by the message")
                .unwrap(),
            "acquired"
        );
    }

    // The message lost (permits added behind the semaphore's back, no
    // publish): a waiter still sees them by its bounded re-check.
    let checking = locks_with(&server.url(), config().recheck(Duration::from_millis(300))).await;
    for expirable in [false, true] {
        let name = format!("sem-lost-{expirable}");
        let sem = checking.semaphore(&name);
        let xsem = checking.expirable_semaphore(&name);
        sem.try_set_permits(0).await.unwrap();
        let waiter = tokio::spawn(async move {
            if expirable {
                xsem.try_acquire(1, Duration::from_secs(30), None)
                    .await
                    .unwrap()
                    .map(drop)
                    .is_some()
            } else {
                sem.try_acquire_raw(1, Duration::from_secs(30))
                    .await
                    .unwrap()
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        admin
            .send(Cmd::new("INCRBY").key(name.as_str()).arg("1"))
            .await
            .unwrap();
        assert!(
            tokio::time::timeout(Duration::from_secs(10), waiter)
                .await
                .expect("woken by the re-check")
                .unwrap(),
            "acquired"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_n_holders_at_once_and_nothing_leaks() {
    let server = RedisServer::start();
    let clients = [
        locks_with(&server.url(), config()).await,
        locks_with(&server.url(), config()).await,
    ];
    for expirable in [false, true] {
        let name = format!("sem-history-{expirable}");
        clients[0]
            .semaphore(&name)
            .try_set_permits(3)
            .await
            .unwrap();
        let inside = Arc::new(AtomicI64::new(0));
        let most = Arc::new(AtomicI64::new(0));
        let mut tasks = Vec::new();
        for t in 0..16 {
            let locks = clients[t % 2].clone();
            let (name, inside, most) = (name.clone(), Arc::clone(&inside), Arc::clone(&most));
            tasks.push(tokio::spawn(async move {
                for _ in 0..10 {
                    let permit = if expirable {
                        Some(locks.expirable_semaphore(&name).acquire(1).await.unwrap())
                    } else {
                        locks.semaphore(&name).acquire_raw(1).await.unwrap();
                        None
                    };
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    match permit {
                        Some(p) => p.release().await.unwrap(),
                        None => {
                            locks.semaphore(&name).release(1).await.unwrap();
                        }
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
        let most = most.load(Ordering::SeqCst);
        assert!((1..=3).contains(&most), "{most} holders at once");
        assert_eq!(
            clients[0].semaphore(&name).available().await.unwrap(),
            3,
            "every permit back"
        );
    }

    // Acquires dropped mid-flight leak nothing: whatever an abandoned
    // attempt took is given back.
    let sem = clients[0].semaphore("sem-cancel");
    let xsem = clients[0].expirable_semaphore("sem-cancel");
    sem.try_set_permits(2).await.unwrap();
    for i in 0..40 {
        let wait = Duration::from_micros(50 * i);
        if i % 2 == 0 {
            // Finished in time: ours to give back.
            if let Ok(Ok(true)) =
                tokio::time::timeout(wait, sem.try_acquire_raw(1, Duration::from_secs(5))).await
            {
                sem.release(1).await.unwrap();
            }
        } else {
            // A guard that made it is dropped: released in the background.
            let _ =
                tokio::time::timeout(wait, xsem.try_acquire(1, Duration::from_secs(5), None)).await;
        }
    }
    SOON.eventually("every abandoned attempt's permit came back", || async {
        sem.available().await.unwrap() == 2
    })
    .await;
    assert_eq!(sem.available().await.unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_holders_leased_permits_come_back_within_a_lease() {
    let server = RedisServer::start();
    let url = server.url();
    let locks = locks_with(&url, config()).await;
    let sem = locks.expirable_semaphore("xsem-crash");
    sem.try_set_permits(2).await.unwrap();
    let crash_url = url.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let locks = locks_with(&crash_url, config()).await;
            let g = locks
                .expirable_semaphore("xsem-crash")
                .acquire(2)
                .await
                .unwrap();
            std::mem::forget(g);
            std::mem::forget(locks);
        });
        rt.shutdown_background();
    })
    .join()
    .unwrap();
    let crashed = Instant::now();
    assert_eq!(sem.available().await.unwrap(), 0);
    let g = sem
        .try_acquire(2, Duration::from_secs(20), None)
        .await
        .unwrap()
        .expect("the crashed holder's permits came back");
    eprintln!(
        "crashed holder's 2 permits back after {:?} (watchdog lease 1.5 s)",
        crashed.elapsed()
    );
    g.release().await.unwrap();
}

// Redisson's RSemaphore and RPermitExpirableSemaphore scripts, as a Java
// client sends them.
const REDISSON_SEM_TRY: &str = "local value = redis.call('get', KEYS[1]); if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then local val = redis.call('decrby', KEYS[1], ARGV[1]); return 1; end; return 0;";
const REDISSON_SEM_RELEASE: &str =
    "local value = redis.call('incrby', KEYS[1], ARGV[1]); redis.call(ARGV[2], KEYS[2], value); ";
const REDISSON_PERMIT_TRY: &str = "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]); if #expiredIds > 0 then redis.call('zrem', KEYS[2], unpack(expiredIds)); local value = redis.call('incrby', KEYS[1], #expiredIds); if tonumber(value) > 0 then redis.call(ARGV[5], KEYS[3], value); end;end; local value = redis.call('get', KEYS[1]); if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then redis.call('decrby', KEYS[1], ARGV[1]); for i = 6, #ARGV, 1 do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); end; local ttl = redis.call('pttl', KEYS[1]); if ttl > 0 then redis.call('pexpire', KEYS[2], ttl); end; return 'OK'; end; local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); if v[1] ~= nil and v[2] ~= ARGV[4] then return ':' .. tostring(v[2]); end return nil;";
const REDISSON_PERMIT_RELEASE: &str = "local expire = redis.call('zscore', KEYS[3], ARGV[1]);local removed = redis.call('zrem', KEYS[3], ARGV[1]);if tonumber(removed) ~= 1 then return 0;end;local value = redis.call('incrby', KEYS[1], ARGV[2]); redis.call(ARGV[4], KEYS[2], value); if tonumber(expire) <= tonumber(ARGV[3]) then return 0;end;return 1;";

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_semaphore_scripts_share_the_counters_with_ours() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), config().recheck(Duration::from_secs(60))).await;
    let admin = locks.client().clone();

    // RSemaphore: a Java release wakes our waiter; a Java acquire counts.
    let sem = locks.semaphore("java-sem");
    sem.try_set_permits(1).await.unwrap();
    let taken = admin
        .eval(REDISSON_SEM_TRY, &["java-sem"], &["1"])
        .await
        .unwrap();
    assert_eq!(taken, Frame::Integer(1));
    assert_eq!(sem.available().await.unwrap(), 0);
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move {
            sem.try_acquire_raw(1, Duration::from_secs(30))
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    admin
        .eval(
            REDISSON_SEM_RELEASE,
            &["java-sem", "redisson_sc:{java-sem}"],
            &["1", "publish"],
        )
        .await
        .unwrap();
    assert!(tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the Java release's message woke us")
        .unwrap());

    // RPermitExpirableSemaphore: a Java permit (client-clock expiry) is
    // reclaimed by our acquire once expired; a Java release of our permit
    // id (raw bytes) returns it, and our guard learns it is gone.
    let xsem = locks.expirable_semaphore("java-xsem");
    xsem.try_set_permits(1).await.unwrap();
    let java_id: PermitId = "00112233445566778899aabbccddeeff".parse().unwrap();
    let expiry = (now_ms() + 500).to_string();
    let now = now_ms().to_string();
    let reply = admin
        .eval(
            REDISSON_PERMIT_TRY,
            &[
                "java-xsem",
                "{java-xsem}:timeout",
                "redisson_sc:{java-xsem}",
            ],
            &[
                b"1".as_slice(),
                expiry.as_bytes(),
                now.as_bytes(),
                b"922337203685477",
                b"publish",
                java_id.as_bytes(),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        reply.as_bytes().map(|b| b.to_vec()),
        Some(b"OK".to_vec()),
        "{reply:?}"
    );
    assert!(xsem
        .try_acquire(1, Duration::ZERO, None)
        .await
        .unwrap()
        .is_none());
    let ours = xsem
        .try_acquire(1, Duration::from_secs(10), None)
        .await
        .unwrap()
        .expect("the Java permit expired and came back");
    let raw = ours.ids()[0];
    let now = now_ms().to_string();
    let released = admin
        .eval(
            REDISSON_PERMIT_RELEASE,
            &[
                "java-xsem",
                "redisson_sc:{java-xsem}",
                "{java-xsem}:timeout",
            ],
            &[raw.as_bytes().as_slice(), b"1", now.as_bytes(), b"publish"],
        )
        .await
        .unwrap();
    assert_eq!(
        released,
        Frame::Integer(1),
        "Java released our permit by id"
    );
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), ours.lost())
            .await
            .unwrap(),
        LossReason::Gone
    );
    assert!(matches!(
        ours.release().await,
        Err(LockError::Expired { .. })
    ));
    assert_eq!(xsem.available().await.unwrap(), 1, "counted once");
}

/// A holder of 3,000 leased permits dies: after its lease every permit is
/// back at once, not a thousand per call (an outside review found the
/// scripts reclaimed at most 1,000 expired permits per call, so
/// `available()` said 1,000 and an acquire of 2,500 failed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_expired_permit_of_a_dead_holder_is_back_in_one_call() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), config()).await;
    let sem = locks.expirable_semaphore("crash-3000");
    assert!(sem.try_set_permits(3000).await.unwrap());
    let g = sem
        .try_acquire(
            3000,
            Duration::from_secs(5),
            Some(Duration::from_millis(300)),
        )
        .await
        .unwrap()
        .expect("all 3000");
    // Dies: nothing gives them back but their lease.
    std::mem::forget(g);
    assert_eq!(sem.available().await.unwrap(), 0);
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(zcard(locks.client(), "{crash-3000}:timeout").await, 3000);
    assert_eq!(sem.available().await.unwrap(), 3000, "all back in one call");
    assert_eq!(zcard(locks.client(), "{crash-3000}:timeout").await, 0);
    // The same through an acquire, which reclaims first.
    let sem2 = locks.expirable_semaphore("crash-2500");
    assert!(sem2.try_set_permits(2500).await.unwrap());
    let g = sem2
        .try_acquire(
            2500,
            Duration::from_secs(5),
            Some(Duration::from_millis(300)),
        )
        .await
        .unwrap()
        .expect("all 2500");
    std::mem::forget(g);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let again = sem2
        .try_acquire(2500, Duration::ZERO, None)
        .await
        .unwrap()
        .expect("every expired permit back, and taken at once");
    assert_eq!(again.ids().len(), 2500);
    again.release().await.unwrap();
}

/// Counts are exact up to `MAX_COUNT` (2^53 − 1) and refused past it,
/// before anything is sent (an outside review found 2^53 + 1 permits
/// granted from 2^53, `try_set_permits(u64::MAX)` accepted and then every
/// acquire failing with a raw server error, and `acquire(u64::MAX)`
/// waiting for ever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_are_exact_up_to_max_count_and_refused_past_it() {
    use keylatch_lock::MAX_COUNT;
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), config()).await;
    let get = |key: &str| server.cli(&["GET", key]).unwrap().trim().to_owned();
    let too_large = |r: &LockError| matches!(r, LockError::CountTooLarge { asked, max } if *asked > MAX_COUNT && *max == MAX_COUNT);

    let s = locks.semaphore("exact");
    assert!(s.try_set_permits(MAX_COUNT).await.unwrap());
    assert_eq!(s.available().await.unwrap(), MAX_COUNT as i64);
    // One more than there is: not granted (as doubles, 2^53 and 2^53 − 1
    // differ; 2^53 + 1 and 2^53 would not).
    let short = locks.semaphore("exact-short");
    assert!(short.try_set_permits(MAX_COUNT - 1).await.unwrap());
    assert!(!short
        .try_acquire_raw(MAX_COUNT, Duration::ZERO)
        .await
        .unwrap());
    assert_eq!(get("exact-short"), (MAX_COUNT - 1).to_string());
    // Every permit taken, given back, drained: the counts are exact.
    assert!(s.try_acquire_raw(MAX_COUNT, Duration::ZERO).await.unwrap());
    assert_eq!(get("exact"), "0");
    assert_eq!(s.release(MAX_COUNT).await.unwrap(), MAX_COUNT as i64);
    assert_eq!(get("exact"), MAX_COUNT.to_string());
    assert_eq!(s.drain().await.unwrap(), MAX_COUNT);
    assert_eq!(get("exact"), "0");

    // Past it: a typed error at once, and nothing changed.
    let past = MAX_COUNT + 1;
    let s = locks.semaphore("past");
    assert!(s.try_set_permits(3).await.unwrap());
    for r in [
        s.try_set_permits(past).await.map(drop),
        s.add_permits(u64::MAX).await.map(drop),
        s.reduce_permits(past).await.map(drop),
        s.release(past).await.map(drop),
        s.try_acquire_raw(past, Duration::from_secs(30))
            .await
            .map(drop),
    ] {
        assert!(r.as_ref().is_err_and(too_large), "{r:?}");
    }
    let waited = tokio::time::timeout(Duration::from_secs(3), s.acquire(u64::MAX)).await;
    assert!(
        matches!(&waited, Ok(Err(e)) if too_large(e)),
        "acquire(u64::MAX) answers at once: {:?}",
        waited.map(|r| r.map(|g| g.forget()))
    );
    assert_eq!(get("past"), "3");
    let e = locks
        .expirable_semaphore("past-expirable")
        .try_set_permits(u64::MAX)
        .await;
    assert!(e.as_ref().is_err_and(too_large), "{e:?}");
    let latch = locks.latch("past-latch");
    let e = latch.try_set_count(u64::MAX).await;
    assert!(e.as_ref().is_err_and(too_large), "{e:?}");
    assert_eq!(latch.count().await.unwrap(), 0, "nothing set");
    assert!(latch.try_set_count(MAX_COUNT).await.unwrap());
    assert_eq!(latch.count().await.unwrap(), MAX_COUNT);
    assert_eq!(latch.count_down().await.unwrap(), MAX_COUNT - 1);

    // A counter someone else set past it (Java's `trySetPermits`, a
    // script) still reads exactly: the drain script answers its text.
    server
        .cli(&["SET", "outside", &i64::MAX.to_string()])
        .unwrap();
    let s = locks.semaphore("outside");
    assert_eq!(s.available().await.unwrap(), i64::MAX);
    assert_eq!(s.drain().await.unwrap(), i64::MAX as u64);
    assert_eq!(get("outside"), "0");
}

/// Zero permits are granted at once with no call, as Redisson's
/// `tryAcquire(0)` (documented on `try_acquire_raw`): not even a missing
/// semaphore or a foreign key is looked at, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_permits_are_granted_at_once_without_a_call() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), config()).await;
    let missing = locks.semaphore("never-set");
    assert!(missing.try_acquire_raw(0, Duration::ZERO).await.unwrap());
    assert_eq!(server.cli(&["EXISTS", "never-set"]).unwrap().trim(), "0");
    server.cli(&["RPUSH", "a-list", "x"]).unwrap();
    let g = locks.semaphore("a-list").acquire(0).await.unwrap();
    assert_eq!(g.permits(), 0);
    assert_eq!(server.cli(&["TYPE", "a-list"]).unwrap().trim(), "list");
    // One permit does look: the typed errors of the docs.
    let r = missing.try_acquire_raw(1, Duration::ZERO).await;
    assert!(matches!(r, Err(LockError::NoSuchSemaphore { .. })), "{r:?}");
    let r = locks
        .semaphore("a-list")
        .try_acquire_raw(1, Duration::ZERO)
        .await;
    assert!(matches!(r, Err(LockError::WrongType { .. })), "{r:?}");
}

/// `CountDownLatch::try_set_count` sets only a latch whose key does not
/// exist (Redisson's `trySetCount`): one counted down to zero has no key
/// and is set again; one set to 0 keeps `"0"` and is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latch_is_set_again_once_its_key_is_gone() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), config()).await;
    let l = locks.latch("again");
    assert!(l.try_set_count(1).await.unwrap());
    assert!(!l.try_set_count(2).await.unwrap(), "closed: not set");
    assert_eq!(l.count_down().await.unwrap(), 0);
    assert_eq!(server.cli(&["EXISTS", "again"]).unwrap().trim(), "0");
    assert!(l.try_set_count(2).await.unwrap(), "open, no key: set again");
    let z = locks.latch("zero");
    assert!(z.try_set_count(0).await.unwrap());
    assert!(z.wait_zero_for(Duration::ZERO).await.unwrap(), "open");
    assert!(!z.try_set_count(2).await.unwrap(), "its key holds \"0\"");
}
