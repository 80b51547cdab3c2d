//! Findings of an outside review of the second lock core, each a test that
//! failed on ae2778a and passes since the fixes: an acquire dropped with its
//! reply unread (f1) or during its NOSCRIPT retry (f2) is settled; a DEL
//! after the first renewal is noticed at once (f3, the renewal's own write
//! had ended tracking); a repeated release cannot end a revived re-entry
//! (f4); a re-entry while the counter is missing is not lost (f5); a
//! cancelled unlock still releases across a reconnect (f6).

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::locks::{freed_within, poll_once, server_with_locks, state, take, warm};

use std::time::{Duration, Instant};

use keylatch_cluster::{Client, ClientConfig, Connection};
use keylatch_harness::RedisServer;
use keylatch_lock::{Locks, LocksConfig};

/// Finding 1: an acquire whose reply reached the connection while its
/// caller was still alive, but whose caller is dropped before it reads the
/// reply, is never settled: `ReplyTx::Settle` hands the frame to the
/// oneshot (the send succeeds), the receiver is then dropped with the frame
/// in it, and the late handler never runs. The lock is held by nobody for
/// the whole watchdog lease (30 s).
///
/// (A `select!`/`timeout` around `acquire()` whose other branch is ready in
/// the same wake-up does exactly this.)
#[tokio::test]
async fn f1_an_acquire_dropped_with_its_reply_unread_is_settled() {
    let (_server, locks) = server_with_locks(LocksConfig::default()).await;
    let lock = locks.lock("rf-f1");
    warm(&lock).await;
    let mut fut = Box::pin(lock.try_acquire_now(None));
    assert!(poll_once(fut.as_mut()).is_pending(), "request queued");
    // The connection writes the acquire and reads its reply meanwhile.
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(fut);
    freed_within(
        &lock,
        Duration::from_secs(3),
        "an acquire dropped after its reply arrived (the late handler must release it)",
    )
    .await;
}

/// Finding 2: the NOSCRIPT retry of a standalone acquire
/// (`Client::eval_shared_settled` → `load_and_run`) has no late handler, so
/// an acquire cancelled while that retry is in flight leaves the lock held
/// by nobody for the whole lease.
#[tokio::test]
async fn f2_an_acquire_cancelled_during_its_noscript_retry_is_settled() {
    let (server, locks) = server_with_locks(LocksConfig::default()).await;
    let lock = locks.lock("rf-f2");
    warm(&lock).await;
    server.cli(&["SCRIPT", "FLUSH"]).unwrap();
    let mut fut = Box::pin(lock.try_acquire_now(None));
    assert!(poll_once(fut.as_mut()).is_pending(), "EVALSHA queued");
    // NOSCRIPT comes back.
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.pause().unwrap();
    // SCRIPT LOAD + EVALSHA queued, then written to the stopped server.
    assert!(poll_once(fut.as_mut()).is_pending(), "retry queued");
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(fut);
    server.resume().unwrap();
    freed_within(
        &lock,
        Duration::from_secs(3),
        "an acquire cancelled while its NOSCRIPT retry was in flight",
    )
    .await;
}

/// Finding 3: client tracking is lost after the first renewal. With
/// `NOLOOP`, the renewal script's own PEXPIRE (on the same connection as the
/// tracked read) removes the key from the server's tracking table without
/// an invalidation, and the engine keeps `tracked = true`: a DEL by anyone
/// else after that is noticed only at the next renewal (lease/3), not at
/// once as ARCHITECTURE.md promises.
#[tokio::test]
async fn f3_a_del_after_the_first_renewal_is_still_noticed_at_once() {
    let server = RedisServer::start();
    let url = server.url();
    let cfg = LocksConfig::default().watchdog_timeout(Duration::from_secs(9));
    let locks = Locks::connect_with(ClientConfig::from_url(&url).unwrap(), cfg)
        .await
        .unwrap();
    let outsider = Connection::connect(&url).await.unwrap();
    let lock = locks.lock("rf-f3");
    let g = lock.acquire().await.unwrap();
    // First renewal at ~3 s (lease/3); the next at ~6 s.
    tokio::time::sleep(Duration::from_millis(3600)).await;
    assert!(locks.renewal_calls() >= 1, "renewed once");
    assert!(!g.is_lost());
    let sent = Instant::now();
    keylatch_cluster::Commands::del(&outsider, ["rf-f3"])
        .await
        .unwrap();
    match tokio::time::timeout(Duration::from_millis(1500), g.lost()).await {
        Ok(_) => {}
        Err(_) => panic!(
            "DEL after the first renewal: lost() not fired within 1.5 s \
             (tracking was dropped by our own renewal); it fires only at the next renewal"
        ),
    }
    eprintln!("lost after {:?}", sent.elapsed());
}

/// Control for finding 3: the same DEL before the first renewal is
/// noticed at once (this passes).
#[tokio::test]
async fn f3_control_a_del_before_the_first_renewal_is_noticed_at_once() {
    let server = RedisServer::start();
    let url = server.url();
    let cfg = LocksConfig::default().watchdog_timeout(Duration::from_secs(9));
    let locks = Locks::connect_with(ClientConfig::from_url(&url).unwrap(), cfg)
        .await
        .unwrap();
    let outsider = Connection::connect(&url).await.unwrap();
    let lock = locks.lock("rf-f3c");
    let g = lock.acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(locks.renewal_calls(), 0, "not renewed yet");
    keylatch_cluster::Commands::del(&outsider, ["rf-f3c"])
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_millis(500), g.lost())
        .await
        .expect("lost() within 0.5 s of a DEL before any renewal");
}

