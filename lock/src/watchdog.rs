//! The watchdog: one task per [`Locks`](crate::Locks) that keeps watchdog
//! holds alive and tells holders when a hold is lost.
//!
//! A hold is registered *before* its acquire is sent and confirmed with the
//! time that acquire was sent; it is deregistered *before* its release is
//! sent, so a renewal can never resurrect a released lock (Redisson's
//! renewal/unlock race). Renewals are batched per node: every due hold of
//! one node and lease goes out in calls of at most [`RENEW_BATCH`] keys
//! (in a cluster with a script allowed to touch several slots of its node;
//! if a node refuses that, per slot), and the calls run concurrently and
//! independently.
//!
//! Rounds run on a fixed grid per lease, one every third of the lease, and
//! each round takes every hold last renewed at least half an interval
//! earlier. Holds taken at scattered times therefore fall into the same
//! round after their first renewal, and N holds on one node cost
//! ⌈N / [`RENEW_BATCH`]⌉ calls per interval, not a call per small group of
//! holds that happened to become due together. No hold waits longer than
//! 1.5 intervals (half a lease) between renewals.
//!
//! Loss is signalled when a renewal finds the hold gone, when no renewal has
//! succeeded by the local deadline (the last successful renewal's *send*
//! time + lease − drift allowance: past it the server may have expired the
//! key, so the holder must assume the worst), or when the max hold is reached.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use keylatch_cluster::{Client, Commands, Invalidation, Pipeline};
use keylatch_resp::{Cmd, Frame};
use tokio::sync::{mpsc, Notify};

pub(crate) use crate::hold_key::HoldKey;
use crate::hold_key::HoldMap;
use crate::loss::{LossRef, LossSignal};
use crate::scripts::{REENTRANT_RENEW, REENTRANT_RENEW_NODE};

/// Most holds renewed by one script call.
pub const RENEW_BATCH: usize = 100;

/// Why a hold was lost.
///
/// ```
/// use keylatch_lock::LossReason;
/// assert_ne!(LossReason::Gone, LossReason::Expired);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossReason {
    /// A renewal found the key gone or held by another owner.
    Gone,
    /// No renewal succeeded before the local deadline (server paused or
    /// unreachable, or a fixed lease ran out): the key may have expired.
    Expired,
    /// The configured max hold was reached; renewal stopped.
    MaxHold,
}

struct Hold {
    slot: u16,
    lease: Duration,
    /// Renewed by the watchdog (false: a fixed lease, only watched).
    renew: bool,
    /// Guards and acquires in flight that refer to this hold.
    refs: usize,
    /// Of those, the guards of the current hold (this epoch).
    guards: usize,
    /// Of those, guards of holds lost before this epoch: they still count
    /// in `refs` until they are dropped, but hold nothing.
    stale: usize,
    /// The hold count this process believes the server has for the current
    /// hold (the largest count an acquire reported, less releases since):
    /// with fencing off, a reply of 1 while this is 1 means the hold
    /// vanished and this acquire took a new one.
    seen_holds: u64,
    /// The token of the last hold found gone: a late reply carrying it is
    /// about a hold that no longer exists.
    gone_token: u64,
    /// A release by owner (after a cancelled attempt) is on its way: new
    /// attempts wait for it, or it could end the hold they take.
    releasing: bool,
    /// Of the current guards, those taken under the watchdog: the hold is
    /// renewed while there is one (a watchdog re-entry on a fixed lease
    /// renews it only until that re-entry is released).
    renewers: usize,
    /// The fencing token of the hold the guards share (0: fencing off).
    token: u64,
    /// Which hold this is: new with the entry, and again when a new hold
    /// replaces a vanished one under the same entry. Renewal replies and
    /// checks apply only to the epoch they were planned for.
    epoch: u64,
    /// Tells this entry from a later one for the same (name, owner): an
    /// entry removed on loss and registered again is a different hold, and
    /// the old guard's deregistration must not touch the new one.
    generation: u64,
    /// Set once an acquire succeeded.
    confirmed: bool,
    registered_at: Instant,
    max_hold: Option<Duration>,
    /// Send time of the last successful acquire or renewal.
    last_ok_sent: Instant,
    next_renew: Instant,
    /// A renewal call for this hold is in flight.
    renewing: bool,
    /// Renew at `early(self)` without waiting for the grid: the last
    /// renewal failed, or an invalidation asks for a check now.
    off_grid: bool,
    /// An invalidation arrived while a renewal was in flight: that renewal
    /// may have been answered before the change, so check again after it.
    recheck: bool,
    /// A tracked read (PTTL) was issued, so a change by anyone else is
    /// pushed to us at once.
    tracked: bool,
    confirmed_at: Instant,
    lost: LossRef,
}

/// Signals a lost hold; forgets its entry only when nothing counts in it.
fn retire_or_remove(holds: &mut HoldMap<Hold>, key: &HoldKey, why: LossReason) {
    if let Some(h) = holds.get_mut(key) {
        h.retire(why);
        if h.refs == 0 {
            holds.remove(key);
        }
    }
}

/// Generations and epochs: unique for the process's life.
fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Hold {
    /// The hold is lost: its guards are told, and the entry stops being
    /// renewed but stays while guards or attempts still count in it, so a
    /// cancelled attempt cannot conclude that this owner has nothing here
    /// (and release a fresh hold another attempt is taking). The next hold
    /// under it starts with a new epoch and signal.
    fn retire(&mut self, why: LossReason) {
        let old = std::mem::replace(&mut self.lost, LossSignal::new());
        old.fire(why);
        if self.token != 0 {
            self.gone_token = self.token;
        }
        self.stale += std::mem::take(&mut self.guards);
        self.new_epoch();
        self.confirmed = false;
    }

    /// A new hold under this entry: replies and checks planned for the old
    /// one must not touch it.
    fn new_epoch(&mut self) {
        self.epoch = next_id();
        self.renewers = 0;
        self.seen_holds = 0;
        self.renewing = false;
        self.off_grid = false;
        self.recheck = false;
    }

    /// The current hold's last guard is gone (it is being released): stop
    /// watching it. Its signal is set aside unfired, so the tokens of guards
    /// released normally stay pending; a later hold starts afresh.
    fn end_hold(&mut self) {
        self.lost = LossSignal::new();
        self.new_epoch();
        self.confirmed = false;
    }

    /// Acquire attempts in flight (references that are no guard).
    fn attempts(&self) -> usize {
        self.refs.saturating_sub(self.guards + self.stale)
    }

    fn new(
        key: &HoldKey,
        lease: Duration,
        renew: bool,
        max_hold: Option<Duration>,
        now: Instant,
    ) -> Self {
        let lease = clamp_span(lease);
        let generation = next_id();
        Self {
            slot: key.slot(),
            lease,
            renew,
            refs: 0,
            guards: 0,
            stale: 0,
            renewers: 0,
            seen_holds: 0,
            gone_token: 0,
            releasing: false,
            token: 0,
            epoch: generation,
            generation,
            confirmed: false,
            registered_at: now,
            max_hold: max_hold.map(clamp_span),
            last_ok_sent: now,
            next_renew: now + lease / 3,
            renewing: false,
            off_grid: false,
            recheck: false,
            tracked: false,
            confirmed_at: now,
            lost: LossSignal::new(),
        }
    }
}

