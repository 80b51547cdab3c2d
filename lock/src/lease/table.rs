//! The lease engine's state: the watched holds and the renewal grid, and
//! every transition of them (a hold handed over, an invalidation, a
//! planning pass, a call's verdicts). Pure logic, no I/O: the actor task
//! (`actor.rs`) feeds it and sends what it plans.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use keylatch_cluster::Invalidation;

use super::calls::Planned;
use super::reason::LossReason;
use super::renewal::RenewalRef;
use super::tuning::TRACK_AFTER;

/// How long a handed-over hold stays young: until it could need its
/// tracked read (nothing else of a hold is due sooner, but a loss deadline,
/// which is checked while young too).
const YOUNG: Duration = TRACK_AFTER;
use super::hold::Hold;

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

/// A finished call, back to the task.
pub(super) enum Done {
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

/// When to look again: the first renewal due, and the first loss deadline,
/// tracked read or max hold (these may not wait for the sleep floor).
#[derive(Default)]
pub(super) struct Wake {
    pub(super) renew: Option<Instant>,
    pub(super) urgent: Option<Instant>,
}

pub(super) fn earliest(a: Option<Instant>, b: Instant) -> Option<Instant> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// What one planning pass sends.
#[derive(Default)]
pub(super) struct Work {
    /// Renewals by (node or slot, kind, lease); checks under lease zero.
    pub(super) groups: HashMap<(Option<String>, u16, RenewalRef, Duration), Vec<Planned>>,
    pub(super) track: HashMap<(Option<String>, u16), Vec<Planned>>,
}

/// The watched holds by lock name (an invalidation names keys), and the
/// next grid round per lease.
#[derive(Default)]
pub(super) struct Table {
    /// Holds handed over less than [`YOUNG`] ago, in arrival order: most end
    /// here (released within microseconds), costing one push and one look,
    /// never a map entry.
    young: Vec<(Arc<Hold>, Instant)>,
    holds: HashMap<Arc<str>, Vec<Entry>>,
    grid: HashMap<Duration, Instant>,
    /// Invalidations are pushed: holds get a tracked read.
    tracking: bool,
}

impl Table {
    pub(super) fn new(tracking: bool) -> Self {
        Self {
            tracking,
            ..Self::default()
        }
    }

    /// A hold handed over: young at first, watched from its first due on.
    pub(super) fn insert(&mut self, hold: Arc<Hold>) {
        // Most holds of a busy process are released before the task sees
        // them: nothing to watch.
        if hold.is_active() {
            self.young.push((hold, Instant::now()));
        }
    }

    /// Young holds still held once [`YOUNG`] old (or `now` for those that
    /// `settle_now` picks) join the table; ended ones are dropped. Returns
    /// when the next young hold comes of age.
    fn grow_up(&mut self, now: Instant, settle_now: impl Fn(&Hold) -> bool) -> Option<Instant> {
        let mut next = None;
        let young = std::mem::take(&mut self.young);
        let mut kept = Vec::with_capacity(young.len());
        for (hold, since) in young {
            if !hold.is_active() {
                continue;
            }
            if now >= since + YOUNG || settle_now(&hold) {
                self.watch(hold, since);
            } else {
                next = earliest(next, since + YOUNG);
                kept.push((hold, since));
            }
        }
        // Keep the larger buffer: the next batch needs no allocation.
        self.young = kept;
        next
    }