/// Finding 4: a "last" release of unknown outcome is repeated, but a
/// re-entry that was already counted on the server can revive the hold
/// meanwhile (`Hold::join`): the repeat then deletes the key under that
/// live guard. Mutual exclusion is broken (another owner takes the lock)
/// while the guard is not reported lost (no tracking: not before the next
/// renewal, lease/3 = 10 s).
#[tokio::test]
async fn f4_a_repeated_last_release_does_not_end_a_revived_reentry() {
    let server = RedisServer::start();
    let mut cfg = ClientConfig::from_url(&server.url()).unwrap();
    cfg.seeds[0] = cfg.seeds[0]
        .clone()
        .request_timeout(Some(Duration::from_millis(300)));
    let client = Client::connect_with(cfg).await.unwrap();
    let locks = Locks::new(client, LocksConfig::default());
    let lock = locks.lock("rf-f4");
    warm(&lock).await;
    let ga = take(&lock, None, "free").await;

    // A clone re-enters: the server counts 2, the reply waits unread.
    let clone = lock.clone();
    let mut fb = Box::pin(clone.try_acquire_now(None));
    assert!(poll_once(fb.as_mut()).is_pending());
    tokio::time::sleep(Duration::from_millis(100)).await;

    server.pause().unwrap();
    // The first guard leaves: the hold's last guard here, so its release
    // is retried after a timeout.
    let unlock = tokio::spawn(ga.unlock());
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The re-entry's reply is read now: it revives the hold.
    let gb = fb.await.unwrap().expect("the re-entry was counted");
    assert_eq!(gb.hold_count(), 2);
    // The release times out (300 ms) and is sent again, and again.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    server.resume().unwrap();
    let _ = unlock.await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let other = locks.lock("rf-f4");
    let stolen = other.try_acquire_now(None).await.unwrap();
    let lost = gb.is_lost();
    assert!(
        stolen.is_none() || lost,
        "another owner took the lock while the revived re-entry's guard is live and not lost \
         (a repeated release ended it); state now: {}",
        state(&lock).await
    );
}

/// Finding 5: a re-entry while the fencing counter is missing (deleted
/// alone: the renewal script puts it back, so the design expects this)
/// returns token 0 (`reentrant_acquire.lua`: `get(KEYS[2]) or '0'`). The
/// re-entry then becomes a new `Hold` with token 0, which the engine judges
/// older than the live hold and fires at once: a guard of a lock this owner
/// holds is reported lost (and its release goes out by owner, unchecked).
#[tokio::test]
async fn f5_a_reentry_with_the_counter_deleted_alone_is_not_lost() {
    let server = RedisServer::start();
    // Tracking on (the README path): the engine looks at new holds within
    // milliseconds (without it, at its next planned wake, lease/3 later).
    let locks = Locks::connect(&server.url()).await.unwrap();
    let lock = locks.lock("rf-f5");
    let g1 = take(&lock, None, "free").await;
    server.cli(&["DEL", "redisson_lock_token:{rf-f5}"]).unwrap();
    let g2 = take(&lock.clone(), None, "re-entry").await;
    assert_eq!(g2.hold_count(), 2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(lock.is_held_by_me().await.unwrap(), "the lock is held");
    assert!(
        !g2.is_lost(),
        "the re-entry's guard is reported lost ({:?}) although this owner holds the lock; \
         token shown {:?}, first guard's {:?}",
        tokio::time::timeout(Duration::from_millis(1), g2.lost())
            .await
            .ok(),
        g2.fencing_token(),
        g1.fencing_token()
    );
    assert_eq!(
        g2.fencing_token(),
        g1.fencing_token(),
        "one hold, one token"
    );
}

/// Finding 6: `unlock()` is documented cancel safe ("the release goes on in
/// the background, as dropping the guard would have sent it"), but on a
/// standalone client it is not `Detached`: cancelled after its release was
/// queued, a transient failure of that release (Disconnected while the
/// connection is being rebuilt) is retried by nobody. Renewal stopped at
/// `leave()`, so the lock stays held by nobody for the rest of its lease.
/// (Dropping the guard instead retries, in `spawn_queued`.)
#[tokio::test]
async fn f6_an_unlock_cancelled_during_a_reconnect_still_releases() {
    let mut server = RedisServer::start();
    let locks = Locks::new(
        Client::connect(&server.url()).await.unwrap(),
        LocksConfig::default(),
    );
    let lock = locks.lock("rf-f6");
    warm(&lock).await;
    let g = take(&lock, None, "free").await;
    server.cli(&["SAVE"]).unwrap();
    server.kill();
    tokio::time::sleep(Duration::from_millis(200)).await;
    {
        let mut u = Box::pin(g.unlock());
        assert!(poll_once(u.as_mut()).is_pending(), "release queued");
    }
    // The connection task fails the queued release (Disconnected).
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.restart().unwrap();
    assert!(
        server.cli(&["EXISTS", "rf-f6"]).unwrap().trim() == "1",
        "the RDB brought the hold back"
    );
    freed_within(
        &lock,
        Duration::from_secs(6),
        "an unlock() cancelled while the connection was down",
    )
    .await;
}
