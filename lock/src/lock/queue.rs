//! Waiting in the server's queue (a fair lock's): the queue is the order,
//! so waiters of one process do not queue locally first (that would let a
//! later process overtake them). Each try keeps the waiter's place and its
//! deadline; the waiter is woken on its own channel when it reaches the
//! head, and gives its place up however the wait ends without the lock.

use std::time::{Duration, Instant};

use crate::error::LockResult;
use crate::wake::{AtOnce, Wake};

use super::attempt::Attempt;
use super::base::Lock;
use super::depart::Departure;
use super::guard::LockGuard;
use super::kind::Waiting;

impl Lock {
    /// Try, joining the queue; then wait for the head's message, a nap or
    /// a re-check, and try again (which renews this owner's deadline),
    /// until `deadline`. However it ends without the lock (past the
    /// deadline, an error, dropped), the owner leaves the queue.
    pub(crate) async fn wait_in_queue(
        &self,
        deadline: Option<Instant>,
        lease: Option<Duration>,
    ) -> LockResult<Option<LockGuard>> {
        let Waiting::Queue { place, channel } = self.handle.kind.waiting else {
            return Box::pin(self.wait_for_turn(deadline, lease, None, &mut false)).await;
        };
        let mut leave = Departure::new(self, Some(place));
        // The uncontended case needs no subscription. (Once subscribed, the
        // loop tries again at once: a release in between is not missed.)
        if let Attempt::Acquired(g) = self.attempt(lease, deadline, true, 0).await? {
            leave.keep();
            return Ok(Some(g));
        }
        let channel = channel(&self.handle.names, &self.handle.owner());
        let cfg = &self.inner.config;
        let mut wake =
            Wake::subscribe(&self.inner, &self.handle.names.key, &channel, deadline).await;
        // A call at least every third of the deadline span keeps the place.
        let renew = cfg.fair_waiter_timeout / 3;
        let mut at_once = AtOnce::default();
        loop {
            let wait = match self.attempt(lease, deadline, true, 0).await? {
                Attempt::Acquired(g) => {
                    // The acquire took this owner out of the queue.
                    leave.keep();
                    return Ok(Some(g));
                }
                Attempt::Held(wait, _) => wait,
            };
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                leave.now().await;
                return Ok(None);
            }
            let mut nap = at_once.nap(wait, cfg.recheck).min(cfg.recheck).min(renew);
            if let Some(left) = left {
                nap = nap.min(left);
            }
            wake.pause(nap).await;
        }
    }
}
