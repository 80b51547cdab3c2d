//! How a waiter learns it may try again: a subscription to the channel a
//! release publishes on, or polling when none can be had. Shared by the
//! reentrant lock's waiters (`acquire.rs`), the fair lock's (`fair.rs`),
//! and the semaphores' and the latch's (`semaphore.rs`, `latch.rs`).

use std::time::{Duration, Instant};

use keylatch_cluster::{Event, Subscription};

use crate::context::Inner;

/// The first poll interval; it doubles up to the re-check interval.
const FIRST_POLL: Duration = Duration::from_millis(10);

/// A waiter's wake-up source.
pub(crate) struct Wake {
    sub: Option<Subscription>,
    /// Woken by name (an RLock hash's waiter, see `rlock_hash.rs`): the
    /// channel releases name the one waiter they wake on, and this
    /// waiter's owner id. While it is there, the lock's channel wakes this
    /// waiter only for `"0"`; a release that woke a registered waiter by
    /// name says `"00"` there, for Redisson's waiters alone.
    named: Option<Named>,
    poll: Duration,
    recheck: Duration,
    /// The lock's name, for the wake events (a wait is the slow path: the
    /// copy is cheap next to the subscription).
    name: Box<str>,
}

impl Wake {
    /// Subscribes to `channel` through the shared hub, the way releases
    /// publish on it. Setting up (perhaps connecting the hub) counts against
    /// the wait and never takes longer than a re-check interval: past that,
    /// or on any failure, the waiter polls instead (said once in the log).
    pub(crate) async fn subscribe(
        inner: &Inner,
        name: &str,
        channel: &str,
        deadline: Option<Instant>,
    ) -> Self {
        let sharded = inner.client.has_sharded_pubsub();
        Self::subscribe_on(inner, name, channel, deadline, sharded).await
    }

