//! Waiting for a fair lock ([`Locks::fair_lock`](crate::Locks::fair_lock)):
//! in the server's queue (Redisson's `redisson_lock_queue:{name}` and
//! `redisson_lock_timeout:{name}`), woken on the waiter's own channel
//! `redisson_lock__channel:{name}:<owner>` when it reaches the head.
//!
//! The queue is the order: unlike the reentrant lock's waiters, fair waiters
//! of one process do not queue locally first (a local queue would let a
//! later process overtake them). Java waiters (Redisson) share the queue, so
//! each entry has two times, both set at each of the waiter's calls (see
//! `lua/fair_acquire.lua`): its deadline in Redisson's zset, in Redisson's
//! chained form, `fair_wait_allowance` (300 s) per place ahead of it, which
//! Redisson's subtractions cannot push under the clock; and its liveness in
//! keylatch's own zset, server time + `fair_waiter_timeout`, by which
//! keylatch's scripts purge a dead keylatch waiter. The waiter calls at
//! least every third of `fair_waiter_timeout`, so a live waiter keeps its
//! place however long it waits and a dead one is purged within the span. A
//! waiter that gives up (its wait ran out, an error, or its future was
//! dropped) leaves the queue at once (`fair_leave.lua`), waking the next
//! head if the lock is free.

use std::time::{Duration, Instant};

use keylatch_cluster::Commands;
use keylatch_resp::Frame;

use crate::acquire::Attempt;
use crate::depart::{Departure, Place};
use crate::error::LockResult;
use crate::guard::LockGuard;
use crate::lock::Lock;
use crate::scripts::FAIR_LEAVE;
use crate::wake::Wake;

impl Lock {
    /// Try, joining the queue; then wait for the head's message, a nap or
    /// a re-check, and try again (which renews this owner's deadline),
    /// until `deadline`. However it ends without the lock (past the
    /// deadline, an error, dropped), the owner leaves the queue.
    pub(crate) async fn wait_fair(
        &self,
        deadline: Option<Instant>,
        lease: Option<Duration>,
    ) -> LockResult<Option<LockGuard>> {
        let mut leave = Departure::new(self, Some(Place::FairQueue));
        // The uncontended case needs no subscription. (Once subscribed, the
        // loop tries again at once: a release in between is not missed.)
        if let Attempt::Acquired(g) = self.attempt(lease, deadline, true).await? {
            leave.keep();
            return Ok(Some(g));
        }
        let channel = self.handle.names.fair_channel(self.owner());
        let cfg = &self.inner.config;
        let mut wake =
            Wake::subscribe(&self.inner, &self.handle.names.key, &channel, deadline).await;
        // A call at least every third of the deadline span keeps the place.
        let renew = cfg.fair_waiter_timeout / 3;
        loop {
            let wait = match self.attempt(lease, deadline, true).await? {
                Attempt::Acquired(g) => {
                    // The acquire took this owner out of the queue.
                    leave.keep();
                    return Ok(Some(g));
                }
                Attempt::Held(wait) => wait,
            };
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                leave.now().await;
                return Ok(None);
            }
            let mut nap = match wait {
                w if w > 0 => Duration::from_millis(w.unsigned_abs()),
                _ => cfg.recheck,
            }
            .min(cfg.recheck)
            .min(renew);
            if let Some(left) = left {
                nap = nap.min(left);
            }
            wake.pause(nap).await;
        }
    }
}

/// `fair_leave.lua` for this owner: `true` when it was queued.
pub(crate) async fn leave(lock: &Lock) -> LockResult<bool> {
    let names = &lock.handle.names;
    let q = names.fair_queue();
    let reply = lock
        .inner
        .client
        .eval_script(
            &FAIR_LEAVE,
            &[&*names.key, &q.queue, &q.timeouts, &q.alive],
            &[
                lock.owner(),
                names.channel.as_str(),
                lock.inner.publish_command(),
                lock.inner.script_args.fair_allowance_ms.as_str(),
            ],
        )
        .await?;
    Ok(*reply.value() == Frame::Integer(1))
}
