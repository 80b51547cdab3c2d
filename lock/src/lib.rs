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
//!   fenced, spin, fair, [`RwLock`], [`Semaphore`] and
//!   [`ExpirableSemaphore`] with [`PermitGuard`], [`CountDownLatch`],
//!   [`MultiLock`];
//! - [`Locks`] (`locks.rs`: constructors, one line per type) and the
//!   force unlock over every type ([`ForceUnlocked`], `force.rs`);
//! - [`RedLock`] (`redlock.rs`): a quorum over several [`Locks`].
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
mod inspect;
mod inspection;
mod lease;
mod lock;
mod locks;
mod names;
mod probe;
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
pub use inspection::{Holder, Inspection, LeasedPermit, QueuedWaiter, Reader, WaitingWriter};
pub use lease::{LossReason, RENEW_BATCH};
pub use lock::{Lock, LockGuard, LostToken, ReplicaSync};
pub use locks::Locks;
pub use redlock::{
    RedLock, RedLockGuard, RedLockHandle, DEFAULT_NODE_TIMEOUT, DRIFT_FLOOR, DRIFT_PERMILLE,
    MAX_RETRY_DELAY,
};
pub use shape::{ForceUnlocked, KeyShape};
pub use types::latch::CountDownLatch;
pub use types::multilock::{MultiGuard, MultiLock};
pub use types::rwlock::RwLock;
pub use types::semaphore::{
    BadPermitId, ExpirableSemaphore, PermitGuard, PermitId, Semaphore, SemaphorePermits,
    MAX_LEASED_PERMITS,
};

/// The client layer the locks are built on.
pub use keylatch_cluster as cluster;
