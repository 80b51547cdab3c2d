//! keylatch's lock family, wire-compatible with Redisson.
//!
//! Layout:
//! - [`Locks`] (`locks.rs`): per-client entry point; owns the watchdog task,
//!   the local wait queues and the waiters' pub/sub hub. [`LocksConfig`].
//! - [`Lock`] (`lock.rs`): one reentrant lock as one owner; the acquire
//!   path (try, subscribe, try again, wait for the unlock message or the
//!   PTTL), [`ReplicaSync`].
//! - `acquire.rs`: one acquire attempt and the finisher that settles an
//!   attempt nobody waits for; waiting for a turn; the replica check.
//! - [`LockGuard`] (`guard.rs`): one guard of a hold, its fencing token,
//!   `lost()`.
//! - `hold.rs`: a hold, named by its token, shared by the guards of its
//!   first acquire and re-entries: loss signal, deadline, guard counts.
//! - `lease/`: the lease engine, one actor task per [`Locks`] that renews
//!   and watches holds ([`LossReason`]); `lease/calls.rs` its server calls.
//! - `release.rs`: releases retried until the hold's deadline, and futures
//!   that finish in the background when dropped.
//! - `waiters.rs`: one local FIFO per lock name, so a release wakes one
//!   local contender, not a herd.
//! - `wake.rs`: a waiter's wake-up source (its subscription, or polling).
//! - `fair.rs`: the fair lock's wait, in the server's queue, and leaving it.
//! - `depart.rs`: a waiter's place (fair queue, waiting writers) given up
//!   however its wait ends without the lock.
//! - `spin.rs`: a spin lock's wait (backoff, no pub/sub).
//! - [`Semaphore`], [`ExpirableSemaphore`] and [`PermitGuard`]
//!   (`semaphore.rs`): Redisson's semaphores; leased permits are holds of
//!   the lease engine.
//! - [`CountDownLatch`] (`latch.rs`).
//! - [`MultiLock`] (`multilock.rs`): all of several locks or none, in one
//!   canonical order; [`RedLock`] (`redlock.rs`): a quorum over
//!   independent masters; `losses.rs`: their loss signals.
//! - [`RwLock`] (`rwlock.rs`): a read-write lock whose read and write sides
//!   are [`Lock`] handles of one owner; the waiting writer's marker.
//! - `handle.rs`: what a lock handle and its clones share, with the lock's
//!   script commands encoded once per handle (the watchdog acquire whole,
//!   the release up to its fencing token).
//! - `hold_key.rs`: the watchdog's key for a hold, hashed once per handle.
//! - `names.rs`: Redisson's key and channel names; every key of a lock
//!   shares its slot.
//! - [`KeyShape`] and [`ForceUnlocked`] (`shape.rs`): what a name's key
//!   holds, for the typed answer when it is no lock of the kind asked for,
//!   and what a force unlock ended.
//! - [`scripts`]: the static catalogue of Lua scripts from `lua/`.
//! - [`LockError`] (`error.rs`).
//! - `fuzzing.rs` (cargo feature `fuzzing`, off by default, hidden): the
//!   script-reply parsers checked on arbitrary frames, for the libFuzzer
//!   target in the repository's `fuzz/` and the corpus replay in this
//!   crate's unit tests.
//!
//! ```no_run
//! use std::time::Duration;
//! use keylatch_lock::Locks;
//! # async fn demo() -> keylatch_lock::LockResult<()> {
//! let locks = Locks::connect("redis://127.0.0.1:6379").await?;
//! let guard = locks.lock("orders:42").acquire().await?;
//! println!("token {:?}", guard.fencing_token());
//! guard.unlock().await?;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

mod background;
mod config;
mod context;
mod error;
mod force;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod hold_key;
mod lease;
mod lock;
mod locks;
mod names;
mod redlock;
mod reply;
pub mod scripts;
mod shape;
mod span;
mod types;
mod waiters;
mod wake;

pub use config::LocksConfig;
pub use error::{LockError, LockResult};
pub use lease::{LossReason, RENEW_BATCH};
pub use lock::{Lock, LockGuard, LostToken, ReplicaSync};
pub use locks::Locks;
pub use redlock::{
    RedLock, RedLockGuard, DEFAULT_NODE_TIMEOUT, DRIFT_FLOOR, DRIFT_PERMILLE, MAX_RETRY_DELAY,
};
pub use shape::{ForceUnlocked, KeyShape};
pub use types::latch::CountDownLatch;
pub use types::multilock::{MultiGuard, MultiLock};
pub use types::rwlock::RwLock;
pub use types::semaphore::{
    BadPermitId, ExpirableSemaphore, PermitGuard, PermitId, Semaphore, MAX_LEASED_PERMITS,
};

/// The client layer the locks are built on.
pub use keylatch_cluster as cluster;
