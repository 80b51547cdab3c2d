//! `Hold`: one hold of a lock, named by its token.
//!
//! A first acquire creates a `Hold` (shared as an `Arc`); re-entries that
//! return the same token join it, so the guards of one hold share one loss
//! signal, one local deadline and one guard count. The lease engine keeps a
//! `Weak` to it and renews it while a guard taken under the watchdog lives.
//!
//! Everything a caller and the engine both touch is an atomic here: no lock
//! is shared between callers and the engine.
//!
//! Life of a hold (drawn in ARCHITECTURE.md):
//! - *live*: guards > 0, not lost. Renewed while renewers > 0.
//! - *ended*: the last guard left (its release goes out after this). The
//!   engine drops it at its next look; a late re-entry reply with the same
//!   token *revives* it (a new epoch, so replies planned before are stale).
//! - *lost*: the loss signal fired (renewal found it gone, deadline passed,
//!   max hold, or a newer token of the same owner). Final.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

pub(crate) use crate::span::{clamp_span, millis};

use super::counters::Counters;
use super::key::HoldKey;
use super::reason::LossReason;
use super::renewal::Renewal;
use super::signal::{LossCell, LossSignal};

/// One hold: its identity (lock, owner, token), its lease state and its loss
/// signal.
pub(crate) struct Hold {
    pub(crate) key: HoldKey,
    /// The token the first acquire got: the hold's identity on the server.
    pub(crate) token: u64,
    /// The lease renewals use, in milliseconds: the first acquire's, then
    /// the longest of its watchdog guards' (once it has one). A fixed lease
    /// joining later (a re-entry's, an `extend`) only moves the deadline.
    lease_ms: AtomicU64,
    /// Local deadline: nanoseconds since [`base`]. Only ever moves later
    /// (every acquire and renewal is a lower bound of the key's expiry:
    /// nothing of ours shortens it).
    deadline: AtomicU64,
    /// When the max hold ends renewal, if one was set.
    /// In nanoseconds since [`base`] (`u64::MAX`: none): half the room of
    /// an `Option<Instant>`.
    max_hold_end: u64,
    counters: Arc<Counters>,
    // The small fields together, so they pack into 16 bytes (a million
    // holds each carry them).
    /// Guards alive.
    guards: AtomicU32,
    /// Of those, guards taken under the watchdog: renewed while any lives.
    renewers: AtomicU32,
    /// Changes when the hold ends or is revived: engine replies planned
    /// under an older epoch do not apply (32 bits: a hold is not ended and
    /// revived four billion times while one reply is on its way).
    epoch: AtomicU32,
    /// The drift in permille, at most 1000 (see
    /// `LocksConfig::drift_permille`), in the low bits; [`COUNTER_MADE`]
    /// in the top one (a flag of its own would pad the small fields past
    /// 16 bytes).
    drift_permille: u16,
    /// Counted in the `Locks`' live holds.
    counted: AtomicBool,
    /// Inline: the hold is already shared, so the signal needs no `Arc`
    /// (and no allocation) of its own.
    pub(crate) lost: LossSignal,
    /// Why it was lost (see `lost`); a byte among the small fields.
    pub(crate) loss: LossCell,
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("name", self.key.name())
            .field("token", &self.token)
            .field("guards", &self.guards())
            .finish_non_exhaustive()
    }
}

/// In `Hold::drift_permille`: the first acquire's call made the fencing
/// counter, which then lives its whole idle expiry from the hold's start.
const COUNTER_MADE: u16 = 0x8000;

/// What a new hold starts with.
pub(crate) struct NewHold {
    pub(crate) key: HoldKey,
    pub(crate) token: u64,
    pub(crate) renew: bool,
    pub(crate) lease: Duration,
    pub(crate) sent_at: Instant,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) drift_permille: u32,
    pub(crate) counters: Arc<Counters>,
    /// The acquire's call made the fencing counter (`{1, token, 1}`).
    pub(crate) counter_made: bool,
}

impl Hold {
    pub(crate) fn new(n: NewHold) -> Arc<Self> {
        n.counters.hold_up();
        let hold = Self {
            key: n.key,
            token: n.token,
            guards: AtomicU32::new(1),
            renewers: AtomicU32::new(u32::from(n.renew)),
            epoch: AtomicU32::new(0),
            lease_ms: AtomicU64::new(millis(clamp_span(n.lease))),
            deadline: AtomicU64::new(0),
            max_hold_end: n
                .max_hold
                .map_or(u64::MAX, |m| nanos(n.sent_at + clamp_span(m))),
            drift_permille: u16::try_from(n.drift_permille.min(1000)).unwrap_or(1000)
                | if n.counter_made { COUNTER_MADE } else { 0 },
            counted: AtomicBool::new(true),
            counters: n.counters,
            lost: LossSignal::default(),
            loss: LossCell::default(),
        };
        hold.extend(n.sent_at, n.lease);
        Arc::new(hold)
    }

