//! Redisson's RLock hash (`name` → {owner: count}) with its fencing
//! counter: the layout the reentrant, non-reentrant, fenced and fair locks
//! and RedLock's members share. Its lease, and the acquire and release
//! commands of the types that take it with no more keys than the two.

use keylatch_resp::Cmd;

use crate::lease::Renewal;
use crate::scripts::{REENTRANT_RELEASE, REENTRANT_RENEW, REENTRANT_RENEW_NODE};

use super::kind::{AcquireCall, ReleaseCall};

/// A hold that is one field of the hash with its token: renewed (and
/// judged) by the reentrant renewal scripts, and tracked.
pub(crate) static HASH_LEASE: Renewal = Renewal {
    slot: &REENTRANT_RENEW,
    node: &REENTRANT_RENEW_NODE,
    tracked: true,
};

/// `KEYS` = hash, counter; `ARGV` = lease, owner, counter expiry: the
/// acquire of every type whose script takes nothing more.
pub(crate) fn hash_acquire(script: &keylatch_cluster::Script, c: &AcquireCall<'_>) -> Cmd {
    script.evalsha_cmd(
        &[&*c.names.key, &*c.names.token],
        &[c.lease_ms, c.owner, c.args.token_ttl_ms.as_str()],
    )
}

/// `reentrant_release.lua`: `KEYS` = hash, counter; `ARGV` = owner,
/// channel, publish command[, token]. The hot path: no key built.
pub(crate) fn hash_release(c: &ReleaseCall<'_>) -> Cmd {
    let head = [c.owner, c.names.channel.as_str(), c.args.publish];
    let keys = [&*c.names.key, &*c.names.token];
    match c.token {
        Some(t) => {
            let [a, b, p] = head;
            REENTRANT_RELEASE.evalsha_cmd(&keys, &[a, b, p, t])
        }
        None => REENTRANT_RELEASE.evalsha_cmd(&keys, &head),
    }
}
