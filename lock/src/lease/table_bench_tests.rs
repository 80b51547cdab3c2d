//! What a planning pass costs against holds watched and holds due (issue
//! 31): a measurement, not a check. Run it in release, alone:
//!
//! ```text
//! cargo test -p keylatch-lock --lib --release -- --ignored --nocapture pass_cost
//! ```
//!
//! It drives the table only through `new`, `insert`, `grow_up`, `plan`,
//! `invalidated` and `apply`, so the same file measures the table before
//! the schedule (copied next to that `table.rs` with the same `mod` line).

use super::super::key::HoldKey;
use super::*;
use crate::lease::hold::NewHold;

const LEASE: Duration = Duration::from_secs(30);

fn hold(i: usize, live: &Arc<crate::lease::Counters>, sent_at: Instant) -> Arc<Hold> {
    let name = format!("lock:{i}");
    Hold::new(NewHold {
        key: HoldKey::new(
            Arc::from(name),
            crate::owner::Owner::given("c:1"),
            &crate::lock::HASH_LEASE,
        ),
        token: i as u64 + 1,
        renew: true,
        lease: LEASE,
        sent_at,
        max_hold: None,
        drift_permille: 10,
        counters: Arc::clone(live),
        counter_made: false,
    })
}

fn standalone(_: u16) -> (Option<String>, u16) {
    (None, 0)
}

fn sent(work: Work) -> Vec<Planned> {
    work.groups.into_values().flatten().collect()
}

fn renewed(t: &mut Table, holds: Vec<Planned>, sent_at: Instant) {
    let verdicts = vec![1; holds.len()];
    t.apply(Done::Judged {
        lease: LEASE,
        sent_at,
        holds,
        verdicts,
        refresh: false,
    });
}

/// The median of `runs` timings of `f`, in microseconds.
fn median_us(runs: usize, mut f: impl FnMut(usize) -> Duration) -> f64 {
    let mut v: Vec<Duration> = (0..runs).map(&mut f).collect();
    v.sort_unstable();
    v[runs / 2].as_secs_f64() * 1e6
}

/// Answers every tracked read in `work`: the hold is there.
fn tracked(t: &mut Table, work: &mut Work) {
    let holds: Vec<Planned> = std::mem::take(&mut work.track)
        .into_values()
        .flatten()
        .collect();
    let found = vec![Some(true); holds.len()];
    t.apply(Done::Tracked { holds, found });
}

fn measure(n: usize, tracking: bool) {
    let live = Arc::new(crate::lease::Counters::default());
    let now = Instant::now();
    let holds: Vec<Arc<Hold>> = (0..n).map(|i| hold(i, &live, now)).collect();
    let mut t = Table::new(tracking);
    for h in &holds {
        t.insert(Arc::clone(h));
    }
    t.grow_up(Instant::now() + YOUNG, |_| false);
    // A round with every hold due (the first), and its replies.
    let at = now + LEASE / 3;
    let started = Instant::now();
    let (mut work, _) = t.plan(at, false, standalone);
    let round = started.elapsed();
    tracked(&mut t, &mut work);
    let out = sent(work);
    assert_eq!(out.len(), n);
    let started = Instant::now();
    renewed(&mut t, out, at);
    let replies = started.elapsed();
    // With tracking, a renewal's own write untracked each key: the pass
    // after the replies reads them all again (part of the round's cost).
    let started = Instant::now();
    let (mut work, _) = t.plan(at + Duration::from_micros(50), false, standalone);
    let reread = started.elapsed();
    tracked(&mut t, &mut work);
    // Passes between rounds (every 3 ms while acquiring, and after each
    // reply): nothing due, then `due` holds invalidated.
    let mut clock = at;
    let mut pass = |t: &mut Table, due: usize, k: usize| {
        let names: Vec<bytes::Bytes> = (0..due)
            .map(|j| bytes::Bytes::from(format!("lock:{}", (k * 7919 + j * 104_729) % n)))
            .collect();
        if due > 0 {
            t.invalidated(&Invalidation::Keys(names));
        }
        clock += Duration::from_micros(100);
        let started = Instant::now();
        let (mut work, _) = t.plan(clock, false, standalone);
        let took = started.elapsed();
        tracked(t, &mut work);
        let out = sent(work);
        renewed(t, out, clock);
        took
    };
    let idle = median_us(21, |k| pass(&mut t, 0, k));
    let one = median_us(21, |k| pass(&mut t, 1, k));
    let hundred = median_us(21, |k| pass(&mut t, 100, k));
    let thousand = median_us(11, |k| pass(&mut t, 1000, k));
    // The next round, every hold due again (off-grid ones too, by now).
    let next = at + LEASE / 3 + LEASE / 6;
    let started = Instant::now();
    let (work, _) = t.plan(next, false, standalone);
    let round2 = started.elapsed();
    let count = sent(work).len();
    println!(
        "tracking {tracking:>5} holds {n:>7} | round all due {:>8.1} ms ({:>5.0} ns/hold), \
         replies {:>7.1} ms, re-reads {:>7.1} ms | pass 0 due {idle:>9.1} us | 1 due {one:>9.1} us | 100 due {hundred:>9.1} us | \
         1000 due {thousand:>9.1} us | round 2 ({count} due) {:>8.1} ms",
        round.as_secs_f64() * 1e3,
        round.as_secs_f64() * 1e9 / n as f64,
        replies.as_secs_f64() * 1e3,
        reread.as_secs_f64() * 1e3,
        round2.as_secs_f64() * 1e3,
    );
}

#[test]
#[ignore = "a measurement: run in release with --ignored --nocapture"]
fn pass_cost() {
    for tracking in [false, true] {
        for n in [10_000, 100_000, 300_000] {
            measure(n, tracking);
        }
    }
}

/// What one held lock keeps in memory, as budgets: a field added to
/// any of these is a cost paid per hold (issue 31 measures a million), so
/// growing one is a deliberate change of this test. 64-bit Linux sizes.
#[test]
#[cfg(all(target_pointer_width = "64", target_os = "linux"))]
fn what_a_hold_keeps_stays_within_its_size_budget() {
    use std::mem::size_of;
    assert!(size_of::<Hold>() <= 88, "Hold: {}", size_of::<Hold>());
    let entry = size_of::<super::super::schedule::Entry>();
    assert!(entry <= 64, "schedule Entry: {entry}");
    let handle = size_of::<crate::lock::HandleForSizes>();
    assert!(handle <= 88, "lock Handle: {handle}");
    assert!(
        size_of::<crate::Lock>() <= 24,
        "Lock: {}",
        size_of::<crate::Lock>()
    );
    let guard = size_of::<crate::LockGuard>();
    assert!(guard <= 64, "LockGuard: {guard}");
}
