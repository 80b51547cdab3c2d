//! Waiting for a turn: in this process's queue for the name, then on the
//! lock's channel, trying again on every unlock message, PTTL expiry or
//! re-check. A kind with a place (a writer's marker holding new readers
//! back) keeps it at each try and gives it up however the wait ends
//! without the lock.

use std::time::{Duration, Instant};

use crate::error::LockResult;
use crate::wake::{nap_for, Wake};

use super::attempt::Attempt;
use super::base::Lock;
use super::depart::Departure;
use super::guard::LockGuard;
use super::kind::Waiting;

impl Lock {
    /// After a failed first try: queue locally, subscribe, and try again on
    /// every unlock message, PTTL expiry or re-check, until `deadline`.
    pub(crate) async fn wait_for_turn(
        &self,
        deadline: Option<Instant>,
        lease: Option<Duration>,
    ) -> LockResult<Option<LockGuard>> {
        let queued = self.inner.waiters.enter(&self.handle.names.key);
        let _turn = match deadline {
            Some(d) => match tokio::time::timeout_at(d.into(), queued).await {
                Ok(t) => t,
                Err(_) => return Ok(None),
            },
            None => queued.await,
        };
        let mut wake = Wake::subscribe(
            &self.inner,
            &self.handle.names.key,
            &self.handle.names.channel,
            deadline,
        )
        .await;
        // A waiting writer holds new readers back with a marker, which it
        // takes back however its wait ends without the lock.
        let place = match self.handle.kind.waiting {
            Waiting::Turn(place) => place,
            Waiting::Queue { .. } | Waiting::Backoff => None,
        };
        let writer = place.is_some();
        let mut marker = Departure::new(self, place);
        let mut cap = self.inner.config.recheck;
        if writer {
            // A call at least every third of the marker's span keeps it.
            cap = cap.min(self.inner.config.fair_waiter_timeout / 3);
        }
        loop {
            let pttl = match self.attempt(lease, deadline, writer).await? {
                Attempt::Acquired(g) => {
                    // The acquire took this writer's marker away itself.
                    marker.keep();
                    return Ok(Some(g));
                }
                Attempt::Held(pttl) => pttl,
            };
            let now = Instant::now();
            let left = deadline.map(|d| d.saturating_duration_since(now));
            if left == Some(Duration::ZERO) {
                marker.now().await;
                return Ok(None);
            }
            let mut nap = nap_for(pttl, self.inner.config.recheck).min(cap);
            if let Some(left) = left {
                nap = nap.min(left);
            }
            wake.pause(nap).await;
        }
    }
}
