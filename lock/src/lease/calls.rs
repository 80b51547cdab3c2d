//! The engine's server calls: renew (or only check) a batch of holds, and
//! the tracked reads that make the server push a change to a held key.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use keylatch_cluster::{Client, Commands, Pipeline, Script};
use keylatch_resp::{Cmd, Frame};

use super::hold::{millis, Hold};
use super::renewal::{Renewal, RenewalRef};

/// A hold in a call, with where the table kept it when the call was planned.
pub(super) type Planned = (Arc<Hold>, Mark);

/// A planned hold's place in the table: its epoch then (a verdict applies
/// only to it) and its slot (a reply finds the entry there without a
/// lookup by name, unless the slot was reused meanwhile). Two `u32`s fill
/// the padding beside the `Arc`: a [`Planned`] is still 16 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Mark {
    pub(super) epoch: u32,
    pub(super) slot: u32,
}

/// One call's worth of holds that share a renewal (whatever their lock
/// types: the script judges each from the same four strings, or two for
/// an owner-only renewal).
pub(super) struct Batch {
    pub(super) renewal: RenewalRef,
    /// The lease to renew with; zero only checks (fixed leases an
    /// invalidation pointed at: never extended).
    pub(super) lease: Duration,
    /// The holds, and (in `marks`, at the same index) each one's place in
    /// the table when the call was planned. Two vectors, not one of
    /// [`Planned`], as the engine's calls take the holds alone.
    pub(super) holds: Vec<Arc<Hold>>,
    pub(super) marks: Vec<Mark>,
    /// In a cluster: the holds may span slots (of one node, when known).
    pub(super) cluster: bool,
    /// The node serves all of them, as far as the topology knows.
    pub(super) on_node: bool,
    /// Refresh the fencing counters' idle expiry (not every renewal: see
    /// the actor's counter window).
    pub(super) refresh: bool,
}

impl Batch {
    /// The script's flags argument (`ARGV[3]`).
    fn flags(&self) -> &'static str {
        if self.refresh {
            "c"
        } else {
            ""
        }
    }
}

/// What one batch's calls found.
pub(super) struct Outcome {
    /// Per hold, in order: 1 stands (renewed), 0 gone, -1 unknown (the call
    /// failed, or the key is served elsewhere now).
    pub(super) verdicts: Vec<i64>,
    /// Script calls made.
    pub(super) calls: u64,
    /// Calls that failed or answered something unreadable.
    pub(super) failed: u64,
    /// The first of those failures, for the renew round's event.
    pub(super) error: Option<String>,
}

impl Outcome {
    fn note(&mut self, r: Result<Vec<i64>, String>) -> Option<Vec<i64>> {
        self.calls += 1;
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.failed += 1;
                self.error.get_or_insert(e);
                None
            }
        }
    }
}

/// Renews (or checks) a batch of holds: one call on a standalone server;
/// in a cluster one call on the node, then slot by slot for what it could
/// not judge.
pub(super) async fn run_batch(client: &Client, batch: &Batch, idle_ms: &str) -> Outcome {
    let n = batch.holds.len();
    let lease = if batch.lease.is_zero() {
        "0".to_owned()
    } else {
        millis(batch.lease).to_string()
    };
    let mut out = Outcome {
        verdicts: vec![-1; n],
        calls: 0,
        failed: 0,
        error: None,
    };
    if !batch.cluster {
        let all: Vec<usize> = (0..n).collect();
        let r = slot_call(client, batch.renewal.0, batch, &all, &lease, idle_ms).await;
        if let Some(v) = out.note(r) {
            out.verdicts = v;
        }
        return out;
    }
    if batch.on_node {
        let r = node_call(client, batch, &lease, idle_ms).await;
        if let Some(v) = out.note(r) {
            out.verdicts = v;
        }
    }
    // What the node could not judge (or a node that refused the whole
    // call) is asked slot by slot through the router. Every slot stands on
    // its own: one that fails leaves its holds unknown, not the others'.
    let mut by_slot: HashMap<u16, Vec<usize>> = HashMap::new();
    for (i, v) in out.verdicts.iter().enumerate() {
        if *v == -1 {
            by_slot
                .entry(batch.holds[i].key.slot())
                .or_default()
                .push(i);
        }
    }
    let bound = split_bound(batch.lease);
    for idx in by_slot.values() {
        let r = bounded(
            bound,
            slot_call(client, batch.renewal.0, batch, idx, &lease, idle_ms),
        )
        .await;
        let failed = r.is_err();
        if let Some(r) = out.note(r) {
            for (j, &i) in idx.iter().enumerate() {
                out.verdicts[i] = r[j];
            }
        }
        // A slot split by a move under way (the hash on one node, its
        // counter on the other) refuses every call naming both keys with
        // `TRYAGAIN` for as long as the move lasts, which may outlast the
        // lease. The owner's field alone still decides whether the hold
        // stands, and a one-key call follows the move (`ASK`): so the
        // holds are renewed by owner this time, their token judged at a
        // later renewal. Never for a check (nothing to keep alive).
        if let (true, Some(by_owner)) = (failed && bound.is_some(), batch.renewal.0.by_owner) {
            let r = bounded(
                bound,
                slot_call(client, by_owner, batch, idx, &lease, idle_ms),
            )
            .await;
            if let Some(r) = out.note(r) {
                for (j, &i) in idx.iter().enumerate() {
                    out.verdicts[i] = r[j];
                }
            }
        }
    }
    out
}

