//! [`RedLockGuard`]: a RedLock held by a quorum of masters, its loss
//! signal, extend and release.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{LockError, LockResult};
use crate::lease::LossReason;
use crate::lock::LockGuard;
use crate::span::clamp_span;
use crate::types::losses::{JoinAll, Losses};

/// Parts per thousand of the lease allowed for clock drift between the
/// masters and this process (the RedLock paper's 0.01).
pub const DRIFT_PERMILLE: u32 = 10;
/// Drift allowed on top, for the resolution of the masters' expiry timers.
pub const DRIFT_FLOOR: Duration = Duration::from_millis(2);

/// A RedLock held by a quorum of masters. Dropping it releases every
/// member in the background.
///
/// ```no_run
/// # async fn demo(r: keylatch_lock::RedLock) -> keylatch_lock::LockResult<()> {
/// let g = r.lock("payouts").acquire().await?;
/// tokio::select! {
///     why = g.lost() => eprintln!("quorum lost: {why:?}"),
///     () = async { /* work */ } => {}
/// }
/// g.unlock().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping a RedLock guard releases it in the background"]
#[derive(Debug)]
pub struct RedLockGuard {
    pub(super) members: Vec<LockGuard>,
    pub(super) quorum: usize,
    pub(super) masters: usize,
    /// When the acquire's round began.
    pub(super) started: Instant,
    /// The validity from `started`, in nanoseconds: the acquire's (lease −
    /// elapsed − drift), moved later by an `extend`, never earlier.
    pub(super) valid_for: AtomicU64,
    /// How long one master's release is waited for.
    pub(super) node_timeout: Duration,
}

impl RedLockGuard {
    /// Runs a critical section while the RedLock holds (a quorum of its
    /// masters): when `work` ends the RedLock is released and its output
    /// returned; when the quorum is lost first ([`lost`](Self::lost)) the
    /// work is dropped at once, every member released, and the loss
    /// returned. As [`LockGuard::run`].
    ///
    /// ```no_run
    /// # async fn demo(r: keylatch_lock::RedLock) -> keylatch_lock::LockResult<()> {
    /// let g = r.lock("payouts").acquire().await?;
    /// g.run(|| async { /* pay out */ }).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Lost`] when the quorum was lost while the work ran, or
    /// the release found the RedLock already ended.
    ///
    /// # Cancel safety
    /// Dropped before it finished, the work is dropped and the guard with
    /// it, which releases every member in the background.
    pub async fn run<T, Fut>(self, work: impl FnOnce() -> Fut) -> LockResult<T>
    where
        Fut: std::future::Future<Output = T>,
    {
        let name = self
            .members
            .first()
            .map(|g| g.lock().name().to_owned())
            .unwrap_or_default();
        let lost = self.lost();
        crate::section::run_section(|| name, lost, work(), || self.unlock()).await
    }