pub(crate) struct Shared {
    holds: Mutex<HoldMap<Hold>>,
    wake: Notify,
    /// Drift allowance: 2 ms + this many thousandths of the lease.
    drift_permille: u32,
    /// When the task will next look at the holds unless woken.
    planned_wake: Mutex<Instant>,
    pub(crate) renew_calls: AtomicU64,
    /// Rounds that sent at least one renewal.
    pub(crate) renew_rounds: AtomicU64,
    /// Woken when a release by owner that attempts wait for is done.
    released: Notify,
    /// Invalidation pushes arrive (client tracking is on): holds older than
    /// [`TRACK_AFTER`] get a tracked read.
    tracking: bool,
}

/// Holds younger than this are not tracked: most locks are released within
/// microseconds, and a tracked read for each would cost the server a command.
pub(crate) const TRACK_AFTER: Duration = Duration::from_millis(20);

/// Handle to the watchdog task; the task ends when the last handle is gone.
#[derive(Clone)]
pub(crate) struct Watchdog {
    shared: Arc<Shared>,
}

impl Watchdog {
    pub(crate) fn spawn(
        client: Client,
        drift_permille: u32,
        invalidations: Option<mpsc::UnboundedReceiver<Invalidation>>,
    ) -> Self {
        let shared = Arc::new(Shared {
            holds: Mutex::new(HoldMap::default()),
            wake: Notify::new(),
            drift_permille,
            planned_wake: Mutex::new(Instant::now()),
            renew_calls: AtomicU64::new(0),
            renew_rounds: AtomicU64::new(0),
            released: Notify::new(),
            tracking: invalidations.is_some(),
        });
        tokio::spawn(run(Arc::downgrade(&shared), client, invalidations));
        Self { shared }
    }

    fn holds(&self) -> std::sync::MutexGuard<'_, HoldMap<Hold>> {
        self.shared.holds.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers (or re-references) a hold before its acquire is sent.
    /// Returns the entry's generation. The lease and the watchdog flag of an
    /// entry that is already held change only when an acquire succeeds
    /// ([`confirm`](Self::confirm)): an attempt that fails must not move the
    /// hold's deadline.
    ///
    /// `Err` while a release by owner of this hold is on its way: wait with
    /// [`released`](Self::released) (created before this call) and try
    /// again.
    pub(crate) fn register(
        &self,
        key: &HoldKey,
        lease: Duration,
        renew: bool,
        max_hold: Option<Duration>,
        now: Instant,
    ) -> Result<u64, ReleasePending> {
        let mut holds = self.holds();
        let hold = holds
            .entry(key.clone())
            .or_insert_with(|| Hold::new(key, lease, renew, max_hold, now));
        if hold.releasing {
            return Err(ReleasePending);
        }
        hold.refs += 1;
        Ok(hold.generation)
    }

