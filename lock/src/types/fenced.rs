//! The fenced lock ([`Locks::fenced_lock`](crate::Locks::fenced_lock)):
//! Redisson's `RFencedLock`, the RLock hash and a token from INCR of the
//! counter on every acquire, re-entries included.

use crate::lock::{
    hash_acquire, hash_release, owner_field, AcquireCall, LockKind, Tokens, Waiting, HASH_LEASE,
    WAITERS,
};
use crate::names::LockNames;
use crate::scripts::{FENCED_ACQUIRE, REENTRANT_RELEASE};

/// The hold's own token is 0 (judged and released by owner, as Redisson
/// does): a re-entry moves the counter past the first acquire's token.
pub(crate) static FENCED: LockKind = LockKind {
    label: "fenced",
    names: LockNames::new,
    field: owner_field,
    acquire: &FENCED_ACQUIRE,
    acquire_cmd: |c: &AcquireCall<'_>| hash_acquire(&FENCED_ACQUIRE, c),
    prepared: true,
    release: &REENTRANT_RELEASE,
    release_cmd: hash_release,
    lease: &HASH_LEASE,
    tokens: Tokens::PerAcquire,
    waiting: Waiting::Turn(Some(&WAITERS)),
    multi_rank: 1,
    batchable: false,
};
