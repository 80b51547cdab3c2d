//! A [`Lock`]'s acquire and release as its users call them: an attempt,
//! then the wait its kind asks for (its turn in this process's queue, the
//! server's queue, or spinning), and a release by owner id.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::error::LockResult;
use crate::lease::WaitEnd;

use super::attempt::Attempt;
use super::base::Lock;
use super::guard::LockGuard;
use super::handle::Acquiring;
use super::kind::Waiting;
use super::release::{release, Retry};

impl Lock {
    /// Acquires ([`acquire`](Self::acquire)), then runs a critical section
    /// while the hold lives ([`LockGuard::run`]): `work` gets the fencing
    /// token, is stopped at once if the hold is lost, and the hold is
    /// released when it ends.
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// let report = lock
    ///     .run(|token| async move { format!("written under token {token:?}") })
    ///     .await?;
    /// # let _ = report;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// What [`acquire`](Self::acquire) fails with; then
    /// [`LockError::Lost`](crate::LockError::Lost) as [`LockGuard::run`].
    ///
    /// # Cancel safety
    /// Dropped while waiting, as [`acquire`](Self::acquire); dropped while
    /// the work runs, the work is dropped and the hold released in the
    /// background.
    pub async fn run<T, Fut>(&self, work: impl FnOnce(Option<u64>) -> Fut) -> LockResult<T>
    where
        Fut: Future<Output = T>,
    {
        self.acquire().await?.run(work).await
    }

    /// Waits as long as it takes, then holds the lock under the watchdog.
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// let guard = lock.acquire().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// See [`try_acquire`](Self::try_acquire).
    ///
    /// # Cancel safety
    /// See [`try_acquire`](Self::try_acquire).
    pub async fn acquire(&self) -> LockResult<LockGuard> {
        if let Waiting::Queue { .. } = self.handle.kind.waiting {
            // One wait without end: rounds would leave the queue and join
            // again at its tail.
            if let Some(g) = Box::pin(self.wait_in_queue(None, None)).await? {
                return Ok(g);
            }
        }
        loop {
            // A day per round keeps the deadline arithmetic finite.
            if let Some(g) = self.try_acquire(Duration::from_secs(86_400), None).await? {
                return Ok(g);
            }
        }
    }