    /// [`subscribe`](Self::subscribe), sharded (SSUBSCRIBE) or not as
    /// `sharded` says: a channel outside its key's slot (the latch's, which
    /// Redisson always names in braces) cannot be sharded with it.
    pub(crate) async fn subscribe_on(
        inner: &Inner,
        name: &str,
        channel: &str,
        deadline: Option<Instant>,
        sharded: bool,
    ) -> Self {
        let setup = async {
            let Some(hub) = inner.pubsub().await else {
                tracing::warn!(lock = %name,
                    "pub/sub hub unavailable; waiting by polling instead");
                return None;
            };
            let sub = if sharded {
                hub.ssubscribe(channel).await
            } else {
                hub.subscribe(channel).await
            };
            match sub {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(lock = %name, error = %e,
                        "no unlock subscription; waiting by polling instead");
                    None
                }
            }
        };
        // (`recheck` is clamped to ten years, so this cannot overflow.)
        let recheck = inner.config.recheck;
        let mut limit = Instant::now() + recheck;
        if let Some(d) = deadline {
            limit = limit.min(d);
        }
        let sub = tokio::time::timeout_at(limit.into(), setup)
            .await
            .unwrap_or_else(|_| {
                tracing::warn!(lock = %name,
                    "unlock subscription not ready in time; waiting by polling instead");
                None
            });
        if sub.is_none() {
            inner.counters.subscription_fallback();
        }
        tracing::debug!(lock = %name, channel,
            via = if sub.is_some() { "subscription" } else { "polling" }, "waiting");
        Self {
            sub,
            named: None,
            poll: FIRST_POLL,
            recheck,
            name: name.into(),
        }
    }

    /// [`subscribe`](Self::subscribe), and to `by_name`, the channel a
    /// release names the waiter it wakes on (its process's own): this
    /// waiter wakes there for any owner of its process (`owner` up to its
    /// last `:`, the client id): it is the head of the process's local
    /// queue by the time it pauses (it may subscribe while it queues), and
    /// a process-mate behind it may have registered first. A message
    /// that grants the lock to `owner`'s wait `tag` ends the wait with the
    /// lock ([`pause`](Self::pause) answers the grant). On `channel` it
    /// wakes only for a plain `"0"`. Without both subscriptions it wakes
    /// for every message, as a waiter not woken by name does
    /// ([`named`](Self::named) says which).
    pub(crate) async fn subscribe_named(
        inner: &Inner,
        name: &str,
        channel: &str,
        by_name: &str,
        owner: &str,
        tag: u16,
        deadline: Option<Instant>,
    ) -> Self {
        // Both at once: on a hot lock each is a hop to the hub, and this
        // runs before a first try.
        let mut limit = Instant::now() + inner.config.recheck;
        if let Some(d) = deadline {
            limit = limit.min(d);
        }
        let setup = async {
            let hub = inner.pubsub().await?;
            if inner.client.has_sharded_pubsub() {
                hub.ssubscribe(by_name).await.ok()
            } else {
                hub.subscribe(by_name).await.ok()
            }
        };
        let (mut wake, named) = tokio::join!(
            Self::subscribe(inner, name, channel, deadline),
            tokio::time::timeout_at(limit.into(), setup)
        );
        if wake.sub.is_none() {
            return wake;
        }
        if let Ok(Some(sub)) = named {
            let process = owner.rfind(':').map_or(owner, |i| &owner[..=i]);
            wake.named = Some(Named {
                sub,
                process: process.into(),
                owner: owner.into(),
                tag,
            });
        }
        wake
    }

    /// Drops the events heard so far (without waiting): a waiter that
    /// subscribed while queued behind process-mates heard their wakes and
    /// grants, none of which is its own (it registers with its next try),
    /// and each would cost it a try of its own. An ended subscription is
    /// dropped as [`pause`](Self::pause) would.
    pub(crate) async fn forget_heard(&mut self) {
        std::future::poll_fn(|cx| {
            if let Some(named) = self.named.as_mut() {
                if drain(&mut named.sub, cx) {
                    self.named = None;
                }
            }
            if let Some(sub) = self.sub.as_mut() {
                if drain(sub, cx) {
                    tracing::warn!(lock = %self.name,
                        "unlock subscription ended; waiting by polling instead");
                    self.sub = None;
                    self.named = None;
                }
            }
            std::task::Poll::Ready(())
        })
        .await;
    }

    /// Whether this waiter polls (no subscription could be had, or it
    /// ended).
    pub(crate) fn polling(&self) -> bool {
        self.sub.is_none()
    }

    /// Whether releases can wake this waiter by name: only then may its
    /// tries register it among the waiters a release wakes.
    pub(crate) fn named(&self) -> bool {
        self.named.is_some()
    }

    /// Waits until a message, a gap (resubscribed: re-check), or `nap`
    /// runs out, all of which lead to another try. Polling, it sleeps the
    /// shorter of `nap` and a poll interval that doubles up to the re-check.
    /// A waiter woken by name may instead be granted the lock: then the
    /// grant is the answer, and the wait is over.
    pub(crate) async fn pause(&mut self, nap: Duration) -> Option<Grant> {
        if self.named.is_some() {
            let by = match self.pause_named(nap).await {
                Ok(by) => by,
                Err(grant) => {
                    tracing::debug!(lock = %self.name, "granted the lock by its release");
                    return Some(grant);
                }
            };
            tracing::debug!(lock = %self.name, by, "woken; trying again");
            return None;
        }
        let by = match self.sub.as_mut() {
            Some(s) => match tokio::time::timeout(nap, s.recv()).await {
                Ok(Some(Event::Message { .. })) => "unlock message",
                Ok(Some(Event::Gap)) => "resubscribed (gap)",
                Ok(Some(_)) => "messages dropped (lagged)",
                Ok(None) => {
                    // The subscription ended: poll from now on.
                    tracing::warn!(lock = %self.name,
                        "unlock subscription ended; waiting by polling instead");
                    self.sub = None;
                    "subscription ended"
                }
                Err(_) => "timer (lease end or re-check)",
            },
            None => {
                tokio::time::sleep(nap.min(self.poll)).await;
                self.poll = (self.poll * 2).min(self.recheck);
                "poll"
            }
        };
        tracing::debug!(lock = %self.name, by, "woken; trying again");
        None
    }

    /// [`pause`](Self::pause) of a waiter woken by name: messages for
    /// others (another waiter's name, a `"00"`) do not end it; a grant to
    /// this wait is the `Err`.
    async fn pause_named(&mut self, nap: Duration) -> Result<&'static str, Grant> {
        let until = tokio::time::Instant::now() + nap;
        loop {
            let (Some(sub), Some(named)) = (self.sub.as_mut(), self.named.as_mut()) else {
                return Ok("subscription ended");
            };
            let event = tokio::select! {
                // Messages before the timer: a grant already here is taken
                // rather than a try sent for it.
                biased;
                e = named.sub.recv() => Heard::Named(e),
                e = sub.recv() => Heard::Lock(e),
                () = tokio::time::sleep_until(until) => return Ok("timer (lease end or re-check)"),
            };
            match event {
                Heard::Lock(Some(Event::Message { payload, .. })) => {
                    if &payload[..] == b"0" {
                        return Ok("unlock message");
                    }
                }
                Heard::Named(Some(Event::Message { payload, .. })) => {
                    if let Some(grant) = Grant::parse(&payload, &named.owner, named.tag) {
                        return Err(grant);
                    }
                    if payload.starts_with(named.process.as_bytes()) {
                        return Ok("woken by name");
                    }
                }
                Heard::Lock(Some(_)) | Heard::Named(Some(_)) => {
                    return Ok("resubscribed (gap) or messages dropped (lagged)")
                }
                Heard::Lock(None) => {
                    tracing::warn!(lock = %self.name,
                        "unlock subscription ended; waiting by polling instead");
                    self.sub = None;
                    self.named = None;
                    return Ok("subscription ended");
                }
                Heard::Named(None) => {
                    // Registered or not, every message on the lock's channel
                    // wakes it from now on.
                    self.named = None;
                    return Ok("subscription ended");
                }
            }
        }
    }
}

