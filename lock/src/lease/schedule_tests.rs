//! Unit tests of the schedule through the table: a pass visits the holds
//! that are due and no others, and every transition still happens on time.

use super::tests::{hold, planned, settle, standalone, LEASE};
use super::*;
use crate::lease::tuning::TOKEN_EVERY;

/// Names of holds `0..n`.
fn name(i: usize) -> String {
    format!("lock:{i}")
}

/// A table of `n` renewed holds: the first round at `at` sent them all and
/// every reply said renewed. Their next round is at `at + LEASE / 3`.
fn renewed(n: usize) -> (Table, Vec<Arc<Hold>>, Instant) {
    let now = Instant::now();
    let mut t = Table::new(false);
    let holds: Vec<Arc<Hold>> = (0..n)
        .map(|i| hold(&name(i), "c:1", i as u64 + 1, true, now))
        .collect();
    for h in &holds {
        t.insert(Arc::clone(h));
    }
    settle(&mut t);
    let at = now + LEASE / 3;
    let (work, _) = t.plan(at, false, standalone);
    let sent = planned(&work, false);
    assert_eq!(sent.len(), n, "the first round takes every hold");
    reply(&mut t, sent, at, 1);
    (t, holds, at)
}

fn reply(t: &mut Table, holds: Vec<Planned>, sent_at: Instant, verdict: i64) {
    let verdicts = vec![verdict; holds.len()];
    t.apply(Done::Judged {
        lease: LEASE,
        sent_at,
        holds,
        verdicts,
        refresh: false,
    });
}

/// A watchdog hold (token 1) named by `key` whose acquire made its fencing
/// counter, confirmed at `now`.
fn made_counter(key: crate::lease::key::HoldKey, now: Instant) -> Arc<Hold> {
    Hold::new(crate::lease::hold::NewHold {
        key,
        token: 1,
        renew: true,
        lease: LEASE,
        sent_at: now,
        max_hold: None,
        drift_permille: 10,
        counters: Arc::new(crate::lease::Counters::default()),
        counter_made: true,
    })
}

fn tokens(work: &Work) -> Vec<u64> {
    let mut v: Vec<u64> = planned(work, false).iter().map(|(h, _)| h.token).collect();
    v.sort_unstable();
    v
}

fn invalidate(t: &mut Table, names: &[String]) {
    let keys = names
        .iter()
        .map(|n| bytes::Bytes::from(n.clone().into_bytes()))
        .collect();
    t.invalidated(&Invalidation::Keys(keys));
}

#[test]
fn a_pass_visits_only_the_holds_that_are_due() {
    let (mut t, _holds, at) = renewed(1000);
    let (work, wake) = t.plan(at + Duration::from_millis(1), false, standalone);
    assert_eq!(t.visited, 0, "nothing is due between rounds");
    assert!(work.groups.is_empty());
    assert_eq!(wake.renew, Some(at + LEASE / 3), "the next round");
    invalidate(&mut t, &[name(3), name(500), name(999)]);
    let (work, _) = t.plan(at + Duration::from_millis(2), false, standalone);
    assert_eq!(t.visited, 3, "the invalidated holds, found by name");
    assert_eq!(tokens(&work), vec![4, 501, 1000]);
    // The round takes the others: those three are in flight, not queued.
    let (work, _) = t.plan(at + LEASE / 3, false, standalone);
    assert_eq!(t.visited, 997);
    assert_eq!(planned(&work, false).len(), 997);
}

#[test]
fn a_hold_due_while_its_renewal_is_out_is_sent_once_and_its_deadline_still_holds() {
    let (mut t, holds, at) = renewed(2);
    let round = at + LEASE / 3;
    let (work, _) = t.plan(round, false, standalone);
    let mut out = planned(&work, false);
    assert_eq!(out.len(), 2);
    // The next round comes while both calls are still out: not sent again.
    let (work, _) = t.plan(round + LEASE / 3, false, standalone);
    assert!(work.groups.is_empty(), "in flight: not sent twice");
    // One reply comes late: that hold goes at its overdue time (the next
    // round is later), once.
    let late = out.split_off(1);
    reply(&mut t, late, round, 1);
    let overdue = round + LEASE / 2;
    let (work, _) = t.plan(overdue - Duration::from_millis(1), false, standalone);
    assert!(work.groups.is_empty());
    let (work, _) = t.plan(overdue, false, standalone);
    assert_eq!(tokens(&work), vec![2]);
    // The other never comes back: its deadline fires while it is in flight.
    let deadline = holds[0].deadline();
    t.plan(deadline, false, standalone);
    assert_eq!(holds[0].loss.get(), Some(LossReason::Expired));
    assert_eq!(holds[1].loss.get(), None);
}

