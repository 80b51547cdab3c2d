//! Instant arithmetic that cannot panic: durations come from users
//! (request timeout, health interval, retry caps), and `Instant + Duration`
//! panics when the sum does not fit.

use std::time::Duration;

use tokio::time::Instant;

/// About 30 years: "never" for any timer this crate arms.
const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// `now + d`, or far in the future when that does not fit.
pub(crate) fn later(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .or_else(|| now.checked_add(FAR))
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_durations_saturate() {
        let now = Instant::now();
        assert_eq!(
            later(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
        assert!(later(now, Duration::MAX) > now + Duration::from_secs(3600));
    }
}
