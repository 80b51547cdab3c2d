//! The catalogue of Lua scripts, compiled in from this crate's `lua/`.
//!
//! Each script is a `static` [`Script`]: its SHA-1 is computed once, on first
//! use, and [`Commands::eval_script`](keylatch_cluster::Commands::eval_script)
//! runs it with `EVALSHA`, loading it where a node answers `NOSCRIPT`.

use keylatch_cluster::Script;

/// Take or re-enter a reentrant lock (Redisson-compatible); see
/// `lua/reentrant_acquire.lua` for KEYS, ARGV and returns.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::REENTRANT_ACQUIRE.sha1().len(), 40);
/// ```
pub static REENTRANT_ACQUIRE: Script = Script::new(
    "reentrant_acquire",
    include_str!("../lua/reentrant_acquire.lua"),
);

/// Take a non-reentrant lock (Redisson's RLock layout; a re-entry is
/// refused); see `lua/nonreentrant_acquire.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::NONREENTRANT_ACQUIRE.name(), "nonreentrant_acquire");
/// ```
pub static NONREENTRANT_ACQUIRE: Script = Script::new(
    "nonreentrant_acquire",
    include_str!("../lua/nonreentrant_acquire.lua"),
);

/// Drop one hold of a reentrant lock, publishing the unlock message on the
/// last one; see `lua/reentrant_release.lua`.
///
/// ```
/// assert!(keylatch_lock::scripts::REENTRANT_RELEASE.source().contains("KEYS[2]"));
/// ```
pub static REENTRANT_RELEASE: Script = Script::new(
    "reentrant_release",
    include_str!("../lua/reentrant_release.lua"),
);

/// Extend many holds at once (the watchdog); see `lua/reentrant_renew.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::REENTRANT_RENEW.name(), "reentrant_renew");
/// ```
pub static REENTRANT_RENEW: Script = Script::new(
    "reentrant_renew",
    include_str!("../lua/reentrant_renew.lua"),
);

/// [`REENTRANT_RENEW`] for holds in many slots of one cluster node (script
/// flag `allow-cross-slot-keys`); see `lua/reentrant_renew_node.lua`.
///
/// ```
/// assert!(keylatch_lock::scripts::REENTRANT_RENEW_NODE.source().starts_with("#!lua"));
/// ```
pub static REENTRANT_RENEW_NODE: Script = Script::new(
    "reentrant_renew_node",
    include_str!("../lua/reentrant_renew_node.lua"),
);

/// End whatever holds a name in the way its type means (a lock's hold, a
/// read-write lock's holds, a permit-expirable semaphore's leased permits),
/// refusing what is no lock; see `lua/force_unlock.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::FORCE_UNLOCK.name(), "force_unlock");
/// ```
pub static FORCE_UNLOCK: Script =
    Script::new("force_unlock", include_str!("../lua/force_unlock.lua"));

/// What a name's key holds (read only), for typed wrong-type answers; see
/// `lua/key_shape.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::KEY_SHAPE.name(), "key_shape");
/// ```
pub static KEY_SHAPE: Script = Script::new("key_shape", include_str!("../lua/key_shape.lua"));

/// Take or re-enter a fair lock, or join its queue (Redisson's
/// `RedissonFairLock` layout, deadlines in Redisson's chained form from
/// server time, keylatch waiters' liveness beside it); see
/// `lua/fair_acquire.lua`, whose header explains how the queue stays
/// shared with Redisson's waiters.
///
/// ```
/// assert!(keylatch_lock::scripts::FAIR_ACQUIRE.source().contains("KEYS[4]"));
/// ```
pub static FAIR_ACQUIRE: Script =
    Script::new("fair_acquire", include_str!("../lua/fair_acquire.lua"));

/// Drop one hold of a fair lock, waking only the queue's head on the last
/// one; see `lua/fair_release.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::FAIR_RELEASE.name(), "fair_release");
/// ```
pub static FAIR_RELEASE: Script =
    Script::new("fair_release", include_str!("../lua/fair_release.lua"));

/// A fair-lock waiter leaving the queue (gave up or cancelled); see
/// `lua/fair_leave.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::FAIR_LEAVE.name(), "fair_leave");
/// ```
pub static FAIR_LEAVE: Script = Script::new("fair_leave", include_str!("../lua/fair_leave.lua"));

