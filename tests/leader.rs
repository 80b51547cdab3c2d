#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Leader election (`Locks::leader`) against a real server: one leader at
//! a time across several processes (each a `Locks` of its own), observers
//! that see each change in order, a proclamation that changes, a leader
//! that dies (seen gone when its lease runs out, with nothing published).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keylatch_harness::RedisServer;
use keylatch_lock::{LeaderInfo, LockError, Locks, LocksConfig, LossReason};

mod common;
use common::locks::connect_with_watchdog;

async fn process(server: &RedisServer) -> Locks {
    connect_with_watchdog(server, Duration::from_secs(1)).await
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

// Found by an outside review (each failed before its fix): a leadership
// whose key an outsider overwrote or deleted, and an old term's guard
// used after its campaigner was elected again.

const T: Duration = Duration::from_secs(10);

/// `LeaderGuard::proclaim` # Errors: "`LockError::Lost` when this process
/// no longer leads (nothing is written)". The election's key overwritten
/// by a string: the leader is told (lost() fires), but proclaim answers a
/// raw server error instead of `Lost`.
#[tokio::test]
async fn proclaim_after_the_key_was_overwritten_is_lost() {
    let server = RedisServer::start();
    let locks = process(&server).await;
    let lead = locks.leader("ow").campaign("a").await.unwrap();
    server.cli(&["SET", "ow", "something-else"]).unwrap();
    let reason = tokio::time::timeout(T, lead.lost())
        .await
        .expect("lost() within 10 s");
    assert!(!lead.is_leader(), "lost: {reason:?}");
    let r = tokio::time::timeout(T, lead.proclaim("b")).await.unwrap();
    assert!(
        matches!(r, Err(LockError::Lost { .. })),
        "proclaim by a leader that no longer leads answered {r:?}"
    );
}

/// A campaigner whose first term was lost (its key deleted) campaigns
/// again and leads. Resigning the old, lost term's guard must not touch the
/// new term: `resign` "takes the proclamation back", and `clear` matches
/// the proclamation by owner only, so it deletes the new term's.
#[tokio::test]
async fn resigning_an_old_lost_term_keeps_the_new_terms_proclamation() {
    let server = RedisServer::start();
    let locks = process(&server).await;
    let watcher = process(&server).await;
    let election = locks.leader("terms");
    let old = election.campaign("term-1").await.unwrap();
    server.cli(&["DEL", "terms"]).unwrap();
    tokio::time::timeout(T, old.lost())
        .await
        .expect("lost() within 10 s");
    let new = tokio::time::timeout(T, election.campaign("term-2"))
        .await
        .unwrap()
        .unwrap();
    assert!(new.fencing_token() > old.fencing_token());
    let before = watcher.leader("terms").current().await.unwrap().unwrap();
    assert_eq!(before.value.as_deref(), Some("term-2"));
    let r = old.resign().await;
    let after = watcher.leader("terms").current().await.unwrap().unwrap();
    assert!(new.is_leader());
    assert_eq!(
        (after.token, after.value.as_deref()),
        (new.fencing_token(), Some("term-2")),
        "the old term's resign ({r:?}) changed what observers see of the live term: {after:?}"
    );
}

/// `Leader::current` on an election name an outsider reused for a string:
/// a typed `LockError::WrongType`, as every other call of the election
/// answers it, never a raw WRONGTYPE server error.
#[tokio::test]
async fn current_on_a_reused_name_is_typed() {
    let server = RedisServer::start();
    let locks = process(&server).await;
    server.cli(&["SET", "reused", "x"]).unwrap();
    let r = tokio::time::timeout(T, locks.leader("reused").current())
        .await
        .unwrap();
    assert!(
        matches!(r, Err(LockError::WrongType { .. })),
        "current() answered {r:?}"
    );
}

/// A `proclaim` that found the leadership gone answers `Lost`; the guard
/// must then know it: `is_leader()` ("whether this process still leads
/// (its hold not known lost)") must be false and `lost()` must resolve,
/// as `PermitGuard::extend` fires the loss when it finds its permits gone.
/// Here (no client tracking, a 30 s watchdog) the guard goes on saying it
/// leads until its next renewal, 10 s later.
#[tokio::test]
async fn a_proclaim_that_finds_the_leadership_gone_tells_the_guard() {
    let server = RedisServer::start();
    let locks = Locks::new(
        keylatch_cluster::Client::connect(&server.url())
            .await
            .unwrap(),
        LocksConfig::default().watchdog_timeout(Duration::from_secs(30)),
    );
    let lead = locks.leader("quiet").campaign("a").await.unwrap();
    server.cli(&["DEL", "quiet"]).unwrap();
    let r = lead.proclaim("b").await;
    assert!(matches!(r, Err(LockError::Lost { .. })), "{r:?}");
    let fired = tokio::time::timeout(Duration::from_millis(500), lead.lost()).await;
    assert!(
        !lead.is_leader() && fired.is_ok(),
        "proclaim answered {r:?}, yet is_leader() = {} and lost() {}",
        lead.is_leader(),
        if fired.is_ok() {
            "fired"
        } else {
            "had not fired 500 ms later"
        }
    );
}

/// The same owner's old, lost term proclaims after its campaigner was
/// elected again: "`LockError::Lost` when this process no longer leads
/// (nothing is written)". `leader_proclaim.lua` checks only that the owner
/// holds the lock, so the old term writes its stale token and value over
/// the live term's proclamation.
#[tokio::test]
async fn an_old_lost_term_cannot_proclaim_over_the_new_term() {
    let server = RedisServer::start();
    let locks = process(&server).await;
    let watcher = process(&server).await;
    let election = locks.leader("stale");
    let old = election.campaign("term-1").await.unwrap();
    server.cli(&["DEL", "stale"]).unwrap();
    tokio::time::timeout(T, old.lost())
        .await
        .expect("lost() within 10 s");
    assert!(!old.is_leader());
    let new = tokio::time::timeout(T, election.campaign("term-2"))
        .await
        .unwrap()
        .unwrap();
    let r = old.proclaim("term-1 again").await;
    let seen = watcher.leader("stale").current().await.unwrap().unwrap();
    assert!(
        matches!(r, Err(LockError::Lost { .. }))
            && seen.token == new.fencing_token()
            && seen.value.as_deref() == Some("term-2"),
        "old (lost) term's proclaim answered {r:?}; observers now see {seen:?} while the live term's token is {:?}",
        new.fencing_token()
    );
}
