//! [`SemaphorePermits`]: a plain semaphore's permits, given back on drop.

use std::fmt;
use std::time::Duration;

use crate::error::LockResult;
use crate::lock::{spawn_queued, Detached};

use super::counter::{give_back, is_oom, Counter};

/// Permits of a plain [`Semaphore`](crate::Semaphore), taken by its
/// [`acquire`](crate::Semaphore::acquire) or
/// [`try_acquire`](crate::Semaphore::try_acquire). Give them back with
/// [`release`](Self::release), which reports errors.
///
/// Dropping the guard (an early return, a `?`, a panic unwinding) never
/// blocks: it sends the release on the current tokio runtime in the
/// background (polled once at the drop, so it is usually on the connection
/// before the dropping task's next request; counted by
/// [`Locks::settle`](crate::Locks::settle)).
/// Without a runtime (dropped after the runtime shut down, or on a thread
/// outside it) nothing is sent and the permits stay taken: plain permits
/// have no lease that would bring them back (use an
/// [`ExpirableSemaphore`](crate::ExpirableSemaphore) where that matters).
///
/// Plain permits have no owner and no lease, so there is nothing a server
/// could show lost: this guard has no `lost()` and no `extend()`.
///
/// ```no_run
/// # async fn work() -> keylatch_lock::LockResult<()> { Ok(()) }
/// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
/// let permit = locks.semaphore("downloads").acquire(1).await?;
/// work().await?; // on an error the dropped guard gives the permit back
/// permit.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping a permits guard releases its permits in the background"]
pub struct SemaphorePermits {
    c: Counter,
    permits: u64,
    /// Released, forgotten, or handed to a drop's release.
    done: bool,
}

impl fmt::Debug for SemaphorePermits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermits")
            .field("semaphore", &self.c.names.key)
            .field("permits", &self.permits)
            .finish_non_exhaustive()
    }
}

impl SemaphorePermits {
    pub(super) fn new(c: Counter, permits: u64) -> Self {
        Self {
            c,
            permits,
            done: false,
        }
    }

    /// How many permits this guard holds.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let permits = locks.semaphore("downloads").acquire(2).await?;
    /// assert_eq!(permits.permits(), 2);
    /// permits.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> u64 {
        self.permits
    }

    /// The semaphore's name.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let permits = locks.semaphore("downloads").acquire(1).await?;
    /// assert_eq!(permits.name(), "downloads");
    /// permits.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.c.names.key
    }

    /// Gives the permits back and tells waiters. A release that surely did
    /// not reach the server (not sent, a slot migrating) is tried again for
    /// up to [`LocksConfig::attempt_timeout`](crate::LocksConfig::attempt_timeout)
    /// (at least 1 s); one of unknown outcome is not repeated (a second
    /// one would create permits).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// locks.semaphore("downloads").acquire(1).await?.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WrongType`](crate::LockError::WrongType) when the key
    /// now holds something else than a count (the name reused by another
    /// type; nothing changed); [`LockError::Client`](crate::LockError::Client)
    /// when the release could not be delivered (the permits may then stay
    /// taken: plain permits have no lease). Refused because the server is
    /// out of memory (`ServerErrorKind::Oom`: nothing ran), the permits
    /// are given back in the background once memory is back, for up to a
    /// watchdog lease ([`Locks::settle`](crate::Locks::settle) waits for it).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before it finished, the release goes on in the
    /// background.
    pub async fn release(mut self) -> LockResult<()> {
        self.done = true;
        if self.permits == 0 {
            return Ok(());
        }
        let (c, n) = (self.c.clone(), self.permits);
        let ticket = c.inner.background.ticket();
        Detached::new(async move {
            let out = give_back(&c, n, Duration::ZERO).await;
            // Refused for want of memory (nothing ran): the caller hears
            // so, and the count is given back in the background once
            // memory is back, as a dropped guard's would be (the guard is
            // gone: nobody else can give it twice).
            if let (Err(e), Ok(rt)) = (&out, tokio::runtime::Handle::try_current()) {
                if is_oom(e) {
                    let patience = c.inner.config.watchdog_timeout;
                    rt.spawn(async move {
                        let _ = give_back(&c, n, patience).await;
                        drop(ticket);
                    });
                    return out;
                }
            }
            drop(ticket);
            out
        })
        .await
        .map(drop)
    }

    /// Keeps the permits taken and returns how many: the guard no longer
    /// gives them back. For Redisson-style hand-over, where another process
    /// releases them by count ([`Semaphore::release`](crate::Semaphore::release)).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let n = locks.semaphore("downloads").acquire(1).await?.forget();
    /// // … another process calls `semaphore("downloads").release(n)` …
    /// # Ok(()) }
    /// ```
    pub fn forget(mut self) -> u64 {
        self.done = true;
        self.permits
    }
}

impl Drop for SemaphorePermits {
    fn drop(&mut self) {
        if self.done || self.permits == 0 {
            return;
        }
        self.done = true;
        // No runtime (it shut down, or a thread outside one): nothing can be
        // sent, and the permits stay taken.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (c, n) = (self.c.clone(), self.permits);
            let ticket = c.inner.background.ticket();
            // Polled once here, so it is usually queued before this task's
            // next request (an `available()`, a re-acquire), as a lock
            // guard's release is.
            spawn_queued(&rt, async move {
                let patience = c.inner.config.watchdog_timeout;
                let _ = give_back(&c, n, patience).await;
                drop(ticket);
            });
        }
    }
}
