//! The API shared by every type (issue 30, "One vocabulary"), against real
//! servers: the plain semaphore's guard (a `?` gives the permits back, an
//! explicit release, `forget`, a drop while the runtime shuts down and one
//! outside any runtime without a panic), `extend` of a fixed lease on a
//! lock, a read-write lock's read side, a multi-lock and a RedLock (longer,
//! never shorter, refused under the watchdog, typed when the hold is gone),
//! and the RedLock's per-name handle.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread::ThreadId;
use std::time::Duration;

use common::Soon;
use keylatch_cluster::{Client, Commands};
use keylatch_harness::{Masters, RedisCluster, RedisServer};
use keylatch_lock::{LockError, Locks, LocksConfig, LossReason, RedLock, Semaphore};
use keylatch_resp::{Cmd, Frame};

const SOON: Soon = Soon::new(Duration::from_secs(10), Duration::from_millis(20));

fn config() -> LocksConfig {
    LocksConfig::default().watchdog_timeout(Duration::from_millis(1500))
}

async fn locks_at(url: &str) -> Locks {
    Locks::new(Client::connect(url).await.unwrap(), config())
}

async fn pttl(client: &Client, key: &str) -> i64 {
    match client.send(Cmd::new("PTTL").key(key)).await.unwrap() {
        Frame::Integer(n) => n,
        other => panic!("PTTL answered {other:?}"),
    }
}

