//! `Lock`: a handle on one reentrant lock as one owner, and the acquire path.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::{Commands, Ttl};
use keylatch_resp::{Cmd, Frame};

use crate::error::{LockError, LockResult};
use crate::guard::LockGuard;
use crate::handle::{acquire_cmd, Handle};
use crate::locks::Inner;
use crate::scripts::{FORCE_UNLOCK, REENTRANT_ACQUIRE, REENTRANT_RELEASE};
use crate::watchdog::{millis, HoldKey};

/// After acquiring, how many replicas must acknowledge the hold (`WAIT`)
/// before it counts. Too few acknowledgements: the hold is released again
/// and the acquire fails with [`LockError::ReplicaSync`].
///
/// ```
/// use std::time::Duration;
/// use keylatch_lock::ReplicaSync;
/// let policy = ReplicaSync::AtLeast { replicas: 1, timeout: Duration::from_millis(100) };
/// assert_ne!(policy, ReplicaSync::None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplicaSync {
    /// No check (Redisson's behaviour): a failover right after the acquire
    /// may lose the hold.
    #[default]
    None,
    /// At least `replicas` acknowledgements within `timeout`.
    AtLeast {
        /// Replicas required.
        replicas: u32,
        /// How long `WAIT` may block.
        timeout: Duration,
    },
    /// Every replica the client's topology knows for the lock's master.
    AllReplicas {
        /// How long `WAIT` may block.
        timeout: Duration,
    },
}

// Returned once per attempt and unpacked at once: boxing the guard would
// cost an allocation per acquire for nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Attempt {
    Acquired(LockGuard),
    /// Held by another owner; the PTTL in milliseconds.
    Held(i64),
}

/// A handle on one reentrant lock, acting as one owner.
///
/// Wire-compatible with Redisson's `RLock`: the lock is a hash named after
/// the lock whose field is the owner id and whose value is the hold count;
/// releases publish `0` on `redisson_lock__channel:{name}`.
///
/// ```no_run
/// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
/// let lock = locks.lock("invoices");
/// let guard = lock.acquire().await?;        // waits, watchdog keeps it
/// let again = lock.acquire().await?;        // same owner: re-entry
/// assert_eq!(again.hold_count(), 2);
/// again.unlock().await?;
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Lock {
    pub(crate) inner: Arc<Inner>,
    /// Names, owner, counters and prepared commands, shared by clones.
    pub(crate) handle: Arc<Handle>,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) replica_sync: ReplicaSync,
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.handle.names.key)
            .field("owner", &self.handle.owner())
            .finish_non_exhaustive()
    }
}

impl Lock {
    pub(crate) fn new(inner: Arc<Inner>, name: &str, owner: Arc<str>) -> Self {
        Self {
            inner,
            handle: Arc::new(Handle::new(name, owner)),
            max_hold: None,
            replica_sync: ReplicaSync::None,
        }
    }

    /// Bounds the total time a watchdog hold may last: past it renewal stops
    /// and [`LockGuard::lost`] fires, so a wedged holder cannot keep the lock
    /// forever. Unbounded by default.
    ///
    /// ```no_run
    /// # fn demo(locks: keylatch_lock::Locks) {
    /// let lock = locks.lock("batch").with_max_hold(std::time::Duration::from_secs(600));
    /// # }
    /// ```
    pub fn with_max_hold(mut self, max: Duration) -> Self {
        self.max_hold = Some(crate::watchdog::clamp_span(max));
        self
    }

    /// Sets the replica-sync policy checked after every acquire.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use keylatch_lock::ReplicaSync;
    /// # fn demo(locks: keylatch_lock::Locks) {
    /// let lock = locks
    ///     .lock("payments")
    ///     .with_replica_sync(ReplicaSync::AtLeast { replicas: 1, timeout: Duration::from_millis(50) });
    /// # }
    /// ```
    pub fn with_replica_sync(mut self, policy: ReplicaSync) -> Self {
        self.replica_sync = policy;
        self
    }

