//! Spans as the arithmetic and the scripts take them.

use std::time::Duration;

/// Longest lease or max hold the arithmetic accepts (ten years): larger
/// values, such as `Duration::MAX` meaning "no limit", are clamped so that
/// `Instant + Duration` can never overflow.
pub(crate) fn clamp_span(d: Duration) -> Duration {
    d.min(Duration::from_secs(10 * 365 * 24 * 3600))
}

/// Milliseconds for PEXPIRE, at least 1.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}
