//! [`ExpirableSemaphore`]: Redisson's `RPermitExpirableSemaphore`, permits
//! with ids and leases.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::context::Inner;
use crate::error::{LockError, LockResult};
use crate::lease::hold::{clamp_span, millis, Hold, NewHold};
use crate::lease::key::HoldKey;
use crate::lock::outlived;
use crate::lock::watched;
use crate::owner::Owner;
use crate::scripts::PERMITS_ACQUIRE;
use crate::shape::wrong_type;

use super::counter::{
    bound, count_methods, release_ids, sem_reply, wait_deadline, wait_for, Counter, SemNames,
    SemReply, Try, MAX_LEASED_PERMITS, PERMITS_LEASE,
};
use super::permit_guard::PermitGuard;
use super::permit_id::PermitId;

/// A permit-expirable semaphore in Redisson's `RPermitExpirableSemaphore`
/// layout: the key holds the available permits, `{name}:timeout` the
/// leased permits (raw id → expiry). The crash-safe semaphore: every
/// permit taken has a lease (the watchdog's, renewed while its
/// [`PermitGuard`] lives, or a fixed one), so a process that dies gives its
/// permits back within one lease. Expiries come from the server's clock.
///
/// ```no_run
/// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
/// let sem = locks.expirable_semaphore("render-slots");
/// sem.try_set_permits(4).await?;
/// let permits = sem.acquire(1).await?; // renewed while held
/// println!("holding {:?}", permits.ids());
/// permits.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ExpirableSemaphore {
    pub(super) c: Counter,
}

impl fmt::Debug for ExpirableSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExpirableSemaphore")
            .field("name", &self.c.names.key)
            .finish_non_exhaustive()
    }
}

impl ExpirableSemaphore {
    pub(crate) fn new(inner: Arc<Inner>, name: &str) -> Self {
        Self {
            c: Counter {
                inner,
                names: SemNames::new(name),
                expirable: true,
            },
        }
    }