    /// A hold joins the table, unless a newer hold of its owner is known
    /// (then it is lost at once); older ones of its owner are lost.
    fn watch(&mut self, hold: Arc<Hold>, since: Instant) {
        let entries = self.holds.entry(Arc::clone(hold.key.name())).or_default();
        let epoch = hold.epoch();
        if let Some(e) = entries
            .iter_mut()
            .find(|e| e.epoch == epoch && Weak::as_ptr(&e.hold) == Arc::as_ptr(&hold))
        {
            // Handed over again while watched (our own write untracked its
            // key): read it again, keep the renewal plan.
            e.tracked = false;
            return;
        }
        let mut stale = false;
        entries.retain(|e| {
            let Some(other) = e.hold.upgrade() else {
                return false;
            };
            if Arc::ptr_eq(&other, &hold) {
                // Handed over again (revived): the new entry replaces it.
                return false;
            }
            if other.key.owner() != hold.key.owner() || other.token == 0 || hold.token == 0 {
                // Another owner's, or a token unknown (taken while the
                // counter was missing): no order to judge by.
                return true;
            }
            if other.token < hold.token {
                // This owner holds a newer hold: the older one vanished
                // behind its guards (deleted, expired, taken and released).
                if other.is_active() {
                    other.fire_because(
                        LossReason::Gone,
                        "this owner took the lock again: the older hold vanished",
                    );
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
            hold.fire_because(
                LossReason::Gone,
                "a late acquire reply for a hold already replaced",
            );
            return;
        }
        entries.push(Entry {
            epoch: hold.epoch(),
            next_renew: since + hold.lease() / 3,
            busy: false,
            off_grid: false,
            recheck: false,
            tracked: false,
            since,
            hold: Arc::downgrade(&hold),
        });
    }

    /// Someone else changed (or the server expired) keys we hold: check
    /// those holds now instead of at their next renewal.
    pub(super) fn invalidated(&mut self, inv: &Invalidation) {
        let now = Instant::now();
        // Young holds are not tracked yet, but one named here (its key was
        // tracked for an earlier hold) is checked like the rest.
        if !self.young.is_empty() {
            self.grow_up(now, |h| match inv {
                Invalidation::All => true,
                Invalidation::Keys(keys) => {
                    keys.iter().any(|k| k.as_ref() == h.key.name().as_bytes())
                }
            });
        }
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
            Invalidation::All => self.holds.values_mut().for_each(&mut mark),
            Invalidation::Keys(keys) => {
                for k in keys {
                    let Ok(name) = std::str::from_utf8(k) else {
                        continue;
                    };
                    if let Some(entries) = self.holds.get_mut(name) {
                        mark(entries);
                    }
                }
            }
        }
    }

    /// This process changed lock `name` itself (no invalidation comes for
    /// our own writes): its holds are checked now, as for an invalidation.
    pub(super) fn touched(&mut self, name: &str) {
        let now = Instant::now();
        if !self.young.is_empty() {
            self.grow_up(now, |h| &**h.key.name() == name);
        }
        if let Some(entries) = self.holds.get_mut(name) {
            for e in entries {
                e.tracked = false;
                e.next_renew = now;
                e.off_grid = true;
                e.recheck = e.busy;
            }
        }
    }

    /// Signals losses that are due, drops holds that ended, and groups what
    /// is due: renewals, checks and tracked reads.
    ///
    /// `node_of` groups a slot's holds: by the node serving it (`Some`), by
    /// the slot itself when that is unknown, or all together standalone.
    pub(super) fn plan(
        &mut self,
        now: Instant,
        node_of: impl Fn(u16) -> (Option<String>, u16),
    ) -> (Work, Wake) {
        let mut wake = Wake::default();
        if let Some(next) = self.grow_up(now, |h| now >= h.deadline()) {
            wake.urgent = earliest(wake.urgent, next);
        }
        let mut pass = Pass {
            now,
            tracking: self.tracking,
            node_of: &node_of,
            work: Work::default(),
            wake,
            leases: Vec::new(),
            grid: &mut self.grid,
        };
        for entries in self.holds.values_mut() {
            entries.retain_mut(|e| pass.visit(e));
        }
        let Pass {
            work,
            mut wake,
            leases,
            ..
        } = pass;
        self.holds.retain(|_, v| !v.is_empty());
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

    fn entry(&mut self, hold: &Arc<Hold>, epoch: u64) -> Option<&mut Entry> {
        let entries = self.holds.get_mut(hold.key.name())?;
        entries
            .iter_mut()
            .find(|e| e.epoch == epoch && Weak::as_ptr(&e.hold) == Arc::as_ptr(hold))
    }

    /// A call's outcome: verdicts applied to the holds they were planned
    /// for (an older epoch's verdict touches nothing).
    pub(super) fn apply(&mut self, done: Done) {
        match done {
            Done::Tracked { holds, found } => {
                for ((h, epoch), found) in holds.iter().zip(found) {
                    if found == Some(false) && h.epoch() == *epoch && h.is_active() {
                        h.fire_because(LossReason::Gone, "a tracked read found the hold gone");
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
                                // The renewal's write untracked the key.
                                e.tracked = false;
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
                                h.fire_because(
                                    LossReason::Gone,
                                    "the renewal found the key gone, overwritten or held by another owner",
                                );
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

/// One planning pass: what it has gathered so far.
struct Pass<'a, F> {
    now: Instant,
    tracking: bool,
    /// Groups a slot's holds (see [`Table::plan`]).
    node_of: &'a F,
    work: Work,
    wake: Wake,
    /// Leases with renewed holds: a lease seen first starts its grid now.
    leases: Vec<Duration>,
    grid: &'a mut HashMap<Duration, Instant>,
}

impl<F: Fn(u16) -> (Option<String>, u16)> Pass<'_, F> {
    /// Looks at one entry: signals its loss if due, plans its tracked read,
    /// renewal or check if due; `false` drops it (ended or lost).
    #[inline]
    fn visit(&mut self, e: &mut Entry) -> bool {
        let Some(h) = e.hold.upgrade() else {
            return false;
        };
        if h.epoch() != e.epoch || !h.is_active() {
            return false;
        }
        if h.max_hold_end.is_some_and(|end| self.now >= end) {
            h.fire(LossReason::MaxHold);
            return false;
        }
        let deadline = h.deadline();
        if self.now >= deadline {
            h.fire(LossReason::Expired);
            return false;
        }
        self.wake.urgent = earliest(self.wake.urgent, deadline);
        if let Some(end) = h.max_hold_end {
            self.wake.urgent = earliest(self.wake.urgent, end);
        }
        if self.tracking && h.renewal.tracked && !e.tracked {
            if self.now >= e.since + TRACK_AFTER {
                e.tracked = true;
                let group = (self.node_of)(h.key.slot());
                self.work
                    .track
                    .entry(group)
                    .or_default()
                    .push((Arc::clone(&h), e.epoch));
            } else {
                self.wake.urgent = earliest(self.wake.urgent, e.since + TRACK_AFTER);
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
                let (node, slot) = (self.node_of)(h.key.slot());
                let group = (node, slot, RenewalRef(h.renewal), Duration::ZERO);
                self.work
                    .groups
                    .entry(group)
                    .or_default()
                    .push((Arc::clone(&h), e.epoch));
            }
            return true;
        }
        if !self.leases.contains(&lease) {
            self.leases.push(lease);
        }
        let round = *self.grid.entry(lease).or_insert(self.now);
        // In a grid round every hold renewed at least half an
        // interval ago goes (renewing early is harmless, and it keeps
        // holds in common rounds); off the grid only retries and
        // overdue holds.
        let early = e.next_renew.checked_sub(lease / 6).unwrap_or(e.next_renew);
        let overdue = e.next_renew + lease / 6;
        if self.now >= early && (self.now >= round || e.off_grid || self.now >= overdue) {
            e.busy = true;
            e.off_grid = false;
            let (node, slot) = (self.node_of)(h.key.slot());
            let group = (node, slot, RenewalRef(h.renewal), lease);
            self.work
                .groups
                .entry(group)
                .or_default()
                .push((Arc::clone(&h), e.epoch));
        } else if e.off_grid {
            self.wake.renew = earliest(self.wake.renew, early);
        } else {
            self.wake.renew = earliest(self.wake.renew, overdue);
        }
        true
    }
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
