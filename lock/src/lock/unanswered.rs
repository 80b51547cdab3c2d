//! An acquire whose caller stopped waiting before its reply was read
//! (cancelled, timed out): the reply goes to a late handler that gives back
//! whatever the acquire took, in the background. [`Unanswered`] makes
//! [`Locks::settle`](crate::Locks::settle) wait for that handler: a process
//! that dropped a wait, settled and exited left the hold (or the permits)
//! the acquire took behind, held by nobody for a lease (review 37).

use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::Error;
use keylatch_resp::{Cmd, Frame};

use crate::context::Inner;

/// An acquire in flight on the connection serving `key`: dropped before
/// [`answered`](Self::answered), a barrier (a `PING` queued behind it on
/// that connection) is sent, and the acquire counts as a background
/// release until the barrier is answered, at most `lease` from then (past
/// it whatever the acquire took has expired by itself).
pub(crate) struct Unanswered<'a> {
    inner: &'a Arc<Inner>,
    key: &'a str,
    lease: Duration,
}

impl<'a> Unanswered<'a> {
    pub(crate) fn new(inner: &'a Arc<Inner>, key: &'a str, lease: Duration) -> Self {
        Self { inner, key, lease }
    }

    /// The reply was read, or the request surely did not run.
    pub(crate) fn answered(self) {
        std::mem::forget(self);
    }

    /// The request failed with `e`: waited for only when a reply may still
    /// come (it timed out); a broken connection answers nothing more.
    pub(crate) fn failed(self, e: &Error) {
        if !may_answer_late(e) {
            self.answered();
        }
    }
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        let client = self.inner.client.clone();
        let key = self.key.to_owned();
        let barrier = async move {
            // The connection the acquire went to (a cluster's: the key's
            // node; a redirect sent it on, and then the barrier only bounds
            // the wait as well as it can).
            if let Ok(conn) = client.connection_for_key(key.as_str()).await {
                let _: Result<Frame, Error> = conn.cmd(Cmd::new("PING")).await;
            }
        };
        self.inner
            .background
            .abandon(barrier, Instant::now() + self.lease);
    }
}

fn may_answer_late(e: &Error) -> bool {
    match e {
        Error::Timeout => true,
        Error::Routing { last, .. } => may_answer_late(last),
        _ => false,
    }
}

/// Awaits `request`, an acquire sent to the connection serving `key`,
/// under an [`Unanswered`] (cancelled, or timed out, it is waited for by
/// `settle`).
pub(crate) async fn watched<T>(
    inner: &Arc<Inner>,
    key: &str,
    lease: Duration,
    request: impl std::future::Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let unanswered = Unanswered::new(inner, key, lease);
    let out = request.await;
    match &out {
        Ok(_) => unanswered.answered(),
        Err(e) => unanswered.failed(e),
    }
    out
}