    count_methods! {
        ctor: "expirable_semaphore",
        name: "render-slots",
        set: "Sets the available permits when the semaphore does not exist yet;
    `true` when set.",
        add: "Adds `permits` available permits, keeping the key's expiry; returns
the available permits after (negative while a reduction below zero is not
made up).",
        reduce: "Removes `permits` available permits, even below zero (Redisson's
`reducePermits`; leased permits stay out until released or expired).
Returns the available permits after, which may be negative.",
        available: "Permits available now, after expired ones went back to the pool.",
        drain: "Takes every available permit (after expired ones went back); returns
how many. They are not leased: they come back only by
[`add_permits`](Self::add_permits).",
    }

    /// Waits as long as it takes for `permits` leased permits, renewed by
    /// the watchdog while the guard lives (as a lock's `acquire()` holds
    /// under the watchdog). For a fixed lease, use
    /// [`try_acquire`](Self::try_acquire) with `Some(lease)`.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let g = locks.expirable_semaphore("render-slots").acquire(2).await?;
    /// g.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// See [`try_acquire`](Self::try_acquire).
    ///
    /// # Cancel safety
    /// See [`try_acquire`](Self::try_acquire).
    pub async fn acquire(&self, permits: u64) -> LockResult<PermitGuard> {
        loop {
            // A day per round keeps the deadline arithmetic finite.
            if let Some(g) = self
                .try_acquire(permits, Duration::from_secs(86_400), None)
                .await?
            {
                return Ok(g);
            }
        }
    }

    /// Tries for up to `wait` to take `permits` leased permits. `lease:
    /// Some(d)`: they expire `d` after the acquire (server time) and
    /// [`PermitGuard::lost`] fires then; `None`: the watchdog renews them
    /// while the guard lives. `Ok(None)` when not in time.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let sem = locks.expirable_semaphore("render-slots");
    /// if let Some(g) = sem.try_acquire(1, Duration::from_secs(2), Some(Duration::from_secs(60))).await? {
    ///     g.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::NoSuchSemaphore`] at once when the semaphore was never
    /// set; [`LockError::WrongType`] at once when its key holds something
    /// else than a count; [`LockError::PermitCount`] for 0 permits or more than
    /// [`MAX_LEASED_PERMITS`]; [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe: permits taken by an attempt whose reply comes after the
    /// caller left are given back by id in the background (and a reply that
    /// never comes leaves them to expire with their lease).
    pub async fn try_acquire(
        &self,
        permits: u64,
        wait: Duration,
        lease: Option<Duration>,
    ) -> LockResult<Option<PermitGuard>> {
        let deadline = wait_deadline(wait);
        let inner = &self.c.inner;
        let (lease_d, renew) = match lease {
            Some(l) => (clamp_span(l), false),
            None => (clamp_span(inner.config.watchdog_timeout), true),
        };
        if permits == 0 || permits > MAX_LEASED_PERMITS {
            return Err(LockError::PermitCount {
                asked: permits,
                max: MAX_LEASED_PERMITS,
            });
        }
        let n = usize::try_from(permits).unwrap_or(usize::MAX);
        let names = &self.c.names;
        let lease_ms = millis(lease_d).to_string();
        wait_for(inner, &names.key, &names.channel, deadline, || {
            // Fresh ids per try: an id is never reused, even by a late reply.
            let ids: Vec<PermitId> = (0..n).map(|_| PermitId::random()).collect();
            let lease_ms = lease_ms.clone();
            async move {
                let hex: Vec<String> = ids.iter().map(ToString::to_string).collect();
                let n_text = n.to_string();
                let mut args: Vec<&str> = vec![
                    &n_text,
                    &lease_ms,
                    names.channel.as_str(),
                    inner.publish_command(),
                ];
                args.extend(hex.iter().map(String::as_str));
                let cmd =
                    Arc::new(PERMITS_ACQUIRE.evalsha_cmd(&[&*names.key, &*names.timeouts], &args));
                // A reply nobody waits for: its permits go back by id.
                let late: keylatch_cluster::LateReply = {
                    let c = self.c.clone();
                    let ids = ids.clone();
                    Arc::new(move |frame| {
                        if matches!(sem_reply(&frame), Ok(SemReply::Got)) {
                            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                                let (c, ids) = (c.clone(), ids.clone());
                                let ticket = c.inner.background.ticket();
                                rt.spawn(async move {
                                    let _ = release_ids(&c, &ids).await;
                                    drop(ticket);
                                });
                            }
                        }
                    })
                };
                let sent_at = Instant::now();
                let b = Some(bound(inner, deadline));
                let sent = inner
                    .client
                    .eval_shared_settled(&PERMITS_ACQUIRE, &cmd, b, late);
                // A process that settles waits for a late reply.
                let frame = watched(inner, &names.key, inner.config.watchdog_timeout, sent).await?;
                match sem_reply(&frame)? {
                    // Answered after its lease ended by the local clock (a
                    // stalled server): given back, and the wait tries again.
                    SemReply::Got if outlived(sent_at, lease_d) => {
                        let _ = release_ids(&self.c, &ids).await;
                        Ok(Try::Short(1))
                    }
                    SemReply::Got => Ok(Try::Got(self.guard(ids, renew, lease_d, sent_at))),
                    SemReply::Missing => Err(LockError::NoSuchSemaphore {
                        name: names.key.to_string(),
                    }),
                    SemReply::WrongType => Err(wrong_type(inner, &names.key).await),
                    SemReply::Short(hint) => Ok(Try::Short(hint)),
                }
            }
        })
        .await
    }

    pub(super) fn guard(
        &self,
        ids: Vec<PermitId>,
        renew: bool,
        lease: Duration,
        sent_at: Instant,
    ) -> PermitGuard {
        let inner = &self.c.inner;
        let csv: Vec<String> = ids.iter().map(ToString::to_string).collect();
        let hold = Hold::new(NewHold {
            key: HoldKey::new(
                Arc::clone(&self.c.names.key),
                Owner::given(&csv.join(",")),
                &PERMITS_LEASE,
            ),
            token: 0,
            renew,
            lease,
            sent_at,
            max_hold: None,
            drift_permille: inner.config.drift_permille,
            counters: Arc::clone(&inner.counters),
            counter_made: false,
        });
        inner.engine.watch(&hold, sent_at);
        inner.counters.acquired("expirable semaphore");
        PermitGuard {
            c: self.c.clone(),
            ids,
            hold,
            renew,
            lease,
            done: false,
        }
    }

    /// Gives permits back by id (e.g. ids handed over from another
    /// process); waiters are told.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks, ids: Vec<keylatch_lock::PermitId>) -> keylatch_lock::LockResult<()> {
    /// locks.expirable_semaphore("render-slots").release_ids(&ids).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Expired`] when any id's lease had run out (it still went
    /// back to the pool, as in Redisson) or it was not out any more
    /// (released before, or expired and taken back by an acquire): the
    /// holder may have run past its lease. [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have released.
    pub async fn release_ids(&self, ids: &[PermitId]) -> LockResult<()> {
        let (released, expired) = release_ids(&self.c, ids).await?;
        if expired > 0 || released < ids.len() {
            return Err(LockError::Expired {
                name: self.name().to_owned(),
            });
        }
        Ok(())
    }
}