    /// The lock's name.
    ///
    /// ```no_run
    /// # fn demo(locks: keylatch_lock::Locks) {
    /// let lock = locks.lock("invoices");
    /// assert_eq!(lock.name(), "invoices");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.handle.names.key
    }

    /// The owner id this handle acts as (`<client uuid>:<n>`).
    ///
    /// ```no_run
    /// # fn demo(locks: keylatch_lock::Locks) {
    /// let lock = locks.lock("invoices");
    /// // Clones act as the same owner; a new handle is another owner.
    /// assert_eq!(lock.clone().owner(), lock.owner());
    /// assert_ne!(locks.lock("invoices").owner(), lock.owner());
    /// // A handle given the id acts as this owner.
    /// assert_eq!(locks.lock_with_owner("invoices", lock.owner()).owner(), lock.owner());
    /// # }
    /// ```
    pub fn owner(&self) -> &str {
        self.handle.owner()
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
    /// first. Contenders of one process queue locally so only one of them
    /// goes back to Redis per release. If no subscription can be had, it
    /// polls instead of failing.
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
    /// [`LockError::Client`] when Redis cannot be reached or answers an
    /// error; [`LockError::ReplicaSync`] under a replica-sync policy.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped at any await, it leaves its local queue slot and
    /// subscription; an acquire whose reply never came is treated as
    /// maybe-acquired and released by owner (a first hold only; a re-entry
    /// is left for its lease to end), so no lock stays held by nobody past
    /// its lease.
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
        if let Attempt::Acquired(g) = self.attempt(lease).await? {
            return Ok(Some(g));
        }
        if wait.is_zero() {
            return Ok(None);
        }
        // Boxed: waiting (queue, subscription, timers) is the slow path, and
        // inline it would enlarge every uncontended acquire's future.
        Box::pin(self.wait_for_turn(deadline, lease)).await
    }

    /// After a failed first try: queue locally, subscribe, and try again on
    /// every unlock message, PTTL expiry or re-check, until `deadline`.
    async fn wait_for_turn(
        &self,
        deadline: Option<Instant>,
        lease: Option<Duration>,
    ) -> LockResult<Option<LockGuard>> {
        let queued = self.inner.waiters.enter(&self.handle.names.key);
        let _turn = match deadline {
            Some(d) => match tokio::time::timeout_at(d.into(), queued).await {
                Ok(t) => t,
                Err(_) => return Ok(None),
            },
            None => queued.await,
        };
        let setup = async {
            match self.inner.pubsub().await {
                Some(hub) => match self.inner.subscribe(hub, &self.handle.names.channel).await {
                    Ok(s) => Some(s),
                    Err(e) => {
                        tracing::warn!(lock = %self.handle.names.key, error = %e,
                            "no unlock subscription; waiting by polling instead");
                        None
                    }
                },
                None => {
                    tracing::warn!(lock = %self.handle.names.key,
                        "pub/sub hub unavailable; waiting by polling instead");
                    None
                }
            }
        };
        // Setting up the subscription (perhaps connecting the hub) counts
        // against the wait, and never holds up polling longer than a
        // re-check interval: past that, poll instead.
        // (`recheck` is clamped to ten years, so this cannot overflow.)
        let mut limit = Instant::now() + self.inner.config.recheck;
        if let Some(d) = deadline {
            limit = limit.min(d);
        }
        let mut sub = tokio::time::timeout_at(limit.into(), setup)
            .await
            .unwrap_or_else(|_| {
                tracing::warn!(lock = %self.handle.names.key,
                    "unlock subscription not ready in time; waiting by polling instead");
                None
            });
        let mut poll = Duration::from_millis(10);
        loop {
            let pttl = match self.attempt(lease).await? {
                Attempt::Acquired(g) => return Ok(Some(g)),
                Attempt::Held(pttl) => pttl,
            };
            let now = Instant::now();
            let left = deadline.map(|d| d.saturating_duration_since(now));
            if left == Some(Duration::ZERO) {
                return Ok(None);
            }
            // PTTL -2: gone between two commands, try at once; -1: no expiry
            // (not ours to judge), re-check at the bounded interval.
            let mut nap = match pttl {
                -2 => Duration::ZERO,
                p if p > 0 => Duration::from_millis(p.unsigned_abs()),
                _ => self.inner.config.recheck,
            }
            .min(self.inner.config.recheck);
            if let Some(left) = left {
                nap = nap.min(left);
            }
            match sub.as_mut() {
                Some(s) => {
                    // A message, a gap (resubscribed: re-check), or the nap
                    // running out all lead to another try.
                    if let Ok(None) = tokio::time::timeout(nap, s.recv()).await {
                        sub = None;
                    }
                }
                None => {
                    tokio::time::sleep(nap.min(poll)).await;
                    poll = (poll * 2).min(self.inner.config.recheck);
                }
            }
        }
    }

    /// One acquire script call.
    pub(crate) async fn attempt(&self, lease: Option<Duration>) -> LockResult<Attempt> {
        let cfg = &self.inner.config;
        let (lease_d, renew) = match lease {
            Some(l) => (crate::watchdog::clamp_span(l), false),
            None => (crate::watchdog::clamp_span(cfg.watchdog_timeout), true),
        };
        let key: HoldKey = self.handle.hold.clone();
        let watchdog = &self.inner.watchdog;
        let (generation, sent_at) = loop {
            // Created before the check, so a release finishing in between
            // still wakes it.
            let released = watchdog.released();
            // One clock read serves as registration and send time.
            let sent_at = Instant::now();
            match watchdog.register(&key, lease_d, renew, self.max_hold, sent_at) {
                Ok(generation) => break (generation, sent_at),
                // A release by owner after a cancelled attempt of this owner
                // is on its way: it must reach the server before this
                // acquire, or it could end the hold this acquire takes. It
                // is bounded by its request timeout.
                Err(_) => released.await,
            }
        };
        let mut in_flight = InFlight {
            lock: self,
            key: Some(key.clone()),
            generation,
        };
        let client = &self.inner.client;
        let (names, owner) = (&self.handle.names, self.handle.owner());
        let args = &self.inner.script_args;
        let reply = if renew {
            match self.handle.acquire_watchdog(args) {
                // A handle in repeated use: the prepared command, shared.
                Some(cmd) => client.eval_shared(&REENTRANT_ACQUIRE, cmd).await,
                None => {
                    let make = || acquire_cmd(args, names, owner, &args.watchdog_ms);
                    client.eval_with(&REENTRANT_ACQUIRE, make).await
                }
            }
        } else {
            let ms = millis(lease_d).to_string();
            let make = || acquire_cmd(args, names, owner, &ms);
            client.eval_with(&REENTRANT_ACQUIRE, make).await
        };
        let frame = match reply {
            Ok(f) => f,
            Err(e) if e.is_unknown_outcome() => {
                // Maybe acquired: `in_flight` releases a first hold on drop.
                return Err(e.into());
            }
            Err(e) => {
                in_flight.settle();
                watchdog.deregister(&key, generation, None, false);
                return Err(e.into());
            }
        };
        // A reply of another shape leaves the outcome unknown, as a lost
        // reply does: `in_flight` handles it on drop.
        let (holds, value) = parse_pair(&frame)?;
        // Disarmed, but its reference stays in the entry until the guard
        // takes it over (or it is dropped below), so a clone's cancelled
        // attempt never sees this owner without a hold in between.
        in_flight.settle();
        if holds <= 0 {
            watchdog.deregister(&key, generation, None, false);
            return Ok(Attempt::Held(value));
        }
        let token = value.max(0).unsigned_abs();
        let (lost, generation, epoch) = watchdog.confirm(
            &key,
            generation,
            sent_at,
            lease_d,
            renew,
            self.max_hold,
            token,
            holds.unsigned_abs(),
        );
        let guard = LockGuard::new(
            self.clone(),
            generation,
            epoch,
            renew,
            holds.unsigned_abs(),
            (cfg.fencing && token > 0).then_some(token),
            lease_d,
            lost,
        );
        if matches!(self.replica_sync, ReplicaSync::None) {
            return Ok(Attempt::Acquired(guard));
        }
        // Boxed: WAIT is opt-in, and inline it would enlarge every acquire.
        Box::pin(self.check_replicas(guard))
            .await
            .map(Attempt::Acquired)
    }

    async fn check_replicas(&self, guard: LockGuard) -> LockResult<LockGuard> {
        let (wanted, timeout) = match self.replica_sync {
            ReplicaSync::None => return Ok(guard),
            ReplicaSync::AtLeast { replicas, timeout } => (i64::from(replicas), timeout),
            ReplicaSync::AllReplicas { timeout } => {
                let conn = self
                    .inner
                    .client
                    .connection_for_key(&*self.handle.names.key)
                    .await?;
                let addr = conn.config().addr();
                let n = self
                    .inner
                    .client
                    .shards()
                    .into_iter()
                    .find(|s| s.master == addr)
                    .map_or(0, |s| s.replicas.len());
                (i64::try_from(n).unwrap_or(i64::MAX), timeout)
            }
        };
        if wanted == 0 {
            return Ok(guard);
        }
        // WAIT counts this connection's writes: the same multiplexed
        // connection that ran the acquire script.
        let conn = self
            .inner
            .client
            .connection_for_key(&*self.handle.names.key)
            .await?;
        let acked = conn
            .wait(u32::try_from(wanted).unwrap_or(u32::MAX), timeout)
            .await?;
        if acked >= wanted {
            return Ok(guard);
        }
        // Release what a failover could lose anyway; report the shortfall.
        let _ = guard.unlock().await;
        Err(LockError::ReplicaSync { acked, wanted })
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
    /// [`LockError::NotOwner`] when this owner holds nothing (nothing
    /// changes); [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have released.
    pub async fn release_one(&self) -> LockResult<bool> {
        self.release(None).await
    }

    pub(crate) async fn release(&self, token: Option<u64>) -> LockResult<bool> {
        let token = token.unwrap_or(0);
        let make = || self.handle.release_cmd(&self.inner.script_args, token);
        let reply = self
            .inner
            .client
            .eval_with(&REENTRANT_RELEASE, make)
            .await?;
        match reply {
            Frame::Null => Err(LockError::NotOwner {
                name: self.handle.names.key.to_string(),
            }),
            Frame::Integer(n) => Ok(n == 1),
            other => Err(LockError::Protocol(other.to_string())),
        }
    }

    /// Whether any owner holds the lock.
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// if lock.is_locked().await? { println!("busy"); }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn is_locked(&self) -> LockResult<bool> {
        Ok(self
            .inner
            .client
            .cmd(Cmd::new("EXISTS").key(&*self.handle.names.key))
            .await?)
    }

    /// Whether this owner holds the lock.
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// assert!(!lock.is_held_by_me().await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn is_held_by_me(&self) -> LockResult<bool> {
        Ok(self.hold_count().await? > 0)
    }

    /// This owner's hold count (0 when not held by it).
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// let n = lock.hold_count().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn hold_count(&self) -> LockResult<u64> {
        let n: Option<u64> = self
            .inner
            .client
            .cmd(
                Cmd::new("HGET")
                    .key(&*self.handle.names.key)
                    .arg(self.handle.owner()),
            )
            .await?;
        Ok(n.unwrap_or(0))
    }

    /// The lock's remaining TTL on the server (`None` when not locked).
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// if let Some(ttl) = lock.remaining_ttl().await? { println!("{ttl:?} left"); }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn remaining_ttl(&self) -> LockResult<Option<Duration>> {
        Ok(
            match self.inner.client.pttl(&*self.handle.names.key).await? {
                Ttl::Expires(d) => Some(d),
                Ttl::Persistent => Some(Duration::MAX),
                Ttl::Missing => None,
            },
        )
    }

    /// Deletes the lock whoever holds it and wakes waiters. `true` when
    /// there was a lock. The holder learns of it through
    /// [`LockGuard::lost`]: at once when its [`Locks`](crate::Locks) tracks
    /// keys ([`Locks::connect`](crate::Locks::connect)), else at its next
    /// renewal (a fixed lease: when the lease ends).
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// lock.force_unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn force_unlock(&self) -> LockResult<bool> {
        let reply = self
            .inner
            .client
            .eval_script(
                &FORCE_UNLOCK,
                &[&*self.handle.names.key, self.handle.names.channel.as_str()],
                &["0", self.inner.publish_command()],
            )
            .await?;
        Ok(reply == Frame::Integer(1))
    }
}