    /// A re-entry with this hold's token joins it. Returns true when the
    /// engine must be told: the hold had ended (its last guard left while
    /// this re-entry was on its way) and is live again, or this is its
    /// first watchdog guard (a fixed-lease hold starts renewing: the engine
    /// looks at a hold when something of it is due, and nothing of a fixed
    /// lease is due before its deadline).
    pub(crate) fn join(&self, renew: bool, sent_at: Instant, lease: Duration) -> bool {
        let starts_renewing = renew && self.renewers.fetch_add(1, Ordering::AcqRel) == 0;
        self.extend(sent_at, lease);
        if starts_renewing {
            // The first watchdog guard: renewals use its lease, whatever
            // fixed lease the hold started with.
            self.lease_ms
                .store(millis(clamp_span(lease)), Ordering::Release);
        } else if renew {
            self.lease_ms
                .fetch_max(millis(clamp_span(lease)), Ordering::AcqRel);
        }
        let revived = self.guards.fetch_add(1, Ordering::AcqRel) == 0;
        if revived {
            self.epoch.fetch_add(1, Ordering::AcqRel);
            if self.loss.get().is_none() && !self.counted.swap(true, Ordering::AcqRel) {
                self.counters.hold_up();
            }
        }
        revived || starts_renewing
    }

    /// A guard leaves. Returns true for the last one: the hold has ended
    /// (renewal stops before the caller sends its release).
    pub(crate) fn leave(&self, renew: bool) -> bool {
        if renew {
            self.renewers.fetch_sub(1, Ordering::AcqRel);
        }
        let last = self.guards.fetch_sub(1, Ordering::AcqRel) == 1;
        if last {
            self.epoch.fetch_add(1, Ordering::AcqRel);
            self.uncount();
        }
        last
    }

    /// The key lives at least `lease` from `sent_at` (an acquire or renewal
    /// sent then succeeded): the deadline may move later, never earlier.
    pub(crate) fn extend(&self, sent_at: Instant, lease: Duration) {
        // The deadline only: a fixed lease (a re-entry's, an `extend`) is
        // not the watchdog's to renew with, or a crashed holder would keep
        // the lock that long after the fixed guard was released. The
        // server keeps the longer expiry anyway (renewals never shorten).
        let permille = u32::from(self.drift_permille & !COUNTER_MADE);
        let end = local_end(sent_at, lease, permille);
        self.deadline.fetch_max(nanos(end), Ordering::AcqRel);
    }

    /// Whether the first acquire's call made the fencing counter: its idle
    /// expiry then runs from the hold's start, and the hold's first
    /// renewal need not refresh it.
    pub(crate) fn counter_made(&self) -> bool {
        self.drift_permille & COUNTER_MADE != 0
    }

    /// Fires the loss signal (the first reason wins) and stops counting the
    /// hold as live.
    pub(crate) fn fire(&self, why: LossReason) {
        let detail = match why {
            LossReason::Gone => "the key is gone, overwritten or held by another owner",
            LossReason::Expired => "no renewal succeeded before the lease deadline",
            LossReason::MaxHold => "the configured max hold was reached",
        };
        self.fire_because(why, detail);
    }

    /// Signals the loss, and logs it the first time, with what found it
    /// (`detail`): at warn, as the holder is working without the lock
    /// from here on; at info for a max hold, which the holder asked for.
    pub(crate) fn fire_because(&self, why: LossReason, detail: &'static str) {
        if self.lost.fire(&self.loss, why) {
            self.counters.lost(why);
            if why == LossReason::MaxHold {
                tracing::info!(lock = %self.key.name(), token = self.token, reason = ?why,
                    detail, "lock lost");
            } else {
                tracing::warn!(lock = %self.key.name(), token = self.token, reason = ?why,
                    detail, "lock lost");
            }
        }
        self.uncount();
    }

    fn uncount(&self) {
        if self.counted.swap(false, Ordering::AcqRel) {
            self.counters.hold_down();
        }
    }

    pub(crate) fn guards(&self) -> u32 {
        self.guards.load(Ordering::Acquire)
    }

    /// Renewed by the engine: a watchdog guard lives and the hold stands.
    pub(crate) fn renews(&self) -> bool {
        self.renewers.load(Ordering::Acquire) > 0 && self.guards() > 0
    }

    /// What the renewal scripts take beside the hash for this hold (the
    /// fencing counter `redisson_lock_token:{name}` for a lock), made on
    /// use by its renewal.
    pub(crate) fn counter(&self) -> String {
        (self.renewal().counter)(self.key.name(), self.key.owner())
    }

