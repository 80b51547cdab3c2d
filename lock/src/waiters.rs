//! Local wait queues: one per lock name within this process.
//!
//! Contenders of one process line up here (FIFO) and only the head goes back
//! to Redis when an unlock message arrives: one release wakes one local
//! contender, not a herd. The queue entry is a permit of a per-name
//! semaphore; dropping it (acquired, timed out, cancelled) lets the next in.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

#[derive(Default)]
pub(crate) struct WaitQueues {
    queues: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// The head-of-queue position for one name; dropping it passes the turn on.
pub(crate) struct Turn {
    /// `None` only if the semaphore were closed, which never happens:
    /// contending without a turn would still be correct, just less polite.
    _permit: Option<OwnedSemaphorePermit>,
    name: String,
    queues: Arc<WaitQueues>,
}

impl WaitQueues {
    /// Waits for this process's turn to contend for `name`.
    ///
    /// Cancel safe: a dropped wait leaves the queue (tokio's semaphore is
    /// FIFO and forgets cancelled waiters).
    pub(crate) async fn enter(self: &Arc<Self>, name: &str) -> Turn {
        let sem = {
            let mut q = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(
                q.entry(name.to_owned())
                    .or_insert_with(|| Arc::new(Semaphore::new(1))),
            )
        };
        let permit = sem.acquire_owned().await.ok();
        Turn {
            _permit: permit,
            name: name.to_owned(),
            queues: Arc::clone(self),
        }
    }

    /// The turn for `name` at once if nobody of this process is queued for
    /// it (the queue is made here, under the same lock as the check), else
    /// `None`. An acquire that may skip its plain first try takes its turn
    /// this way only: queued behind a process-mate, it could wait for a
    /// lock its own owner holds (a re-entry through another handle of the
    /// owner, a multi-lock naming the lock twice).
    pub(crate) fn enter_idle(self: &Arc<Self>, name: &str) -> Option<Turn> {
        let mut q = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        if q.contains_key(name) {
            return None;
        }
        let sem = Arc::new(Semaphore::new(1));
        let permit = Arc::clone(&sem).try_acquire_owned().ok()?;
        q.insert(name.to_owned(), sem);
        Some(Turn {
            _permit: Some(permit),
            name: name.to_owned(),
            queues: Arc::clone(self),
        })
    }

    /// How many contenders of this process hold or wait for the turn for
    /// `name` (0: none), read without queueing.
    pub(crate) fn queued(&self, name: &str) -> usize {
        let q = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        // The map's reference, then one per permit held or awaited.
        q.get(name)
            .map_or(0, |sem| Arc::strong_count(sem).saturating_sub(1))
    }

    /// Names with a queue (for tests: queues must not leak).
    pub(crate) fn len(&self) -> usize {
        self.queues.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

impl Drop for Turn {
    // (Dropped with its permit after this runs: the count below is the
    // map's, the permit's own, and each queued contender's.)
    fn drop(&mut self) {
        let mut q = self.queues.queues.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sem) = q.get(&self.name) {
            // Referenced only by the map and our own permit: nobody else is
            // queued, so forget the name and idle names do not accumulate.
            if Arc::strong_count(sem) <= 2 {
                q.remove(&self.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_idle_turn_is_had_only_while_nobody_is_queued() {
        let q = Arc::new(WaitQueues::default());
        let first = q.enter_idle("a").expect("nobody queued");
        assert!(q.enter_idle("a").is_none(), "the turn is taken");
        assert!(q.enter_idle("b").is_some(), "another name");
        let next = tokio::spawn({
            let q = Arc::clone(&q);
            async move { q.enter("a").await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!next.is_finished(), "queued behind the idle turn");
        assert_eq!(q.queued("a"), 2, "the turn's holder and one queued");
        assert_eq!(q.queued("c"), 0);
        drop(first);
        let second = next.await.expect("task");
        assert!(q.enter_idle("a").is_none(), "queued for again");
        drop(second);
        assert_eq!(q.len(), 0, "no queue left");
        assert!(q.enter_idle("a").is_some());
    }
}
