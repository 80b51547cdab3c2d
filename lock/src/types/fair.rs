//! Waiting for a fair lock ([`Locks::fair_lock`](crate::Locks::fair_lock)):
//! in the server's queue (Redisson's `redisson_lock_queue:{name}` and
//! `redisson_lock_timeout:{name}`), woken on the waiter's own channel
//! `redisson_lock__channel:{name}:<owner>` when it reaches the head.
//!
//! The queue is the order: unlike the reentrant lock's waiters, fair waiters
//! of one process do not queue locally first (a local queue would let a
//! later process overtake them). Java waiters (Redisson) share the queue, so
//! each entry has two times, both set at each of the waiter's calls (see
//! `lua/fair_acquire.lua`): its deadline in Redisson's zset, in Redisson's
//! chained form, `fair_wait_allowance` (300 s) per place ahead of it, which
//! Redisson's subtractions cannot push under the clock; and its liveness in
//! keylatch's own zset, server time + `fair_waiter_timeout`, by which
//! keylatch's scripts purge a dead keylatch waiter. The waiter calls at
//! least every third of `fair_waiter_timeout`, so a live waiter keeps its
//! place however long it waits and a dead one is purged within the span. A
//! waiter that gives up (its wait ran out, an error, or its future was
//! dropped) leaves the queue at once (`fair_leave.lua`), waking the next
//! head if the lock is free.

use keylatch_cluster::Client;
use keylatch_resp::{Cmd, Frame};

use crate::context::ScriptArgs;
use crate::error::LockResult;
use crate::inspection::QueuedWaiter;
use crate::lock::{
    owner_field, AcquireCall, LockKind, Place, ReleaseCall, Tokens, Waiting, HASH_LEASE,
};
use crate::names::{companion, LockNames};
use crate::probe::{ask, server_now_ms, text, zscore};
use crate::scripts::{FAIR_ACQUIRE, FAIR_LEAVE, FAIR_RELEASE};

/// Redisson's fair lock: the RLock hash, taken in the queue's order; a hold
/// is renewed like a reentrant one.
pub(crate) static FAIR: LockKind = LockKind {
    label: "fair",
    names: LockNames::new,
    field: owner_field,
    acquire: &FAIR_ACQUIRE,
    acquire_cmd,
    // A try and a wait differ (whether to queue).
    prepared: false,
    release: &FAIR_RELEASE,
    release_cmd,
    lease: &HASH_LEASE,
    tokens: Tokens::PerHold,
    waiting: Waiting::Queue {
        place: &QUEUE_PLACE,
        channel: waiter_channel,
    },
    multi_rank: 1,
    batchable: false,
};

/// A waiter's entry in the queue, shared by the clones of one handle.
static QUEUE_PLACE: Place = Place {
    label: "fair queue",
    leave: &FAIR_LEAVE,
    leave_cmd,
    shared: true,
    by_name: false,
};

/// `fair_acquire.lua`: joins the queue when `join` and the lock is taken.
fn acquire_cmd(c: &AcquireCall<'_>) -> Cmd {
    let (names, args) = (c.names, c.args);
    let q = queue_keys(names);
    FAIR_ACQUIRE.evalsha_cmd(
        &[
            &*names.key,
            names.token().as_str(),
            &q.queue,
            &q.timeouts,
            &q.alive,
        ],
        &[
            c.lease_ms,
            c.owner,
            args.token_ttl_ms.as_str(),
            args.fair_waiter_ms.as_str(),
            if c.join { "1" } else { "0" },
            args.fair_allowance_ms.as_str(),
            names.channel().as_str(),
            args.publish,
        ],
    )
}

/// `fair_release.lua`, which always names a token (`"0"`: by owner).
fn release_cmd(c: &ReleaseCall<'_>) -> Cmd {
    let names = c.names;
    let q = queue_keys(names);
    FAIR_RELEASE.evalsha_cmd(
        &[
            &*names.key,
            names.token().as_str(),
            &q.queue,
            &q.timeouts,
            &q.alive,
        ],
        &[
            c.owner,
            names.channel().as_str(),
            c.args.publish,
            c.token.unwrap_or("0"),
        ],
    )
}