    /// How the hold is renewed and judged (its key's, shared).
    pub(crate) fn renewal(&self) -> &'static Renewal {
        self.key.renewal()
    }

    /// When the max hold ends renewal, if one was set.
    pub(crate) fn max_hold_end(&self) -> Option<Instant> {
        (self.max_hold_end != u64::MAX).then(|| instant(self.max_hold_end))
    }

    pub(crate) fn epoch(&self) -> u32 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Still worth watching: a guard lives and it is not known lost.
    pub(crate) fn is_active(&self) -> bool {
        self.guards() > 0 && self.loss.get().is_none()
    }

    pub(crate) fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms.load(Ordering::Acquire))
    }

    /// When the hold ends by the local clock unless renewed.
    pub(crate) fn deadline(&self) -> Instant {
        instant(self.deadline.load(Ordering::Acquire))
    }

    /// Lost, or past its local deadline (whether or not the engine has run
    /// since: a starved runtime must not make a hold look held).
    /// (Past the deadline counts only while a guard holds it: a hold
    /// released normally is not lost.)
    pub(crate) fn is_lost(&self) -> bool {
        self.loss.get().is_some() || (self.guards() > 0 && Instant::now() >= self.deadline())
    }
}

/// When a lease taken by a call sent at `sent_at` ends by the local clock:
/// the lease less the clock drift allowed (`drift_permille` of it, and
/// 2 ms), so the local deadline never outlives the key.
pub(crate) fn local_end(sent_at: Instant, lease: Duration, drift_permille: u32) -> Instant {
    let lease = clamp_span(lease);
    let drift = Duration::from_millis(2) + lease * drift_permille.min(1000) / 1000;
    (sent_at + lease).checked_sub(drift).unwrap_or(sent_at)
}

/// The process's time origin for deadlines kept as integers.
fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    // A little in the past, so instants taken before first use still fit.
    *BASE.get_or_init(|| {
        let now = Instant::now();
        now.checked_sub(Duration::from_secs(3600)).unwrap_or(now)
    })
}

/// `t` in nanoseconds since [`base`], at most `u64::MAX - 1` (the lease
/// engine's entries use `u64::MAX` for "no instant").
pub(crate) fn nanos(t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(base()).as_nanos())
        .unwrap_or(u64::MAX)
        .min(u64::MAX - 1)
}

pub(crate) fn instant(n: u64) -> Instant {
    base() + Duration::from_nanos(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(renew: bool, lease: Duration, sent_at: Instant) -> (Arc<Hold>, Arc<Counters>) {
        let live = Arc::new(Counters::default());
        let h = Hold::new(NewHold {
            key: HoldKey::new(
                Arc::from("orders"),
                crate::owner::Owner::given("c:1"),
                &crate::lock::HASH_LEASE,
            ),
            token: 7,
            renew,
            lease,
            sent_at,
            max_hold: None,
            drift_permille: 10,
            counters: Arc::clone(&live),
            counter_made: false,
        });
        (h, live)
    }

    #[test]
    fn the_deadline_only_moves_later() {
        let t0 = Instant::now();
        let (h, _) = hold(true, Duration::from_secs(30), t0);
        let first = h.deadline();
        assert_eq!(
            first,
            t0 + Duration::from_secs(30) - Duration::from_millis(302)
        );
        // A shorter re-entry sent later guarantees less: no change.
        h.extend(t0 + Duration::from_secs(1), Duration::from_secs(5));
        assert_eq!(h.deadline(), first);
        // A renewal sent later with the same lease moves it.
        h.extend(t0 + Duration::from_secs(10), Duration::from_secs(30));
        assert!(h.deadline() > first);
        assert_eq!(h.lease(), Duration::from_secs(30));
    }

    #[test]
    fn guards_end_and_revive_a_hold_under_new_epochs() {
        let t0 = Instant::now();
        let (h, live) = hold(true, Duration::from_secs(30), t0);
        assert_eq!(live.live_holds.load(Ordering::Relaxed), 1);
        assert!(!h.join(false, t0, Duration::from_secs(30)), "a re-entry");
        assert!(!h.leave(true));
        assert!(!h.renews(), "the watchdog guard left: a fixed lease now");
        let e0 = h.epoch();
        assert!(h.leave(false), "the last guard");
        assert!(h.epoch() > e0 && !h.is_active());
        assert_eq!(live.live_holds.load(Ordering::Relaxed), 0);
        // A late re-entry reply with this token revives it.
        assert!(h.join(true, t0, Duration::from_secs(30)));
        assert!(h.renews() && h.is_active());
        assert_eq!(live.live_holds.load(Ordering::Relaxed), 1);
        h.fire(LossReason::Gone);
        assert_eq!(live.live_holds.load(Ordering::Relaxed), 0);
        assert!(h.is_lost() && !h.is_active());
    }

    #[test]
    fn past_its_deadline_a_hold_is_lost_even_unfired() {
        let long_ago = Instant::now() - Duration::from_secs(10);
        let (h, _) = hold(false, Duration::from_millis(100), long_ago);
        assert_eq!(h.loss.get(), None);
        assert!(h.is_lost());
    }
}
