//! A log-linear latency histogram in the style of HdrHistogram: constant
//! memory, about 0.8 % relative precision, cheap to record and to merge.
//!
//! Values are nanoseconds. Below 128 ns every value has its own bucket;
//! above, each power of two is split into 128 equal buckets, so a bucket is
//! never wider than 1/128 of its lower bound. Values above [`Histogram::HIGHEST`]
//! (60 s) land in the last bucket; the exact minimum and maximum are kept
//! beside the buckets, so `max` is never rounded.

use std::time::Duration;

/// log2 of the buckets per power of two: 2^7 = 128 gives ≤ 0.79 % width.
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;

/// A latency histogram: [`record`](Self::record) durations, then read
/// [`percentile`](Self::percentile)s or walk the [`buckets`](Self::buckets)
/// for a CDF.
///
/// ```
/// use std::time::Duration;
/// use keylatch_cli::bench::Histogram;
///
/// let mut h = Histogram::new();
/// for us in 1..=1000 {
///     h.record(Duration::from_micros(us));
/// }
/// let p50 = h.percentile(50.0);
/// assert!((p50.as_secs_f64() * 1e6 - 500.0).abs() < 500.0 * 0.01);
/// assert_eq!(h.max(), Duration::from_micros(1000));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    min_ns: u64,
    max_ns: u64,
    sum_ns: u128,
}

/// One non-empty bucket, as [`Histogram::buckets`] yields them.
///
/// ```
/// use std::time::Duration;
/// use keylatch_cli::bench::Histogram;
///
/// let mut h = Histogram::new();
/// h.record(Duration::from_micros(10));
/// let b = h.buckets().next().unwrap();
/// assert_eq!((b.count, b.cumulative), (1, 1));
/// assert!(b.high >= Duration::from_micros(10));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// The highest value this bucket holds (values are reported as this).
    pub high: Duration,
    /// Values recorded in this bucket.
    pub count: u64,
    /// Values recorded in this bucket and every lower one.
    pub cumulative: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// The largest value kept apart from others (60 s); longer ones are
    /// counted in the last bucket.
    ///
    /// ```
    /// assert_eq!(keylatch_cli::bench::Histogram::HIGHEST.as_secs(), 60);
    /// ```
    pub const HIGHEST: Duration = Duration::from_secs(60);

    /// An empty histogram (about 30 KiB of counters).
    ///
    /// ```
    /// assert_eq!(keylatch_cli::bench::Histogram::new().count(), 0);
    /// ```
    pub fn new() -> Self {
        Self {
            counts: vec![0; index_of(nanos(Self::HIGHEST)) + 1],
            total: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            sum_ns: 0,
        }
    }

    /// Counts one value.
    ///
    /// ```
    /// let mut h = keylatch_cli::bench::Histogram::new();
    /// h.record(std::time::Duration::from_millis(2));
    /// assert_eq!(h.count(), 1);
    /// ```
    pub fn record(&mut self, d: Duration) {
        let ns = nanos(d);
        let i = index_of(ns.min(nanos(Self::HIGHEST)));
        if let Some(c) = self.counts.get_mut(i) {
            *c += 1;
        }
        self.total += 1;
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        self.sum_ns += u128::from(ns);
    }

    /// Adds every value of `other` (per-task histograms become one).
    ///
    /// ```
    /// use std::time::Duration;
    /// let (mut a, mut b) = (keylatch_cli::bench::Histogram::new(), keylatch_cli::bench::Histogram::new());
    /// a.record(Duration::from_micros(5));
    /// b.record(Duration::from_micros(7));
    /// a.merge(&b);
    /// assert_eq!((a.count(), a.max()), (2, Duration::from_micros(7)));
    /// ```
    pub fn merge(&mut self, other: &Histogram) {
        for (c, o) in self.counts.iter_mut().zip(&other.counts) {
            *c += o;
        }
        self.total += other.total;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.sum_ns += other.sum_ns;
    }

    /// Values recorded.
    ///
    /// ```
    /// assert_eq!(keylatch_cli::bench::Histogram::new().count(), 0);
    /// ```
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The smallest value recorded, exactly (zero when empty).
    ///
    /// ```
    /// let mut h = keylatch_cli::bench::Histogram::new();
    /// h.record(std::time::Duration::from_nanos(1234));
    /// assert_eq!(h.min().as_nanos(), 1234);
    /// ```
    pub fn min(&self) -> Duration {
        if self.total == 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos(self.min_ns)
        }
    }

    /// The largest value recorded, exactly (zero when empty).
    ///
    /// ```
    /// let mut h = keylatch_cli::bench::Histogram::new();
    /// h.record(std::time::Duration::from_nanos(98_765));
    /// assert_eq!(h.max().as_nanos(), 98_765);
    /// ```
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max_ns)
    }

    /// The mean, exactly (zero when empty).
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut h = keylatch_cli::bench::Histogram::new();
    /// h.record(Duration::from_micros(10));
    /// h.record(Duration::from_micros(20));
    /// assert_eq!(h.mean(), Duration::from_micros(15));
    /// ```
    pub fn mean(&self) -> Duration {
        match self.sum_ns.checked_div(u128::from(self.total)) {
            Some(m) => Duration::from_nanos(u64::try_from(m).unwrap_or(u64::MAX)),
            None => Duration::ZERO,
        }
    }

    /// The value at or below which `p` percent of the values lie (`p` is
    /// clamped to 0..=100), reported as the top of its bucket but never
    /// outside the exact minimum and maximum, so p50 ≤ p99 ≤ max always.
    /// Zero when empty.
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut h = keylatch_cli::bench::Histogram::new();
    /// for ms in [1, 2, 3, 4, 100] {
    ///     h.record(Duration::from_millis(ms));
    /// }
    /// assert!(h.percentile(50.0) <= h.percentile(99.0));
    /// assert_eq!(h.percentile(100.0), Duration::from_millis(100));
    /// ```
    pub fn percentile(&self, p: f64) -> Duration {
        if self.total == 0 {
            return Duration::ZERO;
        }
        let p = if p.is_nan() {
            100.0
        } else {
            p.clamp(0.0, 100.0)
        };
        if p == 0.0 {
            return self.min();
        }
        // The rank of the wanted value, 1-based: at least the first value.
        let rank = ((p / 100.0 * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Duration::from_nanos(self.reported(i, seen));
            }
        }
        self.max()
    }

    /// The non-empty buckets, lowest first, with running totals: the points
    /// of the empirical CDF (`cumulative / count()` at `high`).
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut h = keylatch_cli::bench::Histogram::new();
    /// h.record(Duration::from_micros(1));
    /// h.record(Duration::from_millis(1));
    /// let cdf: Vec<u64> = h.buckets().map(|b| b.cumulative).collect();
    /// assert_eq!(cdf, vec![1, 2]);
    /// ```
    pub fn buckets(&self) -> impl Iterator<Item = Bucket> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .scan(0u64, move |cumulative, (i, c)| {
                *cumulative += c;
                Some(Bucket {
                    high: Duration::from_nanos(self.reported(i, *cumulative)),
                    count: *c,
                    cumulative: *cumulative,
                })
            })
    }
}

