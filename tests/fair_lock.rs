//! The fair lock (`Locks::fair_lock`) against real servers: arrival order
//! across clients (from a history), dead waiters purged within their bound,
//! live waiters keeping their place, cancelled and timed-out waiters leaving
//! the queue, re-entry, and a Redisson-layout waiter (Redisson's own fair
//! lock scripts, sent as a Java client sends them) sharing one queue with
//! keylatch waiters.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/redisson_fair.rs"]
mod redisson_fair;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keylatch_cluster::{Client, Commands, Event, PubSub};
use keylatch_harness::{RedisCluster, RedisServer};
use keylatch_lock::{LockError, Locks, LocksConfig};
use keylatch_resp::Frame;
use redisson_fair::{now_ms, queue_key, timeout_key, REDISSON_FAIR_LOCK, REDISSON_FAIR_UNLOCK};

/// Purge bound of the tests' waiters: short, so a dead waiter's cost shows.
const WAITER_BOUND: Duration = Duration::from_millis(1000);

fn config() -> LocksConfig {
    LocksConfig::default()
        .fair_waiter_timeout(WAITER_BOUND)
        .watchdog_timeout(Duration::from_secs(6))
}

async fn locks_at(url: &str) -> Locks {
    Locks::new(Client::connect(url).await.unwrap(), config())
}

async fn llen(client: &Client, name: &str) -> i64 {
    match client
        .send(keylatch_resp::Cmd::new("LLEN").arg(queue_key(name)))
        .await
        .unwrap()
    {
        Frame::Integer(n) => n,
        other => panic!("LLEN answered {other:?}"),
    }
}

async fn zcard(client: &Client, name: &str) -> i64 {
    match client
        .send(keylatch_resp::Cmd::new("ZCARD").arg(timeout_key(name)))
        .await
        .unwrap()
    {
        Frame::Integer(n) => n,
        other => panic!("ZCARD answered {other:?}"),
    }
}

async fn queue(client: &Client, name: &str) -> Vec<String> {
    match client
        .send(
            keylatch_resp::Cmd::new("LRANGE")
                .arg(queue_key(name))
                .arg("0")
                .arg("-1"),
        )
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

/// Waits (bounded) until the queue has `n` waiters.
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

/// 20 contenders on 4 clients join the queue one after another (each
/// seen in the queue before the next starts) while the lock is held; once
/// it is released they must hold it in exactly that order.
async fn arrival_order(url: &str, name: &str) {
    let clients: Vec<Locks> = {
        let mut v = Vec::new();
        for _ in 0..4 {
            v.push(locks_at(url).await);
        }
        v
    };
    let admin = clients[0].client().clone();
    let first = clients[0].fair_lock(name).acquire().await.unwrap();
    let history = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..20usize {
        let lock = clients[i % 4].fair_lock(name);
        let history = Arc::clone(&history);
        tasks.push(tokio::spawn(async move {
            let guard = lock
                .try_acquire(Duration::from_secs(60), None)
                .await
                .unwrap()
                .expect("acquired within 60 s");
            history.lock().unwrap().push((i, Instant::now()));
            tokio::time::sleep(Duration::from_millis(5)).await;
            guard.unlock().await.unwrap();
        }));
        until_queued(&admin, name, i as i64 + 1).await;
    }
    assert_eq!(zcard(&admin, name).await, 20, "one deadline per waiter");
    first.unlock().await.unwrap();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("every contender finished")
            .unwrap();
    }
    let order: Vec<usize> = history.lock().unwrap().iter().map(|(i, _)| *i).collect();
    assert_eq!(order, (0..20).collect::<Vec<_>>(), "arrival order");
    assert_eq!(llen(&admin, name).await, 0, "queue empty");
    assert_eq!(zcard(&admin, name).await, 0, "deadlines empty");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contenders_on_four_clients_hold_the_lock_in_arrival_order() {
    let server = RedisServer::start();
    arrival_order(&server.url(), "fair-order").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiter_stops_blocking_the_queue_within_its_bound() {
    let server = RedisServer::start();
    let url = server.url();
    let locks = locks_at(&url).await;
    let admin = locks.client().clone();
    let name = "fair-dead";
    let holder = locks.fair_lock(name).acquire().await.unwrap();

    // The dead waiter: its own process stands in as a runtime on another
    // thread, dropped (connections and tasks gone, nothing left to leave
    // the queue) once it is queued.
    let dead_url = url.clone();
    let (queued_tx, queued_rx) = std::sync::mpsc::channel();
    let (die_tx, die_rx) = std::sync::mpsc::channel::<()>();
    let dead = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let locks = rt.block_on(locks_at(&dead_url));
        let lock = locks.fair_lock(name);
        let owner = lock.owner().to_owned();
        rt.spawn(async move {
            let _ = lock.try_acquire(Duration::from_secs(60), None).await;
        });
        rt.block_on(async { tokio::time::sleep(Duration::from_millis(200)).await });
        queued_tx.send(owner).unwrap();
        die_rx.recv().unwrap();
        rt.shutdown_background();
    });
    let dead_owner = queued_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    until_queued(&admin, name, 1).await;
    let live = locks.fair_lock(name);
    let live_owner = live.owner().to_owned();
    let waiter = tokio::spawn(async move {
        let guard = live
            .try_acquire(Duration::from_secs(30), None)
            .await
            .unwrap();
        (guard.is_some(), Instant::now(), guard)
    });
    until_queued(&admin, name, 2).await;
    assert_eq!(queue(&admin, name).await, vec![dead_owner, live_owner]);
    die_tx.send(()).unwrap();
    dead.join().unwrap();
    // Nothing ran to take the dead waiter out: it is first in line still,
    // so only its deadline can end its turn.
    assert_eq!(
        queue(&admin, name).await.len(),
        2,
        "the dead waiter is still queued"
    );
    let released = Instant::now();
    holder.unlock().await.unwrap();
    let (got, at, guard) = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(got, "the live waiter got the lock");
    let took = at.duration_since(released);
    eprintln!("dead waiter purged: next waiter held the lock {took:?} after the release (bound {WAITER_BOUND:?})");
    // Within the purge bound plus one re-check of the waiter (1 s), with
    // room for a loaded machine; Redisson's default would be 300 s.
    assert!(
        took < WAITER_BOUND + Duration::from_secs(4),
        "a dead waiter blocked the queue for {took:?}"
    );
    guard.unwrap().unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_waiter_keeps_its_place_for_three_times_the_purge_bound() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let admin = locks.client().clone();
    let name = "fair-patient";
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let history = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..2usize {
        let lock = locks.fair_lock(name);
        let history = Arc::clone(&history);
        tasks.push(tokio::spawn(async move {
            let g = lock
                .try_acquire(Duration::from_secs(30), None)
                .await
                .unwrap()
                .expect("acquired");
            history.lock().unwrap().push(i);
            g.unlock().await.unwrap();
        }));
        until_queued(&admin, name, i as i64 + 1).await;
    }
    let first_in_line = queue(&admin, name).await[0].clone();
    tokio::time::sleep(WAITER_BOUND * 3 + Duration::from_millis(500)).await;
    assert_eq!(
        queue(&admin, name).await.first(),
        Some(&first_in_line),
        "the first waiter is still first after 3× the purge bound"
    );
    assert_eq!(llen(&admin, name).await, 2, "nobody was purged");
    holder.unlock().await.unwrap();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(30), t)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(*history.lock().unwrap(), vec![0, 1]);
}