/// An acquire in flight. Dropped while armed (cancelled, or the reply was
/// lost), it stops watching the hold and, if no hold of this owner exists
/// and no other attempt of it is in flight, releases by owner in the
/// background: the script may have run. Otherwise the possible extra hold
/// is left to end with its lease rather than risk ending a clone's hold.
struct InFlight<'a> {
    lock: &'a Lock,
    key: Option<HoldKey>,
    generation: u64,
}

impl InFlight<'_> {
    /// The outcome is known; the caller takes over the attempt's reference.
    fn settle(&mut self) {
        self.key = None;
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else { return };
        // Released by owner only when this owner has nothing else here (no
        // guard, no other attempt, across every handle acting as it): a
        // release could otherwise end a hold someone here relies on. The
        // count lives in the watchdog entry, under its lock, so two
        // attempts cancelled at once cannot both miss each other.
        // Without a runtime no release can be sent, so none is announced.
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.lock
                .inner
                .watchdog
                .deregister(&key, self.generation, None, false);
            return;
        };
        // When nothing is left, the entry stays marked as releasing until the
        // release is done: attempts of this owner that start meanwhile wait,
        // so the release cannot end a hold one of them takes.
        if !self
            .lock
            .inner
            .watchdog
            .deregister(&key, self.generation, None, true)
            .nothing
        {
            return;
        }
        /// Lets waiting attempts go on when the release is done, or dropped
        /// unsent (a runtime shutting down): they must never wait forever.
        struct Done(Lock);
        impl Drop for Done {
            fn drop(&mut self) {
                self.0.inner.watchdog.release_done(&self.0.handle.hold);
            }
        }
        let done = Done(self.lock.clone());
        // Queued after the acquire on the same connection, so it runs after
        // it ("not owner" just means the acquire never ran).
        spawn_queued(&rt, async move {
            let _ = done.0.release(None).await;
            drop(done);
        });
    }
}