    /// How many masters hold it now (by their holds' loss signals and
    /// local deadlines).
    ///
    /// ```no_run
    /// # async fn demo(r: keylatch_lock::RedLock) -> keylatch_lock::LockResult<()> {
    /// let g = r.lock("payouts").acquire().await?;
    /// assert!(g.holding() >= r.quorum());
    /// g.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn holding(&self) -> usize {
        self.members.iter().filter(|g| !g.is_lost()).count()
    }

    /// What the acquire's validity left, from now: lease − elapsed − drift
    /// at acquire time, not extended by renewals (for a fixed lease, the
    /// time the lock is surely held).
    ///
    /// ```no_run
    /// # async fn demo(r: keylatch_lock::RedLock) -> keylatch_lock::LockResult<()> {
    /// let g = r.lock("payouts").try_acquire(std::time::Duration::ZERO, Some(std::time::Duration::from_secs(10))).await?;
    /// if let Some(g) = g { println!("valid for {:?}", g.validity()); }
    /// # Ok(()) }
    /// ```
    pub fn validity(&self) -> Duration {
        let until = self
            .started
            .checked_add(Duration::from_nanos(self.valid_for.load(Ordering::Acquire)))
            .unwrap_or(self.started);
        until.saturating_duration_since(Instant::now())
    }

    /// Whether fewer than a quorum of masters hold it now.
    ///
    /// ```no_run
    /// # async fn demo(r: keylatch_lock::RedLock) -> keylatch_lock::LockResult<()> {
    /// let g = r.lock("payouts").acquire().await?;
    /// assert!(!g.is_lost());
    /// g.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.holding() < self.quorum
    }

    /// Resolves once fewer than a quorum of masters hold it (renewals that
    /// no longer reach a quorum, deadlines passed, keys deleted).
    ///
    /// ```no_run
    /// # async fn demo(r: keylatch_lock::RedLock) -> keylatch_lock::LockResult<()> {
    /// let g = r.lock("payouts").acquire().await?;
    /// let lost = g.lost();
    /// g.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub fn lost(&self) -> impl std::future::Future<Output = LossReason> + Send + 'static {
        // Lost once more members are gone than the quorum can spare.
        let spare = self.members.len().saturating_sub(self.quorum);
        let signals = self
            .members
            .iter()
            .map(|g| Box::pin(g.lost()) as _)
            .collect();
        Losses::new(signals, spare + 1)
    }

    /// Masters the RedLock counts.
    ///
    /// ```no_run
    /// # async fn demo(r: keylatch_lock::RedLock) -> keylatch_lock::LockResult<()> {
    /// let g = r.lock("payouts").acquire().await?;
    /// assert_eq!(g.masters(), r.masters());
    /// g.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn masters(&self) -> usize {
        self.masters
    }

    /// Extends a RedLock taken with a fixed lease on every master that
    /// holds it (in parallel, each waited for at most the node timeout),
    /// as [`LockGuard::extend`] does on one: no master's key is shortened.
    /// When a quorum extended, [`validity`](Self::validity) becomes `lease`
    /// − the call's time − drift (never less than it was).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(r: keylatch_lock::RedLock) -> keylatch_lock::LockResult<()> {
    /// let payouts = r.lock("payouts");
    /// if let Some(g) = payouts.try_acquire(Duration::from_secs(2), Some(Duration::from_secs(10))).await? {
    ///     g.extend(Duration::from_secs(30)).await?;
    ///     g.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WatchdogLease`] when it was taken under the watchdogs
    /// (nothing sent). [`LockError::Expired`] when fewer than a quorum of
    /// masters extended it (the others' holds had ended, or did not answer
    /// in time): the validity is left as it was, and [`lost`](Self::lost)
    /// tells when too few hold it.
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have extended some masters
    /// (the validity then stays where it was, the safe side).
    pub async fn extend(&self, lease: Duration) -> LockResult<()> {
        let name = || {
            self.members
                .first()
                .map(|g| g.lock().name().to_owned())
                .unwrap_or_default()
        };
        let started = Instant::now();
        let t = self.node_timeout;
        let outs = JoinAll::new(
            self.members
                .iter()
                .map(|g| tokio::time::timeout(t, g.extend(lease))),
        )
        .await;
        let mut extended = 0;
        for out in outs {
            match out {
                Ok(Ok(())) => extended += 1,
                Ok(Err(LockError::WatchdogLease { .. })) => {
                    return Err(LockError::WatchdogLease { name: name() })
                }
                _ => {}
            }
        }
        if extended < self.quorum {
            return Err(LockError::Expired { name: name() });
        }
        if let Some(v) = validity(lease, started) {
            let from_start = started.saturating_duration_since(self.started) + v;
            self.valid_for
                .fetch_max(nanos_of(from_start), Ordering::AcqRel);
        }
        Ok(())
    }

    /// Releases it on every master that holds it (in parallel).
    ///
    /// ```no_run
    /// # async fn demo(r: keylatch_lock::RedLock) -> keylatch_lock::LockResult<()> {
    /// r.lock("payouts").acquire().await?.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Expired`] when fewer than a quorum still held it (it
    /// was lost before the release); the members are released anyway.
    ///
    /// # Cancel safety
    /// Cancel safe: members not released yet are released in the
    /// background.
    pub async fn unlock(self) -> LockResult<()> {
        let lost = self.is_lost();
        let name = self
            .members
            .first()
            .map(|g| g.lock().name().to_owned())
            .unwrap_or_default();
        // Every member at once, each waited for at most the node timeout (a
        // paused master must not hold the caller for a lease); a release
        // not answered in time still goes out (written once queued), and
        // the lease ends it otherwise.
        let t = self.node_timeout;
        let (members, quorum) = (self.members.len(), self.quorum);
        let released = JoinAll::new(
            self.members
                .into_iter()
                .map(|g| tokio::time::timeout(t, g.unlock())),
        )
        .await;
        // Members whose release found their hold gone did not hold it;
        // one not answered in time (or failed otherwise) may have. Fewer
        // than a quorum left that may have held it: the RedLock had ended.
        let gone = released
            .iter()
            .filter(|r| {
                matches!(
                    r,
                    Ok(Err(LockError::NotOwner { .. }
                        | LockError::Expired { .. }
                        | LockError::Lost { .. }))
                )
            })
            .count();
        if lost || members - gone < quorum {
            return Err(LockError::Expired { name });
        }
        Ok(())
    }
}

/// What a `lease` asked for at `started` leaves: lease − elapsed − drift
/// ([`DRIFT_PERMILLE`] ‰ of the lease + [`DRIFT_FLOOR`]); `None` when
/// nothing.
pub(super) fn validity(lease: Duration, started: Instant) -> Option<Duration> {
    let lease = clamp_span(lease);
    let drift = (lease / 1000).checked_mul(DRIFT_PERMILLE).unwrap_or(lease) + DRIFT_FLOOR;
    lease
        .checked_sub(started.elapsed())
        .and_then(|v| v.checked_sub(drift))
}

/// A span in nanoseconds, saturating.
pub(super) fn nanos_of(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
