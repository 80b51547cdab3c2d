//! Unit tests of the engine's table: every transition of a hold's plan.

use super::super::key::HoldKey;
use super::*;
use crate::lease::hold::NewHold;

pub(super) const LEASE: Duration = Duration::from_secs(30);

pub(super) fn hold(
    name: &str,
    owner: &str,
    token: u64,
    renew: bool,
    sent_at: Instant,
) -> Arc<Hold> {
    Hold::new(NewHold {
        key: HoldKey::new(
            Arc::from(name),
            crate::owner::Owner::given(owner),
            &crate::lock::HASH_LEASE,
        ),
        token,
        renew,
        lease: LEASE,
        sent_at,
        max_hold: None,
        drift_permille: 10,
        counters: Arc::new(crate::lease::Counters::default()),
        counter_made: false,
    })
}

pub(super) fn standalone(_: u16) -> (Option<String>, u16) {
    (None, 0)
}

/// Lets every young hold join the table (nothing else is due yet).
pub(super) fn settle(t: &mut Table) {
    t.grow_up(Instant::now() + YOUNG, |_| false);
}

/// The holds planned for renewal (lease > 0) or check (lease zero).
pub(super) fn planned(work: &Work, check: bool) -> Vec<Planned> {
    work.groups
        .iter()
        .filter(|((_, _, _, lease, _), _)| lease.is_zero() == check)
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
    assert_eq!(old.loss.get(), Some(LossReason::Gone), "replaced behind it");
    assert_eq!(new.loss.get(), None);
    assert_eq!(
        other_owner.loss.get(),
        None,
        "another owner: not ours to judge"
    );
    // A reply about an even older hold arrives late: gone from the start.
    let late = hold("orders", "c:1", 7, true, now);
    t.insert(Arc::clone(&late));
    settle(&mut t);
    assert_eq!(late.loss.get(), Some(LossReason::Gone));
    assert_eq!(new.loss.get(), None);
    // The same hold through another handle (equal token): both watched.
    let twin = hold("orders", "c:1", 9, true, now);
    t.insert(Arc::clone(&twin));
    settle(&mut t);
    assert_eq!((new.loss.get(), twin.loss.get()), (None, None));
}

#[test]
fn a_reply_finds_its_entry_by_name_when_its_slot_holds_another_hold() {
    let now = Instant::now();
    let mut t = Table::new(false);
    let a = hold("a", "c:1", 1, true, now);
    let b = hold("b", "c:2", 2, true, now);
    t.insert(Arc::clone(&a));
    t.insert(Arc::clone(&b));
    let (work, _) = t.plan(now + LEASE / 3, false, standalone);
    let sent = planned(&work, false);
    let mark_of = |h: &Arc<Hold>| {
        sent.iter()
            .find(|(p, _)| Arc::ptr_eq(p, h))
            .map(|&(_, m)| m)
            .expect("planned")
    };
    let (ma, mb) = (mark_of(&a), mark_of(&b));
    assert_ne!(ma.slot, mb.slot);
    // a's reply names b's slot (as when a's slot was reused by b): "gone"
    // is a's, found by name, never b's.
    t.apply(Done::Judged {
        lease: LEASE,
        sent_at: now,
        holds: vec![(
            Arc::clone(&a),
            Mark {
                slot: mb.slot,
                ..ma
            },
        )],
        verdicts: vec![0],
        refresh: false,
    });
    assert_eq!(a.loss.get(), Some(LossReason::Gone));
    assert_eq!(b.loss.get(), None, "not the hold in that slot");
    // b's own reply still finds b in its slot.
    t.apply(Done::Judged {
        lease: LEASE,
        sent_at: now,
        holds: vec![(Arc::clone(&b), mb)],
        verdicts: vec![0],
        refresh: false,
    });
    assert_eq!(b.loss.get(), Some(LossReason::Gone));
}

#[test]
fn an_ended_hold_is_dropped_and_a_revived_one_watched_anew() {
    let now = Instant::now();
    let mut t = Table::new(false);
    let h = hold("orders", "c:1", 1, true, now);
    t.insert(Arc::clone(&h));
    assert!(h.leave(true), "the last guard");
    let (work, _) = t.plan(now + LEASE / 3, false, standalone);
    assert!(
        planned(&work, false).is_empty(),
        "an ended hold is not renewed"
    );
    assert_eq!(t.sched.len(), 0);
    // A late re-entry reply with its token revives it: handed over again.
    assert!(h.join(true, now, LEASE));
    t.insert(Arc::clone(&h));
    let (work, _) = t.plan(now + LEASE / 3, false, standalone);
    assert_eq!(planned(&work, false).len(), 1);
    // Handed over twice while watched: one entry, not two.
    t.insert(Arc::clone(&h));
    settle(&mut t);
    assert_eq!(t.sched.named("orders").len(), 1);
}

#[test]
fn a_verdict_applies_only_to_the_epoch_it_was_planned_for() {
    let now = Instant::now();
    let mut t = Table::new(false);
    let h = hold("orders", "c:1", 1, true, now);
    t.insert(Arc::clone(&h));
    let at = now + LEASE / 3;
    let (work, _) = t.plan(at, false, standalone);
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
        refresh: false,
    });
    assert_eq!(h.loss.get(), None, "the old epoch's 'gone' is not about it");
    // Its own renewal finds it gone: lost.
    let (work, _) = t.plan(at + LEASE / 3, false, standalone);
    let current = planned(&work, false);
    assert_eq!(current.len(), 1);
    t.apply(Done::Judged {
        lease: LEASE,
        sent_at: at,
        holds: current,
        verdicts: vec![0],
        refresh: false,
    });
    assert_eq!(h.loss.get(), Some(LossReason::Gone));
}

