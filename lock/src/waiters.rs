//! Local wait queues: one per lock name within this process.
//!
//! Contenders of one process line up here (FIFO) and only the head goes back
//! to Redis when an unlock message arrives: one release wakes one local
//! contender, not a herd. The queue entry is a permit of a per-name
//! semaphore; dropping it (acquired, timed out, cancelled) lets the next in.
//!
//! The queues also remember which names this process waited on lately
//! ([`recently_waited`](WaitQueues::recently_waited)): the hub keeps their
//! subscriptions a while after the last waiter leaves, so a contender of
//! such a name can subscribe before its first try at no cost of a round
//! trip, and that first try can then register it as a waiter (one try per
//! wait instead of two).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a name counts as recently waited on after a wait of it ended:
/// half the hub's linger (a second), so its subscription is surely still
/// there.
pub(crate) const RECENT: Duration = Duration::from_millis(500);

/// The fewest remembered names at which the old ones are swept out.
const SWEEP_FLOOR: usize = 64;

#[derive(Default)]
pub(crate) struct WaitQueues {
    queues: Mutex<Queues>,
    /// How many names are queued or remembered (`Queues::turns` and
    /// `recent`): none, and [`recently_waited`](Self::recently_waited) is
    /// one atomic load.
    remembered: AtomicUsize,
}

#[derive(Default)]
struct Queues {
    turns: HashMap<String, Arc<Semaphore>>,
    /// When a wait of each name last ended.
    recent: HashMap<String, Instant>,
    /// Sweep `recent` once it holds this many (doubling: amortised O(1)).
    sweep_at: usize,
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
    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for this process's turn to contend for `name`.
    ///
    /// Cancel safe: a dropped wait leaves the queue (tokio's semaphore is
    /// FIFO and forgets cancelled waiters).
    pub(crate) async fn enter(self: &Arc<Self>, name: &str) -> Turn {
        let sem = {
            let mut q = self.lock();
            let sem = Arc::clone(
                q.turns
                    .entry(name.to_owned())
                    .or_insert_with(|| Arc::new(Semaphore::new(1))),
            );
            self.remembered
                .store(q.turns.len() + q.recent.len(), Ordering::Release);
            sem
        };
        let permit = sem.acquire_owned().await.ok();
        Turn {
            _permit: permit,
            name: name.to_owned(),
            queues: Arc::clone(self),
        }
    }

    /// Whether a wait of `name` in this process ended within [`RECENT`]
    /// (or one is under way).
    pub(crate) fn recently_waited(&self, name: &str) -> bool {
        if self.remembered.load(Ordering::Acquire) == 0 {
            return false;
        }
        let q = self.lock();
        q.turns.contains_key(name) || q.recent.get(name).is_some_and(|t| t.elapsed() < RECENT)
    }

    /// Names with a queue (for tests: queues must not leak).
    pub(crate) fn len(&self) -> usize {
        self.lock().turns.len()
    }

    /// Remembered names (for tests: the memory is bounded).
    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.lock().recent.len()
    }
}

impl Queues {
    /// A wait of `name` ended at `now`; names not waited on within
    /// [`RECENT`] are forgotten now and then.
    fn waited(&mut self, name: &str, now: Instant) -> usize {
        match self.recent.get_mut(name) {
            Some(t) => *t = now,
            None => {
                self.recent.insert(name.to_owned(), now);
            }
        }
        if self.recent.len() >= self.sweep_at.max(SWEEP_FLOOR) {
            self.recent
                .retain(|_, t| now.saturating_duration_since(*t) < RECENT);
            self.sweep_at = 2 * self.recent.len();
        }
        self.recent.len()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let queues = &self.queues;
        let mut q = queues.lock();
        if let Some(sem) = q.turns.get(&self.name) {
            // Referenced only by the map and our own permit: nobody else is
            // queued, so forget the name and idle names do not accumulate.
            if Arc::strong_count(sem) <= 2 {
                q.turns.remove(&self.name);
            }
        }
        let n = q.waited(&self.name, Instant::now()) + q.turns.len();
        queues.remembered.store(n, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_name_is_recent_while_waited_on_and_a_while_after() {
        let q = Arc::new(WaitQueues::default());
        assert!(!q.recently_waited("a"), "never waited on");
        let turn = q.enter("a").await;
        assert!(q.recently_waited("a"), "under way");
        assert!(!q.recently_waited("b"));
        drop(turn);
        assert!(q.recently_waited("a"), "just ended");
        assert_eq!(q.len(), 0, "the queue itself is gone");
    }

    #[test]
    fn old_names_are_swept_so_the_memory_stays_bounded() {
        let mut q = Queues::default();
        let t0 = Instant::now();
        for i in 0..1_000 {
            q.waited(&format!("old{i}"), t0);
        }
        let later = t0 + RECENT * 2;
        let mut most = 0;
        for i in 0..1_000 {
            most = most.max(q.waited(&format!("new{i}"), later));
        }
        // The old thousand went at the first sweep after they aged; the
        // new ones count until their own sweep.
        assert!(q.recent.keys().all(|k| k.starts_with("new")), "old swept");
        assert!(most <= 2 * 1_000 + SWEEP_FLOOR, "{most}");
        let much_later = later + RECENT * 2;
        q.waited("last", much_later);
        for i in 0..SWEEP_FLOOR {
            q.waited(&format!("x{i}"), much_later);
        }
        assert!(q.recent.len() <= SWEEP_FLOOR + 1, "{}", q.recent.len());
    }

    #[tokio::test]
    async fn a_name_waited_on_long_ago_is_not_recent() {
        let q = Arc::new(WaitQueues::default());
        drop(q.enter("a").await);
        {
            let mut inner = q.lock();
            let old = Instant::now()
                .checked_sub(RECENT * 2)
                .expect("a clock past its start");
            inner.recent.insert("a".into(), old);
        }
        assert!(!q.recently_waited("a"));
        assert_eq!(q.remembered(), 1);
    }
}