/// `fair_leave.lua` for this owner: answers 1 when it was queued.
fn leave_cmd(args: &ScriptArgs, names: &LockNames, owner: &str, _tag: u16) -> Cmd {
    let q = queue_keys(names);
    FAIR_LEAVE.evalsha_cmd(
        &[&*names.key, &q.queue, &q.timeouts, &q.alive],
        &[
            owner,
            names.channel().as_str(),
            args.publish,
            args.fair_allowance_ms.as_str(),
        ],
    )
}

/// A fair lock's queue: Redisson's two keys and keylatch's own one, all in
/// the lock's slot.
#[derive(Clone, Debug, PartialEq, Eq)]
struct QueueKeys {
    /// `redisson_lock_queue:{name}`: waiting owners in arrival order.
    queue: String,
    /// `redisson_lock_timeout:{name}`: each waiter's deadline in Redisson's
    /// chained form (owner → ms), which Redisson's scripts purge by and
    /// subtract from.
    timeouts: String,
    /// `keylatch_fair_alive:{name}`: keylatch waiters' liveness (owner →
    /// server ms), by which keylatch's scripts purge its dead waiters
    /// (Redisson never reads it).
    alive: String,
}

/// The queue keys, made on use (a hold keeps its names for its whole life).
fn queue_keys(names: &LockNames) -> QueueKeys {
    QueueKeys {
        queue: companion("redisson_lock_queue", &names.key),
        timeouts: companion("redisson_lock_timeout", &names.key),
        alive: companion("keylatch_fair_alive", &names.key),
    }
}

/// The channel a waiter is woken on, `redisson_lock__channel:{name}:<owner>`.
fn waiter_channel(names: &LockNames, owner: &str) -> String {
    format!("{}:{owner}", names.channel())
}

/// `redisson_lock_queue:{name}`: the queue a force unlock keeps and wakes
/// the head of.
pub(crate) fn queue_key(name: &str) -> String {
    companion("redisson_lock_queue", name)
}

/// The queue's waiters, head first, each with the deadline it is judged
/// by relative to the server's clock: a keylatch waiter's liveness record,
/// else its Redisson deadline (server time, or a Java client's).
pub(crate) async fn inspect_queue(client: &Client, name: &str) -> LockResult<Vec<QueuedWaiter>> {
    let q = queue_keys(&LockNames::new(name));
    let cmd = Cmd::new("LRANGE").key(q.queue.as_str()).arg(0).arg(-1);
    let Frame::Array(items) = ask(client, cmd).await? else {
        return Ok(Vec::new());
    };
    let owners: Vec<String> = items.iter().filter_map(text).collect();
    if owners.is_empty() {
        return Ok(Vec::new());
    }
    let mut scores = Vec::with_capacity(owners.len());
    for owner in owners {
        let liveness = zscore(client, &q.alive, &owner).await?;
        let score = match liveness {
            Some(d) => Some(d),
            None => zscore(client, &q.timeouts, &owner).await?,
        };
        scores.push((owner, liveness.is_some(), score));
    }
    // The server's clock read after every deadline: a waiter that renews
    // its deadline while this runs wrote it at a server time at or before
    // this one, so no deadline shows longer than the timeout it was given.
    let now_ms = server_now_ms(client).await?;
    Ok(scores
        .into_iter()
        .map(|(owner, keylatch, score)| QueuedWaiter {
            deadline_in_ms: score.zip(now_ms).map(|(d, now)| d as i64 - now),
            keylatch,
            owner,
            granted: false,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use keylatch_cluster::Slot;

    #[test]
    fn queue_keys_are_redissons_plus_ours_in_the_lock_slot() {
        let q = queue_keys(&LockNames::new("jobs"));
        assert_eq!(q.queue, "redisson_lock_queue:{jobs}");
        assert_eq!(q.timeouts, "redisson_lock_timeout:{jobs}");
        assert_eq!(q.alive, "keylatch_fair_alive:{jobs}");
        assert_eq!(
            waiter_channel(&LockNames::new("jobs"), "c:1"),
            "redisson_lock__channel:{jobs}:c:1"
        );
        for name in ["jobs", "{t}jobs", "a{b}c"] {
            let n = LockNames::new(name);
            let q = queue_keys(&n);
            let slot = Slot::of(n.key.as_bytes());
            for k in [&q.queue, &q.timeouts, &q.alive] {
                // The fair scripts take all of them in one call.
                assert_eq!(Slot::of(k.as_bytes()), slot, "{k}");
            }
        }
    }
}
