//! [`Semaphore`]: Redisson's `RSemaphore`, permits without an owner.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::context::Inner;
use crate::error::{LockError, LockResult};
use crate::lock::watched;
use crate::scripts::SEMAPHORE_ACQUIRE;
use crate::shape::wrong_type;

use super::counter::{
    bound, bounded, count_methods, sem_reply, signed, wait_deadline, wait_for, Counter, SemNames,
    SemReply, Try,
};
use super::permits::SemaphorePermits;

/// A semaphore in Redisson's `RSemaphore` layout: the key named after it
/// holds the available permits; releases publish the new count on
/// `redisson_sc:{name}`. Permits belong to nobody: a holder that crashes
/// never gives its permits back (see [`ExpirableSemaphore`](crate::ExpirableSemaphore) for permits
/// that come back by themselves).
///
/// Two ways to take permits:
/// - guarded, [`acquire`](Self::acquire) / [`try_acquire`](Self::try_acquire):
///   a [`SemaphorePermits`] that gives them back when dropped (an early
///   return or a `?` cannot leak them) or by its
///   [`release`](SemaphorePermits::release), which reports errors;
/// - raw, Redisson's way, [`acquire_raw`](Self::acquire_raw) /
///   [`try_acquire_raw`](Self::try_acquire_raw) and
///   [`release`](Self::release): nothing gives them back but a `release`,
///   which anyone may call, in this process or another.
///
/// ```no_run
/// use std::time::Duration;
/// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
/// let sem = locks.semaphore("downloads");
/// sem.try_set_permits(3).await?; // only when not set yet
/// if let Some(permit) = sem.try_acquire(1, Duration::from_secs(5)).await? {
///     // … one of at most three; a `?` here gives the permit back …
///     permit.release().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    pub(super) c: Counter,
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.c.names.key)
            .finish_non_exhaustive()
    }
}

impl Semaphore {
    pub(crate) fn new(inner: Arc<Inner>, name: &str) -> Self {
        Self {
            c: Counter {
                inner,
                names: SemNames::new(name),
                expirable: false,
            },
        }
    }