#[test]
fn a_due_hold_invalidated_is_checked_at_once_and_not_again_at_its_round() {
    let (mut t, _holds, at) = renewed(3);
    // Hold 1's early time has come; it waits for the round. Invalidated:
    // renewed at once, off the grid.
    let soon = at + LEASE / 6 + Duration::from_millis(1);
    invalidate(&mut t, &[name(0)]);
    let (work, _) = t.plan(soon, false, standalone);
    assert_eq!(tokens(&work), vec![1]);
    // The round takes the other two, not the one in flight.
    let round = at + LEASE / 3;
    let (work, _) = t.plan(round, false, standalone);
    assert_eq!(tokens(&work), vec![2, 3]);
    // Invalidated again while its call is out: checked again after it.
    let sent = planned(&work, false);
    invalidate(&mut t, &[name(1)]);
    reply(&mut t, sent, round, 1);
    let (work, _) = t.plan(round + Duration::from_millis(1), false, standalone);
    assert_eq!(tokens(&work), vec![2], "the reply may predate the change");
}

#[test]
fn a_round_that_overruns_its_interval_sends_each_hold_once_and_keeps_the_grid() {
    let (mut t, _holds, at) = renewed(50);
    let all: Vec<u64> = (1..=50).collect();
    // The task slept past two rounds: one round, every hold once, and the
    // grid starts again from now rather than firing twice.
    let woke = at + LEASE / 3 * 2 + LEASE / 6;
    let (work, wake) = t.plan(woke, false, standalone);
    assert_eq!(tokens(&work), all);
    assert_eq!(wake.renew, Some(woke + LEASE / 3));
    let sent = planned(&work, false);
    let (work, _) = t.plan(woke + Duration::from_millis(1), false, standalone);
    assert!(work.groups.is_empty(), "no second round at once");
    reply(&mut t, sent, woke, 1);
    let round = woke + LEASE / 3;
    let (work, _) = t.plan(round, false, standalone);
    assert_eq!(tokens(&work), all, "the next round, on the new grid");
    // This round's replies outlast the interval: the next round finds
    // every hold in flight; once back, each goes at its overdue time.
    let sent = planned(&work, false);
    let (work, _) = t.plan(round + LEASE / 3, false, standalone);
    assert!(work.groups.is_empty(), "every hold still in flight");
    reply(&mut t, sent, round, 1);
    let overdue = round + LEASE / 2;
    let (work, _) = t.plan(overdue - Duration::from_millis(1), false, standalone);
    assert!(work.groups.is_empty());
    let (work, _) = t.plan(overdue, false, standalone);
    assert_eq!(tokens(&work), all);
}

#[test]
fn a_released_hold_is_dropped_unrenewed_and_the_sweep_frees_it_sooner() {
    let (mut t, holds, at) = renewed(100);
    for h in &holds[..50] {
        assert!(h.leave(true));
    }
    // Before its round, the sweep (every entry about once a second) drops
    // the released ones; it visits nothing.
    let (work, _) = t.plan(at + Duration::from_millis(1500), false, standalone);
    assert!(work.groups.is_empty());
    assert_eq!(t.visited, 0);
    assert_eq!(t.sched.len(), 50);
    // The round renews only the held ones.
    let (work, _) = t.plan(at + LEASE / 3, false, standalone);
    assert_eq!(tokens(&work), (51..=100).collect::<Vec<u64>>());
    // A new hold reuses a freed slot; the old slot's due times are stale.
    let fresh = hold("fresh", "c:1", 7, true, at);
    t.insert(Arc::clone(&fresh));
    settle(&mut t);
    assert_eq!(t.sched.len(), 51);
    let (work, _) = t.plan(at + LEASE / 3 + Duration::from_millis(1), false, standalone);
    assert_eq!(tokens(&work), vec![7], "a new hold's first renewal, once");
}

#[test]
fn a_fixed_lease_hold_joined_by_a_watchdog_guard_starts_renewing() {
    let now = Instant::now();
    let mut t = Table::new(false);
    let h = hold("orders", "c:1", 1, false, now);
    t.insert(Arc::clone(&h));
    settle(&mut t);
    let (work, _) = t.plan(now + LEASE / 3, false, standalone);
    assert!(work.groups.is_empty(), "a fixed lease is not renewed");
    // Nothing of it is due before its deadline, so the join tells the
    // engine (the caller hands the hold over again).
    assert!(h.join(true, now, LEASE), "its first watchdog guard");
    t.insert(Arc::clone(&h));
    settle(&mut t);
    let (work, _) = t.plan(
        now + LEASE / 3 + Duration::from_millis(1),
        false,
        standalone,
    );
    assert_eq!(tokens(&work), vec![1]);
    assert!(!h.join(true, now, LEASE), "a second one: nothing new");
}