    /// Resolves after the next release by owner that attempts wait for is
    /// done (create it before calling [`register`](Self::register)).
    pub(crate) fn released(&self) -> tokio::sync::futures::Notified<'_> {
        self.shared.released.notified()
    }

    /// The release by owner that [`deregister`](Self::deregister) started
    /// (`release_if_last`) is done, or will not be sent: attempts may go on.
    pub(crate) fn release_done(&self, key: &HoldKey) {
        let mut holds = self.holds();
        if let Some(h) = holds.get_mut(key) {
            h.releasing = false;
            if h.refs == 0 {
                holds.remove(key);
            }
        }
        drop(holds);
        self.shared.released.notify_waiters();
    }

    /// The acquire sent at `sent_at` with `lease` succeeded with fencing
    /// token `token` (0 with fencing off), leaving this owner `holds` holds;
    /// a guard now refers to the entry.
    /// Returns the loss signal, generation and epoch for the new guard.
    ///
    /// A re-entry moves the local deadline only when its lease is at least
    /// the hold's: the script never shortens the key's expiry, so a shorter
    /// re-entry leaves the expiry where it was. A token other than the one
    /// the entry's guards share means this acquire started a new hold: the
    /// old one vanished behind them (deleted, expired, or taken and released
    /// by another owner) before the watchdog noticed. Those guards are told
    /// now, and the new hold gets a signal of its own. (A re-entry keeps its
    /// hold's token, whatever order clones' replies are handled in.)
    #[allow(clippy::too_many_arguments)] // one call site, each argument named there
    pub(crate) fn confirm(
        &self,
        key: &HoldKey,
        generation: u64,
        sent_at: Instant,
        lease: Duration,
        renew: bool,
        max_hold: Option<Duration>,
        token: u64,
        holds: u64,
    ) -> (LossRef, u64, u64) {
        let lease = clamp_span(lease);
        let mut map = self.holds();
        let h = map
            .entry(key.clone())
            .or_insert_with(|| Hold::new(key, lease, renew, max_hold, sent_at));
        if h.generation != generation {
            // The entry this attempt registered with was lost and removed
            // meanwhile: the new hold joins (or starts) the current entry.
            h.refs += 1;
        }
        if token != 0 && (token < h.token || token == h.gone_token) {
            // This reply is about a hold older than the entry's latest, or
            // one already found gone (tokens only rise): that hold no longer
            // exists, and its guard is stale from the start.
            h.stale += 1;
            let gone = LossSignal::new();
            gone.fire(LossReason::Gone);
            return (gone, h.generation, 0);
        }
        let replaced = if token != 0 {
            // A newer token: a new hold.
            h.token != 0 && token > h.token
        } else {
            // Fencing off: a re-entry reports at least 2, and clones' earlier
            // replies can only report less than the count already seen. A 1
            // while this process believes the count is 1 is a new hold.
            holds == 1 && h.seen_holds == 1
        };
        if h.confirmed && replaced {
            // The hold the guards shared vanished behind them.
            h.retire(LossReason::Gone);
        }
        // An entry whose hold ended (released, or lost) is unconfirmed:
        // this is a first hold, under the new epoch and signal set then.
        let first = !h.confirmed;
        if first {
            h.token = token;
            h.lease = lease;
            h.renew = renew;
            h.max_hold = max_hold.map(clamp_span);
            h.registered_at = sent_at;
            h.last_ok_sent = sent_at;
            h.next_renew = sent_at + lease / 3;
            // The send time stands in for the reply's: tracking starts a
            // round trip sooner, which is harmless.
            h.confirmed_at = sent_at;
            h.tracked = false;
        } else {
            if lease > h.lease {
                // The key now lives at least `lease` from this send (the
                // script and renewals never shorten it): the deadline counts
                // from here, even if a renewal with the shorter lease was
                // sent later.
                h.lease = lease;
                h.last_ok_sent = sent_at;
                h.next_renew = sent_at + lease / 3;
            } else if lease == h.lease && sent_at > h.last_ok_sent {
                h.last_ok_sent = sent_at;
                h.next_renew = sent_at + lease / 3;
            }
        }
        h.seen_holds = h.seen_holds.max(holds);
        h.confirmed = true;
        h.guards += 1;
        if renew {
            h.renewers += 1;
        }
        h.renew = h.renewers > 0;
        let lost = Arc::clone(&h.lost);
        let generation = h.generation;
        let epoch = h.epoch;
        // The latest the task may look at this hold: its overdue time (it is
        // normally renewed earlier, by the next grid round, which the task
        // wakes for anyway), its deadline, or its max hold.
        let mut due = overdue(h).min(local_deadline(&self.shared, h));
        if let Some(m) = h.max_hold {
            due = due.min(h.registered_at + m);
        }
        if self.shared.tracking && !h.tracked {
            due = due.min(h.confirmed_at + TRACK_AFTER);
        }
        drop(map);
        // Wake the task only if it would otherwise sleep past this hold: a
        // wake-up per acquire would cost a task switch on the hot path.
        let planned = *self
            .shared
            .planned_wake
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if due < planned {
            self.shared.wake.notify_one();
        }
        (lost, generation, epoch)
    }

    /// Drops one reference: an attempt's (`guard: None`) or a guard's (the
    /// epoch its hold had, and whether it was taken under the watchdog); the
    /// hold stops being watched when its last guard is gone.
    ///
    /// With `release_if_last`, when nothing is left the entry is kept,
    /// marked as releasing, until [`release_done`](Self::release_done): the
    /// caller sends a release by owner, and attempts registering meanwhile
    /// wait for it (decided under the same lock, so none slips in between).
    pub(crate) fn deregister(
        &self,
        key: &HoldKey,
        generation: u64,
        guard: Option<(u64, bool)>,
        release_if_last: bool,
    ) -> Left {
        let mut holds = self.holds();
        let Some(h) = holds.get_mut(key) else {
            if release_if_last {
                // Gone (lost and forgotten): mark it all the same, so the
                // release goes out before any new attempt's acquire.
                let mut marker = Hold::new(key, Duration::ZERO, false, None, Instant::now());
                marker.releasing = true;
                holds.insert(key.clone(), marker);
            }
            return Left {
                nothing: true,
                stale: false,
            };
        };
        if h.generation != generation {
            // That hold was lost and its entry replaced by a newer one.
            return Left {
                nothing: false,
                stale: true,
            };
        }
        h.refs = h.refs.saturating_sub(1);
        let mut stale = false;
        match guard {
            Some((epoch, renew)) if epoch == h.epoch => {
                h.guards = h.guards.saturating_sub(1);
                h.seen_holds = h.seen_holds.saturating_sub(1);
                if renew {
                    h.renewers = h.renewers.saturating_sub(1);
                    h.renew = h.renewers > 0;
                }
                if h.guards == 0 {
                    // Deregistered before its release is sent: no renewal
                    // may follow, even while stale guards or attempts keep
                    // the entry.
                    h.end_hold();
                }
            }
            Some(_) => {
                h.stale = h.stale.saturating_sub(1);
                stale = true;
            }
            None => {}
        }
        if h.refs == 0 {
            if release_if_last {
                h.releasing = true;
            } else {
                // A second lookup, but a cheap one (the hash is precomputed);
                // `entry` would need an owned key, two reference counts.
                holds.remove(key);
            }
            return Left {
                nothing: true,
                stale,
            };
        }
        Left {
            nothing: false,
            stale,
        }
    }

    /// When the current hold's lease runs out by the local clock (send time
    /// of the last successful renewal + lease − drift).
    pub(crate) fn deadline(&self, key: &HoldKey) -> Option<Instant> {
        let holds = self.holds();
        holds.get(key).map(|h| local_deadline(&self.shared, h))
    }

    /// Renewal script calls made so far.
    pub(crate) fn renew_calls(&self) -> u64 {
        self.shared.renew_calls.load(Ordering::Relaxed)
    }

    /// Renewal rounds (wake-ups that sent renewals) so far.
    pub(crate) fn renew_rounds(&self) -> u64 {
        self.shared.renew_rounds.load(Ordering::Relaxed)
    }

    /// Entries with a live hold or an acquire in flight (a lost hold kept
    /// only for its dropped-later guards does not count).
    pub(crate) fn len(&self) -> usize {
        self.holds()
            .values()
            .filter(|h| h.confirmed || h.attempts() > 0)
            .count()
    }
}

/// A release by owner of this hold is on its way; see [`Watchdog::register`].
#[derive(Debug)]
pub(crate) struct ReleasePending;

/// What a deregistration left behind.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Left {
    /// This owner has nothing left in this process on the lock (no guard,
    /// no attempt): only then may a maybe-acquired attempt release by owner
    /// without ending a hold that someone here relies on.
    pub(crate) nothing: bool,
    /// The reference was a guard of a hold already lost.
    pub(crate) stale: bool,
}

/// A hold picked for a call, with its epoch then.
type Planned = (HoldKey, u64);

/// One renewal call's worth of holds.
struct Batch {
    lease: Duration,
    keys: Vec<HoldKey>,
    /// Each hold's epoch when the batch was planned: a reply applies only to
    /// that hold, never to a newer one of the same (name, owner).
    epochs: Vec<u64>,
    /// In a cluster, the keys span several slots of one node.
    cross_slot: bool,
}

