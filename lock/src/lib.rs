//! keylatch's lock family, wire-compatible with Redisson.
//!
//! Layers, bottom to top; a file imports only from the layers below it
//! (ARCHITECTURE.md has the table, and how to add a type):
//! - base: [`LockError`] (`error.rs`), [`LocksConfig`] (`config.rs`),
//!   `names.rs` (the RLock hash's key and channel names), [`scripts`] (the
//!   Lua catalogue), `reply.rs`, `span.rs`, `hold_key.rs`, `waiters.rs`
//!   (one local FIFO per lock name), `background.rs` (releases running on
//!   the runtime, which [`Locks::settle`] waits for);
//! - `lease/`: a hold (`hold.rs`, named by its token) and the lease engine,
//!   one actor task per [`Locks`] that renews and watches holds
//!   ([`LossReason`]); a hold's type names its `Renewal`, the engine none;
//! - `context.rs` (what every handle of a [`Locks`] shares), `wake.rs` (a
//!   waiter's subscription, or polling), [`KeyShape`] (`shape.rs`: what a
//!   name's key holds);
//! - `lock/`: the handle and guard of every type that is taken like a lock:
//!   [`Lock`], [`LockGuard`], [`ReplicaSync`], its acquire, waits and
//!   releases. `lock/kind.rs` is the seam: a type is one `LockKind` value
//!   (its names, scripts' commands, lease, token rule, way of waiting);
//! - `types/`: one file or folder per type: reentrant and non-reentrant,
//!   fenced, spin, fair, [`RwLock`], [`Semaphore`] with
//!   [`SemaphorePermits`] and [`ExpirableSemaphore`] with [`PermitGuard`],
//!   [`CountDownLatch`], [`MultiLock`];
//! - [`Locks`] (`locks.rs`: constructors, one line per type) and the
//!   force unlock over every type ([`ForceUnlocked`], `force.rs`);
//! - [`RedLock`] (`redlock/`): a quorum over several [`Locks`], with its
//!   per-name [`RedLockHandle`].
//! - `fuzzing.rs` (cargo feature `fuzzing`, off by default, hidden): the
//!   script-reply parsers checked on arbitrary frames, for the libFuzzer
//!   target in the repository's `fuzz/` and the corpus replay in this
//!   crate's unit tests.
//!
//! # One vocabulary
//!
//! Every type is made by a constructor taking the name once
//! ([`Locks::lock`], [`Locks::semaphore`], …, [`RedLock::lock`]); on the
//! handle, `acquire()` waits as long as it takes (under the watchdog) and
//! `try_acquire(wait, lease)` gives up after `wait` with `Ok(None)`
//! (`lease: None`: the watchdog renews; `Some(d)`: a fixed lease). The
//! guard's `lost()` resolves when the hold is known gone; `unlock()` ends a
//! lock's hold and `release()` gives permits back (both report errors;
//! dropping a guard releases in the background); `extend(lease)` lengthens
//! a fixed lease and never shortens a key ([`LockError::WatchdogLease`] for
//! a hold the watchdog renews already, [`LockError::Expired`] when the hold
//! is gone). Every count is `u64` (permits asked, given or taken, a latch's
//! count, hold counts, replicas in [`LockError::ReplicaSync`]); the one
//! signed count is a semaphore's available permits (`available()`, and what
//! `add_permits`, `reduce_permits` and [`Semaphore::release`] return),
//! which `reduce_permits` may take below zero, as in Redisson. (An
//! [`Inspection`] shows the server's values as read.)
//!
//! | type | constructor | acquire | try_acquire | guard | `lost()` | end | `extend` |
//! |---|---|---|---|---|---|---|---|
//! | locks of every kind | [`Locks::lock`], `fair_lock`, `spin_lock`, `fenced_lock`, `non_reentrant_lock`, [`RwLock::read`]/[`write`](RwLock::write) | `acquire()` | `try_acquire(wait, lease)` | [`LockGuard`] | yes | `unlock()` | fixed lease |
//! | [`MultiLock`] | [`Locks::multi_lock`] | `acquire()` | `try_acquire(wait, lease)` | [`MultiGuard`] | any member | `unlock()` | fixed lease |
//! | [`RedLock`] | [`RedLock::lock`] ([`RedLockHandle`]) | `acquire()` | `try_acquire(wait, lease)` | [`RedLockGuard`] | below quorum | `unlock()` | fixed lease |
//! | [`ExpirableSemaphore`] | [`Locks::expirable_semaphore`] | `acquire(n)` | `try_acquire(n, wait, lease)` | [`PermitGuard`] | yes | `release()` | fixed lease |
//! | [`Semaphore`] | [`Locks::semaphore`] | `acquire(n)` | `try_acquire(n, wait)` | [`SemaphorePermits`] | — | `release()` | — |
//! | [`CountDownLatch`] | [`Locks::latch`] | — | — | — | — | — | — |
//!
//! Where a type departs from it, and why: semaphores take the count of
//! permits first. A plain semaphore's permits have no owner and no lease
//! (Redisson's layout is one number), so nothing can show them lost or
//! extend them: no `lost()`, no `extend`, no `lease` argument; its raw
//! Redisson calls stay beside the guard ([`Semaphore::acquire_raw`],
//! [`Semaphore::release`]) for permits taken in one process and given
//! back in another. A latch holds nothing: it is set, counted down and
//! waited on.
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
mod inspect;
mod inspection;
mod lease;
mod lock;
mod locks;
mod names;
mod owner;
mod probe;
mod redlock;
mod reply;
pub mod scripts;
mod section;
mod shape;
mod span;
mod types;
mod waiters;
mod wake;

pub use config::LocksConfig;
pub use error::{LockError, LockResult};
pub use inspection::{Holder, Inspection, LeasedPermit, QueuedWaiter, Reader, WaitingWriter};
pub use lease::{LockStats, LossReason, WaitStats, RENEW_BATCH};
pub use lock::{Lock, LockGuard, LostToken, ReplicaSync};
pub use locks::Locks;
pub use names::is_companion_key;
pub use redlock::{
    RedLock, RedLockGuard, RedLockHandle, DEFAULT_NODE_TIMEOUT, DRIFT_FLOOR, DRIFT_PERMILLE,
    MAX_RETRY_DELAY,
};
pub use shape::{ForceUnlocked, KeyShape};
pub use types::latch::CountDownLatch;
pub use types::leader::{Leader, LeaderGuard, LeaderInfo, LeaderObserver};
pub use types::multilock::{MultiGuard, MultiLock};
pub use types::rwlock::RwLock;
pub use types::semaphore::{
    BadPermitId, ExpirableSemaphore, PermitGuard, PermitId, Semaphore, SemaphorePermits, MAX_COUNT,
    MAX_LEASED_PERMITS,
};

/// The client layer the locks are built on.
pub use keylatch_cluster as cluster;
