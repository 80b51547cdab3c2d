//! The engine's task: owns the table of watched holds and the renewal grid;
//! every change to them happens here, in response to a message (a new hold,
//! an invalidation, a call's verdicts) or the clock.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use keylatch_cluster::{Client, Invalidation};
use tokio::sync::mpsc;

use super::calls::{run_batch, track, Batch, Planned};
use super::{
    EngineShared, Invalidations, LeaseKind, LossReason, BUSY_LOOK, RENEW_BATCH, TRACK_AFTER,
};
use crate::hold::{nanos, Hold};

/// The task's bookkeeping for one hold (the hold's own state is its atomics).
struct Entry {
    hold: Weak<Hold>,
    /// The hold's epoch when it was handed over: a hold that ended (and was
    /// perhaps revived, which hands it over again) no longer matches.
    epoch: u64,
    next_renew: Instant,
    /// A call about this hold is in flight.
    busy: bool,
    /// Look at it at `early()` without waiting for the grid: a call failed,
    /// or an invalidation asks for a check now.
    off_grid: bool,
    /// Invalidated while a call was in flight: that call may have been
    /// answered before the change, so check again after it.
    recheck: bool,
    /// A tracked read was made (or is in flight).
    tracked: bool,
    since: Instant,
}

/// What woke the task, besides the clock and new holds.
enum Event {
    /// An invalidation push; `None` once tracking's queue closed.
    Pushed(Option<Invalidation>),
    Done(Done),
}

/// A finished call, back to the task.
enum Done {
    /// Verdicts of a renewal (lease > 0) or check (lease zero).
    Judged {
        lease: Duration,
        sent_at: Instant,
        holds: Vec<Planned>,
        verdicts: Vec<i64>,
    },
    /// Tracked reads: whether each owner's field was there.
    Tracked {
        holds: Vec<Planned>,
        found: Vec<Option<bool>>,
    },
}

pub(super) struct Actor {
    client: Client,
    shared: Arc<EngineShared>,
    inbox: mpsc::UnboundedReceiver<Arc<Hold>>,
    invalidations: Option<Invalidations>,
    done_tx: mpsc::UnboundedSender<Done>,
    done_rx: mpsc::UnboundedReceiver<Done>,
    /// Watched holds by lock name (an invalidation names keys).
    table: HashMap<Arc<str>, Vec<Entry>>,
    /// The next grid round per lease.
    grid: HashMap<Duration, Instant>,
    idle_ms: Arc<str>,
}

/// When to look again: the first renewal due, and the first loss deadline,
/// tracked read or max hold (these may not wait for the sleep floor).
#[derive(Default)]
struct Wake {
    renew: Option<Instant>,
    urgent: Option<Instant>,
}

fn earliest(a: Option<Instant>, b: Instant) -> Option<Instant> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// What one planning pass sends.
#[derive(Default)]
struct Work {
    /// Renewals by (node or slot, kind, lease); checks under lease zero.
    groups: HashMap<(Option<String>, u16, LeaseKind, Duration), Vec<Planned>>,
    track: HashMap<(Option<String>, u16), Vec<Planned>>,
}

impl Actor {
    pub(super) fn new(
        client: Client,
        shared: Arc<EngineShared>,
        inbox: mpsc::UnboundedReceiver<Arc<Hold>>,
        invalidations: Option<Invalidations>,
        idle_ms: String,
    ) -> Self {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        Self {
            client,
            shared,
            inbox,
            invalidations,
            done_tx,
            done_rx,
            table: HashMap::new(),
            grid: HashMap::new(),
            idle_ms: Arc::from(idle_ms),
        }
    }

