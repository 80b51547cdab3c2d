//! An outside review of the read-write lock (`Locks::rw_lock`): adversarial
//! tests against real servers. Tests 1–5 and 14 failed on the first design
//! (read holds named by owner alone, read hold keys with their own
//! expiries, the write's lease as the hash's, one marker id for all waiting
//! writers); each comment says what went wrong then. The fixes: read
//! sessions named by a generation their keys hold, one expiry per session,
//! the write's own expiry key, waiting writers as a zset. Tests 6–13 check
//! what the first suite did not.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::Soon;
use keylatch_cluster::{Client, ClientConfig, Commands};
use keylatch_harness::{RedisCluster, RedisServer};
use keylatch_lock::{LockError, Locks, LocksConfig, LossReason};
use keylatch_resp::{Cmd, Frame};

const SOON: Soon = Soon::new(Duration::from_secs(10), Duration::from_millis(20));
const T: Duration = Duration::from_secs(15);

fn config() -> LocksConfig {
    LocksConfig::default()
        .watchdog_timeout(Duration::from_secs(3))
        .fair_waiter_timeout(Duration::from_secs(2))
}

async fn locks_with(url: &str, cfg: LocksConfig) -> Locks {
    Locks::new(Client::connect(url).await.unwrap(), cfg)
}

