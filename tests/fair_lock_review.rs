#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Outside review of the fair lock: adversarial probes against real
//! servers (queue jumping, clones, cancellations racing releases, lease
//! expiry, force unlock, SCRIPT FLUSH, short waiter spans, a Redisson-style
//! head, arrival order from a history). Every wait is bounded. One failed
//! on the first version: a clone of a waiting handle that gave up took its
//! owner's place out of the queue while another clone still waited (now
//! only the last waiter of an owner leaves).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keylatch_cluster::{Client, Commands};
use keylatch_harness::{RedisCluster, RedisServer};
use keylatch_lock::{Lock, LockError, Locks, LocksConfig};
use keylatch_resp::{Cmd, Frame};
use tokio::task::JoinHandle;

type History = Arc<Mutex<Vec<String>>>;

fn cfg(fwt_ms: u64, recheck_ms: u64, watchdog_ms: u64) -> LocksConfig {
    LocksConfig::default()
        .fair_waiter_timeout(Duration::from_millis(fwt_ms))
        .recheck(Duration::from_millis(recheck_ms))
        .watchdog_timeout(Duration::from_millis(watchdog_ms))
}

/// Long deadlines and re-checks: only a message (or a PTTL) wakes a waiter
/// soon, so a missed wake-up shows as a stall of many seconds.
fn sleepy() -> LocksConfig {
    cfg(30_000, 30_000, 20_000)
}

async fn locks_with(url: &str, c: LocksConfig) -> Locks {
    Locks::new(Client::connect(url).await.unwrap(), c)
}

fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

fn timeout_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

