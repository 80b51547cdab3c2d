//! Redis key and channel names of a lock, in Redisson's layout.
//!
//! `P(prefix)` is `prefix:{name}`, or `prefix:name` when the name contains a
//! `{` at all (Redisson keeps the user's braces as they are). For a name
//! whose braces form a hash tag (`{tenant}:orders`) every key of the lock
//! then shares its slot. Names with braces but no usable tag (`a{b`, `a{}b`)
//! get exactly Redisson's names too, so Redisson's unlock messages wake our
//! waiters; in a cluster their counter lands in another slot than the lock,
//! and the acquire fails with a typed cross-slot error instead of splitting
//! the lock.

use std::sync::Arc;

/// The names one reentrant lock uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LockNames {
    /// The lock hash: the user's name (shared: every hold refers to it, so
    /// cloning must not allocate).
    pub(crate) key: Arc<str>,
    /// `redisson_lock__channel:{name}`.
    pub(crate) channel: String,
    /// `redisson_lock_token:{name}`.
    pub(crate) token: Arc<str>,
}

impl LockNames {
    pub(crate) fn new(name: &str) -> Self {
        Self {
            key: Arc::from(name),
            channel: companion("redisson_lock__channel", name),
            token: Arc::from(companion("redisson_lock_token", name)),
        }
    }
}

impl LockNames {
    /// A read-write lock's names: its channel is `redisson_rwlock:{name}`
    /// (both modes), as Redisson's read and write locks use.
    pub(crate) fn rw(name: &str) -> Self {
        Self {
            channel: companion("redisson_rwlock", name),
            ..Self::new(name)
        }
    }

    /// The base of a read-write lock's per-hold keys, `{name}` (or the name
    /// itself when it has a `{`): Redisson's `suffixName(name, "")` less
    /// the colon.
    pub(crate) fn rw_base(&self) -> String {
        suffixed(&self.key, None)
    }

    /// An owner's read-hold prefix, `{name}:<owner>:rwlock_timeout`: read
    /// hold i is this plus `:i`.
    pub(crate) fn rw_read_prefix(&self, owner: &str) -> String {
        format!("{}:{owner}:rwlock_timeout", self.rw_base())
    }

    /// The waiting writers, `{name}:rwlock_writers_waiting` (a zset of
    /// owner → deadline; keylatch's own key, beside Redisson's layout).
    pub(crate) fn rw_writer_marker(&self) -> String {
        suffixed(&self.key, Some("rwlock_writers_waiting"))
    }

    /// A fair lock's queue keys, made on use (only fair locks need them,
    /// and a hold keeps its names for its whole life).
    pub(crate) fn fair_queue(&self) -> FairKeys {
        FairKeys {
            queue: companion("redisson_lock_queue", &self.key),
            timeouts: companion("redisson_lock_timeout", &self.key),
            alive: companion("keylatch_fair_alive", &self.key),
        }
    }

    /// The channel a fair-lock waiter is woken on,
    /// `redisson_lock__channel:{name}:<owner>`.
    pub(crate) fn fair_channel(&self, owner: &str) -> String {
        format!("{}:{owner}", self.channel)
    }
}

/// A fair lock's queue: Redisson's two keys and keylatch's own one, all in
/// the lock's slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FairKeys {
    /// `redisson_lock_queue:{name}`: waiting owners in arrival order.
    pub(crate) queue: String,
    /// `redisson_lock_timeout:{name}`: each waiter's deadline in Redisson's
    /// chained form (owner → ms), which Redisson's scripts purge by and
    /// subtract from.
    pub(crate) timeouts: String,
    /// `keylatch_fair_alive:{name}`: keylatch waiters' liveness (owner →
    /// server ms), by which keylatch's scripts purge its dead waiters
    /// (Redisson never reads it).
    pub(crate) alive: String,
}

/// Redisson's `{name}:suffix`, or `name:suffix` when the name contains
/// `{`; without a suffix, `{name}` (or `name`).
pub(crate) fn suffixed(name: &str, suffix: Option<&str>) -> String {
    let base = if name.contains('{') {
        name.to_owned()
    } else {
        format!("{{{name}}}")
    };
    match suffix {
        Some(s) => format!("{base}:{s}"),
        None => base,
    }
}

/// Redisson's `prefix:{name}`, or `prefix:name` when the name contains `{`.
pub(crate) fn companion(prefix: &str, name: &str) -> String {
    if name.contains('{') {
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
    fn names_with_a_hash_tag_keep_every_key_in_one_slot() {
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

    #[test]
    fn fair_queue_keys_are_redissons_plus_ours_in_the_lock_slot() {
        let q = LockNames::new("jobs").fair_queue();
        assert_eq!(q.queue, "redisson_lock_queue:{jobs}");
        assert_eq!(q.timeouts, "redisson_lock_timeout:{jobs}");
        assert_eq!(q.alive, "keylatch_fair_alive:{jobs}");
        for name in ["jobs", "{t}jobs", "a{b}c"] {
            let n = LockNames::new(name);
            let q = n.fair_queue();
            let slot = Slot::of(n.key.as_bytes());
            for k in [&q.queue, &q.timeouts, &q.alive] {
                // The fair scripts take all of them in one call.
                assert_eq!(Slot::of(k.as_bytes()), slot, "{k}");
            }
        }
    }

    #[test]
    fn read_write_names_are_redissons_and_share_the_slot() {
        let n = LockNames::rw("docs");
        assert_eq!(n.channel, "redisson_rwlock:{docs}");
        assert_eq!(n.rw_read_prefix("u:1"), "{docs}:u:1:rwlock_timeout");
        assert_eq!(n.rw_writer_marker(), "{docs}:rwlock_writers_waiting");
        let tagged = LockNames::rw("{t}docs");
        assert_eq!(tagged.channel, "redisson_rwlock:{t}docs");
        assert_eq!(tagged.rw_read_prefix("u:1"), "{t}docs:u:1:rwlock_timeout");
        for n in [n, tagged] {
            let slot = Slot::of(n.key.as_bytes());
            assert_eq!(Slot::of(n.rw_read_prefix("o:9").as_bytes()), slot);
            assert_eq!(Slot::of(n.rw_writer_marker().as_bytes()), slot);
            assert_eq!(Slot::of(n.channel.as_bytes()), slot);
        }
    }

    #[test]
    fn names_with_braces_but_no_tag_are_redissons() {
        assert_eq!(LockNames::new("a{b").channel, "redisson_lock__channel:a{b");
        assert_eq!(&*LockNames::new("a{}b").token, "redisson_lock_token:a{}b");
    }
}