#[test]
fn stale_items_are_compacted() {
    let (mut t, _holds, at) = renewed(10);
    // Each invalidation moves a hold's look earlier: the old item is stale.
    for i in 0..3000u32 {
        invalidate(&mut t, &[name(0)]);
        let (work, _) = t.plan(at + Duration::from_micros(u64::from(i)), false, standalone);
        reply(&mut t, planned(&work, false), at, 1);
    }
    assert!(t.sched.looks_len() <= 2 * 10 + 1024 + 1);
}

/// Per planned renewal (lease > 0), whether its call refreshes the counter.
fn refreshing(work: &Work) -> Vec<bool> {
    work.groups
        .iter()
        .filter(|(k, _)| !k.3.is_zero())
        .flat_map(|(k, v)| std::iter::repeat(k.4).take(v.len()))
        .collect()
}

#[test]
fn the_counter_is_refreshed_by_a_first_renewal_that_lands_and_in_the_window_only() {
    let now = Instant::now();
    let mut t = Table::new(false);
    let h = hold(&name(0), "c:1", 1, true, now);
    t.insert(Arc::clone(&h));
    settle(&mut t);
    let at = now + LEASE / 3;
    let (work, _) = t.plan(at, false, standalone);
    assert_eq!(refreshing(&work), vec![true], "a first renewal refreshes");
    // Unknown (the call failed): the retry refreshes again.
    let sent = planned(&work, false);
    t.apply(Done::Judged {
        lease: LEASE,
        sent_at: at,
        holds: sent,
        verdicts: vec![-1],
        refresh: true,
    });
    let at = at + LEASE / 3;
    let (work, _) = t.plan(at, false, standalone);
    assert_eq!(
        refreshing(&work),
        vec![true],
        "the retry of a first renewal"
    );
    t.apply(Done::Judged {
        lease: LEASE,
        sent_at: at,
        holds: planned(&work, false),
        verdicts: vec![1],
        refresh: true,
    });
    let at = at + LEASE / 3;
    let (work, _) = t.plan(at, false, standalone);
    assert_eq!(refreshing(&work), vec![false], "refreshed: not every round");
    reply(&mut t, planned(&work, false), at, 1);
    let at = at + LEASE / 3;
    let (work, _) = t.plan(at, true, standalone);
    assert_eq!(refreshing(&work), vec![true], "while the window is open");
}

#[test]
fn a_counter_the_acquire_made_is_not_refreshed_by_the_first_renewal_but_in_the_window() {
    let now = Instant::now();
    let mut t = Table::new(false);
    let made = made_counter(
        crate::lease::key::HoldKey::new(
            Arc::from(name(0).as_str()),
            crate::owner::Owner::given("c:1"),
            &crate::lock::HASH_LEASE,
        ),
        now,
    );
    let found = hold(&name(1), "c:1", 2, true, now);
    t.insert(Arc::clone(&made));
    t.insert(Arc::clone(&found));
    settle(&mut t);
    let at = now + LEASE / 3;
    let (work, _) = t.plan(at, false, standalone);
    let mut first: Vec<(u64, bool)> = work
        .groups
        .iter()
        .filter(|(k, _)| !k.3.is_zero())
        .flat_map(|(k, v)| v.iter().map(move |(h, _)| (h.token, k.4)))
        .collect();
    first.sort_unstable();
    assert_eq!(
        first,
        [(1, false), (2, true)],
        "the made counter is fresh; the one found is refreshed"
    );
    reply(&mut t, planned(&work, false), at, 1);
    let at = at + LEASE / 3;
    let (work, _) = t.plan(at, true, standalone);
    assert_eq!(
        refreshing(&work),
        vec![true, true],
        "while the window is open"
    );
}

#[test]
fn the_tables_shrink_once_most_holds_are_gone_and_new_holds_still_renew() {
    let (mut t, holds, at) = renewed(5000);
    assert_eq!(t.sched.slots_len(), 5000);
    for h in &holds[100..] {
        assert!(h.leave(true));
    }
    // The sweep drops the released ones; then the tables give back.
    let (_, _) = t.plan(at + Duration::from_millis(1500), false, standalone);
    assert_eq!(t.sched.len(), 100);
    assert_eq!(t.sched.slots_len(), 100, "trailing free slots cut");
    // The 100 left, and a new hold in a reused slot, renew at their round.
    let fresh = hold("fresh", "c:1", 9999, true, at);
    t.insert(Arc::clone(&fresh));
    settle(&mut t);
    let (work, _) = t.plan(at + LEASE / 3, false, standalone);
    let mut want: Vec<u64> = (1..=100).collect();
    want.push(9999);
    assert_eq!(tokens(&work), want);
    for h in &holds[..100] {
        assert!(h.leave(true));
    }
}

