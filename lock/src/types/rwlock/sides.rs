//! A read-write lock's two sides as lock kinds: read holds (a session of
//! one owner) and the write hold, with their lease and the waiting
//! writer's place.

use keylatch_resp::Cmd;

use crate::context::ScriptArgs;
use crate::lease::Renewal;
use crate::lock::{owner_field, AcquireCall, LockKind, Place, ReleaseCall, Tokens, Waiting};
use crate::names::{suffixed, LockNames};
use crate::owner::Owner;
use crate::scripts::{
    RW_READ_ACQUIRE, RW_READ_RELEASE, RW_RENEW, RW_RENEW_NODE, RW_WRITE_ACQUIRE, RW_WRITE_LEAVE,
    RW_WRITE_RELEASE,
};

/// Read sessions and write holds, judged by the hold keys they own. Read
/// holds are not tracked: every other reader's acquire and release writes
/// the same hash, so tracking it would turn each of those into a check of
/// every reader's hold (they are judged at their renewals instead).
static RW_LEASE: Renewal = Renewal {
    slot: &RW_RENEW,
    node: &RW_RENEW_NODE,
    tracked: false,
    counter: hold_prefix,
    by_owner: None,
    owner_only: false,
};

/// The write hold's lease, tracked like a lock's.
static WRITE_LEASE: Renewal = Renewal {
    slot: &RW_RENEW,
    node: &RW_RENEW_NODE,
    tracked: true,
    counter: hold_prefix,
    by_owner: None,
    owner_only: false,
};

/// A read session of one owner (Redisson's `RedissonReadLock`): the
/// owner's count in the hash, one string per hold. The hold's "counter" is
/// the owner's read-hold prefix; its token the session's generation.
pub(super) static READ: LockKind = LockKind {
    label: "read",
    names: rw_names,
    field: owner_field,
    acquire: &RW_READ_ACQUIRE,
    acquire_cmd: read_acquire,
    prepared: true,
    release: &RW_READ_RELEASE,
    release_cmd: read_release,
    lease: &RW_LEASE,
    tokens: Tokens::Session,
    waiting: Waiting::Turn(None),
    multi_rank: 2,
    batchable: false,
};

/// The write hold (field `<owner>:write`); its lease is its own key,
/// `{name}:<owner>:write:rwlock_timeout:1`, holding its fencing token.
pub(super) static WRITE: LockKind = LockKind {
    label: "write",
    names: rw_names,
    field: write_field,
    acquire: &RW_WRITE_ACQUIRE,
    acquire_cmd: write_acquire,
    // A try and a wait differ (whether to hold new readers back).
    prepared: false,
    release: &RW_WRITE_RELEASE,
    release_cmd: write_release,
    lease: &WRITE_LEASE,
    tokens: Tokens::PerHold,
    waiting: Waiting::Turn(Some(&WAITING_WRITER)),
    multi_rank: 0,
    batchable: false,
};

/// A waiting writer's entry in `{name}:rwlock_writers_waiting`.
static WAITING_WRITER: Place = Place {
    label: "waiting writers",
    leave: &RW_WRITE_LEAVE,
    leave_cmd: writer_leave,
    shared: false,
    by_name: false,
};

fn write_field(owner: &Owner) -> Option<Owner> {
    Some(Owner::given(&format!("{owner}:write")))
}

fn read_acquire(c: &AcquireCall<'_>) -> Cmd {
    let names = c.names;
    RW_READ_ACQUIRE.evalsha_cmd(
        &[
            names.key.to_string(),
            read_prefix(names, c.owner),
            writer_marker(names),
            base(names),
        ],
        &[c.lease_ms, c.owner],
    )
}

fn write_acquire(c: &AcquireCall<'_>) -> Cmd {
    let names = c.names;
    RW_WRITE_ACQUIRE.evalsha_cmd(
        &[
            names.key.to_string(),
            names.token(),
            writer_marker(names),
            read_prefix(names, c.owner),
            base(names),
        ],
        &[
            c.lease_ms,
            c.owner,
            c.args.token_ttl_ms.as_str(),
            c.args.fair_waiter_ms.as_str(),
            if c.join { "1" } else { "0" },
        ],
    )
}