async fn cancelled_and_timed_out_waiters_leave(url: &str, name: &str) {
    let locks = locks_at(url).await;
    let admin = locks.client().clone();
    let holder = locks.fair_lock(name).acquire().await.unwrap();

    // A waiter whose wait runs out leaves both keys before it returns.
    let timed = locks.fair_lock(name);
    let got = timed
        .try_acquire(Duration::from_millis(300), None)
        .await
        .unwrap();
    assert!(got.is_none());
    assert_eq!(
        llen(&admin, name).await,
        0,
        "timed-out waiter left the queue"
    );
    assert_eq!(zcard(&admin, name).await, 0, "and its deadline");

    // A waiter whose future is dropped while queued leaves in the background.
    let cancelled = locks.fair_lock(name);
    let task = tokio::spawn(async move {
        let _ = cancelled.try_acquire(Duration::from_secs(60), None).await;
    });
    until_queued(&admin, name, 1).await;
    assert_eq!(zcard(&admin, name).await, 1);
    task.abort();
    let start = Instant::now();
    while llen(&admin, name).await != 0 || zcard(&admin, name).await != 0 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the cancelled waiter is still queued"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    holder.unlock().await.unwrap();
    // Nothing of the waiters is left to block the next acquire.
    let next = locks.fair_lock(name).try_acquire_now(None).await.unwrap();
    assert!(next.is_some(), "free and nobody queued");
    next.unwrap().unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_and_timed_out_waiters_leave_the_queue() {
    let server = RedisServer::start();
    cancelled_and_timed_out_waiters_leave(&server.url(), "fair-cancel").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_entry_counts_and_an_expired_hold_is_a_typed_error() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let lock = locks.fair_lock("fair-reentry");
    let outer = lock.acquire().await.unwrap();
    let inner = lock.acquire().await.unwrap();
    assert_eq!(inner.hold_count(), 2);
    assert_eq!(inner.fencing_token(), outer.fencing_token());
    assert_eq!(
        server
            .cli(&["HGET", "fair-reentry", lock.owner()])
            .unwrap()
            .trim(),
        "2"
    );
    // Another owner waits its turn meanwhile.
    let other = locks.fair_lock("fair-reentry");
    assert!(other.try_acquire_now(None).await.unwrap().is_none());
    inner.unlock().await.unwrap();
    assert!(other.try_acquire_now(None).await.unwrap().is_none());
    outer.unlock().await.unwrap();
    let g = other.try_acquire_now(None).await.unwrap().expect("free");
    g.unlock().await.unwrap();

    let short = locks
        .fair_lock("fair-expiring")
        .try_acquire(Duration::ZERO, Some(Duration::from_millis(200)))
        .await
        .unwrap()
        .expect("free");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let err = short.unlock().await.unwrap_err();
    assert!(matches!(err, LockError::Expired { .. }), "{err}");
}

async fn redisson_try(client: &Client, name: &str, owner: &str) -> Frame {
    client
        .eval(
            REDISSON_FAIR_LOCK,
            &[name, &queue_key(name), &timeout_key(name)],
            &["30000", owner, "300000", &now_ms().to_string()],
        )
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_waiter_and_keylatch_waiters_share_one_queue_in_order() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let admin = locks.client().clone();
    let name = "fair-java";
    let java = "6f1c2d4e-0000-4000-8000-00000000java:42";
    let holder = locks.fair_lock(name).acquire().await.unwrap();

    // The Java waiter queues first (its script returns the wait in ms).
    let reply = redisson_try(&admin, name, java).await;
    assert!(matches!(reply, Frame::Integer(n) if n > 0), "{reply:?}");
    // Its own wake-up channel, as Redisson subscribes to it.
    let hub = PubSub::from_client_with(&admin, Default::default())
        .await
        .unwrap();
    let mut java_channel = hub
        .subscribe(&format!("redisson_lock__channel:{{{name}}}:{java}"))
        .await
        .unwrap();

    let history = Arc::new(Mutex::new(Vec::new()));
    let keylatch = locks.fair_lock(name);
    let keylatch_owner = keylatch.owner().to_owned();
    let h = Arc::clone(&history);
    let waiter = tokio::spawn(async move {
        let g = keylatch
            .try_acquire(Duration::from_secs(30), None)
            .await
            .unwrap()
            .expect("acquired");
        h.lock().unwrap().push("keylatch");
        g.unlock().await.unwrap();
    });
    until_queued(&admin, name, 2).await;
    assert_eq!(
        queue(&admin, name).await,
        vec![java.to_owned(), keylatch_owner]
    );

    // keylatch's release wakes only the head: the Java waiter.
    holder.unlock().await.unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), java_channel.recv())
        .await
        .expect("the Java head was woken")
        .expect("subscribed");
    match event {
        Event::Message { payload, .. } => assert_eq!(&payload[..], b"0"),
        other => panic!("expected the unlock message, got {other:?}"),
    }
    // The keylatch waiter, second in line, does not take the free lock.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(history.lock().unwrap().is_empty(), "keylatch overtook Java");
    let reply = redisson_try(&admin, name, java).await;
    assert_eq!(reply, Frame::Null, "the Java waiter acquired: {reply:?}");
    history.lock().unwrap().push("java");
    // Redisson's unlock wakes the keylatch waiter on its own channel.
    let reply = admin
        .eval(
            REDISSON_FAIR_UNLOCK,
            &[
                name,
                &queue_key(name),
                &timeout_key(name),
                &format!("redisson_lock__channel:{{{name}}}"),
                &format!("redisson_unlock_latch:{{{name}}}:{:032x}", 1),
            ],
            &[
                "0",
                "30000",
                java,
                &now_ms().to_string(),
                "publish",
                "10000",
            ],
        )
        .await
        .unwrap();
    assert_eq!(reply, Frame::Integer(1));
    tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(*history.lock().unwrap(), vec!["java", "keylatch"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_cluster_arrival_order_holds_and_waiters_leave() {
    let cluster = RedisCluster::start();
    arrival_order(&cluster.url(), "fair-cluster-order").await;
    cancelled_and_timed_out_waiters_leave(&cluster.url(), "fair-cluster-cancel").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_wakes_the_queue_head_on_its_own_channel() {
    let server = RedisServer::start();
    // Long re-checks and deadlines: only the message can wake the head soon
    // (its nap is the holder's PTTL, about 20 s).
    let config = LocksConfig::default()
        .fair_waiter_timeout(Duration::from_secs(60))
        .recheck(Duration::from_secs(30))
        .watchdog_timeout(Duration::from_secs(20));
    let locks = Locks::new(Client::connect(&server.url()).await.unwrap(), config);
    let admin = locks.client().clone();
    let name = "fair-force";
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let waiter = locks.fair_lock(name);
    let task = tokio::spawn(async move {
        let g = waiter
            .try_acquire(Duration::from_secs(30), None)
            .await
            .unwrap()
            .expect("acquired");
        (Instant::now(), g)
    });
    until_queued(&admin, name, 1).await;
    // Let the waiter's first nap begin.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let forced = Instant::now();
    assert!(locks.fair_lock(name).force_unlock().await.unwrap());
    let (at, g) = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .unwrap()
        .unwrap();
    let took = at.duration_since(forced);
    eprintln!("head acquired {took:?} after force_unlock");
    assert!(
        took < Duration::from_secs(5),
        "the head slept through the force unlock ({took:?})"
    );
    g.unlock().await.unwrap();
    let err = holder.unlock().await.unwrap_err();
    assert!(
        matches!(err, LockError::NotOwner { .. } | LockError::Expired { .. }),
        "{err}"
    );
}
