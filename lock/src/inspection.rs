//! [`Inspection`]: what a lock name holds right now, as
//! [`Locks::inspect`](crate::Locks::inspect) reads it (plain data; each
//! type fills in its own part, `inspect.rs` puts them together).

/// What a lock name holds right now: the key's type and contents, and what
/// each lock type keeps beside it (a fair queue's waiters, a read-write
/// lock's readers, writer and waiting writers, a permit-expirable
/// semaphore's leased permits, the last fencing token). Read-only, read
/// in several commands: a snapshot of moments close together, not one.
///
/// ```no_run
/// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
/// let seen = locks.inspect("nightly-report").await?;
/// for h in &seen.holders {
///     println!("{} holds it {} time(s), ttl {:?} ms", h.owner, h.count, seen.ttl_ms);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Inspection {
    /// The lock's name.
    pub name: String,
    /// The Redis type of the key (`none` when there is none).
    pub redis_type: String,
    /// PTTL in ms: `None` when the key is missing, -1 without expiry.
    pub ttl_ms: Option<i64>,
    /// The hash's fields that are counts: owner → hold count, in the
    /// server's order (a read-write lock's writer as `<owner>:write`).
    pub holders: Vec<Holder>,
    /// A read-write lock's `mode` (`read` / `write`).
    pub mode: Option<String>,
    /// A string key's value (a semaphore's permits, a latch's count).
    pub value: Option<String>,
    /// Fair-queue waiters, head first.
    pub waiters: Vec<QueuedWaiter>,
    /// keylatch waiters of a reentrant, non-reentrant, fenced or spin lock
    /// (`keylatch_lock_waiters:{name}`), registered to be woken (or handed
    /// the lock) by name by the next release, soonest end first: each
    /// one's `deadline_in_ms` is when its registration ends unless it
    /// calls again. Redisson's waiters of such a lock leave no record.
    pub registered: Vec<QueuedWaiter>,
    /// The last fencing token issued for this name.
    pub fencing_token: Option<u64>,
    /// A read-write lock's readers with their read holds.
    pub readers: Vec<Reader>,
    /// A read-write lock's writer.
    pub writer: Option<Holder>,
    /// Writers waiting for a read-write lock: new keylatch readers wait
    /// behind them.
    pub writers_waiting: Vec<WaitingWriter>,
    /// A permit-expirable semaphore's leased permits (`None`: no such
    /// semaphore at the name).
    pub permits: Option<Vec<LeasedPermit>>,
    /// A hash with a field that no lock has (a value that is no count, a
    /// `mode` that is neither read nor write): an application's hash.
    pub shapeless: bool,
}

/// An owner and its hold count.
///
/// ```
/// let h = keylatch_lock::Holder::new("c0ffee:1", 2);
/// assert_eq!((h.owner.as_str(), h.count), ("c0ffee:1", 2));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The owner id.
    pub owner: String,
    /// Its hold count.
    pub count: i64,
}

impl Holder {
    /// An owner and its count.
    ///
    /// ```
    /// assert_eq!(keylatch_lock::Holder::new("o", 1).count, 1);
    /// ```
    pub fn new(owner: &str, count: i64) -> Self {
        Self {
            owner: owner.to_owned(),
            count,
        }
    }
}

/// One reader of a read-write lock.
///
/// ```
/// let r = keylatch_lock::Reader::default();
/// assert!(r.holds_ttl_ms.is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reader {
    /// The owner id.
    pub owner: String,
    /// Its read count.
    pub count: i64,
    /// PTTL of each read hold's key, hold 1 first (-2: expired, the count
    /// is stale; -1: no expiry).
    pub holds_ttl_ms: Vec<i64>,
}

/// One fair-queue waiter.
///
/// ```
/// let w = keylatch_lock::QueuedWaiter::default();
/// assert!(!w.keylatch);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueuedWaiter {
    /// The owner id.
    pub owner: String,
    /// When it is purged if it does not call again, in ms from the
    /// server's now (negative: past, purged at the next acquire or
    /// release); `None` when it has none. A keylatch waiter's is its
    /// liveness record, by which keylatch's scripts judge it; any other's
    /// is its Redisson deadline.
    pub deadline_in_ms: Option<i64>,
    /// Whether it is a keylatch waiter (it has a liveness record).
    pub keylatch: bool,
    /// A registered waiter only: a release handed it the lock (the lock's
    /// holder is this owner now), and this mark stays until its wait takes
    /// the grant, gives it back, or the grant's lease ends. Its
    /// `deadline_in_ms` is then `None`.
    pub granted: bool,
}

/// A writer waiting for a read-write lock.
///
/// ```
/// let w = keylatch_lock::WaitingWriter::default();
/// assert_eq!(w.deadline_in_ms, 0);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitingWriter {
    /// The owner id.
    pub owner: String,
    /// Ms until its entry runs out unless it calls again.
    pub deadline_in_ms: i64,
}

/// A leased permit of a permit-expirable semaphore.
///
/// ```
/// let p = keylatch_lock::LeasedPermit::default();
/// assert_eq!(p.expires_in_ms, None);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeasedPermit {
    /// Its id, in hex.
    pub id: String,
    /// Ms until it expires (server time); `None`: no lease.
    pub expires_in_ms: Option<i64>,
}