    pub(super) async fn run(mut self) {
        loop {
            // Until the real wake time is known, any hold handed over from
            // here on must wake the task (set before draining, so a hold
            // pushed just after the drain is not left unseen).
            self.shared.planned_wake.store(0, Ordering::Release);
            let Some(drained) = self.take_new_holds() else {
                return;
            };
            self.take_overflow();
            let now = Instant::now();
            let (work, mut wake) = self.plan(now);
            if drained > 0 {
                // Holds are arriving: look again soon, so the next ones
                // need no wake-up of their own (a task switch per acquire
                // under load, otherwise).
                wake.renew = earliest(wake.renew, now + BUSY_LOOK);
            }
            self.send(work);
            let next = match (wake.renew, wake.urgent) {
                (Some(r), Some(u)) => Some(r.min(u)),
                (r, u) => r.or(u),
            };
            // Renewals may wait 5 ms more (no spinning on near-due rounds); a
            // loss deadline may not: with a short lease, 5 ms would outrun
            // the drift allowance (2 ms + 1 %).
            let floor = if next.is_some() && next == wake.urgent {
                Duration::from_millis(1)
            } else {
                Duration::from_millis(5)
            };
            let sleep = next
                .map(|t| t.saturating_duration_since(Instant::now()))
                .unwrap_or(Duration::from_secs(1))
                .clamp(floor, Duration::from_secs(1));
            self.shared
                .planned_wake
                .store(nanos(Instant::now() + sleep), Ordering::Release);
            let inv = self.invalidations.as_mut();
            let pushed = async move {
                match inv {
                    Some(inv) => Some(inv.rx.recv().await),
                    None => std::future::pending().await,
                }
            };
            let done_rx = &mut self.done_rx;
            let event = tokio::select! {
                () = tokio::time::sleep(sleep) => None,
                () = self.shared.wake.notified() => None,
                inv = pushed => Some(Event::Pushed(inv.flatten())),
                Some(done) = done_rx.recv() => Some(Event::Done(done)),
            };
            match event {
                Some(Event::Pushed(Some(inv))) => self.invalidated(&inv),
                Some(Event::Pushed(None)) => self.invalidations = None,
                Some(Event::Done(done)) => self.apply(done),
                None => {}
            }
            // Whatever else is ready, at once.
            while let Ok(done) = self.done_rx.try_recv() {
                self.apply(done);
            }
        }
    }

    /// Moves handed-over holds into the table; how many came. `None` once
    /// every engine handle is gone: the task ends.
    fn take_new_holds(&mut self) -> Option<usize> {
        let mut n = 0;
        loop {
            match self.inbox.try_recv() {
                Ok(hold) => {
                    n += 1;
                    self.insert(hold);
                }
                Err(mpsc::error::TryRecvError::Empty) => return Some(n),
                Err(mpsc::error::TryRecvError::Disconnected) => return None,
            }
        }
    }

    fn insert(&mut self, hold: Arc<Hold>) {
        // Most holds of a busy process are released before the task sees
        // them: nothing to watch.
        if !hold.is_active() {
            return;
        }
        let entries = self.table.entry(Arc::clone(hold.key.name())).or_default();
        let mut stale = false;
        entries.retain(|e| {
            let Some(other) = e.hold.upgrade() else {
                return false;
            };
            if Arc::ptr_eq(&other, &hold) {
                // Handed over again (revived): the new entry replaces it.
                return false;
            }
            if other.key.owner() != hold.key.owner() {
                return true;
            }
            if other.token < hold.token {
                // This owner holds a newer hold: the older one vanished
                // behind its guards (deleted, expired, taken and released).
                if other.is_active() {
                    other.fire(LossReason::Gone);
                }
                return false;
            }
            if other.token > hold.token {
                stale = true;
            }
            true
        });
        if stale {
            // A late reply about a hold already replaced by a newer one.
            hold.fire(LossReason::Gone);
            return;
        }
        let now = Instant::now();
        entries.push(Entry {
            epoch: hold.epoch(),
            next_renew: now + hold.lease() / 3,
            busy: false,
            off_grid: false,
            recheck: false,
            tracked: false,
            since: now,
            hold: Arc::downgrade(&hold),
        });
    }

    /// Pushes that did not fit the queue: anything may have changed.
    fn take_overflow(&mut self) {
        let overflowed = self
            .invalidations
            .as_ref()
            .is_some_and(|inv| inv.overflow.swap(false, Ordering::AcqRel));
        if overflowed {
            self.invalidated(&Invalidation::All);
        }
    }

