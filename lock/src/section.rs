//! Critical sections that end with the hold: `run` on every guard type
//! (and [`Lock::run`](crate::Lock::run)) runs the caller's future while the
//! hold lives, stops it at once when the hold is lost, and releases when it
//! ends. This is the `tokio::select!` on `guard.lost()` that callers used
//! to write by hand, with the release and the loss folded into one typed
//! result.

use std::future::Future;

use crate::error::{LockError, LockResult};
use crate::lease::LossReason;

/// Runs `work` until it ends or `lost` fires, whichever is first (a loss
/// wins a tie), then settles the hold with `release`. `name` names the
/// lock in a [`LockError::Lost`].
///
/// The work is dropped before the release is sent: after a loss nothing of
/// it runs on. A release that finds the hold ended (`Expired`, `NotOwner`)
/// after the work finished is a loss too: the work may have outlived the
/// hold. A release that could not be delivered is retried in the
/// background until the hold's deadline (as `unlock` does), so the work's
/// output stands.
pub(crate) async fn run_section<T, R>(
    name: impl FnOnce() -> String,
    lost: impl Future<Output = LossReason>,
    work: impl Future<Output = T>,
    release: impl FnOnce() -> R,
) -> LockResult<T>
where
    R: Future<Output = LockResult<()>>,
{
    let ended = {
        let lost = std::pin::pin!(lost);
        let work = std::pin::pin!(work);
        tokio::select! {
            biased;
            reason = lost => Err(reason),
            out = work => Ok(out),
        }
        // Both futures are dropped here, before anything is released.
    };
    match ended {
        Err(reason) => {
            // The hold is gone; its release ends whatever may be left.
            let _ = release().await;
            Err(LockError::Lost {
                name: name(),
                reason,
            })
        }
        Ok(out) => match release().await {
            Ok(()) => Ok(out),
            Err(LockError::Expired { .. }) => Err(LockError::Lost {
                name: name(),
                reason: LossReason::Expired,
            }),
            Err(LockError::NotOwner { .. }) => Err(LockError::Lost {
                name: name(),
                reason: LossReason::Gone,
            }),
            Err(_) => Ok(out),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn a_loss_stops_the_work_at_once_and_still_releases() {
        let ran_on = Arc::new(AtomicBool::new(false));
        let released = Arc::new(AtomicUsize::new(0));
        let (r, w) = (Arc::clone(&released), Arc::clone(&ran_on));
        let out = run_section(
            || "orders".to_owned(),
            async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                LossReason::Gone
            },
            async move {
                tokio::time::sleep(Duration::from_secs(5)).await;
                w.store(true, Ordering::SeqCst);
            },
            || async move {
                r.fetch_add(1, Ordering::SeqCst);
                Err(LockError::Expired {
                    name: "orders".into(),
                })
            },
        )
        .await;
        assert!(
            matches!(&out, Err(LockError::Lost { name, reason: LossReason::Gone }) if name == "orders"),
            "{out:?}"
        );
        assert_eq!(released.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!ran_on.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn finished_work_is_released_and_its_output_returned() {
        let out = run_section(
            || unreachable!("no error"),
            std::future::pending(),
            async { 7 },
            || async { Ok(()) },
        )
        .await;
        assert_eq!(out.ok(), Some(7));
    }

    #[tokio::test]
    async fn a_release_that_finds_the_hold_ended_is_a_loss() {
        for (e, reason) in [
            (LockError::Expired { name: "x".into() }, LossReason::Expired),
            (LockError::NotOwner { name: "x".into() }, LossReason::Gone),
        ] {
            let out = run_section(
                || "x".to_owned(),
                std::future::pending(),
                async { 1 },
                move || async move { Err(e) },
            )
            .await;
            assert!(
                matches!(out, Err(LockError::Lost { reason: r, .. }) if r == reason),
                "{out:?}"
            );
        }
        // A release not delivered (retried in the background): the output stands.
        let out = run_section(
            || "x".to_owned(),
            std::future::pending(),
            async { 2 },
            || async { Err(LockError::Protocol("no reply".into())) },
        )
        .await;
        assert_eq!(out.ok(), Some(2));
    }

    #[tokio::test]
    async fn a_loss_that_ties_with_the_end_of_the_work_wins() {
        let out = run_section(
            || "x".to_owned(),
            async { LossReason::MaxHold },
            async { 3 },
            || async { Ok(()) },
        )
        .await;
        assert!(
            matches!(
                out,
                Err(LockError::Lost {
                    reason: LossReason::MaxHold,
                    ..
                })
            ),
            "{out:?}"
        );
    }
}
