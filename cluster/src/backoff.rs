//! Capped exponential backoff with jitter, for reconnects and retries.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// Delays that double per attempt up to a cap, each drawn uniformly from
/// `[d/2, d]` ("equal jitter") so that many clients that lost the same server
/// do not reconnect in lockstep.
///
/// ```
/// use std::time::Duration;
/// use keylatch_cluster::Backoff;
/// let mut b = Backoff::new(Duration::from_millis(10), Duration::from_millis(80));
/// let first = b.next_delay();
/// assert!(first >= Duration::from_millis(5) && first <= Duration::from_millis(10));
/// ```
#[derive(Clone, Debug)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    attempt: u32,
    rng: u64,
}

impl Backoff {
    /// A backoff starting at `min`, never above `max`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use keylatch_cluster::Backoff;
    /// let mut b = Backoff::new(Duration::from_millis(50), Duration::from_millis(10));
    /// assert_eq!(b.attempts(), 0);
    /// // A `max` below `min` is raised to `min`.
    /// for _ in 0..5 {
    ///     assert!(b.next_delay() <= Duration::from_millis(50));
    /// }
    /// ```
    pub fn new(min: Duration, max: Duration) -> Self {
        // RandomState is seeded per process and per instance: enough entropy
        // for jitter without a dependency on a random-number crate.
        let seed = RandomState::new().build_hasher().finish() | 1;
        Self {
            min,
            max: max.max(min),
            attempt: 0,
            rng: seed,
        }
    }

    /// The next delay; each call doubles the ceiling until `max`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use keylatch_cluster::Backoff;
    /// let mut b = Backoff::new(Duration::from_millis(10), Duration::from_millis(40));
    /// // Ceilings 10, 20, 40, 40 ms; each delay lies in [ceiling / 2, ceiling].
    /// for ceiling in [10, 20, 40, 40].map(Duration::from_millis) {
    ///     let d = b.next_delay();
    ///     assert!(d >= ceiling / 2 && d <= ceiling);
    /// }
    /// ```
    pub fn next_delay(&mut self) -> Duration {
        let shift = self.attempt.min(20);
        self.attempt = self.attempt.saturating_add(1);
        let ceiling = self.min.saturating_mul(1 << shift).min(self.max);
        let ceiling_ns = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        let half = ceiling_ns / 2;
        let jitter = if half == 0 {
            0
        } else {
            self.next_u64() % (half + 1)
        };
        Duration::from_nanos(half + jitter)
    }

    /// Starts over from `min` (after a success).
    ///
    /// ```
    /// use std::time::Duration;
    /// use keylatch_cluster::Backoff;
    /// let mut b = Backoff::new(Duration::from_millis(10), Duration::from_secs(1));
    /// for _ in 0..5 {
    ///     b.next_delay();
    /// }
    /// b.reset();
    /// assert_eq!(b.attempts(), 0);
    /// assert!(b.next_delay() <= Duration::from_millis(10)); // back to `min`
    /// ```
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// Attempts made since the last reset.
    ///
    /// ```
    /// use std::time::Duration;
    /// use keylatch_cluster::Backoff;
    /// let mut b = Backoff::new(Duration::from_millis(10), Duration::from_secs(1));
    /// b.next_delay();
    /// b.next_delay();
    /// assert_eq!(b.attempts(), 2);
    /// ```
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    fn next_u64(&mut self) -> u64 {
        // xorshift64: fast, and quality is irrelevant for jitter.
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_cap_with_jitter_in_range() {
        let min = Duration::from_millis(10);
        let max = Duration::from_millis(100);
        let mut b = Backoff::new(min, max);
        let mut ceiling = min;
        for _ in 0..50 {
            let d = b.next_delay();
            assert!(d >= ceiling / 2 && d <= ceiling, "{d:?} vs {ceiling:?}");
            ceiling = (ceiling * 2).min(max);
        }
        b.reset();
        assert!(b.next_delay() <= min);
        assert_eq!(b.attempts(), 1);
    }

    #[test]
    fn jitter_varies() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(1));
        let draws: std::collections::HashSet<_> = (0..20).map(|_| b.next_delay()).collect();
        assert!(draws.len() > 1);
    }
}