    /// Someone else changed (or the server expired) keys we hold: check
    /// those holds now instead of at their next renewal.
    fn invalidated(&mut self, inv: &Invalidation) {
        let now = Instant::now();
        let mut mark = |entries: &mut Vec<Entry>| {
            for e in entries {
                // Tracking is one-shot: read again after the check.
                e.tracked = false;
                e.next_renew = now;
                e.off_grid = true;
                e.recheck = e.busy;
            }
        };
        match inv {
            Invalidation::All => self.table.values_mut().for_each(&mut mark),
            Invalidation::Keys(keys) => {
                for k in keys {
                    let Ok(name) = std::str::from_utf8(k) else {
                        continue;
                    };
                    if let Some(entries) = self.table.get_mut(name) {
                        mark(entries);
                    }
                }
            }
        }
    }

    /// Signals losses that are due, drops holds that ended, and groups what
    /// is due: renewals, checks and tracked reads.
    fn plan(&mut self, now: Instant) -> (Work, Wake) {
        let cluster = self.client.is_cluster();
        let tracking = self.shared.tracking;
        let mut work = Work::default();
        let mut wake = Wake::default();
        // Leases with renewed holds: a lease seen first starts its grid now.
        let mut leases: Vec<Duration> = Vec::new();
        let client = &self.client;
        let grid = &mut self.grid;
        let node_of = |slot: u16| -> (Option<String>, u16) {
            if !cluster {
                return (None, 0);
            }
            match client.master_for_slot(slot) {
                Some(node) => (Some(node), 0),
                None => (None, slot),
            }
        };
        for entries in self.table.values_mut() {
            entries.retain_mut(|e| {
                let Some(h) = e.hold.upgrade() else {
                    return false;
                };
                if h.epoch() != e.epoch || !h.is_active() {
                    return false;
                }
                if h.max_hold_end.is_some_and(|end| now >= end) {
                    h.fire(LossReason::MaxHold);
                    return false;
                }
                let deadline = h.deadline();
                if now >= deadline {
                    h.fire(LossReason::Expired);
                    return false;
                }
                wake.urgent = earliest(wake.urgent, deadline);
                if let Some(end) = h.max_hold_end {
                    wake.urgent = earliest(wake.urgent, end);
                }
                if tracking && !e.tracked {
                    if now >= e.since + TRACK_AFTER {
                        e.tracked = true;
                        let group = node_of(h.key.slot());
                        work.track
                            .entry(group)
                            .or_default()
                            .push((Arc::clone(&h), e.epoch));
                    } else {
                        wake.urgent = earliest(wake.urgent, e.since + TRACK_AFTER);
                    }
                }
                if e.busy {
                    return true;
                }
                let lease = h.lease();
                if !h.renews() {
                    if e.off_grid {
                        // A fixed lease is never renewed, but an invalidation
                        // asks whether it still stands: a check, no expiry.
                        e.busy = true;
                        e.off_grid = false;
                        let (node, slot) = node_of(h.key.slot());
                        let group = (node, slot, h.kind, Duration::ZERO);
                        work.groups
                            .entry(group)
                            .or_default()
                            .push((Arc::clone(&h), e.epoch));
                    }
                    return true;
                }
                if !leases.contains(&lease) {
                    leases.push(lease);
                }
                let round = *grid.entry(lease).or_insert(now);
                // In a grid round every hold renewed at least half an
                // interval ago goes (renewing early is harmless, and it keeps
                // holds in common rounds); off the grid only retries and
                // overdue holds.
                let early = e.next_renew.checked_sub(lease / 6).unwrap_or(e.next_renew);
                let overdue = e.next_renew + lease / 6;
                if now >= early && (now >= round || e.off_grid || now >= overdue) {
                    e.busy = true;
                    e.off_grid = false;
                    let (node, slot) = node_of(h.key.slot());
                    let group = (node, slot, h.kind, lease);
                    work.groups
                        .entry(group)
                        .or_default()
                        .push((Arc::clone(&h), e.epoch));
                } else if e.off_grid {
                    wake.renew = earliest(wake.renew, early);
                } else {
                    wake.renew = earliest(wake.renew, overdue);
                }
                true
            });
        }
        self.table.retain(|_, v| !v.is_empty());
        self.grid.retain(|lease, _| leases.contains(lease));
        for (lease, round) in self.grid.iter_mut() {
            let interval = *lease / 3;
            if now >= *round {
                // Next round one interval on; a task that slept past it
                // starts again from now rather than firing twice.
                *round += interval;
                if *round <= now {
                    *round = now + interval;
                }
            }
            wake.renew = earliest(wake.renew, *round);
        }
        (work, wake)
    }