async fn locks_at(url: &str) -> Locks {
    locks_with(url, config()).await
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

async fn hget(client: &Client, key: &str, field: &str) -> Option<String> {
    match client
        .send(Cmd::new("HGET").key(key).arg(field))
        .await
        .unwrap()
    {
        Frame::Bulk(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Frame::Null => None,
        other => panic!("HGET answered {other:?}"),
    }
}

async fn exists(client: &Client, key: &str) -> bool {
    client
        .send(Cmd::new("EXISTS").key(key))
        .await
        .unwrap()
        .eq(&Frame::Integer(1))
}

async fn dump(client: &Client, key: &str) -> String {
    let all = client.send(Cmd::new("HGETALL").key(key)).await.unwrap();
    let pttl = client.send(Cmd::new("PTTL").key(key)).await.unwrap();
    format!("{key}: {all:?} pttl {pttl:?}")
}

fn read_hold_key(name: &str, owner: &str, i: u32) -> String {
    format!("{{{name}}}:{owner}:rwlock_timeout:{i}")
}

fn marker_key(name: &str) -> String {
    format!("{{{name}}}:rwlock_writers_waiting")
}

// ---------------------------------------------------------------------------
// 1. A lost (expired) read guard's unlock ends a NEWER read hold of the same
//    owner: read releases go "by owner" (token 0), there is nothing that
//    names the hold being released.
// ---------------------------------------------------------------------------
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_read_guards_unlock_does_not_end_the_owners_newer_read_hold() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let admin = locks.client().clone();
    let name = "r18-late-read-release";
    let rw = locks.rw_lock(name);

    let old = rw
        .read()
        .try_acquire_now(Some(Duration::from_millis(400)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        tokio::time::timeout(T, old.lost()).await.unwrap(),
        LossReason::Expired
    );
    SOON.eventually("the expired read hold's hash is gone", || {
        let admin = admin.clone();
        async move { !exists(&admin, name).await }
    })
    .await;

    // The same owner reads again: a new hold (watchdog).
    let new = rw.read().try_acquire_now(None).await.unwrap().unwrap();
    // The old, expired guard is unlocked late.
    let late = tokio::time::timeout(T, old.unlock()).await.unwrap();
    eprintln!("late unlock of the expired read guard: {late:?}");
    eprintln!("after it: {}", dump(&admin, name).await);

    // The new read hold must stand: no writer may get in.
    let writer = locks.rw_lock(name);
    let w = tokio::time::timeout(T, writer.write().try_acquire_now(None))
        .await
        .unwrap()
        .unwrap();
    let writer_got_in = w.is_some();
    if let Some(w) = w {
        w.unlock().await.unwrap();
    }
    assert!(
        !writer_got_in,
        "a writer got the lock while the owner's new read guard is live (lost: {}); \
         the late unlock of the expired guard answered {late:?}",
        new.is_lost()
    );
    assert!(
        matches!(late, Err(LockError::Expired { .. })),
        "unlocking an expired hold must be Expired: {late:?}"
    );
    new.unlock().await.unwrap();
}

// ---------------------------------------------------------------------------
// 2. A read hold that was force-unlocked (and the lock written by someone
//    else meanwhile) must be reported lost, even when the same owner takes a
//    new read hold before the next renewal: `Handle::hold_for` joins the new
//    read to the old Hold (token 0 == 0), so the renewal finds "a" count and
//    the old guard never learns.
// ---------------------------------------------------------------------------
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_unlocked_read_hold_is_reported_lost_even_if_its_owner_reads_again() {
    let server = RedisServer::start();
    // A 9 s watchdog: renewals every 3 s, so the steps below fit between two.
    let p = locks_with(
        &server.url(),
        config().watchdog_timeout(Duration::from_secs(9)),
    )
    .await;
    let q = locks_at(&server.url()).await;
    let name = "r18-force-rejoin";
    let rw = p.rw_lock(name);
    let r1 = rw.read().acquire().await.unwrap();

    // Another process force-unlocks, writes, and leaves.
    assert!(q.rw_lock(name).force_unlock().await.unwrap());
    let w = q
        .rw_lock(name)
        .write()
        .try_acquire_now(None)
        .await
        .unwrap()
        .expect("free after the force unlock");
    w.unlock().await.unwrap();

    // The first process reads again at once.
    let r2 = rw.read().try_acquire_now(None).await.unwrap().unwrap();
    eprintln!(
        "r1 lost: {}, r2 hold_count {} (r1's was {})",
        r1.is_lost(),
        r2.hold_count(),
        r1.hold_count()
    );
    // r1's hold was gone while a writer held the lock: lost() must fire.
    let fired = tokio::time::timeout(Duration::from_secs(12), r1.lost()).await;
    assert!(
        fired.is_ok(),
        "r1 never reported lost although a writer held the lock after its force unlock \
         (r2 joined r1's hold: hold_count {})",
        r2.hold_count()
    );
    drop(r1);
    r2.unlock().await.ok();
}

// ---------------------------------------------------------------------------
// 3. One owner, two read holds of different leases (400 ms, 8 s). Once the
//    short one expired, releasing one hold deletes hold key #2 (the 8 s one,
//    `rw_read_release.lua` deletes `KEYS[2]..':'..(n+1)`) and leaves the
//    count on the dead key #1: the lock is freed while the owner still has
//    a live guard whose (shared) hold runs 8 s.
// ---------------------------------------------------------------------------
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_one_of_two_read_holds_keeps_the_longer_lease() {
    // (After the fix: one owner's read holds are one session whose keys
    // expire together at the later lease, so key #1 lives 8 s too.)
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let admin = locks.client().clone();
    let name = "r18-index";
    let rw = locks.rw_lock(name);
    let short = rw
        .read()
        .try_acquire_now(Some(Duration::from_millis(400)))
        .await
        .unwrap()
        .unwrap();
    let long = rw
        .read()
        .try_acquire_now(Some(Duration::from_secs(8)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(long.hold_count(), 2);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(
        exists(&admin, &read_hold_key(name, rw.owner(), 1)).await,
        "the session's keys expire together, at the later lease"
    );
    // The user is done with the short one.
    let out = short.unlock().await;
    eprintln!("short.unlock() = {out:?}; now {}", dump(&admin, name).await);
    assert!(out.is_ok(), "{out:?}");

    // `long` (8 s fixed lease) still reads: a writer must not get in.
    let other = locks.rw_lock(name);
    let w = other.write().try_acquire_now(None).await.unwrap();
    let got = w.is_some();
    if let Some(w) = w {
        w.unlock().await.unwrap();
    }
    assert!(
        !got,
        "a writer got in while the 8 s read guard is live (lost: {}, remaining {:?})",
        long.is_lost(),
        long.remaining_lease()
    );
    long.unlock().await.unwrap();
}

// ---------------------------------------------------------------------------
// 4. An owner whose only read hold expired (its count left in the hash by
//    another reader that renews) asks for the write: it holds no read, so it
//    must wait for the other reader, not be refused as an upgrade.
//    `rw_write_acquire.lua` refuses on `hexists(owner)` alone.
// ---------------------------------------------------------------------------
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_whose_read_expired_is_not_refused_the_write_as_an_upgrade() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let admin = locks.client().clone();
    let name = "r18-stale-upgrade";
    let a = locks.rw_lock(name);
    let b = locks.rw_lock(name);
    let a_read = a
        .read()
        .try_acquire_now(Some(Duration::from_millis(400)))
        .await
        .unwrap()
        .unwrap();
    let b_read = b.read().acquire().await.unwrap();
    assert_eq!(
        tokio::time::timeout(T, a_read.lost()).await.unwrap(),
        LossReason::Expired
    );
    SOON.eventually("A's hold key expired", || {
        let (admin, k) = (admin.clone(), read_hold_key(name, a.owner(), 1));
        async move { !exists(&admin, &k).await }
    })
    .await;
    eprintln!(
        "A's stale count: {:?}; {}",
        hget(&admin, name, a.owner()).await,
        dump(&admin, name).await
    );
    // B leaves in a moment; A's writer should get the lock then.
    let release_b = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        b_read.unlock().await.unwrap();
    });
    let got = tokio::time::timeout(T, a.write().try_acquire(Duration::from_secs(8), None))
        .await
        .expect("bounded");
    release_b.await.unwrap();
    drop(a_read);
    match got {
        Ok(Some(w)) => w.unlock().await.unwrap(),
        other => panic!("A holds no read (expired) and asked for the write: {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// 5. A write hold with a fixed lease (600 ms) whose owner also reads (watchdog):
//    the write's lease must end it (the owner keeps only its read; other
//    readers may join). The read's acquire and renewals PEXPIRE the whole
//    hash, which carries `mode=write` and the `<owner>:write` field, so the
//    write lives as long as the read is renewed.
// ---------------------------------------------------------------------------
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_write_ends_with_its_lease_though_its_owner_reads_on() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let admin = locks.client().clone();
    let name = "r18-write-lease";
    let a = locks.rw_lock(name);
    let w = a
        .write()
        .try_acquire_now(Some(Duration::from_millis(600)))
        .await
        .unwrap()
        .unwrap();
    let r = a.read().try_acquire_now(None).await.unwrap().unwrap();
    assert_eq!(
        tokio::time::timeout(T, w.lost()).await.unwrap(),
        LossReason::Expired,
        "the write's local lease ran out"
    );
    // Past the write's lease (and two read renewals later) only A's read is
    // left: another reader shares it.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    eprintln!("2.5 s past the write lease: {}", dump(&admin, name).await);
    let b = locks.rw_lock(name);
    let joined = b
        .read()
        .try_acquire(Duration::from_secs(4), None)
        .await
        .unwrap();
    let state = dump(&admin, name).await;
    let ok = joined.is_some();
    if let Some(g) = joined {
        g.unlock().await.unwrap();
    }
    let late = w.unlock().await;
    r.unlock().await.ok();
    assert!(
        ok,
        "the 600 ms write hold still excludes readers 6 s later: {state}"
    );
    assert!(
        matches!(late, Err(LockError::Expired { .. })),
        "unlocking the expired write: {late:?}"
    );
}

// ---------------------------------------------------------------------------
// 6. Re-entrant reads while a writer waits (the writer in another client,
//    and one in the same client, which queues locally): no deadlock; the
//    writer then gets the lock.
// ---------------------------------------------------------------------------
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_entrant_reads_pass_a_waiting_writer_and_the_writer_follows() {
    let server = RedisServer::start();
    let l1 = locks_at(&server.url()).await;
    let l2 = locks_at(&server.url()).await;
    let admin = l1.client().clone();
    let name = "r18-reenter";
    let reader = l1.rw_lock(name);
    let r1 = reader.read().acquire().await.unwrap();
    let writer = l2.rw_lock(name);
    let owner = writer.owner().to_owned();
    let wtask = tokio::spawn(async move {
        writer
            .write()
            .try_acquire(Duration::from_secs(20), None)
            .await
    });
    SOON.eventually("the writer's marker", || {
        let (admin, o) = (admin.clone(), owner.clone());
        async move {
            !matches!(
                admin
                    .send(Cmd::new("ZSCORE").key(marker_key(name)).arg(&*o))
                    .await,
                Ok(Frame::Null) | Err(_)
            )
        }
    })
    .await;
    // A new reader waits behind it.
    assert!(l2
        .rw_lock(name)
        .read()
        .try_acquire_now(None)
        .await
        .unwrap()
        .is_none());
    // The reader re-enters: through a clone, with a wait, and acquire().
    let clone = reader.clone();
    let r2 = tokio::time::timeout(T, clone.read().try_acquire(Duration::from_secs(5), None))
        .await
        .expect("re-entry not stuck behind the writer")
        .unwrap()
        .expect("re-entry let through");
    let r3 = tokio::time::timeout(T, reader.read().acquire())
        .await
        .expect("acquire() re-entry not stuck")
        .unwrap();
    assert_eq!(r3.hold_count(), 3);
    r3.unlock().await.unwrap();
    r2.unlock().await.unwrap();
    assert!(!wtask.is_finished(), "the writer still waits for r1");
    r1.unlock().await.unwrap();
    let w = tokio::time::timeout(T, wtask)
        .await
        .expect("writer not stuck")
        .unwrap()
        .unwrap()
        .expect("writer in after the reader left");
    assert!(!exists(&admin, &marker_key(name)).await);
    w.unlock().await.unwrap();
}

// Same as above but the writer is in the SAME client as the reader (local
// queue shared by both sides), and the writer gets the lock once r1 leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_client_writer_waits_reader_re_enters_then_writer_gets_in() {
    let server = RedisServer::start();
    let l1 = locks_at(&server.url()).await;
    let admin = l1.client().clone();
    let name = "r18-reenter-same";
    let reader = l1.rw_lock(name);
    let r1 = reader.read().acquire().await.unwrap();
    let writer = l1.rw_lock(name);
    let owner = writer.owner().to_owned();
    let wtask = tokio::spawn(async move {
        writer
            .write()
            .try_acquire(Duration::from_secs(20), None)
            .await
    });
    SOON.eventually("the writer's marker", || {
        let (admin, o) = (admin.clone(), owner.clone());
        async move {
            !matches!(
                admin
                    .send(Cmd::new("ZSCORE").key(marker_key(name)).arg(&*o))
                    .await,
                Ok(Frame::Null) | Err(_)
            )
        }
    })
    .await;
    // A new reader of the same client waits (in the local queue too).
    let newcomer = l1.rw_lock(name);
    let ntask = tokio::spawn(async move {
        newcomer
            .read()
            .try_acquire(Duration::from_secs(20), None)
            .await
    });
    let r2 = tokio::time::timeout(T, reader.read().acquire())
        .await
        .expect("re-entry not stuck behind the same client's writer")
        .unwrap();
    assert_eq!(r2.hold_count(), 2);
    r2.unlock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !ntask.is_finished(),
        "the new reader waits behind the writer"
    );
    r1.unlock().await.unwrap();
    let w = tokio::time::timeout(T, wtask)
        .await
        .expect("writer not stuck")
        .unwrap()
        .unwrap()
        .expect("writer got in after the reader left");
    assert!(!exists(&admin, &marker_key(name)).await);
    assert!(!ntask.is_finished(), "the reader waits for the writer");
    w.unlock().await.unwrap();
    let n = tokio::time::timeout(T, ntask)
        .await
        .expect("reader not stuck")
        .unwrap()
        .unwrap()
        .expect("reader in after the writer");
    n.unlock().await.unwrap();
    SOON.eventually("nothing held", || {
        let admin = admin.clone();
        async move { !exists(&admin, name).await }
    })
    .await;
}

// ---------------------------------------------------------------------------
// 7. Downgrade, then the same owner asks for the write again while holding
//    the read: refused (an upgrade), reads and other readers unaffected.
// ---------------------------------------------------------------------------
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_downgrade_writing_again_is_an_upgrade_and_refused() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let admin = locks.client().clone();
    let name = "r18-down-up";
    let a = locks.rw_lock(name);
    let w = a.write().acquire().await.unwrap();
    let w2 = a.write().acquire().await.unwrap();
    assert_eq!(w2.hold_count(), 2);
    let r = a.read().acquire().await.unwrap();
    w2.unlock().await.unwrap();
    // Still write mode: a re-entry of the write is fine.
    let w3 = a.write().try_acquire_now(None).await.unwrap().unwrap();
    w3.unlock().await.unwrap();
    w.unlock().await.unwrap();
    assert_eq!(hget(&admin, name, "mode").await.as_deref(), Some("read"));
    let err = tokio::time::timeout(T, a.write().try_acquire(Duration::from_secs(5), None))
        .await
        .expect("refused at once")
        .unwrap_err();
    assert!(matches!(err, LockError::UpgradeRefused { .. }), "{err:?}");
    assert!(!exists(&admin, &marker_key(name)).await, "no marker left");
    let b = locks.rw_lock(name);
    let rb = b.read().try_acquire_now(None).await.unwrap().unwrap();
    assert!(!r.is_lost());
    r.unlock().await.unwrap();
    rb.unlock().await.unwrap();
    assert!(!exists(&admin, name).await);
}