/// Take or add a read hold of a read-write lock (Redisson's
/// `RedissonReadLock` layout, with keylatch's waiting-writer marker); see
/// `lua/rw_read_acquire.lua`.
///
/// ```
/// assert!(keylatch_lock::scripts::RW_READ_ACQUIRE.source().contains("rwlock_timeout"));
/// ```
pub static RW_READ_ACQUIRE: Script = Script::new(
    "rw_read_acquire",
    include_str!("../lua/rw_read_acquire.lua"),
);

/// Drop one read hold of a read-write lock; see `lua/rw_read_release.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::RW_READ_RELEASE.name(), "rw_read_release");
/// ```
pub static RW_READ_RELEASE: Script = Script::new(
    "rw_read_release",
    include_str!("../lua/rw_read_release.lua"),
);

/// Extend (or check) read-write lock holds (read sessions and write
/// holds), one slot per call; see `lua/rw_renew.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::RW_RENEW.name(), "rw_renew");
/// ```
pub static RW_RENEW: Script = Script::new("rw_renew", include_str!("../lua/rw_renew.lua"));

/// [`RW_RENEW`] for many slots of one cluster node; see
/// `lua/rw_renew_node.lua`.
///
/// ```
/// assert!(keylatch_lock::scripts::RW_RENEW_NODE.source().starts_with("#!lua"));
/// ```
pub static RW_RENEW_NODE: Script =
    Script::new("rw_renew_node", include_str!("../lua/rw_renew_node.lua"));

/// Take or re-enter the write hold of a read-write lock, refusing an
/// upgrade; see `lua/rw_write_acquire.lua`.
///
/// ```
/// assert!(keylatch_lock::scripts::RW_WRITE_ACQUIRE.source().contains(":write"));
/// ```
pub static RW_WRITE_ACQUIRE: Script = Script::new(
    "rw_write_acquire",
    include_str!("../lua/rw_write_acquire.lua"),
);

/// Drop one write hold of a read-write lock (freeing it, or downgrading to
/// the owner's read holds); see `lua/rw_write_release.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::RW_WRITE_RELEASE.name(), "rw_write_release");
/// ```
pub static RW_WRITE_RELEASE: Script = Script::new(
    "rw_write_release",
    include_str!("../lua/rw_write_release.lua"),
);

/// A writer that gave up waiting takes its waiting-writer marker back; see
/// `lua/rw_write_leave.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::RW_WRITE_LEAVE.name(), "rw_write_leave");
/// ```
pub static RW_WRITE_LEAVE: Script =
    Script::new("rw_write_leave", include_str!("../lua/rw_write_leave.lua"));

/// Take n permits of a semaphore (Redisson's `RSemaphore` layout); see `lua/semaphore_acquire.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::SEMAPHORE_ACQUIRE.name(), "semaphore_acquire");
/// ```
pub static SEMAPHORE_ACQUIRE: Script = Script::new(
    "semaphore_acquire",
    include_str!("../lua/semaphore_acquire.lua"),
);

/// Release or add permits of a semaphore, publishing the new count; see `lua/semaphore_change.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::SEMAPHORE_CHANGE.name(), "semaphore_change");
/// ```
pub static SEMAPHORE_CHANGE: Script = Script::new(
    "semaphore_change",
    include_str!("../lua/semaphore_change.lua"),
);

/// Set a semaphore's permits or a latch's count when absent; see `lua/semaphore_set.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::SEMAPHORE_SET.name(), "semaphore_set");
/// ```
pub static SEMAPHORE_SET: Script =
    Script::new("semaphore_set", include_str!("../lua/semaphore_set.lua"));

/// Count or drain a semaphore's available permits (returning expired leased permits first); see `lua/semaphore_drain.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::SEMAPHORE_DRAIN.name(), "semaphore_drain");
/// ```
pub static SEMAPHORE_DRAIN: Script = Script::new(
    "semaphore_drain",
    include_str!("../lua/semaphore_drain.lua"),
);

/// Take n leased permits of a permit-expirable semaphore (Redisson's `RPermitExpirableSemaphore` layout, server time); see `lua/permits_acquire.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::PERMITS_ACQUIRE.name(), "permits_acquire");
/// ```
pub static PERMITS_ACQUIRE: Script = Script::new(
    "permits_acquire",
    include_str!("../lua/permits_acquire.lua"),
);

