//! Waiting by backoff ([`Waiting::Backoff`](super::kind::Waiting)): no
//! pub/sub and no local queue: a waiter tries again after a capped
//! exponential backoff with jitter (1 ms doubling to 128 ms, each delay
//! drawn from the upper half of its ceiling, as Redisson's `RSpinLock`
//! waits). For very many locks with little contention, where a
//! subscription per waiter and a PUBLISH per release would cost more than
//! an occasional extra try.

use std::time::{Duration, Instant};

use keylatch_cluster::Backoff;

use crate::error::LockResult;

use super::attempt::Attempt;
use super::base::Lock;
use super::guard::LockGuard;

/// The first delay's ceiling.
pub(crate) const BACKOFF_FIRST: Duration = Duration::from_millis(1);
/// The largest delay.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_millis(128);

impl Lock {
    /// After a failed first try: back off, try again, until `deadline`.
    pub(crate) async fn wait_by_backoff(
        &self,
        deadline: Option<Instant>,
        lease: Option<Duration>,
    ) -> LockResult<Option<LockGuard>> {
        let mut backoff = Backoff::new(BACKOFF_FIRST, BACKOFF_MAX);
        loop {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                return Ok(None);
            }
            let mut nap = backoff.next_delay();
            if let Some(left) = left {
                nap = nap.min(left);
            }
            tokio::time::sleep(nap).await;
            match self.attempt(lease, deadline, false, 0).await? {
                Attempt::Acquired(g) => return Ok(Some(g)),
                // Gone between two commands: the next try comes soon.
                Attempt::Held(-2, _) => backoff.reset(),
                Attempt::Held(..) => {}
            }
        }
    }
}
