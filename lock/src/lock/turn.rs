//! Waiting for a turn: in this process's queue for the name, then on the
//! lock's channel, trying again on every unlock message, PTTL expiry or
//! re-check. A kind with a place (a writer's marker holding new readers
//! back, an RLock waiter's entry among those a release wakes by name)
//! keeps it at each try and gives it up however the wait ends without the
//! lock.

use std::time::{Duration, Instant};

use crate::error::LockResult;
use crate::lease::hold::clamp_span;
use crate::waiters::Turn;
use crate::wake::{AtOnce, Grant, Wake};

use super::attempt::Attempt;
use super::base::{Lock, ReplicaSync};
use super::depart::Departure;
use super::guard::LockGuard;
use super::kind::Waiting;
use super::rlock_hash::waiters_channel;

/// How many process-mates may hold or wait for a name's turn for a waiter
/// queueing behind them to subscribe while it queues. Each subscribed
/// waiter is one more inbox every message on the lock's channels goes to,
/// holding what it hears (up to the hub's listener capacity) until its
/// turn: a long queue subscribes only at its head.
const SUBSCRIBED_AHEAD: usize = 16;

impl Lock {
    /// After a failed first try: queue locally, subscribe, and try again on
    /// every unlock message (or wake by name), PTTL expiry or re-check,
    /// until `deadline`.
    /// `turn`: this process's turn for the name, when the caller took it
    /// already (`WaitQueues::enter_idle`). `held` is set once a try finds
    /// the lock held (the acquire waited).
    pub(crate) async fn wait_for_turn(
        &self,
        deadline: Option<Instant>,
        lease: Option<Duration>,
        turn: Option<Turn>,
        held: &mut bool,
    ) -> LockResult<Option<LockGuard>> {
        // A waiting writer holds new readers back with a marker, and an
        // RLock hash's waiter registers to be woken by name; either is
        // taken back however the wait ends without the lock.
        let mut place = match self.handle.kind.waiting {
            Waiting::Turn(place) => place,
            Waiting::Queue { .. } | Waiting::Backoff => None,
        };
        let by_name = place.is_some_and(|p| p.by_name);
        let tag = self.wait_tag(by_name, lease);
        let Some((_turn, mut wake)) = self.turn_and_listen(turn, by_name, tag, deadline).await
        else {
            return Ok(None);
        };
        if by_name && !wake.named() {
            // Nobody would hear a wake by name: wait for "0" as before,
            // unregistered.
            place = None;
        }
        let tag = if place.is_some() { tag } else { 0 };
        let mut marker = Departure::new(self, place);
        marker.tag(tag);
        let join = place.is_some();
        let cap = self.nap_cap(join, tag);
        // The fencing counter's value the last try saw (its reply's third
        // element; a try that is no waiter's says nothing: 0).
        let mut seen: i64;
        let mut at_once = AtOnce::default();
        loop {
            // Before the try is sent: a grant that its reply finds not yet
            // made is made after this (the server runs calls in order), so
            // the lease a grant gives counts from no earlier than here.
            let sent_at = Instant::now();
            let pttl = match self.attempt(lease, deadline, join, tag).await? {
                Attempt::Acquired(g) => {
                    // The acquire took this waiter's place away itself.
                    marker.keep();
                    return Ok(Some(g));
                }
                Attempt::Held(pttl, counter) => {
                    seen = counter;
                    pttl
                }
            };
            let now = Instant::now();
            *held = true;
            self.handle.contended(now);
            let left = deadline.map(|d| d.saturating_duration_since(now));
            if left == Some(Duration::ZERO) {
                marker.now().await;
                return Ok(None);
            }
            let mut nap = at_once.nap(pttl, self.inner.config.recheck).min(cap);
            if let Some(left) = left {
                nap = nap.min(left);
            }
            if let Some(grant) = wake.pause(nap).await {
                // A grant not above the counter the last try saw was made
                // before that try ran, and undone since (else the try
                // would have taken it): stale. Try again instead.
                if grant.token > seen {
                    marker.keep();
                    return Ok(Some(self.granted(grant, sent_at)));
                }
            }
        }
    }

