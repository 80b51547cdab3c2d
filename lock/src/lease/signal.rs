//! The loss signal of one hold: set at most once (by the lease engine, or a
//! guard that finds its hold replaced), awaited by the guards and any number
//! of [`LostToken`](crate::LostToken)s. It lives inside the hold.
//!
//! One atomic and one `Notify` per hold, rather than a `watch` channel: a
//! hold is created and dropped on every acquire, and a channel's allocation
//! and its wake-all on drop were visible in the acquire path's profile.

use std::sync::atomic::{AtomicU8, Ordering};

use tokio::sync::Notify;

use super::reason::LossReason;

/// Part of a hold (`hold.rs`): shared with it.
#[derive(Debug, Default)]
pub(crate) struct LossSignal {
    /// 0 while held; otherwise the [`LossReason`] (see `code`).
    reason: AtomicU8,
    notify: Notify,
}

impl LossSignal {
    /// Records the loss and wakes every waiter; the first reason wins.
    /// `true` for that first one (the loss is logged once).
    pub(crate) fn fire(&self, reason: LossReason) -> bool {
        if self
            .reason
            .compare_exchange(0, code(reason), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.notify.notify_waiters();
            return true;
        }
        false
    }

    /// The loss, once known.
    pub(crate) fn get(&self) -> Option<LossReason> {
        decode(self.reason.load(Ordering::Acquire))
    }

    /// Resolves when the hold is known lost; pending forever for a hold that
    /// ends normally (nobody fires it then).
    pub(crate) async fn wait(&self) -> LossReason {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a fire in between still wakes us.
            notified.as_mut().enable();
            if let Some(reason) = self.get() {
                return reason;
            }
            notified.await;
        }
    }
}

fn code(reason: LossReason) -> u8 {
    match reason {
        LossReason::Gone => 1,
        LossReason::Expired => 2,
        LossReason::MaxHold => 3,
    }
}

fn decode(v: u8) -> Option<LossReason> {
    match v {
        1 => Some(LossReason::Gone),
        2 => Some(LossReason::Expired),
        3 => Some(LossReason::MaxHold),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn first_reason_wins_and_every_waiter_wakes() {
        let s = std::sync::Arc::new(LossSignal::default());
        assert_eq!(s.get(), None);
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let s = std::sync::Arc::clone(&s);
                tokio::spawn(async move { s.wait().await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(10)).await;
        s.fire(LossReason::Expired);
        s.fire(LossReason::Gone);
        for w in waiters {
            assert_eq!(w.await.unwrap(), LossReason::Expired);
        }
        // A waiter arriving after the fire resolves at once.
        assert_eq!(s.wait().await, LossReason::Expired);
    }

    #[tokio::test]
    async fn an_unfired_signal_stays_pending() {
        let s = LossSignal::default();
        let r = tokio::time::timeout(Duration::from_millis(20), s.wait()).await;
        assert!(r.is_err());
    }
}