/// Pops what `sub` holds until it is empty; `true` if it has ended.
fn drain(sub: &mut Subscription, cx: &mut std::task::Context<'_>) -> bool {
    // Bounded: an inbox holds at most its capacity, and a message pushed
    // while this runs only makes one more turn.
    for _ in 0..4096 {
        match sub.poll_recv(cx) {
            std::task::Poll::Ready(Some(_)) => {}
            std::task::Poll::Ready(None) => return true,
            std::task::Poll::Pending => return false,
        }
    }
    false
}

/// The waiter's channel a message (or its end) came on.
enum Heard {
    Lock(Option<Event>),
    Named(Option<Event>),
}

/// A waiter woken by name: its subscription, the prefix of its process's
/// owner ids (`<client id>:`), and its own owner id and wait tag (0: it is
/// never granted the lock).
struct Named {
    sub: Subscription,
    process: Box<str>,
    owner: Box<str>,
    tag: u16,
}

/// A release handed the lock to this wait (`lua/lib/grant_waiter.lua`): the
/// hold's token, and how long the server keeps it from the grant on
/// (before the waiter's watchdog renews it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) token: i64,
    pub(crate) lease: Duration,
}

impl Grant {
    /// The grant in a message on the waiters' channel,
    /// `"<owner> <tag> <token> <ms>"`, when it names `owner`'s wait `tag`
    /// (an owner id may hold spaces: the fields are read from the right).
    /// Anything else (a plain wake, another waiter, another wait of this
    /// owner, tag 0) is `None`.
    fn parse(payload: &[u8], owner: &str, tag: u16) -> Option<Self> {
        if tag == 0 {
            return None;
        }
        let text = std::str::from_utf8(payload).ok()?;
        let mut fields = text.rsplitn(4, ' ');
        let ms: u64 = fields.next()?.parse().ok()?;
        let token: i64 = fields.next()?.parse().ok()?;
        let their_tag: u16 = fields.next()?.parse().ok()?;
        let who = fields.next()?;
        (who == owner && their_tag == tag && ms > 0).then(|| Self {
            token,
            lease: Duration::from_millis(ms),
        })
    }
}