async fn run(
    shared: Weak<Shared>,
    client: Client,
    mut invalidations: Option<mpsc::UnboundedReceiver<Invalidation>>,
) {
    // Next round per lease (the task's own state: only `plan` reads it).
    let mut grid: Grid = HashMap::new();
    loop {
        let Some(me) = shared.upgrade() else { return };
        let now = Instant::now();
        // Until the real wake time is known, any hold confirmed meanwhile
        // must wake the task (it may not be in this plan).
        *me.planned_wake.lock().unwrap_or_else(|p| p.into_inner()) =
            now + Duration::from_secs(3600);
        let (batches, to_track, to_check, wake) = plan(&me, &client, now, &mut grid);
        if !batches.is_empty() {
            me.renew_rounds.fetch_add(1, Ordering::Relaxed);
        }
        for batch in batches {
            me.renew_calls.fetch_add(1, Ordering::Relaxed);
            let me = Arc::clone(&me);
            let client = client.clone();
            // Batches are independent: one slow node does not hold up others.
            tokio::spawn(async move { renew(&me, &client, batch).await });
        }
        if !to_track.is_empty() {
            let client = client.clone();
            tokio::spawn(async move { track(&client, to_track).await });
        }
        if !to_check.is_empty() {
            let me = Arc::clone(&me);
            let client = client.clone();
            tokio::spawn(async move { check_fixed(&me, &client, to_check).await });
        }
        let next = match (wake.renew, wake.urgent) {
            (Some(r), Some(u)) => Some(r.min(u)),
            (r, u) => r.or(u),
        };
        // Renewals may wait 5 ms more (no spinning on near-due rounds); a
        // loss deadline may not: with a short lease, 5 ms would outrun the
        // drift allowance (2 ms + 1 %).
        let floor = if next.is_some() && next == wake.urgent {
            Duration::from_millis(1)
        } else {
            Duration::from_millis(5)
        };
        let sleep = next
            .map(|t| t.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_secs(1))
            .clamp(floor, Duration::from_secs(1));
        *me.planned_wake.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now() + sleep;
        // `me` stays alive through the sleep; the loop's upgrade ends the
        // task within a second of the last handle going away.
        let wake = me.wake.notified();
        let pushed = async {
            match invalidations.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep(sleep) => {}
            () = wake => {}
            inv = pushed => match inv {
                Some(inv) => invalidated(&me, inv),
                None => invalidations = None,
            },
        }
    }
}

/// Someone else changed (or the server expired) keys we hold: check those
/// holds now instead of at their next renewal.
fn invalidated(shared: &Shared, inv: Invalidation) {
    let now = Instant::now();
    let mut holds = shared.holds.lock().unwrap_or_else(|p| p.into_inner());
    for (hold, h) in holds.iter_mut() {
        let hit = match &inv {
            Invalidation::All => true,
            Invalidation::Keys(keys) => keys.iter().any(|k| k.as_ref() == hold.name().as_bytes()),
        };
        if hit {
            // Tracking is one-shot: read again after the check.
            h.tracked = false;
            h.next_renew = now;
            h.off_grid = true;
            h.recheck = h.renewing;
        }
    }
}

/// Tracked reads: after `PTTL key` on the lock's own connection, a change to
/// the key by anyone else arrives as an invalidation push.
async fn track(client: &Client, keys: Vec<String>) {
    let p: Pipeline = keys
        .iter()
        .map(|k| Cmd::new("PTTL").key(k.as_str()))
        .collect();
    let _ = client.pipeline(p).await;
}

/// Fixed-lease holds an invalidation pointed at: each is looked up (HEXISTS
/// of its owner, not renewed) and, if gone, lost now rather than when its
/// lease would have ended. An error leaves the hold to its lease deadline.
async fn check_fixed(shared: &Shared, client: &Client, keys: Vec<Planned>) {
    let p: Pipeline = keys
        .iter()
        .map(|(k, _)| Cmd::new("HEXISTS").key(&**k.name()).arg(&**k.owner()))
        .collect();
    let replies = client.pipeline(p).await.ok();
    let mut holds = shared.holds.lock().unwrap_or_else(|p| p.into_inner());
    for (i, (key, epoch)) in keys.iter().enumerate() {
        let Some(h) = holds.get_mut(key) else {
            continue;
        };
        if h.epoch != *epoch {
            // About an older hold; the current one is checked on its own.
            h.renewing = false;
            continue;
        }
        h.renewing = false;
        // Changed again while the check was in flight: check once more.
        h.off_grid = std::mem::take(&mut h.recheck);
        let reply = replies.as_ref().and_then(|r| r.get(i));
        if let Some(Ok(Frame::Integer(0))) = reply {
            retire_or_remove(&mut holds, key, LossReason::Gone);
        }
    }
    drop(holds);
    shared.wake.notify_one();
}

/// Signals losses that are due and groups due renewals by (slot, lease).
/// When the task should look again: the first renewal due, the first loss
/// deadline or max hold.
#[derive(Default)]
struct Wake {
    renew: Option<Instant>,
    urgent: Option<Instant>,
}

fn earliest(a: Option<Instant>, b: Instant) -> Option<Instant> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// The next round's time per lease.
type Grid = HashMap<Duration, Instant>;

