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
mod tests {
    use super::*;
    use crate::hold_key::HoldKey;
    use crate::lease::hold::NewHold;
    use std::sync::atomic::AtomicUsize;

    const LEASE: Duration = Duration::from_secs(30);

    fn hold(name: &str, owner: &str, token: u64, renew: bool, sent_at: Instant) -> Arc<Hold> {
        Hold::new(NewHold {
            key: HoldKey::new(Arc::from(name), Arc::from(owner)),
            counter: Arc::from(format!("redisson_lock_token:{{{name}}}")),
            token,
            renewal: &crate::lock::HASH_LEASE,
            renew,
            lease: LEASE,
            sent_at,
            max_hold: None,
            drift_permille: 10,
            live: Arc::new(AtomicUsize::new(0)),
        })
    }

    fn standalone(_: u16) -> (Option<String>, u16) {
        (None, 0)
    }

    /// Lets every young hold join the table (nothing else is due yet).
    fn settle(t: &mut Table) {
        t.grow_up(Instant::now() + YOUNG, |_| false);
    }

    /// The holds planned for renewal (lease > 0) or check (lease zero).
    fn planned(work: &Work, check: bool) -> Vec<Planned> {
        work.groups
            .iter()
            .filter(|((_, _, _, lease), _)| lease.is_zero() == check)
            .flat_map(|(_, v)| v.iter().cloned())
            .collect()
    }

    #[test]
    fn a_newer_token_of_the_owner_ends_the_older_hold_and_a_late_older_one_is_lost() {
        let now = Instant::now();
        let mut t = Table::new(false);
        let old = hold("orders", "c:1", 5, true, now);
        let other_owner = hold("orders", "c:2", 4, true, now);
        t.insert(Arc::clone(&old));
        t.insert(Arc::clone(&other_owner));
        settle(&mut t);
        let new = hold("orders", "c:1", 9, true, now);
        t.insert(Arc::clone(&new));
        settle(&mut t);
        assert_eq!(old.lost.get(), Some(LossReason::Gone), "replaced behind it");
        assert_eq!(new.lost.get(), None);
        assert_eq!(
            other_owner.lost.get(),
            None,
            "another owner: not ours to judge"
        );
        // A reply about an even older hold arrives late: gone from the start.
        let late = hold("orders", "c:1", 7, true, now);
        t.insert(Arc::clone(&late));
        settle(&mut t);
        assert_eq!(late.lost.get(), Some(LossReason::Gone));
        assert_eq!(new.lost.get(), None);
        // The same hold through another handle (equal token): both watched.
        let twin = hold("orders", "c:1", 9, true, now);
        t.insert(Arc::clone(&twin));
        settle(&mut t);
        assert_eq!((new.lost.get(), twin.lost.get()), (None, None));
    }

    #[test]
    fn an_ended_hold_is_dropped_and_a_revived_one_watched_anew() {
        let now = Instant::now();
        let mut t = Table::new(false);
        let h = hold("orders", "c:1", 1, true, now);
        t.insert(Arc::clone(&h));
        assert!(h.leave(true), "the last guard");
        let (work, _) = t.plan(now + LEASE / 3, standalone);
        assert!(
            planned(&work, false).is_empty(),
            "an ended hold is not renewed"
        );
        assert!(t.holds.is_empty());
        // A late re-entry reply with its token revives it: handed over again.
        assert!(h.join(true, now, LEASE));
        t.insert(Arc::clone(&h));
        let (work, _) = t.plan(now + LEASE / 3, standalone);
        assert_eq!(planned(&work, false).len(), 1);
        // Handed over twice while watched: one entry, not two.
        t.insert(Arc::clone(&h));
        settle(&mut t);
        assert_eq!(t.holds.get("orders").map(Vec::len), Some(1));
    }

    #[test]
    fn a_verdict_applies_only_to_the_epoch_it_was_planned_for() {
        let now = Instant::now();
        let mut t = Table::new(false);
        let h = hold("orders", "c:1", 1, true, now);
        t.insert(Arc::clone(&h));
        let at = now + LEASE / 3;
        let (work, _) = t.plan(at, standalone);
        let stale = planned(&work, false);
        assert_eq!(stale.len(), 1);
        // The hold ends and is revived (a re-entry) while that call is out.
        h.leave(true);
        h.join(true, at, LEASE);
        t.insert(Arc::clone(&h));
        t.apply(Done::Judged {
            lease: LEASE,
            sent_at: at,
            holds: stale,
            verdicts: vec![0],
        });
        assert_eq!(h.lost.get(), None, "the old epoch's 'gone' is not about it");
        // Its own renewal finds it gone: lost.
        let (work, _) = t.plan(at + LEASE / 3, standalone);
        let current = planned(&work, false);
        assert_eq!(current.len(), 1);
        t.apply(Done::Judged {
            lease: LEASE,
            sent_at: at,
            holds: current,
            verdicts: vec![0],
        });
        assert_eq!(h.lost.get(), Some(LossReason::Gone));
    }