/// How long one slot call of a cluster renewal may take before the
/// engine turns to the owner-only renewal (see [`run_batch`]): a quarter
/// of the lease, so both calls end with half of it left. `None` for a
/// check (lease zero): it waits as long as requests do.
fn split_bound(lease: Duration) -> Option<Duration> {
    (!lease.is_zero()).then(|| lease / 4)
}

/// `call`, given up (as failed) past `bound`. Dropping a renewal call is
/// harmless: unsent, it never runs; sent, it only stretches a lease the
/// next renewal judges anyway.
async fn bounded(
    bound: Option<Duration>,
    call: impl std::future::Future<Output = Result<Vec<i64>, String>>,
) -> Result<Vec<i64>, String> {
    match bound {
        None => call.await,
        Some(b) => tokio::time::timeout(b, call)
            .await
            .unwrap_or_else(|_| Err(format!("renew call: no answer within {b:?}"))),
    }
}

/// A renew call's verdicts, or why there are none.
fn judged(reply: keylatch_cluster::Result<Frame>, n: usize) -> Result<Vec<i64>, String> {
    match reply {
        Err(e) => Err(e.to_string()),
        ok => parse(ok, n).ok_or_else(|| format!("renew script: not {n} integers")),
    }
}

/// One call of the kind's slot script for the holds at `idx`.
async fn slot_call(
    client: &Client,
    renewal: &Renewal,
    batch: &Batch,
    idx: &[usize],
    lease: &str,
    idle_ms: &str,
) -> Result<Vec<i64>, String> {
    let reply = client
        .eval_with(renewal.slot, || {
            slot_cmd(renewal, batch, idx, lease, idle_ms)
        })
        .await;
    judged(reply, idx.len())
}

/// Room for one hold's four arguments (name, counter, owner id, token) and
/// their framing, so a call's command is built without reallocating.
const ROOM_PER_HOLD: usize = 192;

/// The slot script's `EVALSHA` (see `reentrant_renew.lua`: `KEYS` hash,
/// counter pairs; `ARGV` lease, idle expiry, flags, then owner, token
/// pairs; for an owner-only renewal, `owner_renew.lua`'s hashes and
/// owners), written straight into the command: no owner or token text is
/// made per hold (a round renews every hold, a million of them at scale).
fn slot_cmd(renewal: &Renewal, batch: &Batch, idx: &[usize], lease: &str, idle_ms: &str) -> Cmd {
    let mut cmd = Cmd::with_capacity("EVALSHA", 96 + ROOM_PER_HOLD * idx.len());
    cmd.push_arg(renewal.slot.sha1());
    if renewal.owner_only {
        // `owner_renew.lua`: KEYS the hashes; ARGV the lease, then owners.
        cmd.push_arg(idx.len());
        for &i in idx {
            cmd.push_key(&**batch.holds[i].key.name());
        }
        cmd.push_arg(lease);
        for &i in idx {
            cmd.push_arg(&*batch.holds[i].key.owner().text());
        }
        return cmd;
    }
    cmd.push_arg(idx.len() * 2);
    for &i in idx {
        let h = &batch.holds[i];
        cmd.push_key(&**h.key.name());
        cmd.push_key(h.counter());
    }
    cmd.push_arg(lease);
    cmd.push_arg(idle_ms);
    cmd.push_arg(batch.flags());
    for &i in idx {
        let h = &batch.holds[i];
        cmd.push_arg(&*h.key.owner().text());
        cmd.push_arg(h.token);
    }
    cmd
}