async fn int(client: &Client, cmd: Cmd) -> i64 {
    match client.send(cmd).await.unwrap() {
        Frame::Integer(n) => n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

async fn llen(client: &Client, name: &str) -> i64 {
    int(client, Cmd::new("LLEN").key(queue_key(name))).await
}

async fn zcard(client: &Client, name: &str) -> i64 {
    int(client, Cmd::new("ZCARD").key(timeout_key(name))).await
}

async fn queue(client: &Client, name: &str) -> Vec<String> {
    match client
        .send(Cmd::new("LRANGE").key(queue_key(name)).arg("0").arg("-1"))
        .await
        .unwrap()
    {
        Frame::Array(items) => items
            .iter()
            .map(|f| match f {
                Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("queue item {other:?}"),
            })
            .collect(),
        other => panic!("LRANGE answered {other:?}"),
    }
}

async fn until_queued(client: &Client, name: &str, n: i64) {
    let start = Instant::now();
    loop {
        let len = llen(client, name).await;
        if len == n {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "queue of {name} has {len} waiters, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn until_empty(client: &Client, name: &str, within: Duration) {
    let start = Instant::now();
    loop {
        let (l, z) = (llen(client, name).await, zcard(client, name).await);
        if l == 0 && z == 0 {
            return;
        }
        assert!(
            start.elapsed() < within,
            "{name}: queue {:?} / {z} deadlines still there after {within:?}",
            queue(client, name).await
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn server_ms(client: &Client) -> i64 {
    match client.send(Cmd::new("TIME")).await.unwrap() {
        Frame::Array(v) => {
            let p = |f: &Frame| match f {
                Frame::Bulk(b) => String::from_utf8_lossy(b).parse::<i64>().unwrap(),
                other => panic!("TIME item {other:?}"),
            };
            p(&v[0]) * 1000 + p(&v[1]) / 1000
        }
        other => panic!("TIME answered {other:?}"),
    }
}

/// A waiter task: tries for `wait`, records `label` when it holds the lock
/// (with the instant), holds `hold`, unlocks. `true` when it got the lock.
fn waiter(
    lock: Lock,
    label: &str,
    wait: Duration,
    hold: Duration,
    history: &History,
) -> JoinHandle<Option<Instant>> {
    let label = label.to_owned();
    let history = Arc::clone(history);
    tokio::spawn(async move {
        let g = lock.try_acquire(wait, None).await.unwrap()?;
        let at = Instant::now();
        history.lock().unwrap().push(label);
        tokio::time::sleep(hold).await;
        g.unlock().await.unwrap();
        Some(at)
    })
}

async fn join_bounded<T>(h: JoinHandle<T>, within: Duration, what: &str) -> T {
    tokio::time::timeout(within, h)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {within:?}"))
        .unwrap()
}

fn order(history: &History) -> Vec<String> {
    history.lock().unwrap().clone()
}

// ---------------------------------------------------------------------------

/// Two clones of one handle (one owner) wait at once: they share a single
/// queue entry. When one of them gives up (its future dropped), its
/// departure removes that shared entry, though the other clone still
/// waits: that clone loses its place (a later owner overtakes it) and is
/// absent from the queue until its next call (up to a third of the span),
/// so a release in between wakes nobody for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_clone_does_not_take_away_its_twins_place() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), sleepy()).await;
    let admin = locks.client().clone();
    let name = "rf-clones";
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let history = History::default();
    let twin = locks.fair_lock(name);
    let owner = twin.owner().to_owned();
    let wait = Duration::from_secs(60);
    let hold = Duration::from_millis(50);

    let a = waiter(twin.clone(), "A", wait, hold, &history);
    until_queued(&admin, name, 1).await;
    let c = waiter(locks.fair_lock(name), "C", wait, hold, &history);
    until_queued(&admin, name, 2).await;
    // Clone B of the same owner, arriving after C but its owner is first.
    let b = waiter(twin.clone(), "B", wait, hold, &history);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = queue(&admin, name).await;
    assert_eq!(before.len(), 2, "one queue entry per owner: {before:?}");
    assert_eq!(before[0], owner);

    a.abort();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = queue(&admin, name).await;

    let released = Instant::now();
    holder.unlock().await.unwrap();
    let b_at = join_bounded(b, Duration::from_secs(40), "clone B").await;
    let _ = join_bounded(c, Duration::from_secs(40), "C").await;
    let b_took = b_at.map(|t| t.duration_since(released));
    let got = order(&history);
    assert!(
        after.first() == Some(&owner) && got == ["B", "C"],
        "clone A gave up while clone B (same owner) still waited: queue went \
         {before:?} -> {after:?}; hold order {got:?} (expected [B, C]); B held \
         the lock {b_took:?} after the release"
    );
}

/// `try_acquire_now` (wait 0) on a free fair lock whose queue has a live
/// head must not take it; a `try_acquire` with a short wait queues behind
/// it and leaves again; a dead (expired) head does not block it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_now_does_not_jump_a_live_queue_but_passes_a_dead_head() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), cfg(1000, 1000, 6000)).await;
    let admin = locks.client().clone();
    let name = "rf-jump";
    let java = "00000000-0000-4000-8000-00000000java:1";
    let now = server_ms(&admin).await;
    admin
        .send(
            Cmd::new("ZADD")
                .key(timeout_key(name))
                .arg((now + 20_000).to_string())
                .arg(java),
        )
        .await
        .unwrap();
    admin
        .send(Cmd::new("RPUSH").key(queue_key(name)).arg(java))
        .await
        .unwrap();
    let jumper = locks.fair_lock(name);
    assert!(
        jumper.try_acquire_now(None).await.unwrap().is_none(),
        "try_acquire_now jumped a live queue head"
    );
    assert!(jumper
        .try_acquire_now(Some(Duration::from_secs(5)))
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        queue(&admin, name).await,
        vec![java.to_owned()],
        "try_now queued"
    );
    let short = tokio::time::timeout(
        Duration::from_secs(10),
        jumper.try_acquire(Duration::from_millis(400), None),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(short.is_none(), "a 400 ms wait jumped the live head");
    assert_eq!(queue(&admin, name).await, vec![java.to_owned()]);
    assert_eq!(zcard(&admin, name).await, 1);

    // Now the head is dead: its deadline passes.
    admin
        .send(
            Cmd::new("ZADD")
                .key(timeout_key(name))
                .arg((now - 1).to_string())
                .arg(java),
        )
        .await
        .unwrap();
    let g = jumper
        .try_acquire_now(None)
        .await
        .unwrap()
        .expect("a dead head is purged");
    assert_eq!(llen(&admin, name).await, 0);
    g.unlock().await.unwrap();

    // With a keylatch waiter woken by a release: a try_now loop during the
    // hand-over never wins before the waiter does.
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let history = History::default();
    let w = waiter(
        locks.fair_lock(name),
        "waiter",
        Duration::from_secs(20),
        Duration::from_millis(200),
        &history,
    );
    until_queued(&admin, name, 1).await;
    holder.unlock().await.unwrap();
    let start = Instant::now();
    while history.lock().unwrap().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "waiter starved");
        if let Some(g) = jumper.try_acquire_now(None).await.unwrap() {
            let seen = order(&history);
            g.unlock().await.unwrap();
            assert!(!seen.is_empty(), "try_acquire_now jumped the woken head");
        }
    }
    join_bounded(w, Duration::from_secs(20), "waiter").await;
}

/// The head is cancelled at the moment the lock is released, in both
/// orders: the next waiter must be woken (by the release or by the
/// leave), not left asleep until its nap (seconds here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_head_cancelled_as_the_lock_is_released_wakes_the_next() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), sleepy()).await;
    let admin = locks.client().clone();
    for round in 0..4 {
        let name = format!("rf-head-cancel-{round}");
        let holder = locks.fair_lock(&name).acquire().await.unwrap();
        let history = History::default();
        let wait = Duration::from_secs(60);
        let a = waiter(locks.fair_lock(&name), "A", wait, Duration::ZERO, &history);
        until_queued(&admin, &name, 1).await;
        let b = waiter(locks.fair_lock(&name), "B", wait, Duration::ZERO, &history);
        until_queued(&admin, &name, 2).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let released = Instant::now();
        match round % 2 {
            0 => {
                a.abort();
                holder.unlock().await.unwrap();
            }
            _ => {
                holder.unlock().await.unwrap();
                a.abort();
            }
        }
        let b_at = join_bounded(b, Duration::from_secs(40), "B")
            .await
            .expect("B acquired");
        let took = b_at.duration_since(released);
        assert!(
            took < Duration::from_secs(5),
            "round {round}: B held the lock only {took:?} after the release (history {:?})",
            order(&history)
        );
        until_empty(&admin, &name, Duration::from_secs(5)).await;
    }
}

/// Eight waiters; five of them (head included) cancelled at once as the
/// lock is released. The three left hold it in arrival order, promptly,
/// and the queue ends empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_waiters_cancelled_at_once_leave_the_rest_in_order() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), sleepy()).await;
    let admin = locks.client().clone();
    let name = "rf-many-cancel";
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let history = History::default();
    let mut tasks = Vec::new();
    for i in 0..8 {
        tasks.push(Some(waiter(
            locks.fair_lock(name),
            &i.to_string(),
            Duration::from_secs(60),
            Duration::from_millis(20),
            &history,
        )));
        until_queued(&admin, name, i + 1).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released = Instant::now();
    for i in [0usize, 2, 3, 5, 7] {
        tasks[i].take().unwrap().abort();
    }
    holder.unlock().await.unwrap();
    for (i, t) in tasks.into_iter().enumerate() {
        if let Some(t) = t {
            join_bounded(t, Duration::from_secs(40), &format!("waiter {i}")).await;
        }
    }
    let took = released.elapsed();
    assert_eq!(order(&history), vec!["1", "4", "6"]);
    assert!(
        took < Duration::from_secs(8),
        "the three remaining waiters took {took:?} after the release"
    );
    until_empty(&admin, name, Duration::from_secs(5)).await;
}

/// The holder's fixed lease runs out with waiters queued: the head takes
/// the lock soon after (its nap is the holder's PTTL), the expired holder's
/// unlock is `Expired`, and does not disturb the new holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holders_lease_expiring_hands_over_to_the_head_promptly() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), sleepy()).await;
    let admin = locks.client().clone();
    let name = "rf-expiry";
    let holder = locks
        .fair_lock(name)
        .try_acquire_now(Some(Duration::from_millis(800)))
        .await
        .unwrap()
        .expect("free");
    let acquired_at = Instant::now();
    let history = History::default();
    let first = locks.fair_lock(name);
    let first_owner = first.owner().to_owned();
    let a = waiter(
        first,
        "A",
        Duration::from_secs(60),
        Duration::from_millis(1500),
        &history,
    );
    until_queued(&admin, name, 1).await;
    let b = waiter(
        locks.fair_lock(name),
        "B",
        Duration::from_secs(60),
        Duration::ZERO,
        &history,
    );
    until_queued(&admin, name, 2).await;
    let a_at = join_bounded(
        tokio::spawn(async move {
            loop {
                if !history_empty(&history) {
                    return (Instant::now(), history);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }),
        Duration::from_secs(40),
        "the head taking the expired lock",
    )
    .await;
    let took = a_at.0.duration_since(acquired_at);
    assert!(
        took < Duration::from_millis(800) + Duration::from_secs(3),
        "head held the lock {took:?} after the 800 ms lease began"
    );
    let err = holder.unlock().await.unwrap_err();
    assert!(matches!(err, LockError::Expired { .. }), "{err}");
    let holder_field: String = server.cli(&["HKEYS", name]).unwrap().trim().to_owned();
    assert_eq!(
        holder_field, first_owner,
        "the head's hold survived the stale unlock"
    );
    join_bounded(a, Duration::from_secs(40), "A").await;
    join_bounded(b, Duration::from_secs(40), "B").await;
    assert_eq!(order(&a_at.1), vec!["A", "B"]);
    until_empty(&admin, name, Duration::from_secs(5)).await;
}

fn history_empty(h: &History) -> bool {
    h.lock().unwrap().is_empty()
}

/// `force_unlock` with three queued: they all get the lock in order, each
/// promptly (the forced holder's lease is long), and the old holder learns
/// of the loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_with_a_queue_keeps_order_and_the_holder_learns() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), cfg(30_000, 30_000, 6_000)).await;
    let admin = locks.client().clone();
    let name = "rf-force";
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let history = History::default();
    let mut tasks = Vec::new();
    for i in 0..3 {
        tasks.push(waiter(
            locks.fair_lock(name),
            &i.to_string(),
            Duration::from_secs(60),
            Duration::from_millis(20),
            &history,
        ));
        until_queued(&admin, name, i + 1).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let forced = Instant::now();
    assert!(locks.fair_lock(name).force_unlock().await.unwrap());
    for t in tasks {
        join_bounded(t, Duration::from_secs(40), "waiter").await;
    }
    let took = forced.elapsed();
    assert_eq!(order(&history), vec!["0", "1", "2"]);
    assert!(
        took < Duration::from_secs(6),
        "three hand-overs took {took:?}"
    );
    tokio::time::timeout(Duration::from_secs(10), holder.lost())
        .await
        .expect("the forced holder learned of its loss");
    let err = holder.unlock().await.unwrap_err();
    assert!(
        matches!(err, LockError::NotOwner { .. } | LockError::Expired { .. }),
        "{err}"
    );
    until_empty(&admin, name, Duration::from_secs(5)).await;
}

/// A waiter whose `Locks` (not its runtime) is dropped while it waits
/// goes on waiting and gets the lock; the queue ends clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_outlives_its_dropped_locks() {
    let server = RedisServer::start();
    let url = server.url();
    let locks = locks_with(&url, cfg(1500, 1000, 6000)).await;
    let admin = locks.client().clone();
    let name = "rf-dropped-locks";
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let other = locks_with(&url, cfg(1500, 1000, 6000)).await;
    let lock = other.fair_lock(name);
    drop(other);
    let history = History::default();
    let w = waiter(lock, "w", Duration::from_secs(30), Duration::ZERO, &history);
    until_queued(&admin, name, 1).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(llen(&admin, name).await, 1, "the live waiter was purged");
    let released = Instant::now();
    holder.unlock().await.unwrap();
    let at = join_bounded(w, Duration::from_secs(30), "waiter")
        .await
        .expect("acquired");
    assert!(at.duration_since(released) < Duration::from_secs(5));
    until_empty(&admin, name, Duration::from_secs(5)).await;
}

/// SCRIPT FLUSH while waiters queue: the scripts are loaded again; order
/// holds, a timed-out waiter still leaves both keys, nothing stalls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_survives_a_script_flush() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), cfg(1500, 1000, 6000)).await;
    let admin = locks.client().clone();
    let name = "rf-flush";
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let history = History::default();
    let a = waiter(
        locks.fair_lock(name),
        "A",
        Duration::from_secs(30),
        Duration::from_millis(20),
        &history,
    );
    until_queued(&admin, name, 1).await;
    let b = waiter(
        locks.fair_lock(name),
        "B",
        Duration::from_secs(30),
        Duration::from_millis(20),
        &history,
    );
    until_queued(&admin, name, 2).await;
    server.cli(&["SCRIPT", "FLUSH"]).unwrap();
    // A waiter that times out after the flush leaves both keys.
    let timed = locks.fair_lock(name);
    let got = tokio::time::timeout(
        Duration::from_secs(10),
        timed.try_acquire(Duration::from_millis(300), None),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(got.is_none());
    server.cli(&["SCRIPT", "FLUSH"]).unwrap();
    assert_eq!(llen(&admin, name).await, 2);
    assert_eq!(zcard(&admin, name).await, 2);
    // Live waiters' renewals ran through the flush: still queued.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(llen(&admin, name).await, 2, "a live waiter was purged");
    server.cli(&["SCRIPT", "FLUSH"]).unwrap();
    holder.unlock().await.unwrap();
    join_bounded(a, Duration::from_secs(30), "A").await;
    join_bounded(b, Duration::from_secs(30), "B").await;
    assert_eq!(order(&history), vec!["A", "B"]);
    until_empty(&admin, name, Duration::from_secs(5)).await;
}

/// `fair_waiter_timeout` (300 ms, the minimum) far shorter than the
/// re-check (10 s): live waiters renew in time and keep their places for
/// many spans, then hold the lock in order, promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_span_shorter_than_the_recheck_keeps_live_waiters_in_place() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), cfg(300, 10_000, 20_000)).await;
    let admin = locks.client().clone();
    let name = "rf-short-span";
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let history = History::default();
    let a_lock = locks.fair_lock(name);
    let b_lock = locks.fair_lock(name);
    let expected = vec![a_lock.owner().to_owned(), b_lock.owner().to_owned()];
    let a = waiter(
        a_lock,
        "A",
        Duration::from_secs(30),
        Duration::from_millis(20),
        &history,
    );
    until_queued(&admin, name, 1).await;
    let b = waiter(
        b_lock,
        "B",
        Duration::from_secs(30),
        Duration::from_millis(20),
        &history,
    );
    until_queued(&admin, name, 2).await;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        let q = queue(&admin, name).await;
        assert_eq!(q, expected, "queue changed after {:?}", start.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let released = Instant::now();
    holder.unlock().await.unwrap();
    join_bounded(a, Duration::from_secs(30), "A").await;
    join_bounded(b, Duration::from_secs(30), "B").await;
    assert_eq!(order(&history), vec!["A", "B"]);
    assert!(released.elapsed() < Duration::from_secs(5));
}

/// A Redisson-style waiter at the head with a huge deadline (as a Java
/// client queues: ~300 s), then it leaves the way Java's cancel does
/// (LREM/ZREM, no message). The keylatch waiter behind it must not take
/// the free lock while the Java head is queued, and must get it soon after
/// the head leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_head_with_a_huge_deadline_that_leaves() {
    let server = RedisServer::start();
    let locks = locks_with(&server.url(), cfg(3000, 1000, 6000)).await;
    let admin = locks.client().clone();
    let name = "rf-java-head";
    let java = "00000000-0000-4000-8000-00000000java:7";
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let now = server_ms(&admin).await;
    admin
        .send(
            Cmd::new("ZADD")
                .key(timeout_key(name))
                .arg((now + 330_000).to_string())
                .arg(java),
        )
        .await
        .unwrap();
    admin
        .send(Cmd::new("RPUSH").key(queue_key(name)).arg(java))
        .await
        .unwrap();
    let history = History::default();
    let w = waiter(
        locks.fair_lock(name),
        "w",
        Duration::from_secs(30),
        Duration::ZERO,
        &history,
    );
    until_queued(&admin, name, 2).await;
    holder.unlock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(history_empty(&history), "keylatch overtook the Java head");
    let left = Instant::now();
    admin
        .send(Cmd::new("LREM").key(queue_key(name)).arg("0").arg(java))
        .await
        .unwrap();
    admin
        .send(Cmd::new("ZREM").key(timeout_key(name)).arg(java))
        .await
        .unwrap();
    let at = join_bounded(w, Duration::from_secs(30), "keylatch waiter")
        .await
        .expect("acquired");
    let took = at.duration_since(left);
    assert!(
        took < Duration::from_secs(5),
        "took {took:?} after the Java head left"
    );
    until_empty(&admin, name, Duration::from_secs(5)).await;
}

/// Re-entry while others queue: counts, keeps the token, does not touch
/// the queue; fencing tokens rise strictly across a chain of waiters on
/// two clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_entry_while_queued_and_fencing_tokens_rise() {
    let server = RedisServer::start();
    let url = server.url();
    let l1 = locks_with(&url, cfg(1500, 1000, 6000)).await;
    let l2 = locks_with(&url, cfg(1500, 1000, 6000)).await;
    let admin = l1.client().clone();
    let name = "rf-tokens";
    let lock = l1.fair_lock(name);
    let outer = lock.acquire().await.unwrap();
    let history = History::default();
    let w = waiter(
        l2.fair_lock(name),
        "w",
        Duration::from_secs(30),
        Duration::ZERO,
        &history,
    );
    until_queued(&admin, name, 1).await;
    let inner = tokio::time::timeout(
        Duration::from_secs(10),
        lock.clone().try_acquire(Duration::from_secs(2), None),
    )
    .await
    .unwrap()
    .unwrap()
    .expect("re-entry while another owner waits");
    assert_eq!(inner.hold_count(), 2);
    assert_eq!(inner.fencing_token(), outer.fencing_token());
    assert_eq!(llen(&admin, name).await, 1, "re-entry joined the queue");
    assert_eq!(zcard(&admin, name).await, 1);
    let now_inner = lock.try_acquire_now(None).await.unwrap().expect("re-entry");
    assert_eq!(now_inner.hold_count(), 3);
    now_inner.unlock().await.unwrap();
    inner.unlock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(history_empty(&history), "waiter got a lock still held once");
    let mut last = outer.fencing_token().expect("fencing on");
    outer.unlock().await.unwrap();
    join_bounded(w, Duration::from_secs(30), "w").await;

    // A chain: each holder releases to a waiter on the other client.
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let first = l1.fair_lock(name).acquire().await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..6 {
        let lock = if i % 2 == 0 {
            l2.fair_lock(name)
        } else {
            l1.fair_lock(name)
        };
        let tokens = Arc::clone(&tokens);
        tasks.push(tokio::spawn(async move {
            let g = lock
                .try_acquire(Duration::from_secs(30), None)
                .await
                .unwrap()
                .expect("acquired");
            tokens.lock().unwrap().push(g.fencing_token().unwrap());
            g.unlock().await.unwrap();
        }));
        until_queued(&admin, name, i + 1).await;
    }
    let t0 = first.fencing_token().unwrap();
    assert!(t0 > last, "token {t0} after {last}");
    first.unlock().await.unwrap();
    for t in tasks {
        join_bounded(t, Duration::from_secs(30), "chain").await;
    }
    last = t0;
    for t in tokens.lock().unwrap().iter() {
        assert!(
            *t > last,
            "tokens not rising: {:?} after {t0}",
            tokens.lock().unwrap()
        );
        last = *t;
    }
}

/// 24 contenders on 4 clients all start at once while the lock is held:
/// the queue's order is the arrival order; once released they must hold
/// the lock in exactly that order.
async fn concurrent_arrivals_follow_the_queue(url: &str, name: &str) {
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(locks_with(url, cfg(3000, 1000, 6000)).await);
    }
    let admin = clients[0].client().clone();
    let holder = clients[0].fair_lock(name).acquire().await.unwrap();
    let history = History::default();
    let mut tasks = Vec::new();
    for i in 0..24 {
        let lock = clients[i % 4].fair_lock(name);
        let label = lock.owner().to_owned();
        tasks.push(waiter(
            lock,
            &label,
            Duration::from_secs(60),
            Duration::from_millis(5),
            &history,
        ));
    }
    until_queued(&admin, name, 24).await;
    let arrival = queue(&admin, name).await;
    holder.unlock().await.unwrap();
    for t in tasks {
        join_bounded(t, Duration::from_secs(60), "contender").await;
    }
    assert_eq!(
        order(&history),
        arrival,
        "hold order differs from arrival order"
    );
    until_empty(&admin, name, Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_contenders_hold_the_lock_in_queue_order() {
    let server = RedisServer::start();
    concurrent_arrivals_follow_the_queue(&server.url(), "rf-concurrent").await;
}

/// On a cluster: concurrent arrival order, the head cancelled as the lock
/// is released, and the clones' shared place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_cluster_order_cancel_and_force_unlock() {
    let cluster = RedisCluster::start();
    let url = cluster.url();
    concurrent_arrivals_follow_the_queue(&url, "rf-cluster-order").await;

    let locks = locks_with(&url, sleepy()).await;
    let admin = locks.client().clone();
    let name = "rf-cluster-cancel";
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let history = History::default();
    let wait = Duration::from_secs(60);
    let a = waiter(locks.fair_lock(name), "A", wait, Duration::ZERO, &history);
    until_queued(&admin, name, 1).await;
    let b = waiter(locks.fair_lock(name), "B", wait, Duration::ZERO, &history);
    until_queued(&admin, name, 2).await;
    let c = waiter(locks.fair_lock(name), "C", wait, Duration::ZERO, &history);
    until_queued(&admin, name, 3).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released = Instant::now();
    a.abort();
    holder.unlock().await.unwrap();
    join_bounded(b, Duration::from_secs(40), "B").await;
    join_bounded(c, Duration::from_secs(40), "C").await;
    assert_eq!(order(&history), vec!["B", "C"]);
    assert!(
        released.elapsed() < Duration::from_secs(8),
        "took {:?}",
        released.elapsed()
    );
    until_empty(&admin, name, Duration::from_secs(5)).await;

    // force_unlock with a queue.
    let name = "rf-cluster-force";
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let history = History::default();
    let w = waiter(locks.fair_lock(name), "w", wait, Duration::ZERO, &history);
    until_queued(&admin, name, 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let forced = Instant::now();
    assert!(locks.fair_lock(name).force_unlock().await.unwrap());
    join_bounded(w, Duration::from_secs(40), "w").await;
    assert!(
        forced.elapsed() < Duration::from_secs(5),
        "took {:?}",
        forced.elapsed()
    );
    drop(holder);
}
