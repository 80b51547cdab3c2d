//! `Lock`: a handle on one reentrant lock as one owner, and the acquire path.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::{Commands, Ttl};
use keylatch_resp::{Cmd, Frame};

use crate::acquire::Attempt;
use crate::error::LockResult;
use crate::guard::LockGuard;
use crate::handle::Handle;
use crate::lease::LeaseKind;
use crate::locks::Inner;
use crate::scripts::FORCE_UNLOCK;

/// After acquiring, how many replicas must acknowledge the hold (`WAIT`)
/// before it counts. Too few acknowledgements: the hold is released again
/// and the acquire fails with [`LockError::ReplicaSync`](crate::LockError::ReplicaSync).
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
    /// Waits by backoff instead of pub/sub (a spin lock).
    pub(crate) spin: bool,
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
    /// A handle from its shared parts, without the per-clone settings.
    pub(crate) fn from_parts(inner: Arc<Inner>, handle: Arc<Handle>) -> Self {
        Self {
            inner,
            handle,
            max_hold: None,
            replica_sync: ReplicaSync::None,
            spin: false,
        }
    }

    pub(crate) fn new(inner: Arc<Inner>, name: &str, owner: Arc<str>, kind: LeaseKind) -> Self {
        Self {
            inner,
            handle: Arc::new(Handle::new(name, owner, kind)),
            max_hold: None,
            replica_sync: ReplicaSync::None,
            spin: false,
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
        self.max_hold = Some(crate::hold::clamp_span(max));
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
        if self.handle.kind == LeaseKind::Fair {
            // One wait without end: rounds would leave the queue and join
            // again at its tail.
            if let Some(g) = Box::pin(self.wait_fair(None, None)).await? {
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
    /// [`LockError::Client`](crate::LockError::Client) when Redis cannot be reached or answers an
    /// error; `LockError::Client(Error::Timeout)` when an attempt's reply did
    /// not come within its bound (the remaining wait, at least
    /// [`LocksConfig::attempt_timeout`](crate::LocksConfig::attempt_timeout),
    /// at most the client's request timeout: the outcome is settled in the
    /// background, see below); [`LockError::ReplicaSync`](crate::LockError::ReplicaSync) under a
    /// replica-sync policy.
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
        if self.handle.kind == LeaseKind::Fair && !wait.is_zero() {
            // Its first attempt may queue this owner: it runs inside the
            // wait, whose guard takes the owner out of the queue however
            // the wait ends (an error, a drop).
            return Box::pin(self.wait_fair(deadline, lease)).await;
        }
        if let Attempt::Acquired(g) = self.attempt(lease, deadline, false).await? {
            return Ok(Some(g));
        }
        if wait.is_zero() {
            return Ok(None);
        }
        if self.spin {
            return Box::pin(self.wait_spin(deadline, lease)).await;
        }
        // Boxed: waiting (queue, subscription, timers) is the slow path, and
        // inline it would enlarge every uncontended acquire's future.
        Box::pin(self.wait_for_turn(deadline, lease)).await
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
        let out = crate::release::release(self, 0, None, crate::release::Retry::Here).await;
        if out.is_ok() {
            self.inner.engine.touched(&self.handle.names.key);
        }
        out
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
    /// [`LockError::Client`](crate::LockError::Client).
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
    /// [`LockError::Client`](crate::LockError::Client).
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
    /// [`LockError::Client`](crate::LockError::Client).
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
                    .arg(self.handle.field()),
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
    /// [`LockError::Client`](crate::LockError::Client).
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
    /// [`LockError::Client`](crate::LockError::Client).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn force_unlock(&self) -> LockResult<bool> {
        let names = &self.handle.names;
        // A fair lock's waiters listen on their own channels: the queue's
        // head is woken there too.
        let queue = (self.handle.kind == LeaseKind::Fair).then(|| names.fair_queue().queue);
        let mut keys = vec![&*names.key];
        keys.extend(queue.as_deref());
        let reply = self
            .inner
            .client
            .eval_script(
                &FORCE_UNLOCK,
                &keys,
                &[
                    // A read-write lock's waiters of both kinds wake on "1".
                    if self.handle.kind.is_rw() { "1" } else { "0" },
                    self.inner.publish_command(),
                    self.handle.names.channel.as_str(),
                ],
            )
            .await?;
        let deleted = *reply.value() == Frame::Integer(1);
        if deleted {
            // Our own DEL raises no invalidation here: holds of this
            // process on the lock are checked now.
            self.inner.engine.touched(&self.handle.names.key);
        }
        Ok(deleted)
    }
}