// ---------------------------------------------------------------------------
// 8. A write hold whose owner's reads expired: its release frees the lock
//    (no read-mode hash left behind), and the expired read's unlock is
//    Expired.
// ---------------------------------------------------------------------------
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_reads_expired_frees_the_lock_on_release() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let admin = locks.client().clone();
    let name = "r18-write-dead-reads";
    let a = locks.rw_lock(name);
    let w = a.write().acquire().await.unwrap();
    let r = a
        .read()
        .try_acquire_now(Some(Duration::from_millis(300)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        tokio::time::timeout(T, r.lost()).await.unwrap(),
        LossReason::Expired
    );
    SOON.eventually("read key gone", || {
        let (admin, k) = (admin.clone(), read_hold_key(name, a.owner(), 1));
        async move { !exists(&admin, &k).await }
    })
    .await;
    w.unlock().await.unwrap();
    assert!(
        !exists(&admin, name).await,
        "freed, not downgraded to dead reads: {}",
        dump(&admin, name).await
    );
    let late = r.unlock().await;
    assert!(matches!(late, Err(LockError::Expired { .. })), "{late:?}");
    let b = locks.rw_lock(name);
    let wb = b.write().try_acquire_now(None).await.unwrap().unwrap();
    wb.unlock().await.unwrap();
}