impl Histogram {
    /// The value reported for bucket `i`, `cumulative` values in: its top,
    /// within the exact extremes; the exact maximum for the last bucket
    /// (which may hold values beyond [`Self::HIGHEST`]).
    fn reported(&self, i: usize, cumulative: u64) -> u64 {
        if cumulative >= self.total {
            self.max_ns
        } else {
            high_of(i).clamp(self.min_ns, self.max_ns)
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The bucket of `v` ns: exact below 128, then 128 buckets per power of two.
fn index_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let exponent = 63 - v.leading_zeros(); // ≥ SUB_BITS
    let shift = exponent - SUB_BITS;
    let mantissa = v >> shift; // in SUB..2*SUB
    ((shift as u64 + 1) * SUB + (mantissa - SUB)) as usize
}

/// The highest value bucket `i` holds.
fn high_of(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let shift = i / SUB - 1;
    let mantissa = SUB + i % SUB;
    ((mantissa + 1) << shift) - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lands_in_a_bucket_that_holds_it() {
        let mut v = 0u64;
        while v < nanos(Histogram::HIGHEST) {
            let i = index_of(v);
            let low = if i == 0 { 0 } else { high_of(i - 1) + 1 };
            assert!(low <= v && v <= high_of(i), "{v} in bucket {i}");
            v = v * 9 / 8 + 1;
        }
    }

    #[test]
    fn buckets_are_contiguous_and_narrow() {
        for i in 1..index_of(nanos(Histogram::HIGHEST)) {
            let low = high_of(i - 1) + 1;
            assert_eq!(index_of(low), i);
            assert_eq!(index_of(high_of(i)), i);
            let width = high_of(i) - low + 1;
            // Relative precision: a bucket is at most 1/128 of its start.
            assert!(width == 1 || width * SUB <= low, "bucket {i}");
        }
    }

    #[test]
    fn percentiles_are_within_one_percent() {
        let mut h = Histogram::new();
        for us in 1..=10_000u64 {
            h.record(Duration::from_micros(us));
        }
        for (p, want_us) in [(50.0, 5_000.0), (90.0, 9_000.0), (99.0, 9_900.0)] {
            let got = h.percentile(p).as_secs_f64() * 1e6;
            assert!(
                (got - want_us).abs() <= want_us * 0.01,
                "p{p}: {got} vs {want_us}"
            );
        }
        assert_eq!(h.percentile(0.0), Duration::from_micros(1));
        assert_eq!(h.percentile(100.0), Duration::from_micros(10_000));
        assert_eq!(h.count(), 10_000);
    }

    #[test]
    fn empty_extreme_and_odd_inputs_do_not_panic() {
        let mut h = Histogram::new();
        assert_eq!(h.percentile(50.0), Duration::ZERO);
        assert_eq!(
            (h.min(), h.max(), h.mean()),
            (Duration::ZERO, Duration::ZERO, Duration::ZERO)
        );
        assert_eq!(h.buckets().count(), 0);
        h.record(Duration::ZERO);
        h.record(Duration::from_secs(3600)); // beyond HIGHEST: last bucket, exact max
        assert_eq!(h.max(), Duration::from_secs(3600));
        assert_eq!(h.percentile(f64::NAN), Duration::from_secs(3600));
        assert_eq!(h.percentile(-5.0), Duration::ZERO);
        assert_eq!(h.percentile(500.0), Duration::from_secs(3600));
        let last = h.buckets().last().unwrap();
        assert_eq!(last.cumulative, 2);
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let (mut a, mut b, mut both) = (Histogram::new(), Histogram::new(), Histogram::new());
        for i in 0..1000u64 {
            let d = Duration::from_nanos(i * i * 37 + 500);
            if i % 3 == 0 {
                a.record(d)
            } else {
                b.record(d)
            }
            both.record(d);
        }
        a.merge(&b);
        assert_eq!(a, both);
        let cdf: Vec<Bucket> = a.buckets().collect();
        assert!(cdf
            .windows(2)
            .all(|w| w[0].high < w[1].high && w[0].cumulative < w[1].cumulative));
        assert_eq!(cdf.last().map(|b| b.cumulative), Some(1000));
    }
}
