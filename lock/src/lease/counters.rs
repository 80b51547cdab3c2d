//! What a [`Locks`](crate::Locks) counts while it works, read as one
//! [`LockStats`] snapshot ([`Locks::stats`](crate::Locks::stats)); with the
//! `metrics` feature each count also goes to the [`metrics`] facade, so an
//! application's own exporter (Prometheus or any other) publishes them.
//!
//! Counting is a relaxed atomic add at each point (no lock, no allocation):
//! the acquire path pays a few nanoseconds.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use super::reason::LossReason;

/// The lock kinds counted apart, by the label their seam gives them (the
/// last entry takes any other).
const KINDS: [&str; 11] = [
    "reentrant",
    "non-reentrant",
    "fair",
    "spin",
    "fenced",
    "read",
    "write",
    "redlock member",
    "expirable semaphore",
    "leader",
    "other",
];

/// Upper bounds of the wait-time buckets (the last bucket is unbounded).
const WAIT_BOUNDS: [Duration; 6] = [
    Duration::from_millis(1),
    Duration::from_millis(10),
    Duration::from_millis(100),
    Duration::from_secs(1),
    Duration::from_secs(10),
    Duration::from_secs(60),
];

/// The counters a `Locks` and its holds share.
#[derive(Default)]
pub(crate) struct Counters {
    /// Holds with a guard that are not known lost.
    pub(crate) live_holds: AtomicUsize,
    acquired: [AtomicU64; KINDS.len()],
    waits: [AtomicU64; 3],
    wait_nanos: AtomicU64,
    wait_max_nanos: AtomicU64,
    wait_buckets: [AtomicU64; WAIT_BOUNDS.len() + 1],
    losses: [AtomicU64; 3],
    subscription_fallbacks: AtomicU64,
    release_retries: AtomicU64,
}

/// The lease engine's part of a [`LockStats`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Renewals {
    pub(crate) calls: u64,
    pub(crate) renewed: u64,
    pub(crate) failures: u64,
    pub(crate) last_round: Duration,
    pub(crate) longest_round: Duration,
}

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitEnd {
    Acquired,
    TimedOut,
    Failed,
}

#[cfg(feature = "metrics")]
impl WaitEnd {
    fn label(self) -> &'static str {
        match self {
            WaitEnd::Acquired => "acquired",
            WaitEnd::TimedOut => "timed_out",
            WaitEnd::Failed => "failed",
        }
    }
}

fn loss_index(reason: LossReason) -> usize {
    match reason {
        LossReason::Gone => 0,
        LossReason::Expired => 1,
        LossReason::MaxHold => 2,
    }
}

#[cfg(feature = "metrics")]
fn loss_label(reason: LossReason) -> &'static str {
    match reason {
        LossReason::Gone => "gone",
        LossReason::Expired => "expired",
        LossReason::MaxHold => "max_hold",
    }
}

impl Counters {
    /// A hold came alive (a new hold, or one revived by a re-entry).
    pub(crate) fn hold_up(&self) {
        self.live_holds.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        metrics::gauge!("keylatch_holds").increment(1.0);
    }

