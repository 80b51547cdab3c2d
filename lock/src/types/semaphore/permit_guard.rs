//! [`PermitGuard`]: leased permits held, renewed by the lease engine.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::{Commands, Error as ClientError};

use crate::error::{LockError, LockResult};
use crate::lease::hold::{clamp_span, millis, Hold};
use crate::lease::LossReason;
use crate::lock::{spawn_queued, Detached};
use crate::scripts::PERMITS_RENEW;

use super::counter::{release_ids, renew_reply, Counter};
use super::permit_id::PermitId;

/// Leased permits of an [`ExpirableSemaphore`](crate::ExpirableSemaphore). Release them with
/// [`release`](Self::release), which reports errors. Dropping the guard
/// stops renewal and gives the permits back in the background (without a
/// runtime, they expire with their lease).
///
/// ```no_run
/// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
/// let g = locks.expirable_semaphore("render-slots").acquire(1).await?;
/// tokio::select! {
///     why = g.lost() => eprintln!("permit lost: {why:?}; stop"),
///     () = async { /* work under the permit */ } => {}
/// }
/// g.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping a permit guard releases its permits in the background"]
pub struct PermitGuard {
    /// The semaphore's counter.
    pub(super) c: Counter,
    pub(super) ids: Vec<PermitId>,
    pub(super) hold: Arc<Hold>,
    pub(super) renew: bool,
    pub(super) lease: Duration,
    pub(super) done: bool,
}

impl fmt::Debug for PermitGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitGuard")
            .field("semaphore", &self.c.names.key)
            .field("ids", &self.ids)
            .finish_non_exhaustive()
    }
}

impl PermitGuard {
    /// Runs a critical section while these permits live: when `work` ends
    /// the permits are released and its output returned; when they are
    /// lost first ([`lost`](Self::lost)) the work is dropped at once, the
    /// permits released, and the loss returned. As
    /// [`LockGuard::run`](crate::LockGuard::run).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let g = locks.expirable_semaphore("render-slots").acquire(1).await?;
    /// let frames = g.run(|| async { 24 }).await?;
    /// # let _ = frames;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Lost`] when the permits were lost while the work ran,
    /// or their release found them already ended.
    ///
    /// # Cancel safety
    /// Dropped before it finished, the work is dropped and the guard with
    /// it, which releases the permits in the background.
    pub async fn run<T, Fut>(self, work: impl FnOnce() -> Fut) -> LockResult<T>
    where
        Fut: std::future::Future<Output = T>,
    {
        let name = Arc::clone(&self.c.names.key);
        let lost = self.lost();
        crate::section::run_section(|| name.to_string(), lost, work(), || self.release()).await
    }

