//! `Lock`: a handle on one lock as one owner: what it is, its settings, and
//! the reads that need no hold. Its acquire is in `acquire.rs`.

use std::sync::Arc;
use std::time::Duration;

use keylatch_cluster::{Commands, Ttl};
use keylatch_resp::Cmd;

use crate::context::Inner;
use crate::error::LockResult;
use crate::owner::Owner;

use super::handle::Handle;
use super::kind::LockKind;

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
#[non_exhaustive]
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
    /// This clone's settings; `None` for the defaults (most handles): one
    /// pointer where both settings took 40 bytes in every handle and guard.
    settings: Option<Arc<Settings>>,
}

/// A [`Lock`] clone's own settings.
#[derive(Clone, Copy, Debug, Default)]
struct Settings {
    max_hold: Option<Duration>,
    replica_sync: ReplicaSync,
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.handle.names.key)
            // Written out as `Lock::owner` hands it out: a log line can
            // give the id to another process, so the handle's holds are
            // judged by token from now on.
            .field("owner", &self.handle.owner_str())
            .field("kind", &self.handle.kind.label)
            .finish_non_exhaustive()
    }
}

impl Lock {
    /// A handle from its shared parts, without the per-clone settings.
    pub(crate) fn from_parts(inner: Arc<Inner>, handle: Arc<Handle>) -> Self {
        Self {
            inner,
            handle,
            settings: None,
        }
    }

    /// The max hold set by [`with_max_hold`](Self::with_max_hold).
    pub(crate) fn max_hold(&self) -> Option<Duration> {
        self.settings.as_ref().and_then(|s| s.max_hold)
    }

    /// The policy set by [`with_replica_sync`](Self::with_replica_sync).
    pub(crate) fn replica_sync(&self) -> ReplicaSync {
        self.settings
            .as_ref()
            .map_or(ReplicaSync::None, |s| s.replica_sync)
    }

    fn set(mut self, change: impl FnOnce(&mut Settings)) -> Self {
        let mut s = self.settings.as_deref().copied().unwrap_or_default();
        change(&mut s);
        self.settings = Some(Arc::new(s));
        self
    }

    pub(crate) fn new(
        inner: Arc<Inner>,
        name: &str,
        owner: Owner,
        kind: &'static LockKind,
    ) -> Self {
        Self {
            inner,
            handle: Arc::new(Handle::new(name, owner, kind)),
            settings: None,
        }
    }

    /// Bounds the total time a watchdog hold may last: past it renewal stops
    /// and [`LockGuard::lost`](crate::LockGuard::lost) fires, so a wedged holder cannot keep the lock
    /// forever. Unbounded by default.
    ///
    /// ```no_run
    /// # fn demo(locks: keylatch_lock::Locks) {
    /// let lock = locks.lock("batch").with_max_hold(std::time::Duration::from_secs(600));
    /// # }
    /// ```
    pub fn with_max_hold(self, max: Duration) -> Self {
        self.set(|s| s.max_hold = Some(crate::span::clamp_span(max)))
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
    pub fn with_replica_sync(self, policy: ReplicaSync) -> Self {
        self.set(|s| s.replica_sync = policy)
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
    /// Once asked for (or written by `Lock`'s or a guard's `Debug`), the id
    /// may be given to another process
    /// ([`Locks::lock_with_owner`](crate::Locks::lock_with_owner)), which
    /// could re-take the lock as this owner behind a lapsed hold: this
    /// handle's holds are then judged by their fencing token at every
    /// renewal, not by owner alone (slightly more server work per renewal).
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
        self.handle.owner_str()
    }

    /// The owner id, compared without writing its text out.
    pub(crate) fn owner_id(&self) -> &Owner {
        self.handle.owner_id()
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
        let n: Result<Option<u64>, _> = self
            .inner
            .client
            .cmd(
                Cmd::new("HGET")
                    .key(&*self.handle.names.key)
                    .arg(&*self.handle.field().text()),
            )
            .await;
        match n {
            Ok(n) => Ok(n.unwrap_or(0)),
            // WRONGTYPE: the name now holds another type (the hold was lost
            // and the name reused): this owner holds nothing there.
            Err(e) if e.server_kind() == Some(keylatch_cluster::ServerErrorKind::Other) => {
                match crate::shape::key_shape(&self.inner, self.name()).await? {
                    found if found.is_lock() => Err(e.into()),
                    _ => Ok(0),
                }
            }
            Err(e) => Err(e.into()),
        }
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
}