    #[test]
    fn a_renewal_moves_the_deadline_and_an_unknown_verdict_retries_later() {
        let now = Instant::now();
        let mut t = Table::new(false);
        let h = hold("orders", "c:1", 1, true, now);
        t.insert(Arc::clone(&h));
        let before = h.deadline();
        let at = now + LEASE / 3;
        let (work, _) = t.plan(at, standalone);
        t.apply(Done::Judged {
            lease: LEASE,
            sent_at: at,
            holds: planned(&work, false),
            verdicts: vec![1],
        });
        assert_eq!(h.deadline(), before + LEASE / 3);
        let (work, _) = t.plan(at, standalone);
        assert!(planned(&work, false).is_empty(), "renewed: not due again");
        // A failed call (-1) is retried after a pause, not at once.
        let later = at + LEASE / 3;
        let (work, _) = t.plan(later, standalone);
        t.apply(Done::Judged {
            lease: LEASE,
            sent_at: later,
            holds: planned(&work, false),
            verdicts: vec![-1],
        });
        assert_eq!(h.lost.get(), None);
        // (The retry time counts from the verdict's arrival, the real now.)
        let (work, _) = t.plan(Instant::now(), standalone);
        assert!(
            planned(&work, false).is_empty(),
            "no spinning on a failing node"
        );
    }

    #[test]
    fn an_invalidation_checks_only_the_named_lock_and_a_fixed_lease_is_only_checked() {
        let now = Instant::now();
        let mut t = Table::new(true);
        let a = hold("a", "c:1", 1, true, now);
        let b = hold("b", "c:1", 2, true, now);
        let fixed = hold("f", "c:1", 3, false, now);
        for h in [&a, &b, &fixed] {
            t.insert(Arc::clone(h));
        }
        let soon = now + Duration::from_millis(1);
        let (work, _) = t.plan(soon, standalone);
        assert!(work.track.is_empty(), "younger than TRACK_AFTER");
        t.invalidated(&Invalidation::Keys(vec![
            bytes::Bytes::from_static(b"a"),
            bytes::Bytes::from_static(b"f"),
        ]));
        let (work, _) = t.plan(soon, standalone);
        let renewed: Vec<u64> = planned(&work, false).iter().map(|(h, _)| h.token).collect();
        let checked: Vec<u64> = planned(&work, true).iter().map(|(h, _)| h.token).collect();
        assert_eq!(renewed, vec![1], "only the named lock, at once");
        assert_eq!(checked, vec![3], "a fixed lease: checked, never extended");
        // Everything may have changed: every idle hold is looked at.
        t.invalidated(&Invalidation::All);
        let (work, _) = t.plan(soon, standalone);
        assert_eq!(planned(&work, false).len(), 1, "b; a's call is still out");
    }

    #[test]
    fn holds_are_tracked_once_old_enough_and_a_tracked_read_can_find_them_gone() {
        let now = Instant::now();
        let mut t = Table::new(true);
        let h = hold("orders", "c:1", 1, false, now);
        t.insert(Arc::clone(&h));
        let (work, wake) = t.plan(now, standalone);
        assert!(work.track.is_empty());
        assert!(wake
            .urgent
            .is_some_and(|w| w <= now + TRACK_AFTER + Duration::from_millis(5)));
        let (work, _) = t.plan(now + TRACK_AFTER * 2, standalone);
        let tracked: Vec<Planned> = work.track.into_values().flatten().collect();
        assert_eq!(tracked.len(), 1);
        t.apply(Done::Tracked {
            holds: tracked,
            found: vec![Some(false)],
        });
        assert_eq!(h.lost.get(), Some(LossReason::Gone));
    }

    #[test]
    fn a_passed_deadline_or_max_hold_fires_the_loss() {
        let long_ago = Instant::now() - LEASE * 2;
        let mut t = Table::new(false);
        let h = hold("orders", "c:1", 1, true, long_ago);
        t.insert(Arc::clone(&h));
        t.plan(Instant::now(), standalone);
        assert_eq!(h.lost.get(), Some(LossReason::Expired));
        assert!(t.holds.is_empty());
    }
}
