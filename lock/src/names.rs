//! Redis key and channel names of a lock, in Redisson's layout.
//!
//! Companion keys embed the lock name in braces so every key of one lock
//! hashes to the lock's slot; a name that already holds a `{` keeps the
//! user's own hash tag instead (`prefix:name`), as Redisson does.

use std::sync::Arc;

/// The names one reentrant lock uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LockNames {
    /// The lock hash: the user's name (shared: every acquire's watchdog
    /// entry refers to it, so cloning must not allocate).
    pub(crate) key: Arc<str>,
    /// `redisson_lock__channel:{name}`.
    pub(crate) channel: String,
    /// `redisson_lock_token:{name}`.
    pub(crate) token: String,
}

impl LockNames {
    pub(crate) fn new(name: &str) -> Self {
        Self {
            key: Arc::from(name),
            channel: companion("redisson_lock__channel", name),
            token: companion("redisson_lock_token", name),
        }
    }
}

/// `prefix:{name}`, or `prefix:name` when the name carries its own hash tag.
/// (Names with braces but no usable tag, such as `a{}b`, cannot share a slot
/// with a companion key in Redisson's layout; they work standalone only.)
pub(crate) fn companion(prefix: &str, name: &str) -> String {
    if keylatch_cluster::hash_tag(name.as_bytes()).len() < name.len() {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keylatch_cluster::Slot;

    #[test]
    fn every_key_of_a_lock_shares_its_slot() {
        for name in ["orders", "{tenant-1}:orders", "a{b}c", "x{y}{z}"] {
            let n = LockNames::new(name);
            let slot = Slot::of(n.key.as_bytes());
            assert_eq!(Slot::of(n.channel.as_bytes()), slot, "{name}");
            assert_eq!(Slot::of(n.token.as_bytes()), slot, "{name}");
        }
        assert_eq!(LockNames::new("x").channel, "redisson_lock__channel:{x}");
        assert_eq!(
            LockNames::new("{t}x").channel,
            "redisson_lock__channel:{t}x"
        );
    }
}