#[test]
fn a_renewal_moves_the_deadline_and_an_unknown_verdict_retries_later() {
    let now = Instant::now();
    let mut t = Table::new(false);
    let h = hold("orders", "c:1", 1, true, now);
    t.insert(Arc::clone(&h));
    let before = h.deadline();
    let at = now + LEASE / 3;
    let (work, _) = t.plan(at, false, standalone);
    t.apply(Done::Judged {
        lease: LEASE,
        sent_at: at,
        holds: planned(&work, false),
        verdicts: vec![1],
        refresh: false,
    });
    assert_eq!(h.deadline(), before + LEASE / 3);
    let (work, _) = t.plan(at, false, standalone);
    assert!(planned(&work, false).is_empty(), "renewed: not due again");
    // A failed call (-1) is retried after a pause, not at once.
    let later = at + LEASE / 3;
    let (work, _) = t.plan(later, false, standalone);
    t.apply(Done::Judged {
        lease: LEASE,
        sent_at: later,
        holds: planned(&work, false),
        verdicts: vec![-1],
        refresh: false,
    });
    assert_eq!(h.loss.get(), None);
    // (The retry time counts from the verdict's arrival, the real now.)
    let (work, _) = t.plan(Instant::now(), false, standalone);
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
    let (work, _) = t.plan(soon, false, standalone);
    assert!(work.track.is_empty(), "younger than TRACK_AFTER");
    t.invalidated(&Invalidation::Keys(vec![
        bytes::Bytes::from_static(b"a"),
        bytes::Bytes::from_static(b"f"),
    ]));
    let (work, _) = t.plan(soon, false, standalone);
    let renewed: Vec<u64> = planned(&work, false).iter().map(|(h, _)| h.token).collect();
    let checked: Vec<u64> = planned(&work, true).iter().map(|(h, _)| h.token).collect();
    assert_eq!(renewed, vec![1], "only the named lock, at once");
    assert_eq!(checked, vec![3], "a fixed lease: checked, never extended");
    // Everything may have changed: every idle hold is looked at.
    t.invalidated(&Invalidation::All);
    let (work, _) = t.plan(soon, false, standalone);
    assert_eq!(planned(&work, false).len(), 1, "b; a's call is still out");
}

#[test]
fn holds_are_tracked_once_old_enough_and_a_tracked_read_can_find_them_gone() {
    let now = Instant::now();
    let mut t = Table::new(true);
    let h = hold("orders", "c:1", 1, false, now);
    t.insert(Arc::clone(&h));
    let (work, wake) = t.plan(now, false, standalone);
    assert!(work.track.is_empty());
    assert!(wake
        .urgent
        .is_some_and(|w| w <= now + TRACK_AFTER + Duration::from_millis(5)));
    let (work, _) = t.plan(now + TRACK_AFTER * 2, false, standalone);
    let tracked: Vec<Planned> = work.track.into_values().flatten().collect();
    assert_eq!(tracked.len(), 1);
    t.apply(Done::Tracked {
        holds: tracked,
        found: vec![Some(false)],
    });
    assert_eq!(h.loss.get(), Some(LossReason::Gone));
}

#[test]
fn a_failed_tracked_read_is_read_again_after_a_pause_not_at_once() {
    let now = Instant::now();
    let mut t = Table::new(true);
    let h = hold("orders", "c:1", 1, true, now);
    t.insert(Arc::clone(&h));
    let at = now + TRACK_AFTER * 2;
    let (work, _) = t.plan(at, false, standalone);
    let tracked: Vec<Planned> = work.track.into_values().flatten().collect();
    assert_eq!(tracked.len(), 1);
    t.apply(Done::Tracked {
        holds: tracked,
        found: vec![None],
    });
    assert_eq!(h.loss.get(), None, "unknown is not a loss");
    // Not at once: a node failing fast must not make the task spin.
    let (work, _) = t.plan(at + Duration::from_millis(1), false, standalone);
    assert!(work.track.is_empty(), "read again at once");
    // After the pause (a tenth of the lease, at most 500 ms), a new read:
    // the failed one may have left the key untracked on the server.
    let later = Instant::now() + Duration::from_millis(501);
    let (work, _) = t.plan(later, false, standalone);
    let again: Vec<Planned> = work.track.into_values().flatten().collect();
    assert_eq!(again.len(), 1, "never read again before its renewal");
    t.apply(Done::Tracked {
        holds: again,
        found: vec![Some(true)],
    });
    // Answered: no further read until something untracks the key.
    let (work, _) = t.plan(later + Duration::from_secs(1), false, standalone);
    assert!(work.track.is_empty());
    assert_eq!(h.loss.get(), None);
}

#[test]
fn a_passed_deadline_or_max_hold_fires_the_loss() {
    let long_ago = Instant::now() - LEASE * 2;
    let mut t = Table::new(false);
    let h = hold("orders", "c:1", 1, true, long_ago);
    t.insert(Arc::clone(&h));
    t.plan(Instant::now(), false, standalone);
    assert_eq!(h.loss.get(), Some(LossReason::Expired));
    assert_eq!(t.sched.len(), 0);
}
