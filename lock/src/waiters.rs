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

    /// Names with a queue (for tests: queues must not leak).
    pub(crate) fn len(&self) -> usize {
        self.queues.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

impl Drop for Turn {
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