fn plan(
    shared: &Shared,
    client: &Client,
    now: Instant,
    grid: &mut Grid,
) -> (Vec<Batch>, Vec<String>, Vec<Planned>, Wake) {
    let mut to_track = Vec::new();
    let mut to_check = Vec::new();
    let cluster = client.is_cluster();
    let mut holds = shared.holds.lock().unwrap_or_else(|p| p.into_inner());
    // Grouped by node (standalone: one group), falling back to the slot when
    // the node is unknown for now.
    let mut groups: HashMap<(Option<String>, u16, Duration), Vec<Planned>> = HashMap::new();
    let mut wake = Wake::default();
    let mut dead = Vec::new();
    // Leases with renewable holds; a lease seen for the first time starts
    // its grid with a round now.
    let mut seen: Vec<Duration> = Vec::new();
    for (key, h) in holds.iter_mut() {
        if !h.confirmed {
            continue;
        }
        if let Some(max) = h.max_hold {
            if now >= h.registered_at + max {
                dead.push((key.clone(), LossReason::MaxHold));
                continue;
            }
        }
        let deadline = local_deadline(shared, h);
        if now >= deadline {
            dead.push((key.clone(), LossReason::Expired));
            continue;
        }
        wake.urgent = earliest(wake.urgent, deadline);
        if shared.tracking && !h.tracked {
            if now >= h.confirmed_at + TRACK_AFTER {
                h.tracked = true;
                to_track.push(key.name().to_string());
            } else {
                wake.urgent = earliest(wake.urgent, h.confirmed_at + TRACK_AFTER);
            }
        }
        // Leases with holds in flight keep their grid too, so it stays
        // fixed while a round's replies are outstanding.
        if h.renew && !seen.contains(&h.lease) {
            seen.push(h.lease);
        }
        if !h.renew && h.off_grid && !h.renewing {
            // A fixed lease is never renewed, but an invalidation asks
            // whether the hold still stands: one HEXISTS, no new expiry.
            h.renewing = true;
            h.off_grid = false;
            to_check.push((key.clone(), h.epoch));
        }
        if h.renew && !h.renewing {
            let round = *grid.entry(h.lease).or_insert(now);
            // In a grid round every hold renewed at least half an interval
            // ago goes (renewing early is harmless, and it keeps holds in
            // common rounds); off the grid only retries and overdue holds.
            let eligible = now >= early(h) && (now >= round || h.off_grid || now >= overdue(h));
            if eligible {
                h.renewing = true;
                let group = if !cluster {
                    (None, 0, h.lease)
                } else {
                    match client.master_for_slot(h.slot) {
                        Some(node) => (Some(node), 0, h.lease),
                        None => (None, h.slot, h.lease),
                    }
                };
                groups
                    .entry(group)
                    .or_default()
                    .push((key.clone(), h.epoch));
            } else if h.off_grid {
                wake.renew = earliest(wake.renew, early(h));
            } else {
                // Normally the next grid round takes it (the grid's own wake
                // is added below); `overdue` is the backstop.
                wake.renew = earliest(wake.renew, overdue(h));
            }
        }
        if let Some(m) = h.max_hold {
            wake.urgent = earliest(wake.urgent, h.registered_at + m);
        }
    }
    for (k, why) in dead {
        retire_or_remove(&mut holds, &k, why);
    }
    drop(holds);
    grid.retain(|lease, _| seen.contains(lease));
    for (lease, round) in grid.iter_mut() {
        let interval = *lease / 3;
        if now >= *round {
            // Next round one interval on; a task that slept past it (busy
            // runtime) starts again from now rather than firing twice.
            *round += interval;
            if *round <= now {
                *round = now + interval;
            }
        }
        wake.renew = earliest(wake.renew, *round);
    }
    let mut batches = Vec::new();
    for ((node, _, lease), keys) in groups {
        for chunk in keys.chunks(RENEW_BATCH) {
            batches.push(Batch {
                lease,
                keys: chunk.iter().map(|(k, _)| k.clone()).collect(),
                epochs: chunk.iter().map(|&(_, e)| e).collect(),
                cross_slot: cluster && node.is_some(),
            });
        }
    }
    (batches, to_track, to_check, wake)
}

async fn renew(shared: &Shared, client: &Client, batch: Batch) {
    let sent_at = Instant::now();
    let results = if batch.cross_slot {
        match renew_on_node(client, &batch).await {
            Some(r) => Some(r),
            // The node refused a multi-slot call (slot moving, old server):
            // renew slot by slot through the router instead.
            None => renew_per_slot(shared, client, &batch).await,
        }
    } else {
        renew_call(client, &batch.keys, batch.lease).await
    };
    apply(shared, &batch, results, sent_at);
}

/// One multi-slot call on the node that serves the first key.
async fn renew_on_node(client: &Client, batch: &Batch) -> Option<Vec<i64>> {
    let first = batch.keys.first()?;
    let conn = client.connection_for_key(&**first.name()).await.ok()?;
    let mut args: Vec<&str> = Vec::with_capacity(batch.keys.len() * 2 + 1);
    let lease = millis(batch.lease).to_string();
    args.push(&lease);
    for k in &batch.keys {
        args.push(k.name());
        args.push(k.owner());
    }
    let reply = conn
        .eval_script(&REENTRANT_RENEW_NODE, &[] as &[&str], &args)
        .await;
    parse_results(reply, batch.keys.len())
}

async fn renew_per_slot(shared: &Shared, client: &Client, batch: &Batch) -> Option<Vec<i64>> {
    let mut by_slot: HashMap<u16, Vec<usize>> = HashMap::new();
    for (i, k) in batch.keys.iter().enumerate() {
        by_slot.entry(k.slot()).or_default().push(i);
    }
    let mut out = vec![-1i64; batch.keys.len()];
    for idx in by_slot.values() {
        let keys: Vec<HoldKey> = idx.iter().map(|&i| batch.keys[i].clone()).collect();
        shared.renew_calls.fetch_add(1, Ordering::Relaxed);
        let r = renew_call(client, &keys, batch.lease).await?;
        for (j, &i) in idx.iter().enumerate() {
            out[i] = r[j];
        }
    }
    Some(out)
}

async fn renew_call(client: &Client, keys: &[HoldKey], lease: Duration) -> Option<Vec<i64>> {
    let (names, args) = script_args(keys, lease);
    let reply = client.eval_script(&REENTRANT_RENEW, &names, &args).await;
    parse_results(reply, keys.len())
}

fn script_args(keys: &[HoldKey], lease: Duration) -> (Vec<&str>, Vec<String>) {
    let names: Vec<&str> = keys.iter().map(|k| &**k.name()).collect();
    let mut args: Vec<String> = Vec::with_capacity(keys.len() + 1);
    args.push(millis(lease).to_string());
    args.extend(keys.iter().map(|k| k.owner().to_string()));
    (names, args)
}