    /// A hold ended (released, or lost).
    pub(crate) fn hold_down(&self) {
        self.live_holds.fetch_sub(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        metrics::gauge!("keylatch_holds").decrement(1.0);
    }

    /// A guard was handed out for a lock of kind `label` (re-entries too).
    pub(crate) fn acquired(&self, label: &'static str) {
        let i = KINDS
            .iter()
            .position(|k| *k == label)
            .unwrap_or(KINDS.len() - 1);
        self.acquired[i].fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        metrics::counter!("keylatch_acquisitions_total", "kind" => KINDS[i]).increment(1);
    }

    /// An acquire that waited ended after `waited`.
    pub(crate) fn waited(&self, end: WaitEnd, waited: Duration) {
        let i = end as usize;
        self.waits[i].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        self.wait_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.wait_max_nanos.fetch_max(nanos, Ordering::Relaxed);
        let b = WAIT_BOUNDS
            .iter()
            .position(|b| waited <= *b)
            .unwrap_or(WAIT_BOUNDS.len());
        self.wait_buckets[b].fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        {
            metrics::counter!("keylatch_waits_total", "outcome" => end.label()).increment(1);
            metrics::histogram!("keylatch_wait_seconds").record(waited.as_secs_f64());
        }
    }

    /// A hold was lost.
    pub(crate) fn lost(&self, reason: LossReason) {
        self.losses[loss_index(reason)].fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        metrics::counter!("keylatch_losses_total", "reason" => loss_label(reason)).increment(1);
    }

    /// A waiter could not subscribe and polls instead.
    pub(crate) fn subscription_fallback(&self) {
        self.subscription_fallbacks.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        metrics::counter!("keylatch_subscription_fallbacks_total").increment(1);
    }

    /// A release was sent again after a transient failure.
    pub(crate) fn release_retry(&self) {
        self.release_retries.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        metrics::counter!("keylatch_release_retries_total").increment(1);
    }

    /// The snapshot, with the engine's renewal counts and round times.
    pub(crate) fn snapshot(&self, engine: Renewals) -> LockStats {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let waits = WaitStats {
            acquired: load(&self.waits[WaitEnd::Acquired as usize]),
            timed_out: load(&self.waits[WaitEnd::TimedOut as usize]),
            failed: load(&self.waits[WaitEnd::Failed as usize]),
            total: Duration::from_nanos(load(&self.wait_nanos)),
            max: Duration::from_nanos(load(&self.wait_max_nanos)),
            buckets: WAIT_BOUNDS
                .iter()
                .map(|b| Some(*b))
                .chain([None])
                .zip(&self.wait_buckets)
                .map(|(b, n)| (b, load(n)))
                .collect(),
        };
        LockStats {
            held: self.live_holds.load(Ordering::Relaxed),
            acquired: KINDS
                .iter()
                .zip(&self.acquired)
                .map(|(k, n)| (*k, load(n)))
                .filter(|(_, n)| *n > 0)
                .collect(),
            waits,
            losses: [LossReason::Gone, LossReason::Expired, LossReason::MaxHold]
                .into_iter()
                .map(|r| (r, load(&self.losses[loss_index(r)])))
                .filter(|(_, n)| *n > 0)
                .collect(),
            renewal_calls: engine.calls,
            renewed_holds: engine.renewed,
            renewal_failures: engine.failures,
            last_renewal_round: engine.last_round,
            longest_renewal_round: engine.longest_round,
            subscription_fallbacks: load(&self.subscription_fallbacks),
            release_retries: load(&self.release_retries),
        }
    }
}

/// What a [`Locks`](crate::Locks) has done since it was made
/// ([`Locks::stats`](crate::Locks::stats)).
///
/// ```
/// let s = keylatch_lock::LockStats::default();
/// assert_eq!(s.held, 0);
/// assert_eq!(s.waits.count(), 0);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockStats {
    /// Holds alive now: a guard lives and the hold is not known lost.
    pub held: usize,
    /// Guards handed out (re-entries included), by lock kind: `reentrant`,
    /// `non-reentrant`, `fair`, `spin`, `fenced`, `read`, `write`,
    /// `redlock member`, `expirable semaphore` (`other` for any kind
    /// added since); kinds with none are left out.
    pub acquired: Vec<(&'static str, u64)>,
    /// Acquires that waited (a first try found the lock taken; a fair
    /// lock's every acquire given a wait), and how long.
    pub waits: WaitStats,
    /// Holds lost, by reason; reasons with none are left out.
    pub losses: Vec<(LossReason, u64)>,
    /// The lease engine's renewal (and check) calls.
    pub renewal_calls: u64,
    /// Holds those calls found held and extended, counted once per
    /// renewal (a check of a fixed lease is not one): over a stretch of
    /// rounds, divides a server's or a client's CPU per renewed hold.
    pub renewed_holds: u64,
    /// Of those, calls that failed (no reply, an error): their holds are
    /// asked again, and lost at their deadline if none succeeds.
    pub renewal_failures: u64,
    /// How long the last renewal round took, from its calls' planning to
    /// its last reply (zero before the first). A round runs every third
    /// of the watchdog lease; one that takes near that long is the warning
    /// before renewals land too late and holds expire (a server or a
    /// network too slow for this many holds).
    pub last_renewal_round: Duration,
    /// The longest renewal round so far.
    pub longest_renewal_round: Duration,
    /// Waits that could not subscribe to their unlock channel and polled.
    pub subscription_fallbacks: u64,
    /// Releases sent again after a failure that surely did not run.
    pub release_retries: u64,
}

/// The waits of a [`LockStats`].
///
/// ```
/// let w = keylatch_lock::WaitStats::default();
/// assert_eq!(w.mean(), None);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitStats {
    /// Waits that ended with the lock.
    pub acquired: u64,
    /// Waits that ran out of time.
    pub timed_out: u64,
    /// Waits that ended with an error.
    pub failed: u64,
    /// Their time, summed.
    pub total: Duration,
    /// The longest.
    pub max: Duration,
    /// How many took at most each bound (1 ms, 10 ms, 100 ms, 1 s, 10 s,
    /// 60 s; `None`: longer), each wait in one bucket.
    pub buckets: Vec<(Option<Duration>, u64)>,
}