    /// This process's turn for the name and the wait's subscriptions. A
    /// waiter queued near the head, behind process-mates, subscribes while
    /// it queues, so its first try follows its turn at once (on a
    /// multi-thread runtime a subscription is two hops between workers,
    /// as long as the try's own round trip on loopback); what it heard
    /// meanwhile was its process-mates' wakes, and is forgotten: that try
    /// sees the lock as it is. Further back ([`SUBSCRIBED_AHEAD`]) it
    /// subscribes once it has its turn. `None`: the turn was not had by
    /// `deadline`.
    async fn turn_and_listen(
        &self,
        turn: Option<Turn>,
        by_name: bool,
        tag: u16,
        deadline: Option<Instant>,
    ) -> Option<(Turn, Wake)> {
        if let Some(turn) = turn {
            return Some((turn, self.listen(by_name, tag, deadline).await));
        }
        // (Past its deadline it only asks for the turn: a subscription
        // could not be had in no time, and would be warned of.)
        let late = deadline.is_some_and(|d| d <= Instant::now());
        if late || self.inner.waiters.queued(&self.handle.names.key) > SUBSCRIBED_AHEAD {
            let turn = self.take_turn(None, deadline).await?;
            return Some((turn, self.listen(by_name, tag, deadline).await));
        }
        let (turn, wake) = tokio::join!(
            self.take_turn(None, deadline),
            self.listen(by_name, tag, deadline)
        );
        let turn = turn?;
        let mut wake = wake;
        if wake.polling() && self.inner.pubsub_connected() {
            // The hub was down while it queued and is back: subscribe now
            // rather than poll the whole wait.
            wake = self.listen(by_name, tag, deadline).await;
        } else {
            wake.forget_heard().await;
        }
        Some((turn, wake))
    }

    /// This process's turn for the name: `turn` if the caller took it
    /// already, else a place in the local queue, until `deadline` (`None`:
    /// not had in time).
    async fn take_turn(&self, turn: Option<Turn>, deadline: Option<Instant>) -> Option<Turn> {
        if turn.is_some() {
            return turn;
        }
        let queued = self.inner.waiters.enter(&self.handle.names.key);
        let t = match deadline {
            Some(d) => tokio::time::timeout_at(d.into(), queued).await.ok()?,
            None => queued.await,
        };
        // A clone ahead in the queue may have been dropped just as it was
        // granted: its leave goes first.
        self.after_own_leaves().await;
        Some(t)
    }

    /// The longest nap between two tries of this wait: the re-check; with a
    /// place, a third of its span (a call that often keeps it); tagged, a
    /// quarter of the watchdog lease: a granted hold's lease counts from
    /// before the last try (the only instant known to precede the grant),
    /// so this leaves a granted guard three quarters of it, as much as a
    /// renewal's margin. (With a 1 s lease and a 1 s nap, guards were
    /// granted past their deadline and lost at once.)
    fn nap_cap(&self, place: bool, tag: u16) -> Duration {
        let cfg = &self.inner.config;
        let mut cap = cfg.recheck;
        if place {
            cap = cap.min(cfg.fair_waiter_timeout / 3);
        }
        if tag != 0 {
            cap = cap.min(cfg.watchdog_timeout / 4);
        }
        cap
    }

    /// The tag of a wait a release may grant the lock to (see
    /// `Inner::grant_tag`), else 0: a waiter by name that holds under the
    /// watchdog, with no replica check to make (the grant's write was the
    /// releaser's). Only an owner id this client made (`<client id>:<n>`)
    /// is tagged: one given by the application (`lock_with_owner`) may be
    /// acted as by other handles and processes too, whose tags would not
    /// be told apart, nor their process channels.
    fn wait_tag(&self, by_name: bool, lease: Option<Duration>) -> u16 {
        let grantable = by_name
            && self.inner.config.grant_to_waiters
            && self.inner.made_owner(&self.handle.owner())
            && lease.is_none()
            && matches!(self.replica_sync(), ReplicaSync::None);
        if grantable {
            self.inner.grant_tag()
        } else {
            0
        }
    }

    /// The guard for a lock a release granted this wait: a first hold of
    /// the grant's token, for the grant's lease (the releaser's watchdog
    /// lease; at most this client's, which renews with it) counted from
    /// `sent_at`, before the grant was made, handed to the watchdog.
    fn granted(&self, grant: Grant, sent_at: Instant) -> LockGuard {
        let lease = clamp_span(grant.lease.min(self.inner.config.watchdog_timeout));
        self.guard_for(1, grant.token, true, lease, sent_at, false)
    }

    /// The waiter's subscriptions: the lock's channel, and with `by_name`
    /// the channel releases wake waiters on by name (and grant wait `tag`
    /// the lock on, when not 0).
    async fn listen(&self, by_name: bool, tag: u16, deadline: Option<Instant>) -> Wake {
        let names = &self.handle.names;
        if !by_name {
            return Wake::subscribe(&self.inner, &names.key, &names.channel(), deadline).await;
        }
        Wake::subscribe_named(
            &self.inner,
            &names.key,
            &names.channel(),
            &waiters_channel(names, &self.handle.owner()),
            &self.handle.owner(),
            tag,
            deadline,
        )
        .await
    }
}
