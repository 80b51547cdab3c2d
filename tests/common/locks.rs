//! Helpers for the lock-core tests: a server with a `Locks` on it, taking
//! and warming a lock, the lock's server state for failure messages, waiting
//! until it is freed, and polling a future exactly once.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use keylatch_cluster::Client;
use keylatch_harness::RedisServer;
use keylatch_lock::{Lock, LockGuard, Locks, LocksConfig};

use super::Soon;

/// A fresh server and one `Locks` (default client config: 30 s request
/// timeout) on it.
pub(crate) async fn server_with_locks(cfg: LocksConfig) -> (RedisServer, Locks) {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    (server, Locks::new(client, cfg))
}

/// A `Locks` through `Locks::connect_with` on `server`, as a separate
/// process of the application would have, with a short `watchdog` (leases
/// that run out within a test, renewed every third of it).
pub(crate) async fn connect_with_watchdog(server: &RedisServer, watchdog: Duration) -> Locks {
    Locks::connect_with(
        keylatch_cluster::ClientConfig::from_url(&server.url()).unwrap(),
        LocksConfig::default().watchdog_timeout(watchdog),
    )
    .await
    .unwrap()
}

/// Takes `lock` at once with `lease` (`None`: the watchdog), within 5 s;
/// panics with `what` if it is not free.
pub(crate) async fn take(lock: &Lock, lease: Option<Duration>, what: &str) -> LockGuard {
    tokio::time::timeout(Duration::from_secs(5), lock.try_acquire_now(lease))
        .await
        .expect("acquire within 5 s")
        .unwrap()
        .expect(what)
}

/// One acquire + release of `lock` under the watchdog and with a fixed
/// lease: connection up and every acquire/release script in the cache.
pub(crate) async fn warm(lock: &Lock) {
    for lease in [None, Some(Duration::from_secs(5))] {
        take(lock, lease, "warm-up lock is free")
            .await
            .unlock()
            .await
            .unwrap();
    }
}

/// The lock's state for failure messages: EXISTS, PTTL, this owner's count.
pub(crate) async fn state(lock: &Lock) -> String {
    format!(
        "locked={:?} pttl={:?} this owner's count={:?}",
        lock.is_locked().await.map_err(|e| e.to_string()),
        lock.remaining_ttl().await.map_err(|e| e.to_string()),
        lock.hold_count().await.map_err(|e| e.to_string()),
    )
}

/// Waits until `lock`'s key is gone on the server, at most `within`.
pub(crate) async fn freed_within(lock: &Lock, within: Duration, what: &str) {
    Soon::new(within, Duration::from_millis(25))
        .until(|| async {
            match lock.is_locked().await {
                Ok(false) => Ok(()),
                Ok(true) => Err(format!(
                    "{what}: lock {:?} still held on the server ({})",
                    lock.name(),
                    state(lock).await
                )),
                Err(e) => Err(format!("{what}: EXISTS failed: {e}")),
            }
        })
        .await;
}

/// Polls `fut` exactly once, synchronously (no await point: on a
/// current-thread runtime no other task, such as a connection task, runs
/// meanwhile).
pub(crate) fn poll_once<F: Future + ?Sized>(fut: Pin<&mut F>) -> Poll<F::Output> {
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    let waker = Waker::from(Arc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    fut.poll(&mut cx)
}

/// [`poll_once`], then drops `fut`; whether it had finished.
pub(crate) fn poll_once_and_drop<F: Future>(fut: F) -> bool {
    let mut fut = std::pin::pin!(fut);
    poll_once(fut.as_mut()).is_ready()
}
