//! One clock for several processes: `CLOCK_MONOTONIC`, which every process
//! on the machine shares, so histories written by different client
//! processes (the fault matrix, the election faults) compare directly.

use std::time::{Duration, Instant};

/// Nanoseconds on `CLOCK_MONOTONIC`, comparable across processes.
///
/// The workspace forbids `unsafe` (so no `clock_gettime` call here); std's
/// `Instant` is `CLOCK_MONOTONIC` on Linux and its `Debug` shows the
/// timespec. [`check_monotonic_clock`] checks the reading once per process,
/// so a change of that format fails the test instead of skewing it.
///
/// ```
/// let a = keylatch_harness::monotonic_ns();
/// assert!(keylatch_harness::monotonic_ns() >= a);
/// ```
///
/// # Panics
/// When `Instant`'s `Debug` no longer shows `tv_sec` and `tv_nsec`.
pub fn monotonic_ns() -> u64 {
    instant_ns(Instant::now())
}

fn instant_ns(t: Instant) -> u64 {
    let text = format!("{t:?}");
    let field = |name: &str| -> Option<u64> {
        let at = text.find(name)? + name.len();
        let digits: String = text[at..]
            .chars()
            .skip_while(|c| !c.is_ascii_digit())
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    match (field("tv_sec"), field("tv_nsec")) {
        (Some(s), Some(ns)) => s * 1_000_000_000 + ns,
        _ => panic!("cannot read CLOCK_MONOTONIC from {text:?}"),
    }
}

/// Panics unless [`monotonic_ns`] advances with `Instant` (the format it
/// parses is what this std prints).
///
/// ```
/// keylatch_harness::check_monotonic_clock();
/// ```
///
/// # Panics
/// When the reading is off by a microsecond or more.
pub fn check_monotonic_clock() {
    let a = Instant::now();
    std::thread::sleep(Duration::from_millis(5));
    let b = Instant::now();
    let want = b.duration_since(a).as_nanos() as i128;
    let got = instant_ns(b) as i128 - instant_ns(a) as i128;
    assert!(
        (got - want).abs() < 1_000,
        "CLOCK_MONOTONIC reading is off: {got} ns vs {want} ns"
    );
}