    count_methods! {
        ctor: "semaphore",
        name: "downloads",
        set: "Sets the permits when the semaphore does not exist yet; `true` when
    set (the count is published), `false` when it existed (unchanged).",
        add: "Adds `permits` permits, keeping the key's expiry (Redisson's
`addPermits` drops it). Returns the permits available after (negative
while a [`reduce_permits`](Self::reduce_permits) below zero is not made
up); waiters are told.",
        reduce: "Takes `permits` permits away, even below zero (Redisson's
`reducePermits`): acquires then wait until releases bring the count back
above what they ask. Returns the permits available after, which may be
negative; the key's expiry is kept.",
        available: "Permits available now (0 when the semaphore does not exist; negative
    after a [`reduce_permits`](Self::reduce_permits) below zero).",
        drain: "Takes every available permit at once; returns how many (0 when the count
    was zero or below, which is then set to 0, as Redisson's `drainPermits` does).",
    }

    /// Gives `permits` back and tells waiters; returns the permits
    /// available after (negative while a reduction below zero is not made
    /// up). The raw release, for permits taken with
    /// [`acquire_raw`](Self::acquire_raw) (anyone may release, in any
    /// process: permits have no owner). A [`SemaphorePermits`] guard
    /// releases its own.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// locks.semaphore("downloads").release(1).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the key holds something else than a
    /// count (the name reused by another type);
    /// [`LockError::CountTooLarge`] above [`MAX_COUNT`](crate::MAX_COUNT),
    /// before anything is sent; [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have released.
    pub async fn release(&self, permits: u64) -> LockResult<i64> {
        self.c.change(signed(bounded(permits)?)).await
    }

    /// Waits as long as it takes for `permits`, and hands them out under a
    /// guard that gives them back when dropped.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let permits = locks.semaphore("downloads").acquire(1).await?;
    /// permits.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// See [`try_acquire`](Self::try_acquire).
    ///
    /// # Cancel safety
    /// See [`try_acquire`](Self::try_acquire).
    pub async fn acquire(&self, permits: u64) -> LockResult<SemaphorePermits> {
        self.acquire_raw(permits).await?;
        Ok(SemaphorePermits::new(self.c.clone(), permits))
    }

    /// Tries for up to `wait` to take `permits`; `Ok(None)` when not in
    /// time. Plain permits have no lease (nothing expires them), so there
    /// is no `lease` argument: a holder that dies keeps them for good (use
    /// an [`ExpirableSemaphore`](crate::ExpirableSemaphore) for that).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let sem = locks.semaphore("downloads");
    /// if let Some(permits) = sem.try_acquire(2, Duration::from_secs(1)).await? {
    ///     permits.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// See [`try_acquire_raw`](Self::try_acquire_raw).
    ///
    /// # Cancel safety
    /// See [`try_acquire_raw`](Self::try_acquire_raw).
    pub async fn try_acquire(
        &self,
        permits: u64,
        wait: Duration,
    ) -> LockResult<Option<SemaphorePermits>> {
        Ok(self
            .try_acquire_raw(permits, wait)
            .await?
            .then(|| SemaphorePermits::new(self.c.clone(), permits)))
    }

    /// Waits as long as it takes for `permits`, without a guard (Redisson's
    /// `acquire`): they stay taken until someone calls
    /// [`release`](Self::release), here or in another process.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let sem = locks.semaphore("downloads");
    /// sem.acquire_raw(1).await?;
    /// sem.release(1).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// See [`try_acquire_raw`](Self::try_acquire_raw).
    ///
    /// # Cancel safety
    /// See [`try_acquire_raw`](Self::try_acquire_raw).
    pub async fn acquire_raw(&self, permits: u64) -> LockResult<()> {
        self.wait(permits, None).await.map(drop)
    }

    /// Tries for up to `wait` to take `permits` without a guard (Redisson's
    /// `tryAcquire`); `false` when not in time. Give them back with
    /// [`release`](Self::release).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let sem = locks.semaphore("downloads");
    /// if sem.try_acquire_raw(2, Duration::from_secs(1)).await? {
    ///     sem.release(2).await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::NoSuchSemaphore`] at once when the semaphore was never
    /// set (nothing to wait for); [`LockError::WrongType`] at once when its
    /// key holds something else than a count (a lock, a list, …);
    /// [`LockError::CountTooLarge`] at once above
    /// [`MAX_COUNT`](crate::MAX_COUNT) (no counter holds that many);
    /// [`LockError::Client`]. Zero permits are granted at once with no
    /// call, as Redisson's `tryAcquire(0)`: none of these checks is made.
    ///
    /// # Cancel safety
    /// Cancel safe: permits taken by an attempt whose reply comes after the
    /// caller left are given back in the background.
    pub async fn try_acquire_raw(&self, permits: u64, wait: Duration) -> LockResult<bool> {
        Ok(self.wait(permits, wait_deadline(wait)).await?.is_some())
    }

    pub(super) async fn wait(
        &self,
        permits: u64,
        deadline: Option<Instant>,
    ) -> LockResult<Option<()>> {
        if permits == 0 {
            // Nothing to take (Redisson answers at once too).
            return Ok(Some(()));
        }
        let n = bounded(permits)?.to_string();
        let names = &self.c.names;
        let cmd = Arc::new(SEMAPHORE_ACQUIRE.evalsha_cmd(&[&*names.key], &[n.as_str()]));
        // A reply nobody waits for any more: permits it took go back.
        let late: keylatch_cluster::LateReply = {
            let c = self.c.clone();
            Arc::new(move |frame| {
                if matches!(sem_reply(&frame), Ok(SemReply::Got)) {
                    if let Ok(rt) = tokio::runtime::Handle::try_current() {
                        let c = c.clone();
                        let ticket = c.inner.background.ticket();
                        rt.spawn(async move {
                            let _ = c.change(signed(permits)).await;
                            drop(ticket);
                        });
                    }
                }
            })
        };
        let inner = &self.c.inner;
        wait_for(inner, &names.key, &names.channel, deadline, || {
            let (cmd, late) = (Arc::clone(&cmd), Arc::clone(&late));
            async move {
                // A process that settles waits for a late reply (`watched`).
                let sent = inner.client.eval_shared_settled(
                    &SEMAPHORE_ACQUIRE,
                    &cmd,
                    Some(bound(inner, deadline)),
                    late,
                );
                let frame = watched(inner, &names.key, inner.config.watchdog_timeout, sent).await?;
                match sem_reply(&frame)? {
                    SemReply::Got => Ok(Try::Got(())),
                    SemReply::Missing => Err(LockError::NoSuchSemaphore {
                        name: names.key.to_string(),
                    }),
                    SemReply::WrongType => Err(wrong_type(inner, &names.key).await),
                    // Short: waits for a release (no hint).
                    SemReply::Short(_) => Ok(Try::Short(-1)),
                }
            }
        })
        .await
    }
}