fn parse_results(reply: keylatch_cluster::Result<Frame>, n: usize) -> Option<Vec<i64>> {
    match reply {
        Ok(Frame::Array(items)) if items.len() == n => items
            .into_iter()
            .map(|f| match f {
                Frame::Integer(i) => Some(i),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

fn apply(shared: &Shared, batch: &Batch, results: Option<Vec<i64>>, sent_at: Instant) {
    let mut holds = shared.holds.lock().unwrap_or_else(|p| p.into_inner());
    for (i, key) in batch.keys.iter().enumerate() {
        let Some(h) = holds.get_mut(key) else {
            continue;
        };
        if batch.epochs.get(i) != Some(&h.epoch) {
            // A newer hold of this owner: the reply was about the old one.
            // The new hold gets a renewal of its own soon.
            h.renewing = false;
            h.off_grid = true;
            continue;
        }
        h.renewing = false;
        h.off_grid = false;
        let recheck = std::mem::take(&mut h.recheck);
        match results.as_ref().map(|r| r[i]) {
            // -1: its slot's call failed; retry like a failed batch.
            Some(-1) | None => {
                // Retry after a pause (not shifted earlier by `early`), so a
                // node that fails fast does not make the task spin.
                h.next_renew =
                    Instant::now() + (h.lease / 10).min(Duration::from_millis(500)) + h.lease / 6;
                h.off_grid = true;
            }
            Some(1) if batch.lease < h.lease => {
                // The hold's lease grew (a longer re-entry) while this
                // renewal with the old one was in flight: it guarantees only
                // the old lease, so the deadline stays; renew with the new
                // lease now.
                h.next_renew = Instant::now();
                h.off_grid = true;
            }
            Some(1) => {
                if sent_at > h.last_ok_sent {
                    h.last_ok_sent = sent_at;
                }
                h.next_renew = sent_at + h.lease / 3;
                if recheck {
                    // Changed behind us while this renewal was in flight.
                    h.next_renew = Instant::now();
                    h.off_grid = true;
                }
            }
            Some(_) => retire_or_remove(&mut holds, key, LossReason::Gone),
        }
    }
    drop(holds);
    // Failed renewals are retried soon, well within the lease; the deadline
    // check fires the loss if none succeeds in time.
    shared.wake.notify_one();
}

/// When a hold may be renewed: a sixth of a lease (half an interval) before
/// it is due, so holds taken at scattered times share rounds (renewing early
/// is harmless).
fn early(h: &Hold) -> Instant {
    h.next_renew
        .checked_sub(h.lease / 6)
        .unwrap_or(h.next_renew)
}

/// When a hold is renewed even off the grid: half an interval past due
/// (1.5 intervals, half a lease, after its last success). Grid rounds come
/// every interval, so this is only reached when the grid is not running yet
/// for its lease, or the task was held up.
fn overdue(h: &Hold) -> Instant {
    h.next_renew + h.lease / 6
}

/// Send time of the last success + lease − drift allowance: past it the
/// server may already have expired the key.
fn local_deadline(shared: &Shared, h: &Hold) -> Instant {
    let drift = Duration::from_millis(2) + h.lease * shared.drift_permille / 1000;
    (h.last_ok_sent + h.lease)
        .checked_sub(drift)
        .unwrap_or(h.last_ok_sent)
}

/// Longest lease or max hold the arithmetic accepts (ten years): larger
/// values, such as `Duration::MAX` meaning "no limit", are clamped so that
/// `Instant + Duration` can never overflow.
pub(crate) fn clamp_span(d: Duration) -> Duration {
    d.min(Duration::from_secs(10 * 365 * 24 * 3600))
}

/// Milliseconds for PEXPIRE, at least 1.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    /// The hold most tests use.
    fn orders() -> HoldKey {
        HoldKey::new(Arc::from("orders"), Arc::from("c:1"))
    }

    /// Registers an attempt where no release by owner is pending.
    fn reg(
        wd: &Watchdog,
        key: &HoldKey,
        lease: Duration,
        renew: bool,
        max_hold: Option<Duration>,
        now: Instant,
    ) -> u64 {
        wd.register(key, lease, renew, max_hold, now)
            .expect("no release pending")
    }

    /// A watchdog without its task: the state machine alone.
    fn idle_watchdog() -> Watchdog {
        Watchdog {
            shared: Arc::new(Shared {
                holds: Mutex::new(HoldMap::default()),
                wake: Notify::new(),
                drift_permille: 10,
                planned_wake: Mutex::new(Instant::now()),
                renew_calls: AtomicU64::new(0),
                renew_rounds: AtomicU64::new(0),
                released: Notify::new(),
                tracking: true,
            }),
        }
    }

    const LEASE: Duration = Duration::from_secs(30);

    /// A watchdog with one confirmed hold on `orders`, whose renewal (sent
    /// at the returned time, in the returned batch) is in flight.
    fn renewing() -> (Watchdog, HoldKey, Batch, Instant) {
        let wd = idle_watchdog();
        let key = orders();
        let (batch, sent_at) = renewal_in_flight(&wd, &key, LEASE);
        (wd, key, batch, sent_at)
    }

    fn invalidate(wd: &Watchdog, key: &'static [u8]) {
        invalidated(
            &wd.shared,
            Invalidation::Keys(vec![Bytes::from_static(key)]),
        );
    }

    fn renewal_in_flight(wd: &Watchdog, key: &HoldKey, lease: Duration) -> (Batch, Instant) {
        let t0 = Instant::now();
        let generation = reg(wd, key, lease, true, None, t0);
        wd.confirm(key, generation, t0, lease, true, None, 1, 1);
        let sent_at = Instant::now();
        let epoch = {
            let mut holds = wd.holds();
            let h = holds.get_mut(key).expect("registered");
            h.renewing = true;
            h.epoch
        };
        let batch = Batch {
            lease,
            keys: vec![key.clone()],
            epochs: vec![epoch],
            cross_slot: false,
        };
        (batch, sent_at)
    }

    #[test]
    fn an_invalidation_during_a_renewal_forces_a_check_after_it() {
        let (wd, key, batch, sent_at) = renewing();

        // The key changes while the renewal is in flight: that renewal's
        // "renewed" may predate the change, so it cannot settle the hold.
        invalidate(&wd, b"orders");
        apply(&wd.shared, &batch, Some(vec![1]), sent_at);
        let holds = wd.holds();
        let h = holds.get(&key).expect("still held");
        assert!(!h.renewing && !h.recheck);
        assert!(h.off_grid, "checked off the grid, not at the next round");
        let now = Instant::now();
        assert!(h.next_renew <= now && early(h) <= now, "due at once");
        assert_eq!(h.last_ok_sent, sent_at, "the renewal itself still counts");
    }

    #[test]
    fn a_renewal_without_an_invalidation_waits_for_the_grid() {
        let (wd, key, batch, sent_at) = renewing();

        // An invalidation for another key, and one for this key arriving
        // after the renewal was applied, are not the race.
        invalidate(&wd, b"other");
        apply(&wd.shared, &batch, Some(vec![1]), sent_at);
        {
            let holds = wd.holds();
            let h = holds.get(&key).expect("still held");
            assert!(!h.off_grid && !h.recheck);
            assert_eq!(h.next_renew, sent_at + LEASE / 3);
        }
        invalidate(&wd, b"orders");
        let holds = wd.holds();
        let h = holds.get(&key).expect("still held");
        assert!(
            h.off_grid && !h.recheck,
            "checked now, no second check owed"
        );
    }

    #[test]
    fn an_attempt_may_release_by_owner_only_when_the_owner_has_nothing_else_here() {
        let wd = idle_watchdog();
        let lease = Duration::from_secs(30);
        // Two handles acting as one owner: equal keys, separate strings.
        let first = orders();
        let second = orders();
        let now = Instant::now();
        let g = reg(&wd, &first, lease, true, None, now);
        let (_, g, epoch) = wd.confirm(&first, g, now, lease, true, None, 7, 1);
        // The second handle's attempt is cancelled: the first's guard holds.
        let attempt = reg(&wd, &second, lease, true, None, now);
        assert_eq!(attempt, g, "one entry per owner, whichever handle");
        assert!(
            !wd.deregister(&second, attempt, None, false).nothing,
            "a guard remains"
        );
        // Two attempts, no guard: only the last one out may release.
        assert!(
            wd.deregister(&first, g, Some((epoch, true)), false).nothing,
            "the guard was the last"
        );
        let a = reg(&wd, &first, lease, true, None, now);
        let b = reg(&wd, &second, lease, true, None, now);
        assert!(!wd.deregister(&first, a, None, false).nothing);
        assert!(wd.deregister(&second, b, None, false).nothing);
        assert_eq!(wd.len(), 0);
    }

    #[test]
    fn a_reply_for_an_older_entry_leaves_the_newer_hold_alone() {
        let (wd, key, batch, sent_at) = renewing();
        let old_lost = Arc::clone(&wd.holds().get(&key).expect("held").lost);
        // The hold is lost and forgotten, and the owner takes the lock again.
        wd.holds().remove(&key);
        let now = Instant::now();
        let g = reg(&wd, &key, LEASE, true, None, now);
        let (new_lost, _, _) = wd.confirm(&key, g, now, LEASE, true, None, 9, 1);
        // The old renewal's reply ("gone") arrives now.
        apply(&wd.shared, &batch, Some(vec![0]), sent_at);
        assert_eq!(new_lost.get(), None, "the new hold is not the one gone");
        assert_eq!(old_lost.get(), None, "nor was the old signal fired here");
        assert_eq!(wd.len(), 1);
    }

    #[test]
    fn a_renewal_with_a_lease_grown_meanwhile_does_not_move_the_deadline() {
        let (wd, key, batch, renewal_sent) = renewing();
        // A clone re-enters with a longer fixed lease while the renewal
        // (with the 30 s lease) is in flight; its reply is handled first.
        let longer = LEASE * 4;
        let g = reg(&wd, &key, longer, false, None, Instant::now());
        let reentry_sent = Instant::now();
        let (lost, _, _) = wd.confirm(&key, g, reentry_sent, longer, false, None, 1, 2);
        apply(&wd.shared, &batch, Some(vec![1]), renewal_sent);
        let holds = wd.holds();
        let h = holds.get(&key).expect("held");
        assert_eq!(h.lease, longer);
        // Counted from the re-entry's send, which guaranteed the longer
        // lease; the renewal guaranteed only the shorter one.
        assert_eq!(h.last_ok_sent, reentry_sent);
        assert!(h.off_grid, "renewed again at once with the longer lease");
        assert_eq!(lost.get(), None);
    }

    #[test]
    fn a_new_token_replaces_the_hold_and_old_replies_skip_it() {
        let (wd, key, batch, sent_at) = renewing();
        let old_lost = Arc::clone(&wd.holds().get(&key).expect("held").lost);
        // The hold vanished and a clone took the lock afresh (token 2 > 1).
        let now = Instant::now();
        let g = reg(&wd, &key, LEASE, true, None, now);
        let (new_lost, _, _) = wd.confirm(&key, g, now, LEASE, true, None, 2, 1);
        assert_eq!(old_lost.get(), Some(LossReason::Gone), "old guards told");
        // The old hold's renewal comes back "gone": about the old hold only.
        apply(&wd.shared, &batch, Some(vec![0]), sent_at);
        assert_eq!(new_lost.get(), None, "the new hold stands");
        assert_eq!(wd.len(), 1);
        // A late reply for an even older token (1) is a hold already gone:
        // its guard is told at once, the current hold is untouched.
        let g = reg(&wd, &key, LEASE, true, None, now);
        let (stale, _, _) = wd.confirm(&key, g, now, LEASE, true, None, 1, 1);
        assert_eq!(stale.get(), Some(LossReason::Gone));
        assert_eq!(new_lost.get(), None);
        assert_eq!(wd.holds().get(&key).expect("held").token, 2);
    }

    #[test]
    fn a_hold_after_every_guard_left_starts_afresh_without_false_losses() {
        let wd = idle_watchdog();
        let key = orders();
        let t0 = Instant::now();
        let g = reg(&wd, &key, LEASE, true, None, t0);
        let (_, g, epoch) = wd.confirm(&key, g, t0, LEASE, true, None, 1, 1);
        // A clone's attempt is in flight when the guard unlocks.
        let attempt = reg(&wd, &key, LEASE, true, None, t0);
        assert!(
            !wd.deregister(&key, g, Some((epoch, true)), false).nothing,
            "the attempt remains"
        );
        // Its reply: a fresh hold with a new token, not a re-entry.
        let t1 = Instant::now();
        let (fresh, _, _) = wd.confirm(&key, attempt, t1, LEASE, true, None, 2, 1);
        // Then a normal re-entry with that same token.
        let (again, _, _) = wd.confirm(&key, attempt, t1, LEASE, true, None, 2, 2);
        assert_eq!(fresh.get(), None);
        assert_eq!(again.get(), None);
        let holds = wd.holds();
        let h = holds.get(&key).expect("held");
        assert_eq!(h.token, 2);
        assert_eq!(h.registered_at, t1, "max hold counts from the new hold");
    }

    #[test]
    fn a_hold_released_while_a_lost_guard_lives_is_no_longer_renewed() {
        let (wd, key, batch, sent_at) = renewing();
        // The first hold is lost; its guard lives on (stale).
        apply(&wd.shared, &batch, Some(vec![0]), sent_at);
        // A clone takes a fresh hold A and unlocks it.
        let t1 = Instant::now();
        let a = reg(&wd, &key, LEASE, true, None, t1);
        let (a_lost, g, a_epoch) = wd.confirm(&key, a, t1, LEASE, true, None, 2, 1);
        assert_eq!(wd.len(), 1);
        assert!(
            !wd.deregister(&key, g, Some((a_epoch, true)), false).nothing,
            "the stale guard stays"
        );
        {
            let holds = wd.holds();
            let h = holds.get(&key).expect("kept for the stale guard");
            assert!(!h.confirmed, "released: not renewed any more");
        }
        assert_eq!(wd.len(), 0);
        assert_eq!(a_lost.get(), None, "a normal release is no loss");
        // With fencing off (token 0), a fresh hold B after that is a first
        // hold: its own lease, deadline base and max-hold start.
        let t2 = Instant::now();
        let b = reg(&wd, &key, LEASE / 2, false, None, t2);
        let (b_lost, _, _) = wd.confirm(&key, b, t2, LEASE / 2, false, None, 0, 1);
        let holds = wd.holds();
        let h = holds.get(&key).expect("held");
        assert_eq!((h.lease, h.renew), (LEASE / 2, false));
        assert_eq!((h.last_ok_sent, h.registered_at), (t2, t2));
        assert_eq!((h.guards, h.stale), (1, 1));
        assert_eq!(b_lost.get(), None);
    }

    #[test]
    fn a_watchdog_re_entry_renews_a_fixed_lease_only_until_it_is_released() {
        let wd = idle_watchdog();
        let key = orders();
        let t0 = Instant::now();
        let f = reg(&wd, &key, LEASE, false, None, t0);
        let (_, g, epoch) = wd.confirm(&key, f, t0, LEASE, false, None, 1, 1);
        assert!(!wd.holds().get(&key).expect("held").renew, "a fixed lease");
        let w = reg(&wd, &key, LEASE, true, None, t0);
        let _ = wd.confirm(&key, w, t0, LEASE, true, None, 1, 2);
        assert!(wd.holds().get(&key).expect("held").renew, "renewed for W");
        // W unlocks: F is a fixed lease again, and still held.
        assert!(!wd.deregister(&key, g, Some((epoch, true)), false).nothing);
        let holds = wd.holds();
        let h = holds.get(&key).expect("held");
        assert!(!h.renew && h.confirmed);
    }

    #[test]
    fn without_fencing_a_second_fresh_hold_is_a_vanished_one_not_a_re_entry() {
        let wd = idle_watchdog();
        let key = orders();
        let t0 = Instant::now();
        let g = reg(&wd, &key, LEASE, true, None, t0);
        let (first, _, _) = wd.confirm(&key, g, t0, LEASE, true, None, 0, 1);
        // Clones' replies out of order: the re-entry's (2) before the earlier
        // fresh one (1) must not look like a vanished hold.
        let b = reg(&wd, &key, LEASE, true, None, t0);
        let c = reg(&wd, &key, LEASE, true, None, t0);
        let _ = wd.confirm(&key, c, t0, LEASE, true, None, 0, 3);
        let _ = wd.confirm(&key, b, t0, LEASE, true, None, 0, 2);
        assert_eq!(first.get(), None);
        // All three released; a new first hold (1), then the key vanishes
        // and a clone's acquire reports 1 again: the hold was replaced.
        let epoch = wd.holds().get(&key).expect("held").epoch;
        for _ in 0..3 {
            let gen = wd.holds().get(&key).expect("held").generation;
            wd.deregister(&key, gen, Some((epoch, true)), false);
        }
        let t1 = Instant::now();
        let d = reg(&wd, &key, LEASE, true, None, t1);
        let (held, _, _) = wd.confirm(&key, d, t1, LEASE, true, None, 0, 1);
        let e = reg(&wd, &key, LEASE / 2, false, None, t1);
        let t2 = Instant::now();
        let (fresh, _, _) = wd.confirm(&key, e, t2, LEASE / 2, false, None, 0, 1);
        assert_eq!(held.get(), Some(LossReason::Gone), "the old hold vanished");
        assert_eq!(fresh.get(), None);
        let holds = wd.holds();
        let h = holds.get(&key).expect("held");
        assert_eq!(
            (h.lease, h.last_ok_sent),
            (LEASE / 2, t2),
            "its own deadline"
        );
    }

    #[test]
    fn a_late_reply_for_a_gone_token_is_stale_even_on_an_unconfirmed_entry() {
        let (wd, key, batch, sent_at) = renewing();
        // A re-entry of token 1 is in flight when the hold is found gone.
        let late = reg(&wd, &key, LEASE, true, None, Instant::now());
        apply(&wd.shared, &batch, Some(vec![0]), sent_at);
        let (lost, _, epoch) = wd.confirm(&key, late, Instant::now(), LEASE, true, None, 1, 2);
        assert_eq!(lost.get(), Some(LossReason::Gone), "that hold is gone");
        assert_eq!(epoch, 0);
        assert_eq!(wd.len(), 0, "nothing live is watched");
    }

    #[test]
    fn attempts_wait_while_a_release_by_owner_is_on_its_way() {
        let wd = idle_watchdog();
        let key = orders();
        let now = Instant::now();
        let a = wd.register(&key, LEASE, true, None, now).expect("free");
        // A cancelled attempt, the owner's last reference: it will release.
        assert!(wd.deregister(&key, a, None, true).nothing);
        assert!(
            wd.register(&key, LEASE, true, None, now).is_err(),
            "must wait"
        );
        assert_eq!(wd.len(), 0, "a marker, not a hold");
        wd.release_done(&key);
        assert!(wd.holds().is_empty(), "the marker is gone");
        let b = wd
            .register(&key, LEASE, true, None, now)
            .expect("may go on");
        // Even for an entry already forgotten, the release is announced.
        assert!(wd.deregister(&key, b, None, false).nothing);
        assert!(wd.deregister(&key, 0, None, true).nothing);
        assert!(wd.register(&key, LEASE, true, None, now).is_err());
        wd.release_done(&key);
        assert!(wd.register(&key, LEASE, true, None, now).is_ok());
    }

    #[test]
    fn a_renewal_that_finds_the_hold_gone_fires_lost_and_forgets_it() {
        let (wd, key, batch, sent_at) = renewing();
        let lost = Arc::clone(&wd.holds().get(&key).expect("held").lost);
        apply(&wd.shared, &batch, Some(vec![0]), sent_at);
        assert_eq!(lost.get(), Some(LossReason::Gone));
        assert_eq!(wd.len(), 0, "no longer watched");
        // Forgotten once its guard is gone.
        let generation = wd.holds().get(&key).expect("kept for its guard").generation;
        assert!(
            wd.deregister(&key, generation, Some((batch.epochs[0], true)), false)
                .nothing
        );
        assert!(wd.holds().is_empty());
    }

    #[test]
    fn a_lost_entry_keeps_counting_attempts_so_none_releases_a_fresh_hold() {
        let (wd, key, batch, sent_at) = renewing();
        let now = Instant::now();
        // Two attempts of clones in flight when the renewal finds it gone.
        let b = reg(&wd, &key, LEASE, true, None, now);
        let c = reg(&wd, &key, LEASE, true, None, now);
        apply(&wd.shared, &batch, Some(vec![0]), sent_at);
        // C is cancelled before it was written: B still counts, so C must
        // not release by owner (B may be taking a fresh hold right now).
        assert!(!wd.deregister(&key, c, None, false).nothing);
        // B's fresh hold is watched again, under a new epoch.
        let (lost, _, _) = wd.confirm(&key, b, Instant::now(), LEASE, true, None, 2, 1);
        assert_eq!(lost.get(), None);
        assert_eq!(wd.len(), 1);
    }
}