    /// The permits' ids (hand them to [`ExpirableSemaphore::release_ids`](crate::ExpirableSemaphore::release_ids)
    /// elsewhere to release them there).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let g = locks.expirable_semaphore("render-slots").acquire(2).await?;
    /// assert_eq!(g.ids().len(), 2);
    /// g.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn ids(&self) -> &[PermitId] {
        &self.ids
    }

    /// The lease the permits were taken with (the watchdog timeout when
    /// renewed).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let sem = locks.expirable_semaphore("render-slots");
    /// if let Some(g) = sem.try_acquire(1, Duration::from_secs(5), Some(Duration::from_secs(60))).await? {
    ///     assert_eq!(g.lease(), Duration::from_secs(60));
    ///     g.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Resolves when the permits are known lost: one is gone or expired (a
    /// renewal or check found it so), or no renewal succeeded by the local
    /// deadline. Stays pending for permits released normally.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let sem = locks.expirable_semaphore("render-slots");
    /// let Some(g) = sem.try_acquire(1, Duration::from_secs(5), Some(Duration::from_millis(200))).await? else { return Ok(()) };
    /// g.lost().await; // the fixed lease runs out
    /// assert!(g.is_lost());
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub fn lost(&self) -> impl std::future::Future<Output = LossReason> + Send + 'static {
        let hold = Arc::clone(&self.hold);
        async move { hold.lost.wait(&hold.loss).await }
    }

    /// Whether the permits are known lost (or past their local deadline).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let g = locks.expirable_semaphore("render-slots").acquire(1).await?;
    /// assert!(!g.is_lost());
    /// g.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.hold.is_lost()
    }

    /// How long the permits last by the local clock unless renewed; `None`
    /// once lost.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let g = locks.expirable_semaphore("render-slots").acquire(1).await?;
    /// assert!(g.remaining_lease().is_some());
    /// g.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self) -> Option<Duration> {
        if self.is_lost() {
            return None;
        }
        Some(
            self.hold
                .deadline()
                .saturating_duration_since(Instant::now()),
        )
    }

    /// Extends fixed-lease permits: each now expires at least `lease` from
    /// the server's now (never sooner than it did), and the local deadline
    /// moves with it. Permits under the watchdog are refused
    /// ([`LockError::WatchdogLease`]): they are renewed already, and a
    /// longer lease would become the watchdog's for every later renewal, so
    /// a crashed holder would keep them that long.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let sem = locks.expirable_semaphore("render-slots");
    /// let Some(g) = sem.try_acquire(1, Duration::from_secs(5), Some(Duration::from_secs(10))).await? else { return Ok(()) };
    /// g.extend(Duration::from_secs(60)).await?;
    /// g.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Expired`] when the permits were lost already, or a
    /// permit is found gone or expired (the loss signal fires);
    /// [`LockError::WatchdogLease`] for permits under the watchdog (nothing
    /// sent); [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have extended.
    pub async fn extend(&self, lease: Duration) -> LockResult<()> {
        let name = || self.c.names.key.to_string();
        if self.done || self.hold.is_lost() {
            return Err(LockError::Expired { name: name() });
        }
        if self.renew {
            return Err(LockError::WatchdogLease { name: name() });
        }
        let lease = clamp_span(lease);
        let c = &self.c;
        let ids = self.hold.key.owner().text();
        let ids: &str = &ids;
        let sent_at = Instant::now();
        let reply = c
            .inner
            .client
            .eval_script(
                &PERMITS_RENEW,
                &[&*c.names.key, &*c.names.timeouts],
                &[millis(lease).to_string().as_str(), "0", "", ids, "0"],
            )
            .await?;
        if renew_reply(reply)? {
            self.hold.extend(sent_at, lease);
            Ok(())
        } else {
            self.hold
                .fire_because(LossReason::Gone, "an extend found the permits gone");
            Err(LockError::Expired {
                name: self.c.names.key.to_string(),
            })
        }
    }

    /// Gives the permits back: renewal stops first, then they return to the
    /// pool by id and waiters are told.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// locks.expirable_semaphore("render-slots").acquire(1).await?.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Expired`] when the permits had been lost or a lease had
    /// run out (an expired permit still goes back to the pool);
    /// [`LockError::Client`] when the release could not be delivered (they
    /// then expire with their lease).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before it finished, the release goes on in the
    /// background.
    pub async fn release(mut self) -> LockResult<()> {
        let ended = self.hold.is_lost();
        if !self.finish() {
            return Ok(());
        }
        let (c, ids) = (self.c.clone(), self.ids.clone());
        let ticket = c.inner.background.ticket();
        let out = Detached::new(async move {
            let out = release_ids(&c, &ids).await;
            drop(ticket);
            out
        })
        .await;
        let (released, expired) = match out {
            Err(LockError::Client(ClientError::Timeout)) if ended => {
                return Err(LockError::Expired {
                    name: self.c.names.key.to_string(),
                })
            }
            other => other?,
        };
        if ended || expired > 0 || released < self.ids.len() {
            return Err(LockError::Expired {
                name: self.c.names.key.to_string(),
            });
        }
        Ok(())
    }

    /// Leaves the hold (renewal stops); `false` if already done.
    pub(super) fn finish(&mut self) -> bool {
        if self.done {
            return false;
        }
        self.done = true;
        self.hold.leave(self.renew);
        true
    }
}

impl Drop for PermitGuard {
    fn drop(&mut self) {
        if !self.finish() {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (c, ids) = (self.c.clone(), std::mem::take(&mut self.ids));
            // Counted until sent, so `Locks::settle` waits for it; queued
            // before this task's next request, as a lock guard's release is.
            let ticket = c.inner.background.ticket();
            spawn_queued(&rt, async move {
                let _ = release_ids(&c, &ids).await;
                drop(ticket);
            });
        }
    }
}
