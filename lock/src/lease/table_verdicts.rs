//! The engine's table, the other half: a call's verdicts applied to the
//! holds it was planned for (`table.rs` plans the calls).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::calls::Mark;
use super::super::hold::Hold;
use super::super::reason::LossReason;
use super::*;

impl Table {
    /// Where the entry a call was planned for is now: its slot then, unless
    /// that slot was reused (the hold ended and another took it), else
    /// found by name.
    fn slot_of(&self, hold: &Arc<Hold>, mark: Mark) -> Option<u32> {
        if self
            .sched
            .get(mark.slot)
            .is_some_and(|e| e.is(hold, mark.epoch))
        {
            return Some(mark.slot);
        }
        self.sched
            .find_named(hold.key.name(), |e| e.is(hold, mark.epoch))
    }

    /// A call's outcome: verdicts applied to the holds they were planned
    /// for (an older epoch's verdict touches nothing).
    pub(in crate::lease) fn apply(&mut self, done: Done) {
        match done {
            Done::Tracked { holds, found } => {
                let now = Instant::now();
                for ((h, mark), found) in holds.iter().zip(found) {
                    if h.epoch() != mark.epoch || !h.is_active() {
                        continue;
                    }
                    match found {
                        Some(false) => {
                            h.fire_because(LossReason::Gone, "a tracked read found the hold gone");
                        }
                        Some(true) => {}
                        None => self.read_again_later(h, *mark, now),
                    }
                }
            }
            Done::Judged {
                lease,
                sent_at,
                holds,
                verdicts,
                refresh,
            } => {
                let now = Instant::now();
                for ((h, mark), verdict) in holds.iter().zip(verdicts) {
                    let Some(slot) = self.slot_of(h, *mark) else {
                        continue;
                    };
                    if let Some(e) = self.sched.get_mut(slot) {
                        e.set(BUSY, false);
                    }
                    if h.epoch() != mark.epoch {
                        // Ended (perhaps revived under a new entry).
                        self.sched.remove(slot);
                        continue;
                    }
                    self.judged(slot, h, verdict, (lease, sent_at), refresh, now);
                }
            }
        }
    }

    /// A tracked read that failed (a dropped connection, a moved slot, a
    /// timeout) may have left the key untracked on the server, so no
    /// change would be pushed until the hold's next renewal (10 s at the
    /// default lease). The hold is read again after the pause an unknown
    /// renewal waits (a failing node must not make the task spin).
    fn read_again_later(&mut self, h: &Arc<Hold>, mark: Mark, now: Instant) {
        let Some(slot) = self.slot_of(h, mark) else {
            return;
        };
        let Some(e) = self.sched.get_mut(slot) else {
            return;
        };
        e.tracked = false;
        let pause = (h.lease() / 10).min(Duration::from_millis(500));
        self.sched.look(slot, now + pause, false);
    }

    /// One hold's verdict from a call with `lease` sent at `sent_at`.
    fn judged(
        &mut self,
        slot: u32,
        h: &Arc<Hold>,
        verdict: i64,
        (lease, sent_at): (Duration, Instant),
        refresh: bool,
        now: Instant,
    ) {
        let tracking = self.tracking;
        let Some(e) = self.sched.get_mut(slot) else {
            return;
        };
        let recheck = e.has(RECHECK);
        e.set(RECHECK, false);
        match verdict {
            1 => {
                let mut at_once = recheck;
                if !lease.is_zero() {
                    // The renewal's write untracked the key.
                    e.tracked = false;
                    if refresh {
                        e.set(COUNTER_FRESH, true);
                    }
                    h.extend(sent_at, lease);
                    e.set_next_renew(sent_at + lease / 3);
                    // A longer re-entry came meanwhile: renew with its
                    // lease now.
                    at_once |= lease < h.lease();
                }
                if at_once {
                    e.set_next_renew(now);
                    e.off_grid = true;
                }
                let next_renew = e.next_renew();
                let early = next_renew.checked_sub(lease / 6).unwrap_or(next_renew);
                let overdue = next_renew + lease / 6;
                let read_again = tracking && h.renewal().tracked && e.pushed && !e.tracked;
                let off_its_grid = !lease.is_zero() && e.grid() != Some(lease);
                let round = self.sched.round(lease);
                if at_once || read_again || off_its_grid {
                    // A visit now plans it (and queues it for its round).
                    self.sched.look(slot, now, false);
                } else if let Some(round) = round.filter(|_| !lease.is_zero()) {
                    // Renewed: it waits for its grid's next round, or its
                    // overdue time if the reply came so late that the
                    // round is later.
                    self.sched.queue(slot, early);
                    if overdue < round {
                        self.sched.look(slot, overdue, false);
                    }
                }
            }
            0 => {
                if h.is_active() {
                    h.fire_because(
                        LossReason::Gone,
                        "the renewal found the key gone, overwritten or held by another owner",
                    );
                }
                self.sched.remove(slot);
            }
            _ => {
                // Unknown: ask again after a pause (a node that fails fast
                // must not make the task spin); the deadline fires the
                // loss if nothing succeeds.
                let l = h.lease();
                let pause = (l / 10).min(Duration::from_millis(500));
                e.set_next_renew(now + pause + l / 6);
                e.off_grid = true;
                self.sched.look(slot, now + pause, false);
            }
        }
    }
}
