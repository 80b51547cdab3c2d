//! `RwLock`: a read-write lock in Redisson's `RReadWriteLock` layout, and
//! the waiting writers' set.
//!
//! Both sides are [`Lock`] handles of one owner, so they share everything a
//! lock has (guards, watchdog, `lost()`, waiting, the fencing token of a
//! write hold); only their kind differs (`sides.rs`), which names their scripts:
//! - read holds (`rw_read_*.lua`): the owner's count in the hash and one
//!   string per hold, `{name}:<owner>:rwlock_timeout:<i>`. One owner's
//!   read holds are one *session*: its generation (server time in µs at
//!   its first hold) is the value of every one of its keys and the hold's
//!   token, so a late release or renewal of an ended session never touches
//!   a newer one; the session's keys expire together, at the latest of
//!   their leases. Renewed per owner (only its own keys, never another
//!   reader's); no fencing token.
//! - the write hold (`rw_write_*.lua`): field `<owner>:write`, a fencing
//!   token from `redisson_lock_token:{name}`, and its lease as its own key
//!   `{name}:<owner>:write:rwlock_timeout:1` holding the token (the owner's
//!   reads keep the hash alive, never the write; a write whose key ran out
//!   is ended by its owner's next call). Judged by the same script
//!   (`rw_renew.lua`) as read sessions.
//!
//! Writer preference: a writer that waits joins
//! `{name}:rwlock_writers_waiting` (a zset of owner → deadline in server
//! time, `LocksConfig::fair_waiter_timeout` ahead, renewed by its calls
//! every third of that); a new reader that finds a live entry waits, so a
//! stream of readers cannot starve writers. Readers already in (re-entries)
//! and the writer's own reads are let through. A writer leaves the set when
//! it gets the lock or gives up.

mod inspect;
mod sides;

pub(crate) use inspect::{holds as inspect_holds, writers_waiting};

pub(crate) use sides::force_keys;

use std::sync::Arc;

use crate::context::Inner;
use crate::lock::Lock;
use crate::owner::Owner;

use sides::{READ, WRITE};

/// A read-write lock acting as one owner: many readers or one writer.
///
/// Wire-compatible with Redisson's `RReadWriteLock`: the hash named after
/// the lock holds `mode` (`read`/`write`), each reader's read count, and
/// the writer's `<owner>:write` count; each read hold has its own expiry key
/// `{name}:<owner>:rwlock_timeout:<i>`; releases publish on
/// `redisson_rwlock:{name}` (`0` for the last read, `1` for the last write,
/// which wakes every waiter).
///
/// - The writer may take read holds and then release the write
///   (downgrade); a reader asking for the write (upgrade) is refused at
///   once with [`LockError::UpgradeRefused`](crate::LockError::UpgradeRefused),
///   never left to wait for itself.
/// - Writers are not starved: while a keylatch writer waits, new keylatch
///   readers wait behind it (readers already in carry on). Redisson readers
///   do not know the set of waiting writers and are not held back.
/// - Read holds carry no fencing token (readers do not write); a write hold
///   has one, from the same counter as the reentrant lock of this name.
///
/// ```no_run
/// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
/// let rw = locks.rw_lock("catalogue");
/// let r1 = rw.read().acquire().await?;
/// let r2 = locks.rw_lock("catalogue").read().acquire().await?; // readers share
/// r1.unlock().await?;
/// r2.unlock().await?;
/// let w = rw.write().acquire().await?; // alone
/// let r = rw.read().acquire().await?; // the writer may read: downgrade
/// w.unlock().await?; // now only a read hold
/// r.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RwLock {
    read: Lock,
    write: Lock,
}

impl RwLock {
    pub(crate) fn new(inner: &Arc<Inner>, name: &str, owner: Owner) -> Self {
        Self {
            read: Lock::new(Arc::clone(inner), name, owner.clone(), &READ),
            write: Lock::new(Arc::clone(inner), name, owner, &WRITE),
        }
    }

    /// The read side: a [`Lock`] whose holds are read holds of this owner
    /// (`acquire`, `try_acquire(wait, lease)`, re-entry, `lost()`). Clones
    /// act as the same owner.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let guard = locks.rw_lock("catalogue").read().acquire().await?;
    /// assert_eq!(guard.fencing_token(), None); // readers have no token
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn read(&self) -> Lock {
        self.read.clone()
    }

    /// The write side: a [`Lock`] whose holds are this owner's write hold,
    /// exclusive of every reader and other writer, with a fencing token.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let guard = locks.rw_lock("catalogue").write().acquire().await?;
    /// assert!(guard.fencing_token().is_some());
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn write(&self) -> Lock {
        self.write.clone()
    }

    /// The lock's name.
    ///
    /// ```no_run
    /// # fn demo(locks: keylatch_lock::Locks) {
    /// assert_eq!(locks.rw_lock("catalogue").name(), "catalogue");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        self.read.name()
    }

    /// The owner id both sides act as (`<client uuid>:<n>`; the write hold's
    /// hash field is this plus `:write`, as in Redisson).
    ///
    /// ```no_run
    /// # fn demo(locks: keylatch_lock::Locks) {
    /// let rw = locks.rw_lock("catalogue");
    /// assert_eq!(rw.read().owner(), rw.write().owner());
    /// # }
    /// ```
    pub fn owner(&self) -> &str {
        self.read.owner()
    }
}