/// One multi-slot call on the node that serves the first hold's key.
async fn node_call(
    client: &Client,
    batch: &Batch,
    lease: &str,
    idle_ms: &str,
) -> Result<Vec<i64>, String> {
    let first = batch.holds.first().ok_or("empty batch")?;
    let conn = client
        .connection_for_key(&**first.key.name())
        .await
        .map_err(|e| e.to_string())?;
    let script = batch.renewal.0.node;
    let reply = conn
        .eval_with(script, || node_cmd(script, batch, lease, idle_ms))
        .await;
    judged(reply, batch.holds.len())
}

/// The node script's `EVALSHA`: no `KEYS`; `ARGV` lease, idle expiry,
/// flags, then name, counter, owner, token per hold (owner-only: lease,
/// then name, owner per hold).
fn node_cmd(script: &Script, batch: &Batch, lease: &str, idle_ms: &str) -> Cmd {
    let mut cmd = Cmd::with_capacity("EVALSHA", 96 + ROOM_PER_HOLD * batch.holds.len());
    cmd.push_arg(script.sha1());
    cmd.push_arg(0_usize);
    cmd.push_arg(lease);
    if batch.renewal.0.owner_only {
        // `owner_renew_node.lua`: name, owner per hold.
        for h in &batch.holds {
            cmd.push_arg(&**h.key.name());
            cmd.push_arg(&*h.key.owner().text());
        }
        return cmd;
    }
    cmd.push_arg(idle_ms);
    cmd.push_arg(batch.flags());
    for h in &batch.holds {
        cmd.push_arg(&**h.key.name());
        cmd.push_arg(h.counter());
        cmd.push_arg(&*h.key.owner().text());
        cmd.push_arg(h.token);
    }
    cmd
}

/// One hold renewed by its lease's slot script with `lease` (a guard's
/// `extend`): the script's verdict, 1 stands (its key now lives at least
/// `lease` from the server's now; a longer expiry is kept), 0 gone, -1
/// unknown (its key is served elsewhere now); `None` for a reply of
/// another shape.
pub(crate) async fn extend_one(
    client: &Client,
    hold: &Hold,
    lease: Duration,
    idle_ms: &str,
) -> keylatch_cluster::Result<Option<i64>> {
    let counter = hold.counter();
    let keys: [&str; 2] = [hold.key.name(), &counter];
    // "0" only checks, as for the engine's fixed-lease checks.
    let lease_ms = if lease.is_zero() {
        "0".to_owned()
    } else {
        millis(lease).to_string()
    };
    let token = hold.token.to_string();
    // The counter's idle expiry refreshed too ("c"): an extend is rare.
    let owner = hold.key.owner().text();
    let args: [&str; 5] = [&lease_ms, idle_ms, "c", &owner, &token];
    let reply = client
        .eval_script(hold.renewal().slot, &keys, &args)
        .await?;
    Ok(parse(Ok(reply), 1).and_then(|v| v.first().copied()))
}