/// The release's `ARGV`: owner, channel, publish command[, token].
fn release_with(script: &keylatch_cluster::Script, keys: &[&str], c: &ReleaseCall<'_>) -> Cmd {
    let channel = c.names.channel();
    let head = [c.owner, channel.as_str(), c.args.publish];
    match c.token {
        Some(t) => {
            let [a, b, p] = head;
            script.evalsha_cmd(keys, &[a, b, p, t])
        }
        None => script.evalsha_cmd(keys, &head),
    }
}

fn read_release(c: &ReleaseCall<'_>) -> Cmd {
    let n = c.names;
    let keys = [&*n.key, &read_prefix(n, c.owner), &base(n)];
    release_with(&RW_READ_RELEASE, &keys, c)
}

fn write_release(c: &ReleaseCall<'_>) -> Cmd {
    let n = c.names;
    let token = n.token();
    let keys = [&*n.key, &token, &base(n)];
    release_with(&RW_WRITE_RELEASE, &keys, c)
}

/// `rw_write_leave.lua` for this writer: answers 1 when it was waiting.
fn writer_leave(args: &ScriptArgs, names: &LockNames, owner: &str, _tag: u16) -> Cmd {
    RW_WRITE_LEAVE.evalsha_cmd(
        &[writer_marker(names)],
        &[owner, names.channel().as_str(), args.publish],
    )
}

/// A read-write lock's names: its channel is `redisson_rwlock:{name}`
/// (both modes), as Redisson's read and write locks use.
fn rw_names(name: &str) -> LockNames {
    LockNames {
        channel_prefix: &crate::names::RW_CHANNEL,
        ..LockNames::new(name)
    }
}

/// The base of the per-hold keys, `{name}` (or the name itself when it has
/// a `{`): Redisson's `suffixName(name, "")` less the colon.
fn base(names: &LockNames) -> String {
    suffixed(&names.key, None)
}

/// An owner's read-hold prefix, `{name}:<owner>:rwlock_timeout`: read hold
/// i is this plus `:i`.
pub(super) fn read_prefix(names: &LockNames, owner: &str) -> String {
    format!("{}:{owner}:rwlock_timeout", suffixed(&names.key, None))
}

/// [`read_prefix`] from the lock's name: for a hold counted in `field`,
/// what its renewals take beside the hash (a write hold's field is
/// `<owner>:write`).
fn hold_prefix(name: &str, field: &Owner) -> String {
    format!("{}:{field}:rwlock_timeout", suffixed(name, None))
}

/// The waiting writers, `{name}:rwlock_writers_waiting` (a zset of owner →
/// deadline; keylatch's own key, beside Redisson's layout).
fn writer_marker(names: &LockNames) -> String {
    suffixed(&names.key, Some("rwlock_writers_waiting"))
}

/// What a force unlock needs of a read-write lock `name`: the base of its
/// hold keys and its channel.
pub(crate) fn force_keys(name: &str) -> (String, String) {
    let names = rw_names(name);
    (base(&names), names.channel())
}

#[cfg(test)]
mod tests {
    use super::*;
    use keylatch_cluster::Slot;

    #[test]
    fn read_write_names_are_redissons_and_share_the_slot() {
        let n = rw_names("docs");
        assert_eq!(n.channel(), "redisson_rwlock:{docs}");
        assert_eq!(read_prefix(&n, "u:1"), "{docs}:u:1:rwlock_timeout");
        assert_eq!(writer_marker(&n), "{docs}:rwlock_writers_waiting");
        let tagged = rw_names("{t}docs");
        assert_eq!(tagged.channel(), "redisson_rwlock:{t}docs");
        assert_eq!(read_prefix(&tagged, "u:1"), "{t}docs:u:1:rwlock_timeout");
        for n in [n, tagged] {
            let slot = Slot::of(n.key.as_bytes());
            assert_eq!(Slot::of(read_prefix(&n, "o:9").as_bytes()), slot);
            assert_eq!(Slot::of(writer_marker(&n).as_bytes()), slot);
            assert_eq!(Slot::of(n.channel().as_bytes()), slot);
            // The renewals' key beside the hash is the hold's own prefix,
            // for a read session and for a write hold's field alike.
            for field in ["u:1", "u:1:write"] {
                assert_eq!(
                    (RW_LEASE.counter)(&n.key, &crate::owner::Owner::given(field)),
                    read_prefix(&n, field)
                );
                assert_eq!(
                    (WRITE_LEASE.counter)(&n.key, &crate::owner::Owner::given(field)),
                    read_prefix(&n, field)
                );
            }
        }
    }
}
