//! A waiter's place on the server, given up however its wait ends without
//! the lock: a fair lock's place in the queue, or a writer's entry among a
//! read-write lock's waiting writers. Awaited when the wait runs out,
//! spawned when the future is dropped or fails; if that call is lost too,
//! the place's own deadline (server time) ends it within its span.

use std::sync::atomic::Ordering;

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
/// acquire that took the lock took the place away itself). Clones of one
/// handle waiting at once share their owner's place in a fair queue: only
/// the last of them to give up leaves it.
pub(crate) struct Departure(Option<(Lock, Place)>);

impl Departure {
    /// `place` is given up by `lock`'s owner when this ends; `None` holds
    /// no place (nothing to give up).
    pub(crate) fn new(lock: &Lock, place: Option<Place>) -> Self {
        if place == Some(Place::FairQueue) {
            lock.handle.fair_waits.fetch_add(1, Ordering::AcqRel);
        }
        Self(place.map(|p| (lock.clone(), p)))
    }

    /// The lock was taken: the place went with it.
    pub(crate) fn keep(&mut self) {
        if let Some((lock, place)) = self.0.take() {
            let _ = last_out(&lock, place);
        }
    }

    /// This waiter's place, if it is the last of its owner to give it up.
    fn take(&mut self) -> Option<(Lock, Place)> {
        let (lock, place) = self.0.take()?;
        last_out(&lock, place).then_some((lock, place))
    }

    /// Gives the place up now (the wait ran out).
    pub(crate) async fn now(mut self) {
        if let Some((lock, place)) = self.take() {
            if let Err(e) = leave(&lock, place).await {
                tracing::debug!(lock = %lock.name(), error = %e, ?place,
                    "giving up a waiter's place failed; its deadline ends it");
            }
        }
    }
}

impl Drop for Departure {
    fn drop(&mut self) {
        let Some((lock, place)) = self.take() else {
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

/// One waiter of `lock`'s owner stops waiting: whether it was the last of
/// them (always, for a place no clone shares).
fn last_out(lock: &Lock, place: Place) -> bool {
    match place {
        Place::FairQueue => lock.handle.fair_waits.fetch_sub(1, Ordering::AcqRel) == 1,
        Place::WaitingWriters => true,
    }
}

async fn leave(lock: &Lock, place: Place) -> LockResult<bool> {
    match place {
        Place::FairQueue => crate::fair::leave(lock).await,
        Place::WaitingWriters => crate::rwlock::leave(lock).await,
    }
}