    /// One attempt, no waiting; `lease: None` puts the hold under the watchdog.
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// match lock.try_acquire_now(None).await? {
    ///     Some(guard) => guard.unlock().await?,
    ///     None => println!("busy"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// See [`try_acquire`](Self::try_acquire).
    ///
    /// # Cancel safety
    /// See [`try_acquire`](Self::try_acquire).
    pub fn try_acquire_now(
        &self,
        lease: Option<Duration>,
    ) -> impl Future<Output = LockResult<Option<LockGuard>>> + Send + '_ {
        // The same future as `try_acquire`, not a wrapper around it (a
        // wrapper would copy it in).
        self.try_acquire(Duration::ZERO, lease)
    }

    /// Tries for up to `wait`. `lease: Some(d)` holds for `d` (no renewal;
    /// [`LockGuard::lost`] fires when it runs out); `None` holds under the
    /// watchdog. Not acquired in time is `Ok(None)`.
    ///
    /// Waiting: after a failed try the waiter subscribes to the unlock
    /// channel through the shared hub, tries again (closing the race), then
    /// sleeps until an unlock message, the lock's PTTL, or
    /// [`LocksConfig::recheck`](crate::LocksConfig::recheck), whichever is
    /// first. A handle whose try found the lock held within the last half
    /// second (its subscriptions are still up) subscribes before its first
    /// try instead, unless another contender of this process is queued for
    /// the name, and that try is the only one. Contenders of one process
    /// queue locally so only one of them goes back to Redis per release.
    /// If no subscription can be had, it polls instead of failing. A try
    /// answered only after the lease it took had run out by the local clock
    /// (a server stalled with the try in flight) gives that hold back and
    /// counts as not acquired: the wait tries again, and a zero wait
    /// answers `Ok(None)`; no guard is handed out already lost.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// if let Some(guard) = lock.try_acquire(Duration::from_secs(2), Some(Duration::from_secs(10))).await? {
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Client`](crate::LockError::Client) when Redis cannot be reached or answers an
    /// error; `LockError::Client(Error::Timeout)` when an attempt's reply did
    /// not come within its bound (the remaining wait, at least
    /// [`LocksConfig::attempt_timeout`](crate::LocksConfig::attempt_timeout),
    /// at most the client's request timeout: the outcome is settled in the
    /// background, see below); [`LockError::ReplicaSync`](crate::LockError::ReplicaSync) under a
    /// replica-sync policy; [`LockError::WrongType`](crate::LockError::WrongType) at once when the
    /// name's key holds no lock (a list, a string, a semaphore's count, a
    /// hash with no lock's shape and no expiry), naming what it holds.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped at any await, it leaves its local queue slot and
    /// subscription. An acquire dropped (or given up, past its bound) while
    /// its reply is on its way hands the reply to a background finisher:
    /// if it says acquired, that hold is released by its token (a re-entry:
    /// that one count), which can never end another hold. A reply that
    /// never arrives leaves whatever the acquire took to end with its lease.
    pub async fn try_acquire(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> LockResult<Option<LockGuard>> {
        // The wait counts from the call (no clock read for a zero wait).
        let deadline = if wait.is_zero() {
            None
        } else {
            Instant::now().checked_add(wait)
        };
        // Counted until this returns or is dropped (see `fold_orphans`).
        let _acquiring = Acquiring::new(&self.handle);
        self.after_own_leaves().await;
        if matches!(self.handle.kind.waiting, Waiting::Queue { .. }) && !wait.is_zero() {
            // Its first attempt may queue this owner: it runs inside the
            // wait, whose guard takes the owner out of the queue however
            // the wait ends (an error, a drop).
            let r = Box::pin(self.wait_in_queue(deadline, lease)).await;
            self.count_wait(&r, wait, deadline);
            return self.log_outcome(r, wait, deadline);
        }
        // A handle that found the lock held lately, with nobody of this
        // process queued for the name: its subscriptions are still up, so
        // the wait (subscribed first) makes the first try, one that
        // registers it if the lock is held; else a plain try first, and a
        // second, registering one after subscribing.
        let turn = if wait.is_zero() || !self.warm() {
            None
        } else {
            self.inner.waiters.enter_idle(&self.handle.names.key)
        };
        // Whether a try found the lock held: only then did it wait.
        let mut held = false;
        if turn.is_none() {
            match self.attempt(lease, deadline, false, 0).await {
                Ok(Attempt::Acquired(g)) => return self.log_outcome(Ok(Some(g)), wait, deadline),
                Ok(Attempt::Held(..)) => {
                    held = true;
                    self.handle.contended(Instant::now());
                }
                Err(e) => return self.log_outcome(Err(e), wait, deadline),
            }
            if wait.is_zero() {
                return self.log_outcome(Ok(None), wait, deadline);
            }
        }
        let r = if let Waiting::Backoff = self.handle.kind.waiting {
            Box::pin(self.wait_by_backoff(deadline, lease)).await
        } else {
            // Boxed: waiting (queue, subscription, timers) is the slow path,
            // and inline it would enlarge every uncontended acquire's future.
            Box::pin(self.wait_for_turn(deadline, lease, turn, &mut held)).await
        };
        if !held {
            // Taken by the wait's first try: no wait to count.
            return self.log_outcome(r, wait, deadline);
        }
        self.count_wait(&r, wait, deadline);
        self.log_outcome(r, wait, deadline)
    }

    /// Whether this acquire may go straight to its wait: a kind whose
    /// waiters register to be woken by name, through a handle that found
    /// the lock held lately (`Handle::recently_contended`), with the hub
    /// connected, an owner id this client made, and no hold of the handle
    /// (a re-entry tries at once). The caller also needs the name's local
    /// turn free (`WaitQueues::enter_idle`).
    fn warm(&self) -> bool {
        let by_name = matches!(self.handle.kind.waiting, Waiting::Turn(Some(p)) if p.by_name);
        by_name
            && self.handle.recently_contended()
            && self.inner.pubsub_connected()
            && self.inner.made_owner(&self.handle.owner())
            && !self.handle.holds()
    }

    /// Waits (at most an attempt timeout: one call's worth) for leaves of
    /// this owner's dropped waits still on their way: one of them may
    /// carry a grant back, which this acquire would otherwise find as its
    /// own hold (see `Leaves`). One atomic load when none is.
    pub(super) async fn after_own_leaves(&self) {
        let leaves = &self.inner.leaves;
        if !leaves.any() {
            return;
        }
        let now = Instant::now();
        let until = now
            .checked_add(self.inner.config.attempt_timeout)
            .unwrap_or(now);
        leaves.settled(&self.handle.owner(), until).await;
    }

    /// Counts a wait that ended with `r` ([`Locks::stats`](crate::Locks::stats)):
    /// its time is the call's, from its start (`deadline − wait`).
    fn count_wait(
        &self,
        r: &LockResult<Option<LockGuard>>,
        wait: Duration,
        deadline: Option<Instant>,
    ) {
        let left = deadline.map_or(Duration::ZERO, |d| {
            d.saturating_duration_since(Instant::now())
        });
        let end = match r {
            Ok(Some(_)) => WaitEnd::Acquired,
            Ok(None) => WaitEnd::TimedOut,
            Err(_) => WaitEnd::Failed,
        };
        self.inner.counters.waited(end, wait.saturating_sub(left));
    }

    /// The acquire's event, at debug (one per acquire call: per lock, not
    /// per request, and off unless asked for): the lock, its kind, what
    /// came of it and how long it waited. The fields, clock read included,
    /// are evaluated only when a subscriber wants debug events.
    fn log_outcome(
        &self,
        r: LockResult<Option<LockGuard>>,
        wait: Duration,
        deadline: Option<Instant>,
    ) -> LockResult<Option<LockGuard>> {
        let waited_ms = || {
            let left = deadline.map_or(Duration::ZERO, |d| {
                d.saturating_duration_since(Instant::now())
            });
            u64::try_from(wait.saturating_sub(left).as_millis()).unwrap_or(u64::MAX)
        };
        let outcome = match &r {
            Ok(Some(_)) => "acquired",
            Ok(None) => "not acquired in time",
            Err(_) => "failed",
        };
        match &r {
            Err(e) => tracing::debug!(lock = %self.name(), kind = self.handle.kind.label,
                outcome, waited_ms = waited_ms(), error = %e, "acquire"),
            Ok(_) => tracing::debug!(lock = %self.name(), kind = self.handle.kind.label,
                outcome, waited_ms = waited_ms(), "acquire"),
        }
        r
    }

    /// Releases one hold of this owner without a guard (for holds handed
    /// over by owner id). `Ok(true)` when that was the last hold.
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// let last = lock.release_one().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::NotOwner`](crate::LockError::NotOwner) when this owner holds nothing (nothing
    /// changes); [`LockError::Client`](crate::LockError::Client).
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have released.
    pub async fn release_one(&self) -> LockResult<bool> {
        let out = release(self, 0, None, Retry::Here).await;
        if out.is_ok() {
            self.inner.engine.touched(&self.handle.names.key);
        }
        out
    }
}
