//! The loss signal of one hold: set at most once (by the lease engine, or a
//! guard that finds its hold replaced), awaited by the guards and any number
//! of [`LostToken`](crate::LostToken)s. It lives inside the hold.
//!
//! One atomic and one `Notify` per hold, rather than a `watch` channel: a
//! hold is created and dropped on every acquire, and a channel's allocation
//! and its wake-all on drop were visible in the acquire path's profile.
//!
//! The `Notify` (32 bytes) is boxed and made by the first waiter: most holds
//! are never waited on, and a million held locks each carried one. The
//! reason is a byte of its own ([`LossCell`]) that the hold keeps beside its
//! other small fields: inside [`LossSignal`] it padded the signal from 16 to
//! 24 bytes, 8 bytes of every hold.

use std::sync::atomic::{fence, AtomicU8, Ordering};
use std::sync::OnceLock;

use tokio::sync::Notify;

use super::reason::LossReason;

/// Where a hold's waiters wait: made by the first one.
#[derive(Debug, Default)]
pub(crate) struct LossSignal {
    notify: OnceLock<Box<Notify>>,
}

/// Why the hold was lost, once it was (0: not lost).
#[derive(Debug, Default)]
pub(crate) struct LossCell(AtomicU8);

impl LossCell {
    pub(crate) fn get(&self) -> Option<LossReason> {
        decode(self.0.load(Ordering::Acquire))
    }
}

impl LossSignal {
    /// Sets `cell` to `reason` unless a reason is there, and wakes every
    /// waiter. Returns whether this call set it.
    pub(crate) fn fire(&self, cell: &LossCell, reason: LossReason) -> bool {
        if cell
            .0
            .compare_exchange(0, code(reason), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            // Paired with the fence in `wait`: either that waiter sees the
            // reason, or this sees its `Notify` (a store then a load on
            // each side needs both fences to be sequentially consistent).
            fence(Ordering::SeqCst);
            if let Some(notify) = self.notify.get() {
                notify.notify_waiters();
            }
            return true;
        }
        false
    }

    /// The reason in `cell`, once one is fired.
    pub(crate) async fn wait(&self, cell: &LossCell) -> LossReason {
        if let Some(reason) = cell.get() {
            return reason;
        }
        let notify = self.notify.get_or_init(Box::default);
        loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a fire in between still wakes us.
            notified.as_mut().enable();
            fence(Ordering::SeqCst);
            if let Some(reason) = cell.get() {
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

    /// A signal and its cell, as a hold has them.
    #[derive(Default)]
    struct Both {
        signal: LossSignal,
        cell: LossCell,
    }

    impl Both {
        fn get(&self) -> Option<LossReason> {
            self.cell.get()
        }
        fn fire(&self, reason: LossReason) -> bool {
            self.signal.fire(&self.cell, reason)
        }
        async fn wait(&self) -> LossReason {
            self.signal.wait(&self.cell).await
        }
    }

    #[tokio::test]
    async fn first_reason_wins_and_every_waiter_wakes() {
        let s = std::sync::Arc::new(Both::default());
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fire_racing_the_first_waiter_still_wakes_it() {
        // The waiter makes the `Notify` while the fire may be looking for
        // it: whichever runs first, the waiter must resolve.
        for _ in 0..200 {
            let s = std::sync::Arc::new(Both::default());
            let waiter = {
                let s = std::sync::Arc::clone(&s);
                tokio::spawn(async move { s.wait().await })
            };
            tokio::task::yield_now().await;
            s.fire(LossReason::Gone);
            let got = tokio::time::timeout(Duration::from_secs(5), waiter).await;
            assert_eq!(got.expect("woken").unwrap(), LossReason::Gone);
        }
    }

    #[tokio::test]
    async fn an_unfired_signal_stays_pending() {
        let s = Both::default();
        let r = tokio::time::timeout(Duration::from_millis(20), s.wait()).await;
        assert!(r.is_err());
    }
}
