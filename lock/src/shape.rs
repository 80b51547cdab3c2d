//! What a name's key holds, for the typed answers given when it is no lock
//! of the kind asked for ([`KeyShape`], [`LockError::WrongType`]) and for a
//! force unlock that knows the type it ends ([`ForceUnlocked`]).
//!
//! The scripts judge the key's type themselves before they touch it: a
//! release or renewal that finds another type answers "not held" (the hold
//! is gone), an acquire on something else answers "wrong type". Then, off
//! the fast path, `key_shape.lua` says what the key is, so the error can
//! name it.

use std::fmt;

use keylatch_cluster::Commands;
use keylatch_resp::Frame;

use crate::context::Inner;
use crate::error::{LockError, LockResult};

use crate::scripts::KEY_SHAPE;

/// What a name's key holds, as `key_shape.lua` classifies it.
///
/// ```
/// use keylatch_lock::KeyShape;
/// assert!(KeyShape::LockHash.is_lock());
/// assert!(!KeyShape::List.is_lock());
/// assert_eq!(KeyShape::List.to_string(), "a list");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyShape {
    /// No key.
    None,
    /// A lock's hash: every field a hold count (reentrant, fair, fenced,
    /// spin and non-reentrant locks, multi-lock and RedLock members).
    LockHash,
    /// A read-write lock's hash (`mode` read or write).
    ReadWriteHash,
    /// A hash of another shape: no lock.
    Hash,
    /// A string holding an integer: a semaphore's permits or a count-down
    /// latch's count (the two share Redisson's layout).
    Counter,
    /// A string that is no integer.
    String,
    /// A list.
    List,
    /// A set.
    Set,
    /// A sorted set.
    SortedSet,
    /// A stream.
    Stream,
    /// Any other type (a module's).
    Other,
}

impl KeyShape {
    /// From `key_shape.lua`'s code (unknown codes are [`Other`](Self::Other)).
    pub(crate) fn from_code(code: i64) -> Self {
        match code {
            0 => Self::None,
            1 => Self::LockHash,
            2 => Self::ReadWriteHash,
            3 => Self::Hash,
            4 => Self::Counter,
            5 => Self::String,
            6 => Self::List,
            7 => Self::Set,
            8 => Self::SortedSet,
            9 => Self::Stream,
            _ => Self::Other,
        }
    }

    /// Whether it is a lock's hash (of any lock kind).
    ///
    /// ```
    /// assert!(keylatch_lock::KeyShape::ReadWriteHash.is_lock());
    /// ```
    pub fn is_lock(self) -> bool {
        matches!(self, Self::LockHash | Self::ReadWriteHash)
    }
}

impl fmt::Display for KeyShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::None => "nothing",
            Self::LockHash => "a lock",
            Self::ReadWriteHash => "a read-write lock",
            Self::Hash => "a hash that is no lock",
            Self::Counter => "a semaphore's or count-down latch's count",
            Self::String => "a string that is no lock",
            Self::List => "a list",
            Self::Set => "a set",
            Self::SortedSet => "a sorted set",
            Self::Stream => "a stream",
            Self::Other => "a value of another type",
        })
    }
}

/// What [`Locks::force_unlock`](crate::Locks::force_unlock) ended.
///
/// ```
/// use keylatch_lock::ForceUnlocked;
/// assert_ne!(ForceUnlocked::Free, ForceUnlocked::Lock);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForceUnlocked {
    /// Nothing was held.
    Free,
    /// A lock's hold (reentrant, fair, fenced, spin, non-reentrant, a
    /// multi-lock's or RedLock's member): the hash deleted, waiters woken
    /// (a fair queue's head on its own channel; the queue is kept).
    Lock,
    /// A read-write lock: its readers' and writer's holds deleted, waiters
    /// of both kinds woken.
    ReadWriteLock,
    /// A permit-expirable semaphore: this many leased permits given back
    /// to its count (the semaphore keeps its size), waiters told.
    Permits(u64),
}

/// What `key` holds now.
pub(crate) async fn key_shape(inner: &Inner, key: &str) -> LockResult<KeyShape> {
    let reply = inner.client.eval_script(&KEY_SHAPE, &[key], &["0"]).await?;
    match reply.value() {
        Frame::Integer(n) => Ok(KeyShape::from_code(*n)),
        other => Err(LockError::Protocol(other.shown())),
    }
}

/// The typed error for a call on `name` that found no lock of its kind:
/// [`LockError::WrongType`] naming what is there (or the failure to ask).
pub(crate) async fn wrong_type(inner: &Inner, name: &str) -> LockError {
    match key_shape(inner, name).await {
        Ok(found) => LockError::WrongType {
            name: name.to_owned(),
            found,
        },
        Err(e) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_shape_and_unknown_ones_are_other() {
        for code in 0..=9 {
            assert_ne!(KeyShape::from_code(code), KeyShape::Other, "{code}");
        }
        assert_eq!(KeyShape::from_code(10), KeyShape::Other);
        assert_eq!(KeyShape::from_code(-5), KeyShape::Other);
        assert!(!KeyShape::Counter.is_lock());
        assert!(KeyShape::Hash.to_string().contains("no lock"));
    }
}
