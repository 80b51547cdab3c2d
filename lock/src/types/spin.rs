//! The spin lock ([`Locks::spin_lock`](crate::Locks::spin_lock)): the
//! reentrant lock's data (so it excludes, and is excluded by, reentrant
//! holders of the name), but a waiter neither subscribes nor queues
//! locally: it waits by backoff, as Redisson's `RSpinLock`.

use crate::lock::{
    hash_acquire, hash_release, owner_field, AcquireCall, LockKind, Tokens, Waiting, HASH_LEASE,
};
use crate::names::LockNames;
use crate::scripts::{REENTRANT_ACQUIRE, REENTRANT_RELEASE};

/// The reentrant lock's hash and scripts, waited for by backoff; never
/// batched into a multi-lock's one call (its wait is its own).
pub(crate) static SPIN: LockKind = LockKind {
    label: "spin",
    names: LockNames::new,
    field: owner_field,
    acquire: &REENTRANT_ACQUIRE,
    acquire_cmd: |c: &AcquireCall<'_>| hash_acquire(&REENTRANT_ACQUIRE, c),
    prepared: true,
    release: &REENTRANT_RELEASE,
    release_cmd: hash_release,
    lease: &HASH_LEASE,
    tokens: Tokens::PerHold,
    waiting: Waiting::Backoff,
    multi_rank: 1,
    batchable: false,
};
