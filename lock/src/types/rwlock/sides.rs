//! A read-write lock's two sides as lock kinds: read holds (a session of
//! one owner) and the write hold, with their lease and the waiting
//! writer's place.

use std::sync::Arc;

use keylatch_resp::Cmd;

use crate::context::ScriptArgs;
use crate::lease::Renewal;
use crate::lock::{AcquireCall, LockKind, Place, ReleaseCall, Tokens, Waiting};
use crate::names::LockNames;
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
};

/// The write hold's lease, tracked like a lock's.
static WRITE_LEASE: Renewal = Renewal {
    slot: &RW_RENEW,
    node: &RW_RENEW_NODE,
    tracked: true,
};

/// A read session of one owner (Redisson's `RedissonReadLock`): the
/// owner's count in the hash, one string per hold. The hold's "counter" is
/// the owner's read-hold prefix; its token the session's generation.
pub(super) static READ: LockKind = LockKind {
    label: "read",
    names: LockNames::rw,
    field: owner_field,
    counter: hold_keys,
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
    names: LockNames::rw,
    field: write_field,
    counter: hold_keys,
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
};

fn owner_field(owner: &str) -> Arc<str> {
    Arc::from(owner)
}

fn write_field(owner: &str) -> Arc<str> {
    Arc::from(format!("{owner}:write"))
}

/// A read session's keys, or the write hold's key: judged by the token
/// they hold.
fn hold_keys(names: &LockNames, field: &str) -> Arc<str> {
    Arc::from(names.rw_read_prefix(field))
}

fn read_acquire(c: &AcquireCall<'_>) -> Cmd {
    let names = c.names;
    RW_READ_ACQUIRE.evalsha_cmd(
        &[
            names.key.to_string(),
            names.rw_read_prefix(c.owner),
            names.rw_writer_marker(),
            names.rw_base(),
        ],
        &[c.lease_ms, c.owner],
    )
}

fn write_acquire(c: &AcquireCall<'_>) -> Cmd {
    let names = c.names;
    RW_WRITE_ACQUIRE.evalsha_cmd(
        &[
            names.key.to_string(),
            names.token.to_string(),
            names.rw_writer_marker(),
            names.rw_read_prefix(c.owner),
            names.rw_base(),
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
    let head = [c.owner, c.names.channel.as_str(), c.args.publish];
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
    let keys = [&*n.key, &n.rw_read_prefix(c.owner), &n.rw_base()];
    release_with(&RW_READ_RELEASE, &keys, c)
}

fn write_release(c: &ReleaseCall<'_>) -> Cmd {
    let n = c.names;
    let keys = [&*n.key, &*n.token, &n.rw_base()];
    release_with(&RW_WRITE_RELEASE, &keys, c)
}

/// `rw_write_leave.lua` for this writer: answers 1 when it was waiting.
fn writer_leave(args: &ScriptArgs, names: &LockNames, owner: &str) -> Cmd {
    RW_WRITE_LEAVE.evalsha_cmd(
        &[names.rw_writer_marker()],
        &[owner, names.channel.as_str(), args.publish],
    )
}
