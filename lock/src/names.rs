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

use std::io::Write as _;
use std::sync::Arc;

use keylatch_resp::ToArg;

/// The names a lock uses: its hash, its channel, its fencing counter (a
/// type with more keys derives them in its own file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LockNames {
    /// The lock hash: the user's name (shared: every hold refers to it, so
    /// cloning must not allocate).
    pub(crate) key: Arc<str>,
    /// The channel's prefix: its name is [`channel`](Self::channel), made
    /// when a command needs it rather than kept (a handle made per request
    /// and then held would keep it for the whole hold). A thin pointer to
    /// a static name ([`LOCK_CHANNEL`], [`RW_CHANNEL`]): 8 bytes in every
    /// handle, where a `&str` took 16.
    pub(crate) channel_prefix: &'static &'static str,
}

/// The lock channel's prefix: `redisson_lock__channel:{name}`.
pub(crate) static LOCK_CHANNEL: &str = "redisson_lock__channel";
/// A read-write lock's channel prefix: `redisson_rwlock:{name}`.
pub(crate) static RW_CHANNEL: &str = "redisson_rwlock";

/// The fencing counter's prefix: `redisson_lock_token:{name}`.
const TOKEN_PREFIX: &str = "redisson_lock_token";

impl LockNames {
    pub(crate) fn new(name: &str) -> Self {
        Self {
            key: Arc::from(name),
            channel_prefix: &LOCK_CHANNEL,
        }
    }

    /// The fencing counter, `redisson_lock_token:{name}` (made on use, as
    /// the channel is).
    pub(crate) fn token(&self) -> String {
        companion(TOKEN_PREFIX, &self.key)
    }

    /// [`token`](Self::token) written straight into a command.
    pub(crate) fn token_arg(&self) -> CompanionArg<'_> {
        CompanionArg::new(TOKEN_PREFIX, &self.key)
    }

    /// The hash and [`token_arg`](Self::token_arg): an acquire's two keys.
    pub(crate) fn key_and_token(&self) -> (&str, CompanionArg<'_>) {
        (&self.key, self.token_arg())
    }

    /// [`channel`](Self::channel) written straight into a command.
    pub(crate) fn channel_arg(&self) -> CompanionArg<'_> {
        CompanionArg::new(self.channel_prefix, &self.key)
    }

    /// The channel releases publish on: `redisson_lock__channel:{name}`
    /// (`redisson_rwlock:{name}` for a read-write lock).
    pub(crate) fn channel(&self) -> String {
        companion(self.channel_prefix, &self.key)
    }
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

/// [`companion`] written straight into a command's arguments: a command
/// built whole (a handle's first, or every one of a handle made per
/// request) allocates no name of its own for it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CompanionArg<'a> {
    prefix: &'static str,
    name: &'a str,
}

impl<'a> CompanionArg<'a> {
    pub(crate) fn new(prefix: &'static str, name: &'a str) -> Self {
        Self { prefix, name }
    }
}

impl ToArg for CompanionArg<'_> {
    fn write_arg(&self, out: &mut Vec<u8>) {
        let (prefix, name) = (self.prefix, self.name);
        // `prefix:{name}`, or `prefix:name` when the name has a brace.
        let braced = !name.contains('{');
        let len = prefix.len() + 1 + name.len() + if braced { 2 } else { 0 };
        // Writing to a Vec cannot fail.
        let _ = write!(out, "${len}\r\n{prefix}:");
        if braced {
            out.push(b'{');
        }
        out.extend_from_slice(name.as_bytes());
        if braced {
            out.push(b'}');
        }
        out.extend_from_slice(b"\r\n");
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

/// Whether `key` is one the lock types keep beside a lock's own key (a
/// fencing counter, a fair lock's queue, timeouts and liveness, the
/// waiters woken by name, a leader's proclamation, a read-write lock's read-hold timeouts and
/// waiting writers, an expirable semaphore's leases): never a lock name of
/// its own, so a listing of locks by pattern leaves it out. For a lock
/// name with braces Redisson suffixes without them (`name:timeout`), and
/// those cannot be told from a name of their own: they count as names.
///
/// ```
/// use keylatch_lock::is_companion_key;
/// assert!(is_companion_key("redisson_lock_token:{orders}"));
/// assert!(is_companion_key("{docs}:u:1:rwlock_timeout:1"));
/// assert!(is_companion_key("{jobs}:timeout"));
/// assert!(!is_companion_key("orders"));
/// assert!(!is_companion_key("{tenant}:orders"));
/// ```
pub fn is_companion_key(key: &str) -> bool {
    const PREFIXES: [&str; 6] = [
        "redisson_lock_token:",
        "keylatch_leader:",
        "redisson_lock_queue:",
        "redisson_lock_timeout:",
        "keylatch_fair_alive:",
        "keylatch_lock_waiters:",
    ];
    if PREFIXES.iter().any(|p| key.starts_with(p)) {
        return true;
    }
    // `{name}:suffix` for a name without braces.
    let Some(rest) = key.strip_prefix('{') else {
        return false;
    };
    let Some((_, suffix)) = rest.split_once('}') else {
        return false;
    };
    suffix == ":timeout"
        || suffix == ":rwlock_writers_waiting"
        || (suffix.contains(":rwlock_timeout") && suffix.starts_with(':'))
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
            assert_eq!(Slot::of(n.channel().as_bytes()), slot, "{name}");
            assert_eq!(Slot::of(n.token().as_bytes()), slot, "{name}");
        }
        assert_eq!(LockNames::new("x").channel(), "redisson_lock__channel:{x}");
        assert_eq!(
            LockNames::new("{t}x").channel(),
            "redisson_lock__channel:{t}x"
        );
    }

    #[test]
    fn names_with_braces_but_no_tag_are_redissons() {
        assert_eq!(
            LockNames::new("a{b").channel(),
            "redisson_lock__channel:a{b"
        );
        assert_eq!(LockNames::new("a{}b").token(), "redisson_lock_token:a{}b");
    }

    #[test]
    fn a_companion_written_into_a_command_is_the_name_as_made() {
        for name in ["orders", "{tenant}:orders", "a{b", "a{}b", "", "ünïcode"] {
            let names = LockNames::new(name);
            let (mut direct, mut made) = (Vec::new(), Vec::new());
            names.token_arg().write_arg(&mut direct);
            names.channel_arg().write_arg(&mut direct);
            names.token().as_str().write_arg(&mut made);
            names.channel().as_str().write_arg(&mut made);
            assert_eq!(direct, made, "{name:?}");
        }
    }
}
