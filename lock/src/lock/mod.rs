//! The lock handle and its guard, for every lock type: [`Lock`] (what a
//! handle is, its settings, reads), its acquire (an attempt, then the wait
//! its kind asks for), its release, and [`LockGuard`]. A type plugs in with
//! a [`LockKind`] value (`kind.rs`); nothing here names a type.
//!
//! Files, each importing only those listed before it: `kind.rs` (the
//! seam), `rlock_hash.rs` (the RLock hash most types share), `handle.rs`
//! (what a handle and its clones share, commands prepared once), `base.rs`
//! ([`Lock`], [`ReplicaSync`]), `release.rs` (releases retried until the
//! hold's deadline, futures that finish when dropped), `guard.rs`
//! ([`LockGuard`], [`LostToken`]), `depart.rs` (a waiter's place given up),
//! `attempt.rs` (one attempt, its late reply settled, the replica check),
//! `turn.rs` (waiting for a turn), `queue.rs` (waiting in the server's
//! queue), `backoff.rs` (waiting by backoff), `acquire.rs` (the public acquire
//! and release by owner).

mod acquire;
mod attempt;
mod backoff;
mod base;
mod depart;
mod guard;
mod handle;
mod kind;
mod queue;
mod release;
mod rlock_hash;
mod turn;
mod unanswered;

pub(crate) use attempt::{outlived, settle_late};
pub use base::{Lock, ReplicaSync};
pub use guard::{LockGuard, LostToken};
#[cfg(test)]
pub(crate) use handle::Handle as HandleForSizes;
pub(crate) use handle::{Acquiring, Unsettled};
pub(crate) use kind::{owner_field, AcquireCall, LockKind, Place, ReleaseCall, Tokens, Waiting};
pub(crate) use release::{retriable, spawn_queued, Detached};
pub(crate) use rlock_hash::{hash_acquire, hash_release, waiters_key, HASH_LEASE, WAITERS};
pub(crate) use unanswered::watched;