/// A renew script's verdicts for `n` holds: an array of exactly `n`
/// integers, or `None` (every hold unknown).
pub(crate) fn parse(reply: keylatch_cluster::Result<Frame>, n: usize) -> Option<Vec<i64>> {
    match reply.map(Frame::into_value) {
        Ok(Frame::Array(items)) if items.len() == n => items
            .into_iter()
            .map(|f| match f.value() {
                Frame::Integer(i) => Some(*i),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// Tracked reads (opt-in tracking: `CLIENT CACHING YES` right before each
/// read) on the connection of the first hold's node: from then on a change
/// to the key by anyone else arrives as an invalidation push. Each read is
/// also a check: `Some(false)` when the owner's field is already gone.
pub(super) async fn track(client: &Client, holds: &[Planned]) -> Vec<Option<bool>> {
    let Some(first) = holds.first() else {
        return Vec::new();
    };
    let Ok(conn) = client.connection_for_key(&**first.0.key.name()).await else {
        return vec![None; holds.len()];
    };
    let mut p = Pipeline::new();
    for (h, _) in holds {
        p.add(Cmd::new("CLIENT").arg("CACHING").arg("YES"));
        p.add(
            Cmd::new("HEXISTS")
                .key(&**h.key.name())
                .arg(&*h.key.owner().text()),
        );
    }
    match conn.pipeline(p).await {
        Ok(replies) => replies.chunks(2).map(|pair| found(pair.get(1))).collect(),
        Err(_) => vec![None; holds.len()],
    }
}

/// A tracked read's `HEXISTS` answer: whether the owner's field is there
/// (`false` too when the key holds another type), `None` when unknown
/// (failed, or not an integer).
pub(crate) fn found(reply: Option<&keylatch_cluster::Result<Frame>>) -> Option<bool> {
    match reply {
        Some(Ok(f)) => match f.value() {
            Frame::Integer(n) => Some(*n == 1),
            _ => None,
        },
        // The key holds another type now (a `SET` over the hash, landed
        // before this read): the hold is gone, as its renewal would judge.
        // Left unknown, it waited for that renewal (10 s at the default
        // lease): nothing else changes the key, so no invalidation comes.
        Some(Err(e)) if e.as_server_error().is_some_and(|s| s.code() == "WRONGTYPE") => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::lease::hold::NewHold;
    use crate::lease::key::HoldKey;
    use crate::lock::HASH_LEASE;
    use crate::owner::Owner;

    fn hold(name: &str, owner: Owner, token: u64) -> Arc<Hold> {
        Hold::new(NewHold {
            key: HoldKey::new(Arc::from(name), owner, &HASH_LEASE),
            token,
            renew: true,
            lease: Duration::from_secs(30),
            sent_at: Instant::now(),
            max_hold: None,
            drift_permille: 10,
            counters: Arc::new(crate::lease::Counters::default()),
            counter_made: false,
        })
    }

    fn batch(holds: Vec<Arc<Hold>>) -> Batch {
        Batch {
            renewal: RenewalRef(&HASH_LEASE),
            lease: Duration::from_secs(30),
            marks: vec![Mark::default(); holds.len()],
            holds,
            cluster: false,
            on_node: false,
            refresh: true,
        }
    }

    /// The commands written in place carry exactly the arguments the
    /// scripts read: the same bytes as the command built from text.
    #[test]
    fn renew_commands_carry_each_holds_four_strings_in_the_scripts_order() {
        let client = Arc::new("0b8a4b8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b".to_owned());
        let made = Owner::made(&client, u64::MAX);
        let holds = vec![
            hold("orders:{7}", made, 1_700_000_000_000_001),
            hold("a", Owner::given("java-uuid:12"), 3),
        ];
        let b = batch(holds);
        let script = HASH_LEASE.slot;
        let got = slot_cmd(&HASH_LEASE, &b, &[1, 0], "30000", "86400000");
        let want = script.evalsha_cmd(
            &[
                "a",
                "redisson_lock_token:{a}",
                "orders:{7}",
                "redisson_lock_token:orders:{7}",
            ],
            &[
                "30000",
                "86400000",
                "c",
                "java-uuid:12",
                "3",
                &format!("{client}:{}", u64::MAX),
                "1700000000000001",
            ],
        );
        assert_eq!(
            got.args().collect::<Vec<_>>(),
            want.args().collect::<Vec<_>>()
        );
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>()
        );

        let node = HASH_LEASE.node;
        let got = node_cmd(node, &b, "0", "86400000");
        let want = node.evalsha_cmd(
            &[] as &[&str],
            &[
                "0",
                "86400000",
                "c",
                "orders:{7}",
                "redisson_lock_token:orders:{7}",
                &format!("{client}:{}", u64::MAX),
                "1700000000000001",
                "a",
                "redisson_lock_token:{a}",
                "java-uuid:12",
                "3",
            ],
        );
        assert_eq!(
            got.args().collect::<Vec<_>>(),
            want.args().collect::<Vec<_>>()
        );
        assert_eq!(got.keys().count(), 0);
    }
}