/// How long to sleep before trying again, from the PTTL (or wait) a try
/// answered: `-2` (the key went between two commands) at once; `0` (the
/// key expires this very millisecond: PTTL answers 0, not -2, until the
/// clock moves past it) one millisecond; a positive wait that long; `-1`
/// (no expiry, not ours to judge) or anything else, `recheck`. The caller
/// bounds the result by its own caps and what is left of its wait.
pub(crate) fn nap_for(pttl: i64, recheck: Duration) -> Duration {
    match pttl {
        -2 => Duration::ZERO,
        0 => Duration::from_millis(1),
        p if p > 0 => Duration::from_millis(p.unsigned_abs()),
        _ => recheck,
    }
}

/// A wait's tries made again at once in a row. A try told that the key
/// went between two commands (`-2`) is made again at once; a server that
/// keeps saying so (no real lock does: a script runs whole) would have the
/// wait spin on it, so past [`AtOnce::FREE`] in a row the pauses double
/// from 1 ms up to the re-check, as for a lock that has no PTTL.
#[derive(Debug, Default)]
pub(crate) struct AtOnce(u8);

impl AtOnce {
    /// Tries made again at once before the pauses start.
    const FREE: u8 = 3;

    /// [`nap_for`]'s pause for `pttl`, or a longer one when this would be
    /// one try too many made at once in a row.
    pub(crate) fn nap(&mut self, pttl: i64, recheck: Duration) -> Duration {
        let nap = nap_for(pttl, recheck);
        if !nap.is_zero() {
            self.0 = 0;
            return nap;
        }
        self.0 = self.0.saturating_add(1);
        if self.0 <= Self::FREE {
            return nap;
        }
        let doublings = u32::from(self.0 - Self::FREE - 1).min(16);
        Duration::from_millis(1u64 << doublings).min(recheck)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tries_made_at_once_in_a_row_are_bounded() {
        let recheck = Duration::from_millis(100);
        let mut a = AtOnce::default();
        let naps: Vec<u128> = (0..12).map(|_| a.nap(-2, recheck).as_millis()).collect();
        assert_eq!(naps, [0, 0, 0, 1, 2, 4, 8, 16, 32, 64, 100, 100]);
        // A try with a PTTL in between starts the count again.
        assert_eq!(a.nap(7, recheck).as_millis(), 7);
        assert_eq!(a.nap(-2, recheck), Duration::ZERO);
        let mut long = AtOnce(u8::MAX);
        assert_eq!(long.nap(-2, recheck), recheck);
    }

    #[test]
    fn a_grant_is_read_only_for_its_own_wait() {
        let owner = "c0ffee:7";
        let grant = Grant::parse(b"c0ffee:7 12 1700000000000001 5000", owner, 12);
        assert_eq!(
            grant,
            Some(Grant {
                token: 1_700_000_000_000_001,
                lease: Duration::from_millis(5000)
            })
        );
        // Another wait of this owner, another owner, a plain wake, no tag.
        assert_eq!(Grant::parse(b"c0ffee:7 13 9 5000", owner, 12), None);
        assert_eq!(Grant::parse(b"c0ffee:8 12 9 5000", owner, 12), None);
        assert_eq!(Grant::parse(b"c0ffee:7", owner, 12), None);
        assert_eq!(Grant::parse(b"c0ffee:7 0 9 5000", owner, 0), None);
        assert_eq!(Grant::parse(b"c0ffee:7 12 9 0", owner, 12), None);
        assert_eq!(Grant::parse(b"c0ffee:7 12 nine 5000", owner, 12), None);
        // An owner id with spaces (`lock_with_owner`) is read from the right.
        let spaced = "my app : 3";
        assert_eq!(
            Grant::parse(b"my app : 3 4 77 300", spaced, 4).map(|g| g.token),
            Some(77)
        );
    }

    #[test]
    fn a_key_expiring_this_millisecond_is_tried_again_at_once_not_at_the_recheck() {
        let recheck = Duration::from_secs(20);
        assert_eq!(nap_for(0, recheck), Duration::from_millis(1));
        assert_eq!(nap_for(-2, recheck), Duration::ZERO);
        assert_eq!(nap_for(750, recheck), Duration::from_millis(750));
        assert_eq!(nap_for(-1, recheck), recheck);
        assert_eq!(nap_for(-7, recheck), recheck);
    }
}