/// The tokens of the holds a pass plans tracked reads for.
fn tracked_tokens(work: &Work) -> Vec<u64> {
    work.track
        .values()
        .flatten()
        .map(|(h, _)| h.token)
        .collect()
}

#[test]
fn only_holds_within_the_tracking_budget_get_tracked_reads() {
    let now = Instant::now();
    let mut t = Table::new(true).track_budget(3);
    let holds: Vec<Arc<Hold>> = (0..5)
        .map(|i| hold(&name(i), "c:1", i as u64 + 1, true, now))
        .collect();
    for h in &holds {
        t.insert(Arc::clone(h));
    }
    let (work, _) = t.plan(now + TRACK_AFTER * 2, false, standalone);
    let tracked = tracked_tokens(&work);
    assert_eq!(tracked.len(), 3, "three within the budget: {tracked:?}");
    // One of them released: the next hold handed over takes its place.
    let first = holds.iter().find(|h| h.token == tracked[0]).unwrap();
    assert!(first.leave(true));
    let (_, _) = t.plan(
        now + TRACK_AFTER * 2 + Duration::from_secs(2),
        false,
        standalone,
    );
    let late = hold(&name(9), "c:1", 99, true, now + Duration::from_secs(2));
    t.insert(Arc::clone(&late));
    let (work, _) = t.plan(now + Duration::from_secs(3), false, standalone);
    assert_eq!(
        tracked_tokens(&work),
        vec![99],
        "a freed place in the budget is taken"
    );
    for h in holds.iter().filter(|h| h.token != first.token) {
        assert!(h.leave(true));
    }
}

#[test]
fn the_entries_of_one_name_are_found_and_unchained_in_any_order() {
    use super::super::schedule::{Entry, Schedule};
    let now = Instant::now();
    let mut s = Schedule::default();
    let holds: Vec<Arc<Hold>> = (0..4)
        .map(|i| hold("same", &format!("c:{i}"), i + 1, true, now))
        .collect();
    let other = hold("other", "c:9", 9, true, now);
    let slots: Vec<u32> = holds.iter().map(|h| s.add(Entry::new(h, now))).collect();
    let o = s.add(Entry::new(&other, now));
    let sorted = |mut v: Vec<u32>| {
        v.sort_unstable();
        v
    };
    assert_eq!(sorted(s.named("same")), slots);
    assert_eq!(s.named("other"), vec![o]);
    // Out of the middle of the chain, then its head (the last added), then
    // its tail.
    s.remove(slots[1]);
    assert_eq!(sorted(s.named("same")), vec![slots[0], slots[2], slots[3]]);
    s.remove(slots[3]);
    assert_eq!(sorted(s.named("same")), vec![slots[0], slots[2]]);
    s.remove(slots[0]);
    assert_eq!(s.named("same"), vec![slots[2]]);
    // A freed slot taken by another name joins that name's chain only.
    let again = hold("other", "c:8", 10, true, now);
    let r = s.add(Entry::new(&again, now));
    assert!(slots.contains(&r), "a freed slot is reused");
    assert_eq!(sorted(s.named("other")), sorted(vec![o, r]));
    assert_eq!(s.named("same"), vec![slots[2]]);
    assert_eq!(
        s.find_named("other", |e| e.is(&again, again.epoch())),
        Some(r)
    );
    assert_eq!(s.find_named("same", |e| e.is(&again, again.epoch())), None);
    s.remove(slots[2]);
    assert!(s.named("same").is_empty());
    assert_eq!(sorted(s.all()), sorted(vec![o, r]));
    // Removing twice changes nothing.
    s.remove(slots[2]);
    assert_eq!(s.len(), 2);
}