    /// Starts the planned calls; each runs on its own and reports back.
    fn send(&self, work: Work) {
        let cluster = self.client.is_cluster();
        let mut renewed = false;
        for ((node, _, kind, lease), holds) in work.groups {
            for chunk in holds.chunks(RENEW_BATCH) {
                renewed |= !lease.is_zero();
                let batch = Batch {
                    kind,
                    lease,
                    holds: chunk.to_vec(),
                    cluster,
                    on_node: node.is_some(),
                };
                let (client, shared, tx) = (
                    self.client.clone(),
                    Arc::clone(&self.shared),
                    self.done_tx.clone(),
                );
                let idle_ms = Arc::clone(&self.idle_ms);
                tokio::spawn(async move {
                    let sent_at = Instant::now();
                    let (verdicts, calls) = run_batch(&client, &batch, &idle_ms).await;
                    shared.renew_calls.fetch_add(calls, Ordering::Relaxed);
                    let _ = tx.send(Done::Judged {
                        lease: batch.lease,
                        sent_at,
                        holds: batch.holds,
                        verdicts,
                    });
                    shared.wake.notify_one();
                });
            }
        }
        if renewed {
            self.shared.renew_rounds.fetch_add(1, Ordering::Relaxed);
        }
        for (_, holds) in work.track {
            for chunk in holds.chunks(RENEW_BATCH) {
                let holds = chunk.to_vec();
                let (client, tx) = (self.client.clone(), self.done_tx.clone());
                tokio::spawn(async move {
                    let found = track(&client, &holds).await;
                    let _ = tx.send(Done::Tracked { holds, found });
                });
            }
        }
    }

    fn entry(&mut self, hold: &Arc<Hold>, epoch: u64) -> Option<&mut Entry> {
        let entries = self.table.get_mut(hold.key.name())?;
        entries
            .iter_mut()
            .find(|e| e.epoch == epoch && Weak::as_ptr(&e.hold) == Arc::as_ptr(hold))
    }

    fn apply(&mut self, done: Done) {
        match done {
            Done::Tracked { holds, found } => {
                for ((h, epoch), found) in holds.iter().zip(found) {
                    if found == Some(false) && h.epoch() == *epoch && h.is_active() {
                        h.fire(LossReason::Gone);
                    }
                }
            }
            Done::Judged {
                lease,
                sent_at,
                holds,
                verdicts,
            } => {
                let now = Instant::now();
                for ((h, epoch), verdict) in holds.iter().zip(verdicts) {
                    let Some(e) = self.entry(h, *epoch) else {
                        continue;
                    };
                    e.busy = false;
                    if h.epoch() != *epoch {
                        continue;
                    }
                    let recheck = std::mem::take(&mut e.recheck);
                    match verdict {
                        1 => {
                            if !lease.is_zero() {
                                h.extend(sent_at, lease);
                                e.next_renew = sent_at + lease / 3;
                                if lease < h.lease() {
                                    // A longer re-entry came meanwhile: renew
                                    // with its lease now.
                                    e.next_renew = now;
                                    e.off_grid = true;
                                }
                            }
                            if recheck {
                                e.next_renew = now;
                                e.off_grid = true;
                            }
                        }
                        0 => {
                            if h.is_active() {
                                h.fire(LossReason::Gone);
                            }
                        }
                        _ => {
                            // Unknown: ask again after a pause (a node that
                            // fails fast must not make the task spin); the
                            // deadline fires the loss if nothing succeeds.
                            let l = h.lease();
                            e.next_renew = now + (l / 10).min(Duration::from_millis(500)) + l / 6;
                            e.off_grid = true;
                        }
                    }
                }
            }
        }
    }
}
