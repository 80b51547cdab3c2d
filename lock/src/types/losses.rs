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

/// Polls every future in this task (no spawn per future) and resolves
/// with their outputs in order once all are ready: a RedLock round asks
/// every master at once this way.
pub(crate) struct JoinAll<F: Future> {
    futs: Vec<Pin<Box<F>>>,
    outs: Vec<Option<F::Output>>,
}

impl<F: Future> JoinAll<F> {
    pub(crate) fn new(futs: impl IntoIterator<Item = F>) -> Self {
        let futs: Vec<Pin<Box<F>>> = futs.into_iter().map(Box::pin).collect();
        let outs = futs.iter().map(|_| None).collect();
        Self { futs, outs }
    }
}

impl<F: Future> Unpin for JoinAll<F> {}

impl<F: Future> Future for JoinAll<F> {
    type Output = Vec<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Vec<F::Output>> {
        let this = &mut *self;
        let mut pending = false;
        for (fut, out) in this.futs.iter_mut().zip(this.outs.iter_mut()) {
            if out.is_some() {
                continue;
            }
            match fut.as_mut().poll(cx) {
                Poll::Ready(v) => *out = Some(v),
                Poll::Pending => pending = true,
            }
        }
        if pending {
            return Poll::Pending;
        }
        Poll::Ready(this.outs.iter_mut().filter_map(Option::take).collect())
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
