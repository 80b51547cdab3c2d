//! The lock layer's error type.

use std::fmt;

/// `Result` with the lock layer's [`LockError`].
pub type LockResult<T> = std::result::Result<T, LockError>;

/// What can go wrong with a lock. "Not acquired in time" is not an error:
/// the acquire calls return `Ok(None)` for it.
///
/// ```
/// use keylatch_lock::LockError;
/// let e = LockError::NotOwner { name: "orders".into() };
/// assert!(e.to_string().contains("orders"));
/// let e = LockError::Expired { name: "orders".into() };
/// assert!(e.to_string().contains("already ended"));
/// let e = LockError::WrongType { name: "orders".into(), found: keylatch_lock::KeyShape::List };
/// assert!(e.to_string().contains("holds a list"));
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum LockError {
    /// The client failed (connection, routing, server error).
    Client(keylatch_cluster::Error),
    /// Unlock by an owner that does not hold the lock (it expired,
    /// was force-unlocked, its name now holds another type, or it was never
    /// held by this owner). Nothing changed.
    NotOwner {
        /// The lock's name.
        name: String,
    },
    /// [`LockGuard::unlock`](crate::LockGuard::unlock) or
    /// [`extend`](crate::LockGuard::extend) (or a permit guard's `release`
    /// or `extend`) of a hold that had already ended: its lease ran out, it
    /// is gone from the server, or it was lost
    /// ([`LockGuard::lost`](crate::LockGuard::lost) fired or was due).
    /// Nothing changed. (A hold that ended otherwise, e.g. force-unlocked or
    /// released through another handle of its owner, is
    /// [`NotOwner`](Self::NotOwner).)
    Expired {
        /// The lock's name.
        name: String,
    },
    /// The hold was acquired but fewer replicas than required acknowledged
    /// it in time; it has been released again.
    ReplicaSync {
        /// Replicas that acknowledged.
        acked: u64,
        /// Replicas required.
        wanted: u64,
    },
    /// A non-reentrant lock's holder tried to acquire it again. Nothing
    /// changed: the first hold stands.
    NotReentrant {
        /// The lock's name.
        name: String,
    },
    /// A read-write lock's write acquire by an owner that holds read holds
    /// of it but not the write: the upgrade would wait for its own readers
    /// for ever (Redisson's deadlock, #4796), so it is refused at once.
    /// Nothing changed: the read holds stand. Release them first, then
    /// acquire the write.
    UpgradeRefused {
        /// The lock's name.
        name: String,
    },
    /// A wait on a semaphore (or permit-expirable semaphore) that does not
    /// exist: nothing would ever release a permit, so the wait fails at
    /// once instead of running out its time (Redisson waits). Set its
    /// permits first (`try_set_permits`).
    NoSuchSemaphore {
        /// The semaphore's name.
        name: String,
    },
    /// A RedLock acquire that could not ask a quorum of its masters: fewer
    /// than `needed` answered at all in the last round (errors, timeouts),
    /// so no answer could have been a quorum. Nothing is left held.
    Quorum {
        /// Masters that answered (held or free).
        answered: usize,
        /// The quorum: N/2 + 1.
        needed: usize,
    },
    /// A permit-expirable semaphore acquire of 0 permits, or of more than
    /// one call may lease ([`MAX_LEASED_PERMITS`](crate::MAX_LEASED_PERMITS)).
    /// Nothing was sent.
    PermitCount {
        /// Permits asked for.
        asked: u64,
        /// The most one acquire may lease.
        max: u64,
    },
    /// A semaphore's or a latch's count above
    /// [`MAX_COUNT`](crate::MAX_COUNT), 2^53 − 1: the scripts count in Lua
    /// numbers, exact only up to there, so a larger count could be granted
    /// when too few are there, or read back as another number. Nothing was
    /// sent.
    CountTooLarge {
        /// The count asked for.
        asked: u64,
        /// The largest count taken.
        max: u64,
    },
    /// A multi-lock lists one lock name under two owners: the second would
    /// wait for the first for ever, so the acquire is refused at once.
    SelfDeadlock {
        /// The lock's name.
        name: String,
    },
    /// The name's key holds something that is no lock of the kind asked
    /// for (a list, a string, a hash with no lock's shape; a lock where a
    /// semaphore was asked for, …): an acquire or a wait fails at once
    /// instead of waiting for a holder that does not exist. Nothing changed.
    WrongType {
        /// The name.
        name: String,
        /// What the key holds.
        found: crate::KeyShape,
    },
    /// A force unlock refused: the name holds no lock at all, or a
    /// semaphore's or latch's count with no holder to free (plain
    /// semaphores' permits belong to nobody; a latch has no holder).
    /// Nothing changed.
    ForceUnlockRefused {
        /// The name.
        name: String,
        /// What the key holds.
        found: crate::KeyShape,
    },
    /// `extend` of a hold taken under the watchdog: its lease is renewed
    /// already for as long as the guard lives, so a fixed extension would
    /// mean nothing until the guard is dropped (and then keep the key past
    /// its release's intent). Nothing changed. Take the hold with a fixed
    /// lease (`try_acquire(wait, Some(lease))`) to extend it.
    WatchdogLease {
        /// The lock's name.
        name: String,
    },
    /// The script answered something the lock layer does not understand.
    Protocol(String),
    /// A critical section run under a hold (`run` on a guard, or
    /// [`Lock::run`](crate::Lock::run)) lost the hold: the section was
    /// stopped at once (when the loss was seen while it ran) or its release
    /// found the hold already ended (the section may have outlived it).
    Lost {
        /// The lock's name.
        name: String,
        /// Why the hold was lost.
        reason: crate::LossReason,
    },
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Client(e) => write!(f, "{e}"),
            LockError::Lost { name, reason } => write!(
                f,
                "the hold on lock {name:?} was lost during its critical section ({reason:?})"
            ),
            LockError::NotOwner { name } => {
                write!(
                    f,
                    "lock {name:?} is not held by this owner (expired or never held)"
                )
            }
            LockError::Expired { name } => {
                write!(
                    f,
                    "the hold on lock {name:?} had already ended (lease ran out or lost)"
                )
            }
            LockError::ReplicaSync { acked, wanted } => write!(
                f,
                "only {acked} of {wanted} replicas acknowledged the acquire in time; released"
            ),
            LockError::NotReentrant { name } => {
                write!(
                    f,
                    "lock {name:?} is not reentrant and this owner holds it already"
                )
            }
            LockError::UpgradeRefused { name } => write!(
                f,
                "read-write lock {name:?}: this owner holds read holds, and an upgrade to write is refused (it would wait for itself); release the reads first"
            ),
            LockError::NoSuchSemaphore { name } => write!(
                f,
                "semaphore {name:?} does not exist: set its permits first (try_set_permits)"
            ),
            LockError::Quorum { answered, needed } => write!(
                f,
                "RedLock: only {answered} masters answered, {needed} needed for a quorum; nothing held"
            ),
            LockError::PermitCount { asked, max } => write!(
                f,
                "cannot lease {asked} permits in one acquire: 1 to {max}"
            ),
            LockError::CountTooLarge { asked, max } => write!(
                f,
                "a count of {asked} is more than a semaphore or latch counts exactly (at most {max})"
            ),
            LockError::SelfDeadlock { name } => write!(
                f,
                "a multi-lock lists lock {name:?} under two owners: it would wait for itself"
            ),
            LockError::WrongType { name, found } => write!(
                f,
                "key {name:?} holds {found}: no lock of the kind asked for; refused (nothing changed)"
            ),
            LockError::ForceUnlockRefused { name, found } => match found {
                crate::KeyShape::Counter => write!(
                    f,
                    "force unlock of {name:?} refused: it holds {found}, which has no holder to free (release permits or count down instead)"
                ),
                _ => write!(
                    f,
                    "force unlock of {name:?} refused: it holds {found}, not a lock (nothing changed)"
                ),
            },
            LockError::WatchdogLease { name } => write!(
                f,
                "lock {name:?} is held under the watchdog, which renews it: extend applies to fixed leases only (nothing changed)"
            ),
            LockError::Protocol(s) => write!(f, "unexpected script reply: {s}"),
        }
    }
}

/// No `source()`: `Client` displays the client's error as it is (a
/// transparent wrapper), and every other message is whole, so a chain
/// printer shows each part once. Match `LockError::Client(e)` to reach it.
impl std::error::Error for LockError {}

impl From<keylatch_cluster::Error> for LockError {
    fn from(e: keylatch_cluster::Error) -> Self {
        LockError::Client(e)
    }
}
