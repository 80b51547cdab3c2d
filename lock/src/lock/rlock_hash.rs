//! Redisson's RLock hash (`name` → {owner: count}) with its fencing
//! counter: the layout the reentrant, non-reentrant, fenced and fair locks
//! and RedLock's members share. Its lease, and the acquire and release
//! commands of the types that take it with no more keys than the two.

use keylatch_resp::Cmd;

use crate::context::ScriptArgs;
use crate::lease::Renewal;
use crate::names::{companion, LockNames};
use crate::scripts::{REENTRANT_RELEASE, REENTRANT_RENEW, REENTRANT_RENEW_NODE, WAITER_LEAVE};

use super::kind::{AcquireCall, Place, ReleaseCall};

/// A hold that is one field of the hash with its token: renewed (and
/// judged) by the reentrant renewal scripts, and tracked.
pub(crate) static HASH_LEASE: Renewal = Renewal {
    slot: &REENTRANT_RENEW,
    node: &REENTRANT_RENEW_NODE,
    tracked: true,
};

/// A waiter of an RLock hash: each try that finds the lock held registers
/// the owner in [`waiters_key`] for the fair-lock waiter span, the next
/// release takes the longest registered out and wakes it by name (one
/// waiter per release across processes, not every subscriber), and a
/// waiter that gives up leaves (`waiter_leave.lua`).
pub(crate) static WAITERS: Place = Place {
    label: "waiters woken by name",
    leave: &WAITER_LEAVE,
    leave_cmd: waiter_leave,
    shared: false,
    by_name: true,
};

/// `keylatch_lock_waiters:{name}`: the waiters a release wakes by name (a
/// zset, owner id -> the server time its entry ends), and the channel it
/// wakes them on. Built when a command is (a prepared release has it).
pub(crate) fn waiters_key(names: &LockNames) -> String {
    companion("keylatch_lock_waiters", &names.key)
}

fn waiter_leave(args: &ScriptArgs, names: &LockNames, owner: &str) -> Cmd {
    WAITER_LEAVE.evalsha_cmd(
        &[&*names.key],
        &[
            owner,
            names.channel.as_str(),
            args.publish,
            &waiters_key(names),
        ],
    )
}

/// `KEYS` = hash, counter; `ARGV` = lease, owner, counter expiry: the
/// acquire of every type whose script takes nothing more. A try of a
/// waiter (`join`) adds the span and the waiters' registry, so the try
/// that finds the lock held registers it (and one that takes the lock
/// takes the owner out; see [`WAITERS`]); a try without a wait sends
/// neither.
pub(crate) fn hash_acquire(script: &keylatch_cluster::Script, c: &AcquireCall<'_>) -> Cmd {
    let keys = [&*c.names.key, &*c.names.token];
    let argv = [c.lease_ms, c.owner, c.args.token_ttl_ms.as_str()];
    if !c.join {
        return script.evalsha_cmd(&keys, &argv);
    }
    let waiters = waiters_key(c.names);
    let [l, o, e] = argv;
    script.evalsha_cmd(&keys, &[l, o, e, &c.args.fair_waiter_ms, &waiters])
}

/// `reentrant_release.lua`: `KEYS` = hash, counter; `ARGV` = owner,
/// channel, publish command, waiters[, token] (the waiters by name: an
/// argument, not a key, see the script).
pub(crate) fn hash_release(c: &ReleaseCall<'_>) -> Cmd {
    let waiters = waiters_key(c.names);
    let head = [
        c.owner,
        c.names.channel.as_str(),
        c.args.publish,
        waiters.as_str(),
    ];
    let keys = [&*c.names.key, &*c.names.token];
    match c.token {
        Some(t) => {
            let [a, b, p, w] = head;
            REENTRANT_RELEASE.evalsha_cmd(&keys, &[a, b, p, w, t])
        }
        None => REENTRANT_RELEASE.evalsha_cmd(&keys, &head),
    }
}
