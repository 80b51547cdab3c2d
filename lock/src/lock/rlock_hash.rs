//! Redisson's RLock hash (`name` → {owner: count}) with its fencing
//! counter: the layout the reentrant, non-reentrant, fenced and fair locks
//! and RedLock's members share. Its lease, and the acquire and release
//! commands of the types that take it with no more keys than the two.

use keylatch_resp::{Cmd, ToArg};

use crate::context::ScriptArgs;
use crate::lease::Renewal;
use crate::names::{companion, CompanionArg, LockNames};
use crate::owner::Owner;
use crate::scripts::{
    OWNER_RENEW, OWNER_RENEW_NODE, REENTRANT_RELEASE, REENTRANT_RENEW, REENTRANT_RENEW_NODE,
    WAITER_LEAVE,
};

use super::kind::{AcquireCall, Place, ReleaseCall};

/// A hold that is one field of the hash with its token: renewed (and
/// judged) by the reentrant renewal scripts, and tracked.
pub(crate) static HASH_LEASE: Renewal = Renewal {
    slot: &REENTRANT_RENEW,
    node: &REENTRANT_RENEW_NODE,
    tracked: true,
    counter: token_counter,
    by_owner: Some(&HASH_BY_OWNER),
    owner_only: false,
};

/// [`HASH_LEASE`]'s plain renewal of a hold judged by its owner alone
/// (`owner_renew.lua`): the owner's field there, the key stretched; no
/// counter read. Only the lease engine picks it, hold by hold.
static HASH_BY_OWNER: Renewal = Renewal {
    slot: &OWNER_RENEW,
    node: &OWNER_RENEW_NODE,
    tracked: true,
    counter: token_counter,
    by_owner: None,
    owner_only: true,
};

/// The fencing counter, `redisson_lock_token:{name}`: what the RLock
/// hash's renewals take beside it.
fn token_counter(name: &str, _field: &Owner) -> String {
    companion("redisson_lock_token", name)
}

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
    companion(WAITERS_PREFIX, &names.key)
}

const WAITERS_PREFIX: &str = "keylatch_lock_waiters";

/// The channel releases wake (or grant the lock to) `owner`'s waiters of
/// this lock on: [`waiters_key`], `:`, and the owner id up to its last `:`
/// (the client id, one per process), as `reentrant_release.lua` builds it,
/// so a release wakes the one process it names.
pub(crate) fn waiters_channel(names: &LockNames, owner: &str) -> String {
    let process = owner.rfind(':').map_or(owner, |i| &owner[..i]);
    format!("{}:{process}", waiters_key(names))
}

/// [`waiters_key`] written straight into a command's arguments.
fn waiters_arg(name: &str) -> CompanionArg<'_> {
    CompanionArg::new(WAITERS_PREFIX, name)
}

fn waiter_leave(args: &ScriptArgs, names: &LockNames, owner: &str, tag: u16) -> Cmd {
    WAITER_LEAVE.evalsha_cmd(
        &[&*names.key],
        &[
            &owner as &dyn ToArg,
            &names.channel(),
            &args.publish,
            &waiters_key(names),
            &tag,
        ],
    )
}

/// `KEYS` = hash, counter; `ARGV` = lease, owner, counter expiry: the
/// acquire of every type whose script takes nothing more. A try of a
/// waiter (`join`) adds the span, the waiters' registry and the wait's tag,
/// so the try that finds the lock held registers it (and one that takes
/// the lock, or finds it granted to this wait, takes the owner out; see
/// [`WAITERS`]); a try without a wait sends none of them.
pub(crate) fn hash_acquire(script: &keylatch_cluster::Script, c: &AcquireCall<'_>) -> Cmd {
    let token = c.names.token_arg();
    let keys: [&dyn ToArg; 2] = [&&*c.names.key, &token];
    let argv = [c.lease_ms, c.owner, c.args.token_ttl_ms.as_str()];
    if !c.join {
        return script.evalsha_cmd(&keys, &argv);
    }
    let waiters = waiters_arg(&c.names.key);
    let [l, o, e] = argv;
    let span = c.args.fair_waiter_ms.as_str();
    script.evalsha_cmd(&keys, &[&l as &dyn ToArg, &o, &e, &span, &waiters, &c.tag])
}

/// `reentrant_release.lua`: `KEYS` = hash, counter; `ARGV` = owner,
/// channel, publish command, waiters, grant[, token] (the waiters by name:
/// an argument, not a key, see the script; a waiter granted the lock holds
/// it for this client's watchdog lease, then its own watchdog renews it).
pub(crate) fn hash_release(c: &ReleaseCall<'_>) -> Cmd {
    let waiters = waiters_arg(&c.names.key);
    let channel = c.names.channel_arg();
    let grant = c.args.grant_ms.as_str();
    let head: [&dyn ToArg; 5] = [&c.owner, &channel, &c.args.publish, &waiters, &grant];
    let token = c.names.token_arg();
    let keys: [&dyn ToArg; 2] = [&&*c.names.key, &token];
    match c.token {
        Some(t) => {
            let [a, b, p, w, g] = head;
            REENTRANT_RELEASE.evalsha_cmd(&keys, &[a, b, p, w, g, &t])
        }
        None => REENTRANT_RELEASE.evalsha_cmd(&keys, &head),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_renewals_name_the_fencing_counter() {
        for name in ["orders", "{tenant}:orders", "a{b"] {
            let names = LockNames::new(name);
            assert_eq!(
                (HASH_LEASE.counter)(name, &crate::owner::Owner::given("c:1")),
                names.token()
            );
        }
    }

    #[test]
    fn a_process_is_woken_on_its_client_ids_channel_in_the_locks_slot() {
        let names = LockNames::new("orders");
        assert_eq!(
            waiters_channel(&names, "c0ffee-42:17"),
            "keylatch_lock_waiters:{orders}:c0ffee-42"
        );
        // An owner id without ':' (lock_with_owner) is its own process.
        assert_eq!(
            waiters_channel(&names, "worker"),
            "keylatch_lock_waiters:{orders}:worker"
        );
        // Where the registry shares the lock's slot (a release reads it
        // there), so does the channel. (A name like "a{b" gives the
        // registry no hash tag: it is read through pcall, and is none.)
        let slot = |s: &str| keylatch_cluster::Slot::of(s.as_bytes());
        for name in ["orders", "{tenant}:orders", "ünïcode", "a:b:c"] {
            let names = LockNames::new(name);
            assert_eq!(slot(&waiters_key(&names)), slot(&names.key), "{name:?}");
            assert_eq!(
                slot(&waiters_channel(&names, "c:1")),
                slot(&names.key),
                "{name:?}"
            );
        }
    }

    #[test]
    fn the_waiters_argument_is_the_waiters_key_as_written() {
        for name in ["orders", "{tenant}:orders", "a{b", "", "ünïcode"] {
            let names = LockNames::new(name);
            let (mut direct, mut owned) = (Vec::new(), Vec::new());
            waiters_arg(&names.key).write_arg(&mut direct);
            waiters_key(&names).write_arg(&mut owned);
            assert_eq!(
                String::from_utf8_lossy(&direct),
                String::from_utf8_lossy(&owned),
                "{name:?}"
            );
        }
    }
}
