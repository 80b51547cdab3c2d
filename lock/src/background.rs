//! Releases handed to the runtime (retried after a transient failure, or
//! sent after their caller left), counted so a process can wait for them
//! before it exits ([`Locks::settle`](crate::Locks::settle)): a short-lived
//! program (the CLI's `exec`) would otherwise end with a release still
//! queued, and its lock would stay held by nobody until the lease ran out.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

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

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
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
}
