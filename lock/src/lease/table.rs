//! The lease engine's state: the watched holds and the renewal grid, and
//! every transition of them (a hold handed over, an invalidation, a
//! planning pass, a call's verdicts). Pure logic, no I/O: the actor task
//! (`actor.rs`) feeds it and sends what it plans. When each hold is next
//! due is kept by the schedule (`schedule.rs`): a pass visits the holds
//! that are due and no others.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::Invalidation;

use super::calls::{Mark, Planned};
use super::entry::{BUSY, COUNTER_FRESH, RECHECK};
use super::hold::Hold;
use super::reason::LossReason;
use super::renewal::{Renewal, RenewalRef};
use super::schedule::{Entry, Schedule};
use super::tuning::TRACK_AFTER;

/// How long a handed-over hold stays young: until it could need its
/// tracked read (nothing else of a hold is due sooner, but a loss deadline,
/// which is checked while young too).
const YOUNG: Duration = TRACK_AFTER;

/// A finished call, back to the task.
pub(super) enum Done {
    /// Verdicts of a renewal (lease > 0) or check (lease zero).
    Judged {
        lease: Duration,
        sent_at: Instant,
        holds: Vec<Planned>,
        verdicts: Vec<i64>,
        /// The call refreshed the fencing counters' idle expiry.
        refresh: bool,
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

/// What calls a group of planned holds shares: the node (or slot), the
/// kind's renewal, the lease, and whether the counters' idle expiry is
/// refreshed.
pub(super) type GroupKey = (Option<String>, u16, RenewalRef, Duration, bool);

/// What one planning pass sends.
#[derive(Default)]
pub(super) struct Work {
    /// Renewals by [`GroupKey`]; checks under lease zero.
    pub(super) groups: HashMap<GroupKey, Vec<Planned>>,
    pub(super) track: HashMap<(Option<String>, u16), Vec<Planned>>,
}

/// The watched holds (by lock name, for invalidations; by due time, for
/// passes: the schedule), and the young ones not watched yet.
#[derive(Default)]
pub(super) struct Table {
    /// Holds handed over less than [`YOUNG`] ago, in arrival order: most end
    /// here (released within microseconds), costing one push and one look,
    /// never a map entry.
    young: Vec<(Arc<Hold>, Instant)>,
    sched: Schedule,
    /// Invalidations are pushed: holds get a tracked read.
    tracking: bool,
    /// At most this many holds are tracked (`LocksConfig::tracked_holds`).
    track_budget: usize,
    /// The counter window is open: every renewal refreshes its counter.
    refresh_all: bool,
    /// Entries the last pass visited (the tests check that a pass visits
    /// what is due and nothing else).
    #[cfg(test)]
    pub(super) visited: usize,
}

impl Table {
    pub(super) fn new(tracking: bool) -> Self {
        Self {
            tracking,
            track_budget: usize::MAX,
            ..Self::default()
        }
    }

    /// At most `n` holds tracked at a time; the others are judged by their
    /// renewals only.
    pub(super) fn track_budget(mut self, n: usize) -> Self {
        self.track_budget = n;
        self
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
    /// (then it is lost at once); older ones of its owner are lost. Its
    /// first look is at once (`since` has passed).
    fn watch(&mut self, hold: Arc<Hold>, since: Instant) {
        let epoch = hold.epoch();
        let slots = self.sched.named(hold.key.name());
        let same = slots
            .iter()
            .copied()
            .find(|&s| self.sched.get(s).is_some_and(|e| e.is(&hold, epoch)));
        if let Some(slot) = same {
            // Handed over again while watched (our own write untracked its
            // key, or a watchdog guard joined it): read it again, keep the
            // renewal plan, and look at it now (it may renew from now on).
            if let Some(e) = self.sched.get_mut(slot) {
                e.tracked = false;
            }
            self.sched.look(slot, since, true);
            return;
        }
        let mut stale = false;
        for slot in slots {
            let Some(other) = self.sched.get(slot).map(|e| e.hold.upgrade()) else {
                continue;
            };
            let Some(other) = other else {
                self.sched.remove(slot);
                continue;
            };
            if Arc::ptr_eq(&other, &hold) {
                // Handed over again (revived): the new entry replaces it.
                self.sched.remove(slot);
                continue;
            }
            if other.key.owner() != hold.key.owner() || other.token == 0 || hold.token == 0 {
                // Another owner's, or a token unknown (taken while the
                // counter was missing): no order to judge by.
                continue;
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
                self.sched.remove(slot);
                continue;
            }
            if other.token > hold.token {
                stale = true;
            }
        }
        if stale {
            // A late reply about a hold already replaced by a newer one.
            hold.fire_because(
                LossReason::Gone,
                "a late acquire reply for a hold already replaced",
            );
            return;
        }
        let mut entry = Entry::new(&hold, since);
        // A counter its acquire made lives its whole idle expiry from
        // `since`: the first renewal need not refresh it (a renewal that
        // does costs the server about half as much again). Only for the
        // hold's first watch under the watchdog: a revived hold, or a
        // fixed lease that a watchdog guard joins later, may be far older.
        entry.set(
            COUNTER_FRESH,
            hold.counter_made() && hold.renews() && hold.epoch() == 0,
        );
        entry.pushed =
            self.tracking && hold.renewal().tracked && self.sched.pushed() < self.track_budget;
        let slot = self.sched.add(entry);
        self.sched.look(slot, since, true);
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
        match inv {
            Invalidation::All => {
                for slot in self.sched.all() {
                    self.check_now(slot, now);
                }
            }
            Invalidation::Keys(keys) => {
                for k in keys {
                    if let Ok(name) = std::str::from_utf8(k) {
                        self.check_named(name, now);
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
        self.check_named(name, now);
    }

    fn check_named(&mut self, name: &str, now: Instant) {
        // A check changes no entry's name.
        for slot in self.sched.named(name) {
            self.check_now(slot, now);
        }
    }

    /// A hold to check at once (off the grid; after its call in flight).
    fn check_now(&mut self, slot: u32, now: Instant) {
        let Some(e) = self.sched.get_mut(slot) else {
            return;
        };
        // Tracking is one-shot: read again after the check.
        e.tracked = false;
        e.set_next_renew(now);
        e.off_grid = true;
        let busy = e.has(BUSY);
        e.set(RECHECK, busy);
        self.sched.look(slot, now, false);
    }

    /// Signals losses that are due, drops holds that ended, and groups what
    /// is due: renewals, checks and tracked reads. Visits only the holds
    /// the schedule says are due.
    ///
    /// `node_of` groups a slot's holds: by the node serving it (`Some`), by
    /// the slot itself when that is unknown, or all together standalone.
    /// `refresh_all`: the counter window is open (see the actor), so every
    /// renewal planned refreshes its fencing counter's idle expiry; outside
    /// it only a hold's first renewal does (not when its acquire made the
    /// counter).
    pub(super) fn plan(
        &mut self,
        now: Instant,
        refresh_all: bool,
        node_of: impl Fn(u16) -> (Option<String>, u16),
    ) -> (Work, Wake) {
        self.refresh_all = refresh_all;
        let mut wake = Wake::default();
        if let Some(next) = self.grow_up(now, |h| now >= h.deadline()) {
            wake.urgent = earliest(wake.urgent, next);
        }
        #[cfg(test)]
        {
            self.visited = 0;
        }
        let mut work = Work::default();
        for slot in self.sched.take_due(now) {
            self.visit(slot, now, &node_of, &mut work);
        }
        self.sched.sweep(now);
        if let Some(round) = self.sched.advance(now) {
            wake.renew = earliest(wake.renew, round);
        }
        match self.sched.next_look() {
            Some((at, true)) => wake.urgent = earliest(wake.urgent, at),
            Some((at, false)) => wake.renew = earliest(wake.renew, at),
            None => {}
        }
        self.sched.compact();
        (work, wake)
    }

    /// Looks at one due entry: signals its loss if due, plans its tracked
    /// read, renewal or check if due, drops it if it ended or was lost, and
    /// schedules its next look.
    fn visit<F: Fn(u16) -> (Option<String>, u16)>(
        &mut self,
        slot: u32,
        now: Instant,
        node_of: &F,
        work: &mut Work,
    ) {
        #[cfg(test)]
        {
            self.visited += 1;
        }
        let Some(h) = self.sched.get(slot).map(Entry::live) else {
            return;
        };
        let Some(h) = h else {
            self.sched.remove(slot);
            return;
        };
        if h.max_hold_end().is_some_and(|end| now >= end) {
            h.fire(LossReason::MaxHold);
            self.sched.remove(slot);
            return;
        }
        let deadline = h.deadline();
        if now >= deadline {
            h.fire(LossReason::Expired);
            self.sched.remove(slot);
            return;
        }
        // A loss by time is judged at its time: every entry keeps a look
        // no later than its deadline.
        let mut look = (
            h.max_hold_end().map_or(deadline, |end| end.min(deadline)),
            true,
        );
        if let Some(at) = self.plan_track(slot, &h, now, node_of, work) {
            look.0 = look.0.min(at);
        }
        if let Some(at) = self.plan_renewal(slot, &h, now, node_of, work) {
            if at < look.0 {
                look = (at, false);
            }
        }
        self.sched.look(slot, look.0, look.1);
    }

    /// Plans the hold's tracked read if it needs one now; returns when it
    /// will need one, if later.
    fn plan_track<F: Fn(u16) -> (Option<String>, u16)>(
        &mut self,
        slot: u32,
        h: &Arc<Hold>,
        now: Instant,
        node_of: &F,
        work: &mut Work,
    ) -> Option<Instant> {
        let tracking = self.tracking;
        let e = self.sched.get_mut(slot)?;
        if !tracking || !h.renewal().tracked || !e.pushed || e.tracked {
            return None;
        }
        let at = e.since() + TRACK_AFTER;
        if now < at {
            return Some(at);
        }
        e.tracked = true;
        let group = node_of(h.key.slot());
        work.track.entry(group).or_default().push((
            Arc::clone(h),
            Mark {
                epoch: e.epoch,
                slot,
            },
        ));
        None
    }

    /// Plans the hold's renewal (or a fixed lease's check) if due; else
    /// queues it for its grid's round, and returns when to look at it
    /// off the grid, if it must be.
    fn plan_renewal<F: Fn(u16) -> (Option<String>, u16)>(
        &mut self,
        slot: u32,
        h: &Arc<Hold>,
        now: Instant,
        node_of: &F,
        work: &mut Work,
    ) -> Option<Instant> {
        if self.sched.get(slot)?.has(BUSY) {
            return None;
        }
        let lease = if h.renews() {
            h.lease()
        } else {
            // A fixed lease is never renewed, but an invalidation asks
            // whether it still stands: a check, no expiry.
            self.sched.unjoin(slot);
            Duration::ZERO
        };
        let round = if lease.is_zero() {
            now
        } else {
            self.sched.join(slot, lease, now)
        };
        let e = self.sched.get_mut(slot)?;
        // In a grid round every hold renewed at least half an interval ago
        // goes (renewing early is harmless, and it keeps holds in common
        // rounds); off the grid only retries and overdue holds.
        let next_renew = e.next_renew();
        let early = next_renew.checked_sub(lease / 6).unwrap_or(next_renew);
        let overdue = next_renew + lease / 6;
        let due = if lease.is_zero() {
            e.off_grid
        } else {
            now >= early && (now >= round || e.off_grid || now >= overdue)
        };
        if due {
            e.set(BUSY, true);
            e.off_grid = false;
            let refresh = !lease.is_zero() && (self.refresh_all || !e.has(COUNTER_FRESH));
            let renewal = renewal_for(e, h, lease, refresh);
            let (node, s) = node_of(h.key.slot());
            work.groups
                .entry((node, s, RenewalRef(renewal), lease, refresh))
                .or_default()
                .push((
                    Arc::clone(h),
                    Mark {
                        epoch: e.epoch,
                        slot,
                    },
                ));
            // Off the grid, perhaps: its round must not look at it again.
            self.sched.dequeue(slot);
            return None;
        }
        if lease.is_zero() {
            return None;
        }
        if e.off_grid {
            return Some(early);
        }
        self.sched.queue(slot, early);
        // A round comes by the overdue time (the grid moves an interval at
        // a time), unless the reply that set it came late: then by overdue.
        (overdue < round).then_some(overdue)
    }
}

/// The renewal a planned call judges `h` with. A plain renewal of a hold
/// nobody can have replaced judges it by owner alone (no counter read: two
/// calls, not three), but for one renewal in `TOKEN_EVERY`; a check, a
/// counter refresh and every other hold read the token.
fn renewal_for(e: &mut Entry, h: &Hold, lease: Duration, refresh: bool) -> &'static Renewal {
    match h.renewal().by_owner {
        Some(lighter) if !lease.is_zero() && !refresh && h.key.by_owner() && e.owner_turn() => {
            lighter
        }
        _ => {
            e.token_judged();
            h.renewal()
        }
    }
}

#[path = "table_verdicts.rs"]
mod verdicts;

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod schedule_tests;

#[cfg(test)]
#[path = "table_bench_tests.rs"]
mod bench_tests;
