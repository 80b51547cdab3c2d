//! The reentrant lock ([`Locks::lock`](crate::Locks::lock), and the spin
//! lock's data) and the non-reentrant lock
//! ([`Locks::non_reentrant_lock`](crate::Locks::non_reentrant_lock)):
//! Redisson's RLock hash, a hold counted per owner.

use crate::lock::{
    hash_acquire, hash_release, owner_field, AcquireCall, LockKind, Tokens, Waiting, HASH_LEASE,
    WAITERS,
};
use crate::names::LockNames;
use crate::scripts::{NONREENTRANT_ACQUIRE, REENTRANT_ACQUIRE, REENTRANT_RELEASE};

/// Redisson's `RLock`: the owner's count in the hash, a re-entry adds one.
pub(crate) static REENTRANT: LockKind = LockKind {
    label: "reentrant",
    names: LockNames::new,
    field: owner_field,
    acquire: &REENTRANT_ACQUIRE,
    acquire_cmd: |c: &AcquireCall<'_>| hash_acquire(&REENTRANT_ACQUIRE, c),
    prepared: true,
    release: &REENTRANT_RELEASE,
    release_cmd: hash_release,
    lease: &HASH_LEASE,
    tokens: Tokens::PerHold,
    waiting: Waiting::Turn(Some(&WAITERS)),
    multi_rank: 1,
    batchable: true,
};

/// The same hash with a count of exactly 1: a second acquire by the holder
/// is refused (Redisson 4.4's non-reentrant lock).
pub(crate) static NON_REENTRANT: LockKind = LockKind {
    label: "non-reentrant",
    names: LockNames::new,
    field: owner_field,
    acquire: &NONREENTRANT_ACQUIRE,
    acquire_cmd: |c: &AcquireCall<'_>| hash_acquire(&NONREENTRANT_ACQUIRE, c),
    prepared: true,
    release: &REENTRANT_RELEASE,
    release_cmd: hash_release,
    lease: &HASH_LEASE,
    tokens: Tokens::PerHold,
    waiting: Waiting::Turn(Some(&WAITERS)),
    multi_rank: 1,
    batchable: false,
};
