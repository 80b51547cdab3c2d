//! Releases handed to the runtime (retried after a transient failure, or
//! sent after their caller left), counted so a process can wait for them
//! before it exits ([`Locks::settle`](crate::Locks::settle)): a short-lived
//! program (the CLI's `exec`) would otherwise end with a release still
//! queued, and its lock would stay held by nobody until the lease ran out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Notify;

/// The count of background releases of one `Locks`.
#[derive(Debug, Default)]
pub(crate) struct Background {
    running: AtomicUsize,
    idle: Notify,
}

/// One background release, counted until dropped (finished, failed for
/// good, or abandoned with its runtime).
#[derive(Debug)]
pub(crate) struct Ticket(Arc<Background>);

impl Background {
    /// Counts one more background release until the ticket is dropped.
    pub(crate) fn ticket(self: &Arc<Self>) -> Ticket {
        self.running.fetch_add(1, Ordering::AcqRel);
        Ticket(Arc::clone(self))
    }

    /// Background releases not finished yet.
    pub(crate) fn running(&self) -> usize {
        self.running.load(Ordering::Acquire)
    }

    /// Resolves once none is running.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            // Registered before the check, so a drop in between wakes it.
            notified.as_mut().enable();
            if self.running() == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Background {
    /// An acquire sent and left unanswered (see `lock::Unanswered`): counted
    /// as a background release until `barrier` (a request queued behind it
    /// on its connection) is answered, or `until`. The connection answers in
    /// order and runs a late reply's handler as it reads it, so by then the
    /// acquire's reply was handled (and whatever it gave back holds its own
    /// ticket), or it was dropped unsent or failed with its connection: a
    /// process that settles and exits does not end before the handler gives
    /// back what the acquire took. Without a runtime, nothing.
    pub(crate) fn abandon(
        self: &Arc<Self>,
        barrier: impl std::future::Future<Output = ()> + Send + 'static,
        until: Instant,
    ) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let ticket = self.ticket();
        rt.spawn(async move {
            let _ = tokio::time::timeout_at(until.into(), barrier).await;
            drop(ticket);
        });
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// Leaves of waits a release may have granted the lock to (tagged waits)
/// still on their way, by owner id. A wait dropped just as it was granted
/// leaves in the background, giving the grant back; an acquire of the same
/// owner sent before that leave would find its own grant, which a
/// non-reentrant lock refuses as a re-entry and a reentrant one counts as
/// one. So an acquire waits for its owner's leaves first
/// ([`settled`](Self::settled)): one atomic load when there are none.
#[derive(Debug, Default)]
pub(crate) struct Leaves {
    any: AtomicUsize,
    by_owner: Mutex<ByOwner>,
}

/// Leaves on their way per owner id, and what wakes that owner's acquires
/// once none is.
type ByOwner = HashMap<Box<str>, (usize, Arc<Notify>)>;

/// One leave on its way, counted until dropped (sent and answered, failed,
/// or abandoned with its runtime).
#[derive(Debug)]
pub(crate) struct LeaveTicket {
    leaves: Arc<Leaves>,
    owner: Box<str>,
}

impl Leaves {
    /// Counts one more leave of `owner` until the ticket is dropped.
    pub(crate) fn ticket(self: &Arc<Self>, owner: &str) -> LeaveTicket {
        let mut map = self.map();
        map.entry(owner.into())
            .or_insert_with(|| (0, Arc::new(Notify::new())))
            .0 += 1;
        self.any.fetch_add(1, Ordering::AcqRel);
        LeaveTicket {
            leaves: Arc::clone(self),
            owner: owner.into(),
        }
    }

    /// Whether any leave is on its way (of any owner).
    pub(crate) fn any(&self) -> bool {
        self.any.load(Ordering::Acquire) > 0
    }

    fn map(&self) -> std::sync::MutexGuard<'_, ByOwner> {
        self.by_owner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Resolves once no leave of `owner` is on its way, or at `until`
    /// (a leave that cannot be sent must not stall acquires: the grant it
    /// carries then ends with its lease, as any undelivered release).
    pub(crate) async fn settled(&self, owner: &str, until: Instant) {
        while self.any.load(Ordering::Acquire) > 0 {
            let Some(notify) = self.map().get(owner).map(|e| Arc::clone(&e.1)) else {
                return;
            };
            let notified = notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a ticket dropped in between
            // wakes it.
            notified.as_mut().enable();
            let same = self
                .map()
                .get(owner)
                .is_some_and(|e| Arc::ptr_eq(&e.1, &notify));
            if !same {
                // Settled since (perhaps with leaves of a later wait on
                // their way under a new entry): look again.
                continue;
            }
            if tokio::time::timeout_at(until.into(), notified)
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

impl Drop for LeaveTicket {
    fn drop(&mut self) {
        let mut map = self.leaves.map();
        if let Some(entry) = map.get_mut(&self.owner) {
            entry.0 -= 1;
            if entry.0 == 0 {
                if let Some((_, notify)) = map.remove(&self.owner) {
                    notify.notify_waiters();
                }
            }
        }
        self.leaves.any.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn idle_waits_for_every_ticket() {
        let bg = Arc::new(Background::default());
        bg.idle().await;
        let (a, b) = (bg.ticket(), bg.ticket());
        assert_eq!(bg.running(), 2);
        let waiter = tokio::spawn({
            let bg = Arc::clone(&bg);
            async move { bg.idle().await }
        });
        drop(a);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "one is still running");
        drop(b);
        tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .expect("idle once both are dropped")
            .expect("task");
    }

    #[tokio::test]
    async fn an_owners_acquire_waits_for_its_own_leaves_only() {
        let leaves = Arc::new(Leaves::default());
        let far = Instant::now() + Duration::from_secs(30);
        // None on their way: at once.
        tokio::time::timeout(Duration::from_secs(1), leaves.settled("a:1", far))
            .await
            .expect("nothing to wait for");
        let (one, two) = (leaves.ticket("a:1"), leaves.ticket("a:1"));
        let other = leaves.ticket("a:2");
        // Another owner's leave does not hold this owner back.
        tokio::time::timeout(Duration::from_secs(1), leaves.settled("a:3", far))
            .await
            .expect("another owner's leaves");
        let waiter = tokio::spawn({
            let leaves = Arc::clone(&leaves);
            async move { leaves.settled("a:1", far).await }
        });
        drop(one);
        drop(other);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "one leave of a:1 is on its way");
        drop(two);
        tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .expect("settled once both are dropped")
            .expect("task");
        assert_eq!(leaves.any.load(Ordering::Acquire), 0);
        // A leave that never ends holds an acquire back only until its
        // bound.
        let _stuck = leaves.ticket("a:1");
        let soon = Instant::now() + Duration::from_millis(50);
        tokio::time::timeout(Duration::from_secs(2), leaves.settled("a:1", soon))
            .await
            .expect("bounded");
    }
}
