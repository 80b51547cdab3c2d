#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Leader election (`Locks::leader`) against a real server: one leader at
//! a time across several processes (each a `Locks` of its own), observers
//! that see each change in order, a proclamation that changes, a leader
//! that dies (seen gone when its lease runs out, with nothing published).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keylatch_harness::RedisServer;
use keylatch_lock::{LeaderInfo, Locks, LocksConfig, LossReason};

async fn process(server: &RedisServer) -> Locks {
    Locks::connect_with(
        keylatch_cluster::ClientConfig::from_url(&server.url()).unwrap(),
        LocksConfig::default().watchdog_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap()
}

/// The observer's next answer, within 10 s.
async fn next(w: &mut keylatch_lock::LeaderObserver) -> Option<LeaderInfo> {
    tokio::time::timeout(Duration::from_secs(10), w.next())
        .await
        .expect("a change within 10 s")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_observers_see_each_change_in_order() {
    let server = RedisServer::start();
    let watcher = process(&server).await;
    let mut watch = watcher.leader("sched").observe().await;
    assert_eq!(next(&mut watch).await, None, "nobody leads yet");

    // Three processes, two terms each: lead 100 ms, resign.
    let terms: Arc<Mutex<Vec<(String, Instant, Instant)>>> = Arc::default();
    let mut tasks = Vec::new();
    for p in 0..3 {
        let locks = process(&server).await;
        let terms = Arc::clone(&terms);
        tasks.push(tokio::spawn(async move {
            let election = locks.leader("sched");
            for _ in 0..2 {
                let lead = election.campaign(&format!("p{p}")).await.unwrap();
                let from = Instant::now();
                assert!(lead.is_leader());
                tokio::time::sleep(Duration::from_millis(100)).await;
                assert!(lead.is_leader(), "not lost while leading");
                let to = Instant::now();
                lead.resign().await.unwrap();
                terms.lock().unwrap().push((format!("p{p}"), from, to));
            }
        }));
    }
    // The observer: every term (a token of its own) with its value, in
    // the order they led; a process may lead twice in a row.
    let mut seen: Vec<(u64, String)> = Vec::new();
    while seen.len() < 6 {
        if let Some(LeaderInfo {
            token: Some(t),
            value: Some(v),
            ..
        }) = next(&mut watch).await
        {
            if seen.last().map(|s| s.0) != Some(t) {
                seen.push((t, v));
            }
        }
    }
    assert!(
        seen.windows(2).all(|w| w[0].0 < w[1].0),
        "tokens rise: {seen:?}"
    );
    let seen: Vec<String> = seen.into_iter().map(|s| s.1).collect();
    for t in tasks {
        t.await.unwrap();
    }
    let mut terms = terms.lock().unwrap().clone();
    terms.sort_by_key(|t| t.1);
    for w in terms.windows(2) {
        assert!(w[0].2 <= w[1].1, "one leader at a time: {terms:?}");
    }
    let order: Vec<String> = terms.iter().map(|t| t.0.clone()).collect();
    assert_eq!(seen, order, "the observer saw each term, in order");
    assert_eq!(watcher.leader("sched").current().await.unwrap(), None);
}

#[tokio::test]
async fn a_new_proclamation_and_a_lost_leadership_are_seen() {
    let server = RedisServer::start();
    let leader = process(&server).await;
    let watcher = process(&server).await;
    let election = leader.leader("proc");
    let lead = election.campaign("10.0.0.1:80").await.unwrap();
    let mut watch = watcher.leader("proc").observe().await;
    let first = next(&mut watch).await.unwrap();
    assert_eq!(first.value.as_deref(), Some("10.0.0.1:80"));
    assert_eq!(first.owner, election.owner());
    assert_eq!(first.token, lead.fencing_token());
    lead.proclaim("10.0.0.1:81").await.unwrap();
    assert_eq!(
        next(&mut watch).await.unwrap().value.as_deref(),
        Some("10.0.0.1:81")
    );
    // Deleted behind the leader: it is told, and observers see nobody.
    server.cli(&["DEL", "proc"]).unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(5), lead.lost())
        .await
        .unwrap();
    assert_eq!(reason, LossReason::Gone);
    assert!(!lead.is_leader());
    assert_eq!(next(&mut watch).await, None);
    assert!(matches!(
        lead.proclaim("late").await,
        Err(keylatch_lock::LockError::Lost { .. })
    ));
}

#[tokio::test]
async fn a_leader_that_dies_is_seen_gone_when_its_lease_runs_out() {
    let server = RedisServer::start();
    // A leader that died: its hold and proclamation, a 600 ms lease left,
    // and nobody to publish anything.
    server.cli(&["HSET", "dead", "gone:1", "1"]).unwrap();
    server.cli(&["PEXPIRE", "dead", "600"]).unwrap();
    server
        .cli(&["SET", "keylatch_leader:{dead}", "9\ngone:1\nold-host"])
        .unwrap();
    let watcher = process(&server).await;
    let mut watch = watcher.leader("dead").observe().await;
    let first = next(&mut watch).await.unwrap();
    assert_eq!(
        (first.owner.as_str(), first.value.as_deref()),
        ("gone:1", Some("old-host"))
    );
    let t0 = Instant::now();
    assert_eq!(next(&mut watch).await, None, "gone with its lease");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    // The stale proclamation is never shown for the next leader.
    let next_leader = process(&server).await;
    let lead = next_leader
        .leader("dead")
        .campaign("new-host")
        .await
        .unwrap();
    let now = next(&mut watch).await.unwrap();
    assert_ne!(now.value.as_deref(), Some("old-host"));
    lead.resign().await.unwrap();
}