impl WaitStats {
    /// Waits that ended, however.
    ///
    /// ```
    /// assert_eq!(keylatch_lock::WaitStats::default().count(), 0);
    /// ```
    pub fn count(&self) -> u64 {
        self.acquired + self.timed_out + self.failed
    }

    /// The mean wait, if any ended.
    ///
    /// ```
    /// assert!(keylatch_lock::WaitStats::default().mean().is_none());
    /// ```
    pub fn mean(&self) -> Option<Duration> {
        let n = u32::try_from(self.count()).ok().filter(|n| *n > 0)?;
        Some(self.total / n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_land_where_they_belong() {
        let c = Counters::default();
        c.hold_up();
        c.hold_up();
        c.hold_down();
        c.acquired("fenced");
        c.acquired("fenced");
        c.acquired("something new");
        c.waited(WaitEnd::Acquired, Duration::from_micros(500));
        c.waited(WaitEnd::TimedOut, Duration::from_secs(2));
        c.waited(WaitEnd::Failed, Duration::from_secs(120));
        c.lost(LossReason::Expired);
        c.subscription_fallback();
        c.release_retry();
        c.release_retry();
        let s = c.snapshot(Renewals {
            calls: 7,
            renewed: 640,
            failures: 1,
            last_round: Duration::from_millis(3),
            longest_round: Duration::from_millis(9),
        });
        assert_eq!(s.held, 1);
        assert_eq!(s.acquired, [("fenced", 2), ("other", 1)]);
        assert_eq!(s.waits.count(), 3);
        assert_eq!(s.waits.max, Duration::from_secs(120));
        assert_eq!(s.waits.buckets[0], (Some(Duration::from_millis(1)), 1));
        assert_eq!(s.waits.buckets[4], (Some(Duration::from_secs(10)), 1));
        assert_eq!(s.waits.buckets[6], (None, 1));
        assert_eq!(s.losses, [(LossReason::Expired, 1)]);
        assert_eq!((s.renewal_calls, s.renewal_failures), (7, 1));
        assert_eq!(s.renewed_holds, 640);
        assert_eq!(
            (s.last_renewal_round, s.longest_renewal_round),
            (Duration::from_millis(3), Duration::from_millis(9))
        );
        assert_eq!((s.subscription_fallbacks, s.release_retries), (1, 2));
        let mean = s.waits.mean().unwrap();
        assert!(mean > Duration::from_secs(40) && mean < Duration::from_secs(41));
    }
}

#[cfg(all(test, feature = "metrics"))]
mod metrics_tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use metrics::{
        Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString,
        Unit,
    };

    /// Every series by `name{label=value,…}`: counters and gauges as their
    /// atomic, histograms as the count of their records.
    #[derive(Default)]
    struct Seen(Mutex<HashMap<String, Arc<AtomicU64>>>);

    struct Records(Arc<AtomicU64>);
    impl HistogramFn for Records {
        fn record(&self, _: f64) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    impl Seen {
        fn series(&self, key: &Key) -> Arc<AtomicU64> {
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            let name = format!("{}{{{}}}", key.name(), labels.join(","));
            let mut m = self.0.lock().unwrap();
            Arc::clone(m.entry(name).or_default())
        }

        fn get(&self, name: &str) -> u64 {
            self.0
                .lock()
                .unwrap()
                .get(name)
                .map_or(0, |a| a.load(Ordering::Relaxed))
        }
    }

    impl Recorder for Seen {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            Counter::from_arc(self.series(key))
        }
        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::from_arc(self.series(key))
        }
        fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::from_arc(Arc::new(Records(self.series(key))))
        }
    }

    #[test]
    fn every_count_also_reaches_the_metrics_facade() {
        let seen = Seen::default();
        metrics::with_local_recorder(&seen, || {
            let c = Counters::default();
            c.hold_up();
            c.hold_up();
            c.hold_down();
            c.acquired("fair");
            c.waited(WaitEnd::TimedOut, Duration::from_millis(5));
            c.lost(LossReason::Gone);
            c.subscription_fallback();
            c.release_retry();
        });
        assert_eq!(f64::from_bits(seen.get("keylatch_holds{}")), 1.0);
        assert_eq!(seen.get("keylatch_acquisitions_total{kind=fair}"), 1);
        assert_eq!(seen.get("keylatch_waits_total{outcome=timed_out}"), 1);
        assert_eq!(seen.get("keylatch_wait_seconds{}"), 1);
        assert_eq!(seen.get("keylatch_losses_total{reason=gone}"), 1);
        assert_eq!(seen.get("keylatch_subscription_fallbacks_total{}"), 1);
        assert_eq!(seen.get("keylatch_release_retries_total{}"), 1);
    }
}