#[test]
fn names_of_one_hash_share_a_chain_but_are_found_apart() {
    use super::super::entry::name_hash;
    use super::super::schedule::{Entry, Schedule};
    let now = Instant::now();
    let mut s = Schedule::default();
    let sorted = |mut v: Vec<u32>| {
        v.sort_unstable();
        v
    };
    let a1 = hold("a", "c:1", 1, true, now);
    let b1 = hold("b", "c:1", 2, true, now);
    let a2 = hold("a", "c:2", 3, true, now);
    let sa1 = s.add(Entry::new(&a1, now));
    // "b" made to collide with "a" (a 64-bit hash collision, forced).
    let mut eb = Entry::new(&b1, now);
    eb.name = name_hash("a");
    let sb1 = s.add(eb);
    let sa2 = s.add(Entry::new(&a2, now));
    assert_eq!(
        sorted(s.named("a")),
        vec![sa1, sa2],
        "a live other name is left out"
    );
    assert_eq!(s.find_named("a", |e| e.is(&b1, b1.epoch())), Some(sb1));
    s.remove(sb1);
    assert_eq!(sorted(s.named("a")), vec![sa1, sa2]);
    s.remove(sa2);
    assert_eq!(s.named("a"), vec![sa1]);
    // An entry whose hold is gone counts (it may be of the name; a visit
    // drops it).
    let b2 = hold("b", "c:3", 4, true, now);
    let mut e = Entry::new(&b2, now);
    e.name = name_hash("a");
    let sb2 = s.add(e);
    drop(b2);
    assert_eq!(sorted(s.named("a")), sorted(vec![sa1, sb2]));
    s.remove(sa1);
    s.remove(sb2);
    assert!(s.named("a").is_empty() && s.all().is_empty());
}

/// Names a hold like a lock handle does, with a `by_owner` the test turns.
struct Judged {
    name: Arc<str>,
    owner: crate::owner::Owner,
    by_owner: std::sync::atomic::AtomicBool,
}

impl super::super::key::HoldNames for Judged {
    fn name(&self) -> &Arc<str> {
        &self.name
    }
    fn owner(&self) -> &crate::owner::Owner {
        &self.owner
    }
    fn slot(&self) -> u16 {
        0
    }
    fn renewal(&self) -> &'static crate::lease::Renewal {
        &crate::lock::HASH_LEASE
    }
    fn by_owner(&self) -> bool {
        self.by_owner.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Per planned hold (by token), whether its call judges by owner alone.
fn by_owner_of(work: &Work) -> Vec<(u64, bool)> {
    let mut v: Vec<(u64, bool)> = work
        .groups
        .iter()
        .flat_map(|(k, v)| v.iter().map(move |(h, _)| (h.token, k.2 .0.owner_only)))
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn plain_renewals_of_holds_nobody_can_replace_judge_by_owner_and_nothing_else_does() {
    let now = Instant::now();
    let mut t = Table::new(false);
    let names = Arc::new(Judged {
        name: Arc::from(name(0).as_str()),
        owner: crate::owner::Owner::made(&Arc::new("c".to_owned()), 1),
        by_owner: std::sync::atomic::AtomicBool::new(true),
    });
    let lone = made_counter(crate::lease::key::HoldKey::of(Arc::clone(&names) as _), now);
    // A key of its own (a write hold's, a permit's) is never judged so.
    let named = hold(&name(1), "c:1", 2, true, now);
    t.insert(Arc::clone(&lone));
    t.insert(Arc::clone(&named));
    settle(&mut t);
    // Sixteen plain rounds: the lone hold is judged by its token at one
    // renewal in TOKEN_EVERY (where in the count it starts depends on its
    // name), the named one always.
    let mut at = now;
    let mut lone_by_token = Vec::new();
    for round in 0..16 {
        at += LEASE / 3;
        let (work, _) = t.plan(at, false, standalone);
        let judged = by_owner_of(&work);
        assert_eq!(judged.len(), 2, "round {round}: {judged:?}");
        assert_eq!(judged[1], (2, false), "round {round}");
        if !judged[0].1 {
            lone_by_token.push(round);
        }
        reply(&mut t, planned(&work, false), at, 1);
    }
    assert_eq!(lone_by_token.len(), 2, "{lone_by_token:?}");
    assert_eq!(
        lone_by_token[1] - lone_by_token[0],
        usize::from(TOKEN_EVERY),
        "{lone_by_token:?}"
    );
    // The window refreshes (and so reads) every counter.
    at += LEASE / 3;
    let (work, _) = t.plan(at, true, standalone);
    assert_eq!(by_owner_of(&work), [(1, false), (2, false)], "the window");
    reply(&mut t, planned(&work, false), at, 1);
    // In doubt since (an acquire of its handle cancelled): by token at
    // every renewal.
    names
        .by_owner
        .store(false, std::sync::atomic::Ordering::Relaxed);
    for round in 0..usize::from(TOKEN_EVERY) {
        at += LEASE / 3;
        let (work, _) = t.plan(at, false, standalone);
        assert_eq!(
            by_owner_of(&work),
            [(1, false), (2, false)],
            "in doubt, {round}"
        );
        reply(&mut t, planned(&work, false), at, 1);
    }
}