/// Runs `fut` in the background after polling it once here, so whatever it
/// sends first is on the connection's queue before the caller sends anything
/// else (on a cluster, once the node's connection is up). A plain spawn
/// could run after the caller's next request.
pub(crate) fn spawn_queued(
    rt: &tokio::runtime::Handle,
    fut: impl Future<Output = ()> + Send + 'static,
) {
    /// The first poll's waker: the spawned task polls again with its own.
    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    let mut fut = Box::pin(fut);
    // Not while unwinding: a poll that panics then (a runtime shutting
    // down) would abort the process. The spawn alone is still best effort.
    if !std::thread::panicking() {
        let waker = std::task::Waker::from(Arc::new(Noop));
        let mut cx = std::task::Context::from_waker(&waker);
        if fut.as_mut().poll(&mut cx).is_ready() {
            return;
        }
    }
    rt.spawn(fut);
}

fn parse_pair(frame: &Frame) -> LockResult<(i64, i64)> {
    match frame {
        Frame::Array(items) => match items.as_slice() {
            [Frame::Integer(a), Frame::Integer(b)] => Ok((*a, *b)),
            _ => Err(LockError::Protocol(frame.to_string())),
        },
        other => Err(LockError::Protocol(other.to_string())),
    }
}

/// Keeps the loss signal type in one place for the guard.
pub(crate) type LostRx = crate::loss::LossRef;
