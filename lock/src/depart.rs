//! A waiter's place on the server, given up however its wait ends without
//! the lock: a fair lock's place in the queue, or a writer's entry among a
//! read-write lock's waiting writers. Awaited when the wait runs out,
//! spawned when the future is dropped or fails; if that call is lost too,
//! the place's own deadline (server time) ends it within its span.

use crate::error::LockResult;
use crate::lock::Lock;

/// Which place a waiter holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// `redisson_lock_queue:{name}` and its deadlines (`fair.rs`).
    FairQueue,
    /// `{name}:rwlock_writers_waiting` (`rwlock.rs`).
    WaitingWriters,
}

/// Gives a waiter's place up unless [`keep`](Self::keep) was called (the
/// acquire that took the lock took the place away itself).
pub(crate) struct Departure(Option<(Lock, Place)>);

impl Departure {
    /// `place` is given up by `lock`'s owner when this ends; `None` holds
    /// no place (nothing to give up).
    pub(crate) fn new(lock: &Lock, place: Option<Place>) -> Self {
        Self(place.map(|p| (lock.clone(), p)))
    }

    /// The lock was taken: the place went with it.
    pub(crate) fn keep(&mut self) {
        self.0 = None;
    }

    /// Gives the place up now (the wait ran out).
    pub(crate) async fn now(mut self) {
        if let Some((lock, place)) = self.0.take() {
            if let Err(e) = leave(&lock, place).await {
                tracing::debug!(lock = %lock.name(), error = %e, ?place,
                    "giving up a waiter's place failed; its deadline ends it");
            }
        }
    }
}

impl Drop for Departure {
    fn drop(&mut self) {
        let Some((lock, place)) = self.0.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        rt.spawn(async move {
            let _ = leave(&lock, place).await;
        });
    }
}

async fn leave(lock: &Lock, place: Place) -> LockResult<bool> {
    match place {
        Place::FairQueue => crate::fair::leave(lock).await,
        Place::WaitingWriters => crate::rwlock::leave(lock).await,
    }
}
