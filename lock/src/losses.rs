//! A future over several holds' loss signals that resolves once `enough`
//! of them fired: one for a multi-lock (any member lost is the whole
//! lost), more than the spare ones for a RedLock (a quorum no longer holds).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::lease::LossReason;

type Signal = Pin<Box<dyn Future<Output = LossReason> + Send>>;

/// Resolves with the reason of the loss that made `enough`.
pub(crate) struct Losses {
    signals: Vec<Option<Signal>>,
    enough: usize,
    seen: usize,
}

impl Losses {
    pub(crate) fn new(signals: Vec<Signal>, enough: usize) -> Self {
        Self {
            signals: signals.into_iter().map(Some).collect(),
            enough: enough.max(1),
            seen: 0,
        }
    }
}

impl Future for Losses {
    type Output = LossReason;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<LossReason> {
        let this = &mut *self;
        for slot in &mut this.signals {
            let Some(fut) = slot.as_mut() else {
                continue;
            };
            if let Poll::Ready(why) = fut.as_mut().poll(cx) {
                *slot = None;
                this.seen += 1;
                if this.seen >= this.enough {
                    return Poll::Ready(why);
                }
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn resolves_once_enough_signals_fired() {
        let (tx1, rx1) = tokio::sync::oneshot::channel::<()>();
        let (tx2, rx2) = tokio::sync::oneshot::channel::<()>();
        let pending: Signal = Box::pin(std::future::pending());
        let s1: Signal = Box::pin(async move {
            let _ = rx1.await;
            LossReason::Gone
        });
        let s2: Signal = Box::pin(async move {
            let _ = rx2.await;
            LossReason::Expired
        });
        let mut two = Box::pin(Losses::new(vec![s1, pending, s2], 2));
        tx1.send(()).unwrap();
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(50), &mut two)
                .await
                .is_err()
        );
        tx2.send(()).unwrap();
        assert_eq!(two.await, LossReason::Expired);
    }
}