// ---------------------------------------------------------------------------
// 9. force_unlock while a writer holds and a reader and a writer wait:
//    both waiters get the lock (one after the other), the holder is told.
// ---------------------------------------------------------------------------
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_wakes_waiting_readers_and_writers() {
    let server = RedisServer::start();
    let l1 = locks_at(&server.url()).await;
    let l2 = locks_at(&server.url()).await;
    let l3 = locks_at(&server.url()).await;
    let admin = l1.client().clone();
    let name = "r18-force-wake";
    // The holder's client tracks keys: a force unlock from elsewhere is
    // noticed at once (fixed lease too).
    let tracking = Locks::connect_with(ClientConfig::from_url(&server.url()).unwrap(), config())
        .await
        .unwrap();
    let h = tracking
        .rw_lock(name)
        .write()
        .try_acquire_now(Some(Duration::from_secs(60)))
        .await
        .unwrap()
        .unwrap();
    let reader = l2.rw_lock(name);
    let rtask = tokio::spawn(async move {
        let g = reader
            .read()
            .try_acquire(Duration::from_secs(20), None)
            .await?;
        if let Some(g) = g {
            g.unlock().await?;
            return Ok::<bool, LockError>(true);
        }
        Ok(false)
    });
    let writer = l3.rw_lock(name);
    let wtask = tokio::spawn(async move {
        let g = writer
            .write()
            .try_acquire(Duration::from_secs(20), None)
            .await?;
        if let Some(g) = g {
            tokio::time::sleep(Duration::from_millis(100)).await;
            g.unlock().await?;
            return Ok::<bool, LockError>(true);
        }
        Ok(false)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(l2.rw_lock(name).force_unlock().await.unwrap());
    assert_eq!(
        tokio::time::timeout(T, h.lost()).await.unwrap(),
        LossReason::Gone
    );
    let r = tokio::time::timeout(Duration::from_secs(25), rtask)
        .await
        .expect("reader not hung")
        .unwrap();
    let w = tokio::time::timeout(Duration::from_secs(25), wtask)
        .await
        .expect("writer not hung")
        .unwrap();
    assert!(matches!(r, Ok(true)), "reader: {r:?}");
    assert!(matches!(w, Ok(true)), "writer: {w:?}");
    assert!(h.unlock().await.is_err());
    SOON.eventually("nothing held, no marker", || {
        let admin = admin.clone();
        async move { !exists(&admin, name).await && !exists(&admin, &marker_key(name)).await }
    })
    .await;
}

// ---------------------------------------------------------------------------
// 10. A read release after the hash was force-deleted and re-made by another
//     reader: an error, and the other reader's hold untouched.
// ---------------------------------------------------------------------------
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_release_after_a_force_unlock_leaves_the_new_readers_alone() {
    let server = RedisServer::start();
    let l1 = locks_at(&server.url()).await;
    let l2 = locks_at(&server.url()).await;
    let admin = l1.client().clone();
    let name = "r18-force-read";
    let a = l1.rw_lock(name);
    let ra = a.read().acquire().await.unwrap();
    let ra2 = a.read().acquire().await.unwrap();
    assert!(l2.rw_lock(name).force_unlock().await.unwrap());
    let b = l2.rw_lock(name);
    let rb = b.read().acquire().await.unwrap();
    let e1 = ra2.unlock().await;
    let e2 = ra.unlock().await;
    assert!(e1.is_err() && e2.is_err(), "{e1:?} {e2:?}");
    assert_eq!(hget(&admin, name, b.owner()).await.as_deref(), Some("1"));
    assert!(!rb.is_lost());
    assert!(l1
        .rw_lock(name)
        .write()
        .try_acquire_now(None)
        .await
        .unwrap()
        .is_none());
    rb.unlock().await.unwrap();
    assert!(!exists(&admin, name).await);
}

// ---------------------------------------------------------------------------
// 11. A writer that died while waiting: its marker holds new readers back no
//     longer than fair_waiter_timeout (2 s here).
// ---------------------------------------------------------------------------
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiting_writers_marker_holds_readers_back_only_for_its_span() {
    let server = RedisServer::start();
    let url = server.url();
    let locks = locks_at(&url).await;
    let admin = locks.client().clone();
    let name = "r18-dead-writer";
    let holder = locks.rw_lock(name).read().acquire().await.unwrap();

    // The writer waits in a runtime of its own, then that runtime dies.
    let crash_url = url.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let crashed = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let locks = locks_at(&crash_url).await;
            let rw = locks.rw_lock(name);
            let owner = rw.owner().to_owned();
            let w = rw.write();
            let fut = Box::pin(w.try_acquire(Duration::from_secs(60), None));
            let mut fut = Some(fut);
            // Run it until the marker is set.
            let admin = locks.client().clone();
            let mk = marker_key(name);
            loop {
                tokio::select! {
                    _ = fut.as_mut().unwrap() => panic!("the writer got in?"),
                    () = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
                if !matches!(
                    admin
                        .send(Cmd::new("ZSCORE").key(mk.clone()).arg(&*owner))
                        .await,
                    Ok(Frame::Null) | Err(_)
                ) {
                    break;
                }
            }
            tx.send(owner).unwrap();
            std::mem::forget(fut.take());
            std::mem::forget(locks);
        });
        rt.shutdown_background();
    });
    let _dead = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    crashed.join().unwrap();
    assert!(exists(&admin, &marker_key(name)).await);
    let newcomer = locks.rw_lock(name);
    assert!(newcomer
        .read()
        .try_acquire_now(None)
        .await
        .unwrap()
        .is_none());
    let got = tokio::time::timeout(T, newcomer.read().try_acquire(Duration::from_secs(8), None))
        .await
        .expect("bounded")
        .unwrap()
        .expect("in once the dead writer's marker ran out");
    got.unlock().await.unwrap();
    holder.unlock().await.unwrap();
}

