#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `Locks::stats` against a real server: guards by kind, holds alive,
//! waits by how they ended, losses by reason, renewal calls.

use std::time::{Duration, Instant};

use keylatch_harness::RedisServer;
use keylatch_lock::{Locks, LossReason};

mod common;
use common::locks::connect_with_watchdog;

async fn locks(server: &RedisServer) -> Locks {
    connect_with_watchdog(server, Duration::from_secs(1)).await
}

#[tokio::test]
async fn stats_count_guards_waits_losses_and_renewals() {
    let server = RedisServer::start();
    let a = locks(&server).await;
    let b = locks(&server).await;

    let held = a.lock("stats-held").acquire().await.unwrap();
    let fenced = a.fenced_lock("stats-fenced").acquire().await.unwrap();
    let sem = a.expirable_semaphore("stats-sem");
    assert!(sem.try_set_permits(1).await.unwrap());
    let permit = sem.acquire(1).await.unwrap();
    let s = a.stats();
    assert_eq!(s.held, 3, "{s:?}");
    assert_eq!(
        s.acquired,
        [("reentrant", 1), ("fenced", 1), ("expirable semaphore", 1)]
    );

    // B waits 300 ms in vain, then waits again and gets it at A's release.
    let got = b
        .lock("stats-held")
        .try_acquire(Duration::from_millis(300), None)
        .await
        .unwrap();
    assert!(got.is_none());
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move {
            b.lock("stats-held")
                .try_acquire(Duration::from_secs(10), None)
                .await
                .unwrap()
                .expect("acquired at the release")
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    held.unlock().await.unwrap();
    let g = waiter.await.unwrap();
    let w = b.stats().waits;
    assert_eq!((w.acquired, w.timed_out, w.failed), (1, 1, 0), "{w:?}");
    assert!(w.max >= Duration::from_millis(300), "{w:?}");
    assert!(w.total >= w.max && w.mean().is_some());
    assert_eq!(w.buckets.iter().map(|(_, n)| n).sum::<u64>(), 2);
    g.unlock().await.unwrap();

    // A loss: the fenced lock's key deleted behind its guard.
    server.cli(&["DEL", "stats-fenced"]).unwrap();
    let t0 = Instant::now();
    while a.stats().losses.is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(5), "the loss is counted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let s = a.stats();
    assert_eq!(s.losses, [(LossReason::Gone, 1)]);
    assert_eq!(s.held, 1, "the permit only: {s:?}");
    assert!(s.renewal_calls > 0, "{s:?}");
    // A round's time is counted once its last reply is in.
    let t0 = Instant::now();
    while a.stats().last_renewal_round.is_zero() {
        assert!(t0.elapsed() < Duration::from_secs(5), "a round's time");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let s = a.stats();
    assert!(s.longest_renewal_round >= s.last_renewal_round, "{s:?}");
    assert_eq!(s.subscription_fallbacks, 0);
    // The permit is renewed every third of its 1 s watchdog: each renewal
    // counts one renewed hold.
    let renewed = s.renewed_holds;
    assert!(renewed > 0, "{s:?}");
    let t0 = Instant::now();
    while a.stats().renewed_holds < renewed + 2 {
        assert!(t0.elapsed() < Duration::from_secs(5), "renewals counted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    permit.release().await.unwrap();
    // Nothing is held: no renewal counts any more.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = a.stats().renewed_holds;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(a.stats().renewed_holds, after, "renewed after the release");
    drop(fenced);
    assert_eq!(a.stats().held, 0);
}
