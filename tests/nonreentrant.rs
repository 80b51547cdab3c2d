//! The non-reentrant lock: the lease engine's second lease kind (Redisson's
//! RLock hash, re-entry refused), against a real redis-server.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use keylatch_cluster::Client;
use keylatch_harness::RedisServer;
use keylatch_lock::{LockError, Locks, LocksConfig, LossReason};

const LEASE: Duration = Duration::from_millis(1500);

async fn locks(server: &RedisServer) -> Locks {
    Locks::new(
        Client::connect(&server.url()).await.unwrap(),
        LocksConfig::default().watchdog_timeout(LEASE),
    )
}

fn hget(server: &RedisServer, key: &str, field: &str) -> String {
    server.cli(&["HGET", key, field]).unwrap().trim().to_owned()
}

#[tokio::test]
async fn a_re_entry_is_refused_and_the_first_hold_stands() {
    let server = RedisServer::start();
    let locks = locks(&server).await;
    let lock = locks.non_reentrant_lock("report");
    let guard = lock.acquire().await.unwrap();
    assert_eq!(guard.hold_count(), 1);
    for again in [lock.clone(), lock.clone()] {
        let err = again.try_acquire_now(None).await.unwrap_err();
        assert!(matches!(err, LockError::NotReentrant { .. }), "{err}");
    }
    assert_eq!(hget(&server, "report", lock.owner()), "1", "not counted");
    // Another owner, reentrant or not, is excluded from the same hash.
    assert!(locks
        .lock("report")
        .try_acquire_now(None)
        .await
        .unwrap()
        .is_none());
    let other = locks.non_reentrant_lock("report");
    assert!(other.try_acquire_now(None).await.unwrap().is_none());
    guard.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    // And a reentrant hold excludes the non-reentrant kind.
    let reentrant = locks.lock("report").acquire().await.unwrap();
    assert!(other.try_acquire_now(None).await.unwrap().is_none());
    reentrant.unlock().await.unwrap();
    other.acquire().await.unwrap().unlock().await.unwrap();
    assert_eq!(locks.watched_holds(), 0);
}

#[tokio::test]
async fn the_engine_renews_both_kinds_and_judges_each_on_its_own() {
    let server = RedisServer::start();
    let locks = locks(&server).await;
    let plain = locks.non_reentrant_lock("kind-a").acquire().await.unwrap();
    let counted = locks.lock("kind-b").acquire().await.unwrap();
    let calls = locks.renewal_calls();
    // Three leases: without renewals both keys would be long gone.
    tokio::time::sleep(LEASE * 3).await;
    assert!(!plain.is_lost() && !counted.is_lost());
    for key in ["kind-a", "kind-b"] {
        let pttl: i64 = server.cli(&["PTTL", key]).unwrap().trim().parse().unwrap();
        assert!(pttl > 0, "{key}: {pttl}");
    }
    assert!(locks.renewal_calls() > calls, "renewed by the engine");
    // One kind's hold deleted behind it: only that hold is lost.
    server.cli(&["DEL", "kind-a"]).unwrap();
    let reason = tokio::time::timeout(LEASE * 2, plain.lost())
        .await
        .expect("lost");
    assert_eq!(reason, LossReason::Gone);
    assert!(!counted.is_lost());
    assert!(matches!(
        plain.unlock().await,
        Err(LockError::Expired { .. })
    ));
    counted.unlock().await.unwrap();
    assert_eq!(locks.watched_holds(), 0);
}