// ---------------------------------------------------------------------------
// 12. Cancelled waiting readers and writers (aborted at many points, while
//     the lock is being released and re-taken) leave nothing held.
// ---------------------------------------------------------------------------
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_waiters_leave_nothing_held() {
    let server = RedisServer::start();
    let l1 = locks_at(&server.url()).await;
    let l2 = locks_at(&server.url()).await;
    let admin = l1.client().clone();
    let name = "r18-cancel";
    for i in 0..12u64 {
        let h = l1.rw_lock(name).write().acquire().await.unwrap();
        let mut tasks = Vec::new();
        for k in 0..3 {
            let rw = l2.rw_lock(name);
            tasks.push(tokio::spawn(async move {
                let lock = if k == 0 { rw.write() } else { rw.read() };
                let g = lock.try_acquire(Duration::from_secs(20), None).await;
                // Held: keep it until aborted (dropped then).
                tokio::time::sleep(Duration::from_secs(60)).await;
                drop(g);
            }));
        }
        tokio::time::sleep(Duration::from_millis(100 + 7 * i)).await;
        let release = tokio::spawn(async move { h.unlock().await });
        tokio::time::sleep(Duration::from_millis(i % 4)).await;
        for t in &tasks {
            t.abort();
        }
        for t in tasks {
            let _ = t.await;
        }
        release.await.unwrap().unwrap();
        Soon::new(Duration::from_secs(10), Duration::from_millis(20))
            .eventually("nothing held after the cancels", || {
                let admin = admin.clone();
                async move { !exists(&admin, name).await && !exists(&admin, &marker_key(name)).await }
            })
            .await;
    }
}