/// Give leased permits back by id; see `lua/permits_release.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::PERMITS_RELEASE.name(), "permits_release");
/// ```
pub static PERMITS_RELEASE: Script = Script::new(
    "permits_release",
    include_str!("../lua/permits_release.lua"),
);

/// Extend (or check) permit guards' leases, one slot per call; see `lua/permits_renew.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::PERMITS_RENEW.name(), "permits_renew");
/// ```
pub static PERMITS_RENEW: Script =
    Script::new("permits_renew", include_str!("../lua/permits_renew.lua"));

/// `PERMITS_RENEW` for many slots of one cluster node; see `lua/permits_renew_node.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::PERMITS_RENEW_NODE.name(), "permits_renew_node");
/// ```
pub static PERMITS_RENEW_NODE: Script = Script::new(
    "permits_renew_node",
    include_str!("../lua/permits_renew_node.lua"),
);

/// Count a count-down latch down by one (Redisson's `RCountDownLatch`); see `lua/latch_count_down.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::LATCH_COUNT_DOWN.name(), "latch_count_down");
/// ```
pub static LATCH_COUNT_DOWN: Script = Script::new(
    "latch_count_down",
    include_str!("../lua/latch_count_down.lua"),
);

/// Take or re-enter a fenced lock, a token per acquire (Redisson's `RFencedLock`); see `lua/fenced_acquire.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::FENCED_ACQUIRE.name(), "fenced_acquire");
/// ```
pub static FENCED_ACQUIRE: Script =
    Script::new("fenced_acquire", include_str!("../lua/fenced_acquire.lua"));

/// Take several reentrant locks of one slot at once, all or none (a
/// multi-lock's members sharing a hash tag); see `lua/multi_acquire.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::MULTI_ACQUIRE.name(), "multi_acquire");
/// ```
pub static MULTI_ACQUIRE: Script =
    Script::new("multi_acquire", include_str!("../lua/multi_acquire.lua"));

/// Take or re-enter a reentrant lock without a fencing counter (a RedLock
/// member); see `lua/unfenced_acquire.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::UNFENCED_ACQUIRE.name(), "unfenced_acquire");
/// ```
pub static UNFENCED_ACQUIRE: Script = Script::new(
    "unfenced_acquire",
    include_str!("../lua/unfenced_acquire.lua"),
);

/// Every script, for tests and tooling (e.g. preloading).
///
/// ```
/// assert!(!keylatch_lock::scripts::ALL.is_empty());
/// ```
pub static ALL: &[&Script] = &[
    &REENTRANT_ACQUIRE,
    &NONREENTRANT_ACQUIRE,
    &REENTRANT_RELEASE,
    &REENTRANT_RENEW,
    &REENTRANT_RENEW_NODE,
    &FORCE_UNLOCK,
    &KEY_SHAPE,
    &FAIR_ACQUIRE,
    &FAIR_RELEASE,
    &FAIR_LEAVE,
    &RW_READ_ACQUIRE,
    &RW_READ_RELEASE,
    &RW_RENEW,
    &RW_RENEW_NODE,
    &RW_WRITE_ACQUIRE,
    &RW_WRITE_RELEASE,
    &RW_WRITE_LEAVE,
    &SEMAPHORE_ACQUIRE,
    &SEMAPHORE_CHANGE,
    &SEMAPHORE_SET,
    &SEMAPHORE_DRAIN,
    &PERMITS_ACQUIRE,
    &PERMITS_RELEASE,
    &PERMITS_RENEW,
    &PERMITS_RENEW_NODE,
    &LATCH_COUNT_DOWN,
    &FENCED_ACQUIRE,
    &MULTI_ACQUIRE,
    &UNFENCED_ACQUIRE,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_documents_its_api_and_has_a_distinct_sha() {
        let mut shas = std::collections::HashSet::new();
        for s in ALL {
            let header: String = s
                .source()
                .lines()
                .skip_while(|l| l.starts_with("#!"))
                .take_while(|l| l.starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n");
            assert!(
                header.contains("KEYS["),
                "{}: header must list KEYS",
                s.name()
            );
            assert!(
                header.contains("ARGV[1]"),
                "{}: header must list ARGV",
                s.name()
            );
            assert!(
                header.contains("Returns"),
                "{}: header must say what it returns",
                s.name()
            );
            assert!(
                shas.insert(s.sha1().to_owned()),
                "{}: duplicate script",
                s.name()
            );
        }
    }
}