/// What a job under a permit fails with: a lock error or its own.
#[derive(Debug)]
enum JobError {
    Lock(#[allow(dead_code)] LockError),
    Failed,
}

impl From<LockError> for JobError {
    fn from(e: LockError) -> Self {
        JobError::Lock(e)
    }
}

/// Takes two permits, then fails with `?` before releasing them.
async fn job_that_fails(sem: &Semaphore) -> Result<(), JobError> {
    let permits = sem.acquire(2).await?;
    assert_eq!(permits.permits(), 2);
    let step: Result<(), JobError> = Err(JobError::Failed);
    step?;
    permits.release().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_mark_gives_the_permits_back() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let sem = locks.semaphore("qm");
    assert!(sem.try_set_permits(3).await.unwrap());
    for _ in 0..3 {
        assert!(matches!(job_that_fails(&sem).await, Err(JobError::Failed)));
        // The drop's release runs in the background (counted by settle).
        SOON.eventually("permits back after a `?`", || async {
            sem.available().await.unwrap() == 3
        })
        .await;
    }
    // A panic unwinding through the holder gives them back too.
    let s2 = sem.clone();
    let r = tokio::spawn(async move {
        let _p = s2.acquire(3).await.unwrap();
        panic!("the job panics while holding 3 permits");
    })
    .await;
    assert!(r.is_err());
    SOON.eventually("permits back after a panic", || async {
        sem.available().await.unwrap() == 3
    })
    .await;
    assert!(locks.settle(Duration::from_secs(5)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_guard_release_forget_and_raw_calls() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let sem = locks.semaphore("guarded");
    sem.try_set_permits(3).await.unwrap();

    let two = sem
        .try_acquire(2, Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((two.permits(), two.name()), (2, "guarded"));
    assert_eq!(sem.available().await.unwrap(), 1);
    assert!(
        sem.try_acquire(2, Duration::from_millis(200))
            .await
            .unwrap()
            .is_none(),
        "one left: not in time is Ok(None)"
    );
    two.release().await.unwrap();
    assert_eq!(sem.available().await.unwrap(), 3);

    // forget: the permits stay taken, and another process may give them
    // back by count, as Redisson's code does.
    let n = sem.acquire(1).await.unwrap().forget();
    assert_eq!(n, 1);
    assert_eq!(sem.available().await.unwrap(), 2);
    let elsewhere = locks_at(&server.url()).await;
    assert_eq!(elsewhere.semaphore("guarded").release(n).await.unwrap(), 3);

    // The raw calls: acquire here, release there.
    sem.acquire_raw(3).await.unwrap();
    assert!(!sem.try_acquire_raw(1, Duration::ZERO).await.unwrap());
    assert_eq!(elsewhere.semaphore("guarded").release(3).await.unwrap(), 3);

    // A guard's release of a name reused by another type is typed.
    let g = sem.acquire(1).await.unwrap();
    locks
        .client()
        .send(Cmd::new("DEL").key("guarded"))
        .await
        .unwrap();
    locks
        .client()
        .send(Cmd::new("RPUSH").key("guarded").arg("x"))
        .await
        .unwrap();
    assert!(matches!(
        g.release().await,
        Err(LockError::WrongType { .. })
    ));

    // Counts: asked and given in u64; the available count is signed.
    let s = locks.semaphore("counts");
    s.try_set_permits(1).await.unwrap();
    assert_eq!(s.add_permits(2).await.unwrap(), 3);
    assert_eq!(s.reduce_permits(5).await.unwrap(), -2);
    assert_eq!(s.available().await.unwrap(), -2);
    assert_eq!(s.drain().await.unwrap(), 0, "nothing taken below zero");
    assert_eq!(s.add_permits(4).await.unwrap(), 4);
    assert_eq!(s.drain().await.unwrap(), 4);
    let latch = locks.latch("counts-latch");
    assert_eq!(latch.count_down().await.unwrap(), 0, "never set: open");
    latch.try_set_count(2).await.unwrap();
    assert_eq!(latch.count_down().await.unwrap(), 1);
    assert_eq!(latch.count_down().await.unwrap(), 0);
    assert_eq!(latch.count_down().await.unwrap(), 0, "already open");
}

/// Panics seen on the thread of the test below (a hook is global to the
/// binary; tokio swallows a panic in a task dropped at shutdown, so only a
/// hook can see one).
static SHUTDOWN_PANICS: AtomicUsize = AtomicUsize::new(0);
static SHUTDOWN_THREAD: OnceLock<ThreadId> = OnceLock::new();

/// Set when the task holding a permit is dropped.
static TASK_DROPPED: AtomicBool = AtomicBool::new(false);
struct DropFlag;
impl Drop for DropFlag {
    fn drop(&mut self) {
        TASK_DROPPED.store(true, Ordering::SeqCst);
    }
}

#[test]
fn dropping_permits_while_the_runtime_shuts_down_never_panics() {
    SHUTDOWN_THREAD.set(std::thread::current().id()).unwrap();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if SHUTDOWN_THREAD.get() == Some(&std::thread::current().id()) {
            SHUTDOWN_PANICS.fetch_add(1, Ordering::SeqCst);
        }
        previous(info);
    }));
    let server = RedisServer::start();
    let url = server.url();
    // A current-thread runtime: its tasks are dropped on this thread when
    // it shuts down.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let outside = rt.block_on(async {
        let locks = locks_at(&url).await;
        let sem = locks.semaphore("shutdown");
        sem.try_set_permits(3).await.unwrap();
        let held = sem.acquire(1).await.unwrap();
        // A task holding a permit when the runtime shuts down: the guard
        // is dropped during the shutdown (the flag shows it was).
        let flag = DropFlag;
        tokio::spawn(async move {
            let _held = held;
            let _flag = flag;
            std::future::pending::<()>().await;
        });
        tokio::task::yield_now().await;
        // One carried out of the runtime, dropped after it is gone.
        sem.acquire(1).await.unwrap()
    });
    assert!(!TASK_DROPPED.load(Ordering::SeqCst));
    drop(rt);
    assert!(
        TASK_DROPPED.load(Ordering::SeqCst),
        "the holding task was dropped by the shutdown"
    );
    // No runtime at all: nothing can be sent; no panic either.
    drop(outside);
    assert_eq!(SHUTDOWN_PANICS.load(Ordering::SeqCst), 0);

    // What the server shows: the permit dropped outside a runtime stays
    // taken (plain permits have no lease), as the guard's docs say.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let left = rt.block_on(async { locks_at(&url).await.semaphore("shutdown").available().await });
    assert!(
        left.unwrap() <= 2,
        "the permit dropped without a runtime stays out"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_a_fixed_lease_longer_never_shorter() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let admin = locks.client();
    let lock = locks.lock("ext");
    let g = lock
        .try_acquire(Duration::ZERO, Some(Duration::from_millis(1000)))
        .await
        .unwrap()
        .unwrap();
    g.extend(Duration::from_secs(5)).await.unwrap();
    assert!(pttl(admin, "ext").await > 4000);
    // Past the first lease the hold stands, locally and on the server.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!g.is_lost());
    assert!(g.remaining_lease().unwrap() > Duration::from_secs(2));
    assert!(lock.is_held_by_me().await.unwrap());
    // A shorter extend keeps the longer expiry.
    g.extend(Duration::from_millis(500)).await.unwrap();
    assert!(pttl(admin, "ext").await > 2500, "never shortened");
    // ZERO only checks.
    g.extend(Duration::ZERO).await.unwrap();
    g.unlock().await.unwrap();

    // Under the watchdog: refused, typed, nothing sent.
    let w = lock.acquire().await.unwrap();
    assert!(matches!(
        w.extend(Duration::from_secs(60)).await,
        Err(LockError::WatchdogLease { ref name }) if name == "ext"
    ));
    w.unlock().await.unwrap();

    // The hold gone from the server: Expired, and the loss signal fires.
    let g = lock
        .try_acquire(Duration::ZERO, Some(Duration::from_secs(5)))
        .await
        .unwrap()
        .unwrap();
    admin.send(Cmd::new("DEL").key("ext")).await.unwrap();
    assert!(matches!(
        g.extend(Duration::from_secs(10)).await,
        Err(LockError::Expired { .. })
    ));
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(2), g.lost())
            .await
            .unwrap(),
        LossReason::Gone
    );
    drop(g);

    // Past its lease: Expired, and no key is made again.
    let g = lock
        .try_acquire(Duration::ZERO, Some(Duration::from_millis(200)))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(matches!(
        g.extend(Duration::from_secs(10)).await,
        Err(LockError::Expired { .. })
    ));
    assert_eq!(pttl(admin, "ext").await, -2);

    // Another owner's hold is never extended by a guard whose hold is gone
    // (the script judges the owner; no local deadline has passed).
    let mine = lock
        .try_acquire(Duration::ZERO, Some(Duration::from_secs(5)))
        .await
        .unwrap()
        .unwrap();
    admin.send(Cmd::new("DEL").key("ext")).await.unwrap();
    let theirs = locks
        .lock("ext")
        .try_acquire(Duration::ZERO, Some(Duration::from_secs(2)))
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(
        mine.extend(Duration::from_secs(60)).await,
        Err(LockError::Expired { .. })
    ));
    assert!(pttl(admin, "ext").await <= 2000, "theirs untouched");
    drop(mine);
    theirs.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_through_each_types_renewal_script() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let admin = locks.client();
    let fixed = Some(Duration::from_millis(1000));
    // A read-write lock's read side (its own hold keys and script).
    let read = locks
        .rw_lock("ext-rw")
        .read()
        .try_acquire(Duration::ZERO, fixed)
        .await
        .unwrap()
        .unwrap();
    read.extend(Duration::from_secs(5)).await.unwrap();
    assert!(pttl(admin, "ext-rw").await > 4000);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert!(!read.is_lost());
    read.unlock().await.unwrap();
    // A fenced lock (its hold judged by owner).
    let fenced = locks
        .fenced_lock("ext-fenced")
        .try_acquire(Duration::ZERO, fixed)
        .await
        .unwrap()
        .unwrap();
    fenced.extend(Duration::from_secs(5)).await.unwrap();
    assert!(pttl(admin, "ext-fenced").await > 4000);
    fenced.unlock().await.unwrap();
    // A multi-lock: every member.
    let m = locks
        .multi_lock(&["ext-a", "ext-b"])
        .try_acquire(Duration::ZERO, fixed)
        .await
        .unwrap()
        .unwrap();
    m.extend(Duration::from_secs(5)).await.unwrap();
    assert!(pttl(admin, "ext-a").await > 4000);
    assert!(pttl(admin, "ext-b").await > 4000);
    m.unlock().await.unwrap();
    let w = locks.multi_lock(&["ext-a"]).acquire().await.unwrap();
    assert!(matches!(
        w.extend(Duration::from_secs(5)).await,
        Err(LockError::WatchdogLease { .. })
    ));
    w.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_handle_and_extend() {
    let masters = Masters::start(3);
    let mut nodes = Vec::new();
    let mut admins = Vec::new();
    for u in masters.urls() {
        nodes.push(locks_at(&u).await);
        admins.push(Client::connect(&u).await.unwrap());
    }
    let redlock = RedLock::new(nodes).node_timeout(Duration::from_millis(300));
    let payouts = redlock.lock("payouts");
    assert_eq!(payouts.name(), "payouts");
    assert_eq!(payouts.redlock().quorum(), 2);

    let g = payouts
        .try_acquire(Duration::from_secs(2), Some(Duration::from_millis(1000)))
        .await
        .unwrap()
        .unwrap();
    assert!(g.validity() < Duration::from_secs(1));
    g.extend(Duration::from_secs(5)).await.unwrap();
    assert!(g.validity() > Duration::from_secs(4));
    for a in &admins {
        assert!(pttl(a, "payouts").await > 4000);
    }
    // A shorter extend changes neither a key nor the validity.
    g.extend(Duration::from_millis(300)).await.unwrap();
    assert!(g.validity() > Duration::from_secs(3));
    // Gone on two of three masters: no quorum extends it.
    for a in &admins[..2] {
        a.send(Cmd::new("DEL").key("payouts")).await.unwrap();
    }
    assert!(matches!(
        g.extend(Duration::from_secs(10)).await,
        Err(LockError::Expired { .. })
    ));
    drop(g);

    let w = payouts.acquire().await.unwrap();
    assert!(matches!(
        w.extend(Duration::from_secs(10)).await,
        Err(LockError::WatchdogLease { .. })
    ));
    w.unlock().await.unwrap();
}

/// On a cluster: extend goes to the hold's slot (the lock's key and its
/// counter share it), for a lock and a read side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_on_a_cluster() {
    let cluster = RedisCluster::start();
    let client = common::client_for(&cluster).await;
    let locks = Locks::new(client.clone(), config());
    let fixed = Some(Duration::from_millis(1000));
    for name in ["ext-c1", "ext-c2", "{tag}ext-c3"] {
        let g = locks
            .lock(name)
            .try_acquire(Duration::ZERO, fixed)
            .await
            .unwrap()
            .unwrap();
        g.extend(Duration::from_secs(5)).await.unwrap();
        assert!(pttl(&client, name).await > 4000, "{name}");
        g.unlock().await.unwrap();
    }
    let read = locks
        .rw_lock("ext-crw")
        .read()
        .try_acquire(Duration::ZERO, fixed)
        .await
        .unwrap()
        .unwrap();
    read.extend(Duration::from_secs(5)).await.unwrap();
    assert!(pttl(&client, "ext-crw").await > 4000);
    read.unlock().await.unwrap();
}