// ---------------------------------------------------------------------------
// 13. Many tasks: writers (some downgrading), re-entrant readers, on two
//     clients; a writer never overlaps any hold (counters checked inside
//     the holds).
// ---------------------------------------------------------------------------
async fn exclusion_workload(clients: &[Locks], name: &str, rounds: usize) {
    let readers = Arc::new(AtomicI64::new(0));
    let writers = Arc::new(AtomicI64::new(0));
    let bad = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (c, locks) in clients.iter().enumerate() {
        for t in 0..4usize {
            let rw = locks.rw_lock(name);
            let (readers, writers, bad) =
                (Arc::clone(&readers), Arc::clone(&writers), Arc::clone(&bad));
            tasks.push(tokio::spawn(async move {
                for i in 0..rounds {
                    let lease = (i % 3 == 0).then(|| Duration::from_secs(20));
                    if t == 0 {
                        let w = rw
                            .write()
                            .try_acquire(Duration::from_secs(30), lease)
                            .await
                            .unwrap()
                            .unwrap_or_else(|| panic!("c{c} writer round {i}: not in 30 s"));
                        if writers.fetch_add(1, Ordering::SeqCst) != 0
                            || readers.load(Ordering::SeqCst) != 0
                        {
                            bad.fetch_add(1, Ordering::SeqCst);
                        }
                        tokio::time::sleep(Duration::from_millis(3)).await;
                        if writers.load(Ordering::SeqCst) != 1
                            || readers.load(Ordering::SeqCst) != 0
                        {
                            bad.fetch_add(1, Ordering::SeqCst);
                        }
                        if i % 2 == 1 {
                            // Downgrade.
                            let r = rw.read().try_acquire_now(lease).await.unwrap().unwrap();
                            writers.fetch_sub(1, Ordering::SeqCst);
                            w.unlock().await.unwrap();
                            readers.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(2)).await;
                            readers.fetch_sub(1, Ordering::SeqCst);
                            r.unlock().await.unwrap();
                        } else {
                            writers.fetch_sub(1, Ordering::SeqCst);
                            w.unlock().await.unwrap();
                        }
                    } else {
                        let r = rw
                            .read()
                            .try_acquire(Duration::from_secs(30), lease)
                            .await
                            .unwrap()
                            .unwrap_or_else(|| panic!("c{c} reader {t} round {i}: not in 30 s"));
                        readers.fetch_add(1, Ordering::SeqCst);
                        if writers.load(Ordering::SeqCst) != 0 {
                            bad.fetch_add(1, Ordering::SeqCst);
                        }
                        let r2 = rw.read().try_acquire_now(None).await.unwrap();
                        assert!(r2.is_some(), "re-entry while holding");
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        if writers.load(Ordering::SeqCst) != 0 {
                            bad.fetch_add(1, Ordering::SeqCst);
                        }
                        readers.fetch_sub(1, Ordering::SeqCst);
                        r2.unwrap().unlock().await.unwrap();
                        r.unlock().await.unwrap();
                    }
                }
            }));
        }
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(180), t)
            .await
            .expect("workload finished")
            .unwrap();
    }
    assert_eq!(bad.load(Ordering::SeqCst), 0, "a writer overlapped a hold");
    assert!(
        !exists(clients[0].client(), name).await,
        "nothing held after: {}",
        dump(clients[0].client(), name).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_with_downgrades_and_re_entries_keep_writers_exclusive() {
    let server = RedisServer::start();
    let clients = [locks_at(&server.url()).await, locks_at(&server.url()).await];
    exclusion_workload(&clients, "r18-workload", 12).await;
    assert!(!exists(clients[0].client(), &marker_key("r18-workload")).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_downgrades_re_entries_and_a_lost_read_guard() {
    let cluster = RedisCluster::start();
    let clients = [cluster_locks(&cluster).await, cluster_locks(&cluster).await];
    exclusion_workload(&clients, "r18-cluster", 6).await;

    // Bug 1 on a cluster as well: the expired read guard's late unlock ends
    // the owner's new read hold.
    let name = "r18-cluster-late";
    let rw = clients[0].rw_lock(name);
    let old = rw
        .read()
        .try_acquire_now(Some(Duration::from_millis(400)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        tokio::time::timeout(T, old.lost()).await.unwrap(),
        LossReason::Expired
    );
    let admin = clients[0].client().clone();
    SOON.eventually("expired", || {
        let admin = admin.clone();
        async move { !exists(&admin, name).await }
    })
    .await;
    let new = rw.read().try_acquire_now(None).await.unwrap().unwrap();
    let late = old.unlock().await;
    let w = clients[1]
        .rw_lock(name)
        .write()
        .try_acquire_now(None)
        .await
        .unwrap();
    let got = w.is_some();
    if let Some(w) = w {
        w.unlock().await.unwrap();
    }
    assert!(
        !got,
        "cluster: a writer got in beside a live read guard (late unlock: {late:?})"
    );
    new.unlock().await.unwrap();
}

// ---------------------------------------------------------------------------
// 14. Two waiting writers, one gives up: the other still waits, so new
//     readers must still wait behind it. The marker is one owner id, and the
//     leaving writer deletes it when it was the last to set it
//     (`rw_write_leave.lua`), so until the remaining writer's next attempt
//     the lock takes new readers.
// ---------------------------------------------------------------------------
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_giving_up_does_not_let_readers_jump_another_waiting_writer() {
    let server = RedisServer::start();
    let l1 = locks_at(&server.url()).await;
    let l2 = locks_at(&server.url()).await;
    let l3 = locks_at(&server.url()).await;
    let admin = l1.client().clone();
    let name = "r18-two-writers";
    let mut jumped = 0;
    let rounds = 20;
    for round in 0..rounds {
        let holder = l1.rw_lock(name).read().acquire().await.unwrap();
        // W2 waits for long.
        let w2 = l2.rw_lock(name);
        let w2_owner = w2.owner().to_owned();
        let w2task =
            tokio::spawn(
                async move { w2.write().try_acquire(Duration::from_secs(20), None).await },
            );
        SOON.eventually("W2's marker", || {
            let (admin, o) = (admin.clone(), w2_owner.clone());
            async move {
                !matches!(
                    admin
                        .send(Cmd::new("ZSCORE").key(marker_key(name)).arg(&*o))
                        .await,
                    Ok(Frame::Null) | Err(_)
                )
            }
        })
        .await;
        // W1 waits briefly, and is the last to set the marker.
        let w1 = l3.rw_lock(name);
        let got = w1
            .write()
            .try_acquire(Duration::from_millis(300), None)
            .await
            .unwrap();
        assert!(got.is_none());
        // W2 still waits: a new reader must not get in.
        let newcomer = l3.rw_lock(name);
        let r = newcomer.read().try_acquire_now(None).await.unwrap();
        if let Some(r) = r {
            jumped += 1;
            eprintln!("round {round}: a new reader got in while W2 waits");
            r.unlock().await.unwrap();
        }
        assert!(!w2task.is_finished());
        holder.unlock().await.unwrap();
        let g = tokio::time::timeout(T, w2task)
            .await
            .expect("W2 not hung")
            .unwrap()
            .unwrap()
            .expect("W2 in");
        g.unlock().await.unwrap();
    }
    assert_eq!(
        jumped, 0,
        "{jumped} of {rounds} rounds: a new reader got in while a writer waited"
    );
}
