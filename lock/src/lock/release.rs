//! Releases that are never dropped, and futures that finish in the
//! background when their caller goes away.
//!
//! A release that meets a transient failure (a node reconnecting, a slot
//! migrating, a refused or unanswered request) is tried again with backoff
//! until the hold's local deadline: past it the lease ends the hold anyway.
//! A cancelled `unlock()` or a dropped guard hands its release to the
//! runtime, so it still goes out.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use keylatch_cluster::{Error, ServerErrorKind};
use keylatch_resp::Frame;

use super::base::Lock;
use crate::error::{LockError, LockResult};

/// First pause before a release is tried again; doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(20);
const MAX_PAUSE: Duration = Duration::from_millis(1000);

/// What a release does after a transient failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Keeps trying here (a background task already).
    Here,
    /// Hands the retries to a task of their own and returns the failure,
    /// so a caller waiting on it hears at once (allocates only then).
    Background,
}

/// Releases one hold of `lock`'s owner. `token` names the hold (`0`: by
/// owner, unchecked). Failures that surely did not run (not sent, a
/// redirect, a slot migrating, the server loading) are retried until
/// `until`; one of unknown outcome is not (see [`retriable`]): the lease
/// ends that count.
pub(crate) async fn release(
    lock: &Lock,
    token: u64,
    until: Option<Instant>,
    retry: Retry,
) -> LockResult<bool> {
    let err = match once(lock, token, until).await {
        Ok(done) => return done,
        Err(e) => e,
    };
    if !again(&err, until, FIRST_PAUSE) {
        return Err(err.into());
    }
    match (retry, tokio::runtime::Handle::try_current()) {
        (Retry::Background, Ok(rt)) => {
            let lock = lock.clone();
            let ticket = lock.inner.background.ticket();
            rt.spawn(async move {
                let _ = retry_until(&lock, token, until).await;
                drop(ticket);
            });
            Err(err.into())
        }
        _ => retry_until(lock, token, until).await,
    }
}

/// The retries after a first transient failure: with backoff, until the
/// release is delivered, fails for good, or `until` comes.
async fn retry_until(lock: &Lock, token: u64, until: Option<Instant>) -> LockResult<bool> {
    let mut pause = FIRST_PAUSE;
    loop {
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
        lock.inner.counters.release_retry();
        match once(lock, token, until).await {
            Ok(done) => return done,
            Err(e) if again(&e, until, pause) => {
                tracing::debug!(lock = %lock.name(), error = %e, "release failed; trying again");
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// One release call: `Ok` with the outcome when the server answered it,
/// `Err` with the client's failure otherwise.
async fn once(lock: &Lock, token: u64, until: Option<Instant>) -> Result<LockResult<bool>, Error> {
    let make = || lock.handle.release_cmd(&lock.inner.script_args, token);
    // Written once queued, even if the caller leaves before that: a release
    // asked for goes out (standalone; a cluster's keeps its future alive).
    let sent = lock
        .inner
        .client
        .eval_with_written(lock.handle.kind.release, make, until);
    Ok(match sent.await?.into_value() {
        Frame::Null => Err(LockError::NotOwner {
            name: lock.name().to_owned(),
        }),
        // 0: holds remain; 1: the last one ended. Anything else is no
        // answer of the release scripts.
        Frame::Integer(n @ (0 | 1)) => Ok(n == 1),
        other => Err(LockError::Protocol(other.shown())),
    })
}

/// Whether to try again after `err`, pausing `pause` first.
fn again(err: &Error, until: Option<Instant>, pause: Duration) -> bool {
    until.is_some_and(|u| Instant::now() + pause < u) && retriable(err)
}

/// Whether a failed release may be sent again: only when it surely did not
/// run. A release of unknown outcome (written, no answer) is never repeated:
/// if it ran, a second one would take one more count, and the hold's count
/// may be more than this process knows (a clone's re-entry counted on the
/// server before its reply revived the hold here).
pub(crate) fn retriable(e: &Error) -> bool {
    if e.is_unknown_outcome() {
        return false;
    }
    match e {
        Error::Disconnected => true,
        Error::Routing { last: inner, .. } => retriable(inner),
        _ => matches!(
            e.server_kind(),
            Some(
                ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::Loading
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::Moved
                    | ServerErrorKind::Ask
                    | ServerErrorKind::Busy
                    // A script refused at its first write for want of
                    // memory ran nothing (Redis refuses a script's write only
                    // while the script has written nothing); memory may come
                    // back before the lease ends.
                    | ServerErrorKind::Oom
            )
        ),
    }
}

/// A boxed future that is never abandoned: dropped before it finished, it is
/// moved onto the runtime and finishes there (its output discarded).
/// Without a runtime it is dropped (what it had not sent is never sent).
pub(crate) struct Detached<T: Send + 'static> {
    fut: Option<Pin<Box<dyn Future<Output = T> + Send>>>,
}

impl<T: Send + 'static> Detached<T> {
    pub(crate) fn new(fut: impl Future<Output = T> + Send + 'static) -> Self {
        Self {
            fut: Some(Box::pin(fut)),
        }
    }
}

impl<T: Send + 'static> Future for Detached<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let Some(fut) = self.fut.as_mut() else {
            // Polled after it finished: a caller's bug, but no panic here.
            return Poll::Pending;
        };
        let out = fut.as_mut().poll(cx);
        if out.is_ready() {
            self.fut = None;
        }
        out
    }
}

impl<T: Send + 'static> Drop for Detached<T> {
    fn drop(&mut self) {
        if let Some(fut) = self.fut.take() {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = fut.await;
                });
            }
        }
    }
}

/// Runs `fut` in the background after polling it once here, so whatever it
/// sends first is on the connection's queue before the caller sends anything
/// else (on a cluster, once the node's connection is up). A plain spawn
/// could run after the caller's next request.
pub(crate) fn spawn_queued(
    rt: &tokio::runtime::Handle,
    fut: impl Future<Output = ()> + Send + 'static,
) {
    /// The first poll's waker: the spawned task polls again with its own.
    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    let mut fut = Box::pin(fut);
    // Not while unwinding: a poll that panics then (a runtime shutting
    // down) would abort the process. The spawn alone is still best effort.
    if !std::thread::panicking() {
        let waker = std::task::Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        if fut.as_mut().poll(&mut cx).is_ready() {
            return;
        }
    }
    rt.spawn(fut);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_is_repeated_only_when_it_surely_did_not_run() {
        assert!(!retriable(&Error::Timeout), "it may have run");
        assert!(!retriable(&Error::ConnectionClosed), "it may have run");
        assert!(retriable(&Error::Disconnected));
        let tryagain = Error::from_server_error(b"TRYAGAIN Multiple keys request during rehashing");
        assert!(retriable(&tryagain));
        let wrongtype = Error::from_server_error(b"WRONGTYPE Operation against a key");
        assert!(!retriable(&wrongtype));
        let routed = Error::Routing {
            slot: Some(1),
            tried: Vec::new(),
            last: Box::new(Error::from_server_error(b"MOVED 1 127.0.0.1:7000")),
        };
        assert!(retriable(&routed));
    }

    #[tokio::test]
    async fn a_dropped_detached_future_still_finishes() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let d = Detached::new(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = tx.send(());
        });
        drop(d);
        tokio::time::timeout(Duration::from_secs(2), rx)
            .await
            .expect("finished in the background")
            .expect("sent");
    }
}
