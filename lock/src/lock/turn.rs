//! Waiting for a turn: in this process's queue for the name, then on the
//! lock's channel, trying again on every unlock message, PTTL expiry or
//! re-check. A kind with a place (a writer's marker holding new readers
//! back, an RLock waiter's entry among those a release wakes by name)
//! keeps it at each try and gives it up however the wait ends without the
//! lock.

use std::time::{Duration, Instant};

use crate::error::LockResult;
use crate::wake::{nap_for, Wake};

use super::attempt::Attempt;
use super::base::Lock;
use super::depart::Departure;
use super::guard::LockGuard;
use super::kind::Waiting;
use super::rlock_hash::waiters_key;

impl Lock {
    /// After a failed first try: queue locally, subscribe, and try again on
    /// every unlock message (or wake by name), PTTL expiry or re-check,
    /// until `deadline`.
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
        // A waiting writer holds new readers back with a marker, and an
        // RLock hash's waiter registers to be woken by name; either is
        // taken back however the wait ends without the lock.
        let mut place = match self.handle.kind.waiting {
            Waiting::Turn(place) => place,
            Waiting::Queue { .. } | Waiting::Backoff => None,
        };
        let by_name = place.is_some_and(|p| p.by_name);
        let mut wake = self.listen(by_name, deadline).await;
        if by_name && !wake.named() {
            // Nobody would hear a wake by name: wait for "0" as before,
            // unregistered.
            place = None;
        }
        let mut marker = Departure::new(self, place);
        let join = place.is_some();
        let mut cap = self.inner.config.recheck;
        if place.is_some() {
            // A call at least every third of the place's span keeps it.
            cap = cap.min(self.inner.config.fair_waiter_timeout / 3);
        }
        loop {
            let pttl = match self.attempt(lease, deadline, join).await? {
                Attempt::Acquired(g) => {
                    // The acquire took this waiter's place away itself.
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

    /// The waiter's subscriptions: the lock's channel, and with `by_name`
    /// the channel releases wake waiters on by name.
    async fn listen(&self, by_name: bool, deadline: Option<Instant>) -> Wake {
        let names = &self.handle.names;
        if !by_name {
            return Wake::subscribe(&self.inner, &names.key, &names.channel(), deadline).await;
        }
        Wake::subscribe_named(
            &self.inner,
            &names.key,
            &names.channel(),
            &waiters_key(names),
            self.handle.owner(),
            deadline,
        )
        .await
    }
}
