#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Critical sections that end with the hold (`run` on every guard type and
//! `Lock::run`), against real servers: the work's output comes back and the
//! hold is released after it; a hold lost while the work runs stops the
//! work at once (it never reaches its end) and comes back as
//! `LockError::Lost` with the reason.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::{Client, Commands};
use keylatch_harness::{Masters, RedisServer};
use keylatch_lock::{LockError, Locks, LocksConfig, LossReason, RedLock};
use keylatch_resp::Cmd;

/// A 1 s watchdog: a renewal every third of a second finds a deleted key.
fn config() -> LocksConfig {
    LocksConfig::default().watchdog_timeout(Duration::from_secs(1))
}

async fn locks(server: &RedisServer) -> Locks {
    Locks::connect_with(
        keylatch_cluster::ClientConfig::from_url(&server.url()).unwrap(),
        config(),
    )
    .await
    .unwrap()
}

/// Work that would run 10 s and then mark that it reached its end.
async fn long_work(reached_end: Arc<AtomicBool>) {
    tokio::time::sleep(Duration::from_secs(10)).await;
    reached_end.store(true, Ordering::SeqCst);
}

/// Deletes `keys` on `url` after `after`.
fn delete_later(url: String, keys: Vec<String>, after: Duration) {
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        let c = Client::connect(&url).await.unwrap();
        let mut del = Cmd::new("DEL");
        for k in &keys {
            del.push_key(k.as_str());
        }
        c.send(del).await.unwrap();
    });
}

/// Asserts a loss came back quickly and the work never reached its end.
async fn assert_stopped(out: Result<(), LockError>, started: Instant, reached_end: &AtomicBool) {
    assert!(
        matches!(
            out,
            Err(LockError::Lost {
                reason: LossReason::Gone,
                ..
            })
        ),
        "{out:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stopped at the loss"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!reached_end.load(Ordering::SeqCst), "the work was dropped");
}

#[tokio::test]
async fn a_lock_runs_its_section_with_the_token_and_releases_after() {
    let server = RedisServer::start();
    let locks = locks(&server).await;
    let fenced = locks.fenced_lock("section-fenced");
    let (token, held_inside) = fenced
        .run(|token| {
            let probe = fenced.clone();
            async move { (token, probe.is_locked().await.unwrap()) }
        })
        .await
        .unwrap();
    assert!(held_inside, "the work ran under the hold");
    let counter = server
        .cli(&["GET", "redisson_lock_token:{section-fenced}"])
        .unwrap();
    assert_eq!(
        token.map(|t| t.to_string()),
        Some(counter.trim().to_owned())
    );
    assert!(
        !fenced.is_locked().await.unwrap(),
        "released after the work"
    );

    // A guard taken first runs the same way.
    let lock = locks.lock("section-plain");
    let guard = lock.acquire().await.unwrap();
    assert_eq!(guard.run(|_| async { 7 }).await.unwrap(), 7);
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn a_lock_lost_during_its_section_stops_the_work() {
    let server = RedisServer::start();
    let locks = locks(&server).await;
    let reached_end = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&reached_end);
    delete_later(
        server.url(),
        vec!["section-lost".into()],
        Duration::from_millis(200),
    );
    let started = Instant::now();
    let out = locks.lock("section-lost").run(|_| long_work(flag)).await;
    assert_stopped(out, started, &reached_end).await;
}

#[tokio::test]
async fn expirable_permits_run_a_section_and_stop_it_when_lost() {
    let server = RedisServer::start();
    let locks = locks(&server).await;
    let sem = locks.expirable_semaphore("section-permits");
    assert!(sem.try_set_permits(2).await.unwrap());
    let g = sem.acquire(1).await.unwrap();
    assert_eq!(g.run(|| async { "rendered" }).await.unwrap(), "rendered");
    assert_eq!(sem.available().await.unwrap(), 2, "released after");

    let g = sem.acquire(1).await.unwrap();
    let reached_end = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&reached_end);
    let keys = server.cli(&["KEYS", "*section-permits*"]).unwrap();
    delete_later(
        server.url(),
        keys.split_whitespace().map(str::to_owned).collect(),
        Duration::from_millis(200),
    );
    let started = Instant::now();
    let out = g.run(|| long_work(flag)).await;
    assert_stopped(out, started, &reached_end).await;
}

#[tokio::test]
async fn a_multi_lock_runs_with_every_token_and_stops_when_a_member_is_lost() {
    let server = RedisServer::start();
    let locks = locks(&server).await;
    let multi = locks.multi_lock(&["section-a", "section-b"]);
    let tokens = multi
        .acquire()
        .await
        .unwrap()
        .run(|tokens| async move { tokens })
        .await
        .unwrap();
    assert_eq!(tokens.len(), 2);
    assert!(tokens.iter().all(Option::is_some), "{tokens:?}");

    let g = multi.acquire().await.unwrap();
    let reached_end = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&reached_end);
    delete_later(
        server.url(),
        vec!["section-b".into()],
        Duration::from_millis(200),
    );
    let started = Instant::now();
    let out = g.run(|_| long_work(flag)).await;
    assert_stopped(out, started, &reached_end).await;
    assert_eq!(server.cli(&["EXISTS", "section-a"]).unwrap().trim(), "0");
}

#[tokio::test]
async fn a_redlock_runs_its_section_and_stops_when_the_quorum_is_lost() {
    let masters = Masters::start(3);
    let mut nodes = Vec::new();
    for u in masters.urls() {
        nodes.push(Locks::new(Client::connect(&u).await.unwrap(), config()));
    }
    let redlock = RedLock::new(nodes).node_timeout(Duration::from_millis(300));
    let lock = redlock.lock("section-red");
    let g = lock.acquire().await.unwrap();
    assert_eq!(g.run(|| async { 3 }).await.unwrap(), 3);

    let g = lock.acquire().await.unwrap();
    let reached_end = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&reached_end);
    // Two of three masters forget it: one left is no quorum.
    for u in masters.urls().into_iter().take(2) {
        delete_later(u, vec!["section-red".into()], Duration::from_millis(200));
    }
    let started = Instant::now();
    let out = g.run(|| long_work(flag)).await;
    assert_stopped(out, started, &reached_end).await;
}
