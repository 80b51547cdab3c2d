//! The lease engine: one actor task per [`Locks`](crate::Locks) that keeps
//! holds alive and tells holders when a hold is lost.
//!
//! Callers hand it a hold once, when a first acquire (or a re-entry that
//! revives an ended hold) succeeds: a lock-free push on its inbox, and a
//! wake-up only when the hold is due before the task's planned wake. From
//! then on the task alone owns the hold's bookkeeping (renewal grid, calls
//! in flight, tracking); callers and the task share only the hold's atomics
//! ([`Hold`]), never a lock. What a lease is made of on the server is its
//! [`LeaseKind`]: the renewal script and the arguments per hold.
//!
//! Renewals are batched per node (in a cluster with a script allowed to touch
//! several slots of its node; where refused, per slot), at most
//! [`RENEW_BATCH`] holds per call, one round per lease/3 on a fixed grid, so
//! 10,000 holds cost about 100 calls per round. Each hold is judged on its
//! own by the script (owner present, token current, key a hash): one bad key
//! is that hold's loss, never its batch's.
//!
//! Loss is signalled when a renewal or check finds the hold gone, when no
//! renewal has succeeded by the local deadline (send time + lease − drift),
//! when the max hold is reached, or when a newer hold of the same owner
//! appears (its token is higher).

mod actor;
mod calls;
mod table;

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use calls::{found, parse as verdicts};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::{Client, Invalidation, Script};
use tokio::sync::{mpsc, Notify};

use crate::hold::{nanos, Hold};
use crate::scripts::{
    FAIR_ACQUIRE, FAIR_RELEASE, FENCED_ACQUIRE, NONREENTRANT_ACQUIRE, PERMITS_ACQUIRE,
    PERMITS_RELEASE, PERMITS_RENEW, PERMITS_RENEW_NODE, REENTRANT_ACQUIRE, REENTRANT_RELEASE,
    REENTRANT_RENEW, REENTRANT_RENEW_NODE, RW_READ_ACQUIRE, RW_READ_RELEASE, RW_RENEW,
    RW_RENEW_NODE, RW_WRITE_ACQUIRE, RW_WRITE_RELEASE, UNFENCED_ACQUIRE,
};

/// Most holds renewed by one script call.
pub const RENEW_BATCH: usize = 100;

/// Holds younger than this are not tracked: most locks are released within
/// microseconds, and a tracked read for each would cost the server a command.
/// Older ones get one tracked read, so a change by anyone else is pushed to
/// us at once.
pub(crate) const TRACK_AFTER: Duration = Duration::from_millis(2);

/// How late a first renewal or tracked read may be for the task's next
/// look, rather than waking it for one hold.
pub(crate) const WAKE_SLACK: Duration = Duration::from_millis(2);

/// After a pass that took new holds, the task looks again within this, so
/// holds arriving meanwhile need no wake-up of their own: their first due
/// (a tracked read at [`TRACK_AFTER`], with [`WAKE_SLACK`]) is no earlier
/// than that look. (An idle process wakes at once: only a busy one batches.)
pub(crate) const BUSY_LOOK: Duration = Duration::from_millis(3);

/// Invalidation pushes queued for the engine before it treats the overflow
/// as "everything may have changed".
pub(crate) const INVALIDATION_QUEUE: usize = 1024;

/// Why a hold was lost.
///
/// ```
/// use keylatch_lock::LossReason;
/// assert_ne!(LossReason::Gone, LossReason::Expired);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossReason {
    /// A renewal or check found the key gone, overwritten, held by another
    /// owner, or re-taken by this owner as a newer hold.
    Gone,
    /// No renewal succeeded before the local deadline (server paused or
    /// unreachable, or a fixed lease ran out): the key may have expired.
    Expired,
    /// The configured max hold was reached; renewal stopped.
    MaxHold,
}

/// What a lock's holds are on the server, and so how they are taken and
/// renewed: the seam the rest of the lock family plugs into (a read-write
/// lock's read holds, a fair lock waiter's place, an expirable semaphore's
/// permits each bring their own scripts here).
///
/// The engine batches holds per kind; a kind names its acquire script and
/// its renewal scripts (per slot, and per node in a cluster), each judging
/// every hold on its own from four strings: key, counter, owner, token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum LeaseKind {
    /// Redisson's RLock hash (`name` → {owner: count}) with its fencing
    /// counter.
    Reentrant,
    /// The same hash with a count of exactly 1: a second acquire by the
    /// holder is refused (Redisson 4.4's non-reentrant lock).
    NonReentrant,
    /// The same hash, taken in arrival order through Redisson's fair-lock
    /// queue (`redisson_lock_queue:{name}`, `redisson_lock_timeout:{name}`);
    /// a hold is renewed like a reentrant one.
    Fair,
    /// A read-write lock's read session of one owner (Redisson's
    /// `RedissonReadLock`: the owner's count in the hash, one string per
    /// hold). The hold's "counter" is the owner's read-hold prefix; its
    /// token the session's generation, which every hold key holds.
    RwRead,
    /// A read-write lock's write hold (field `<owner>:write` of the hash);
    /// its lease is its own key, `{name}:<owner>:write:rwlock_timeout:1`,
    /// holding its fencing token (the hold's "counter" is that key's
    /// prefix). Judged by the same script as read sessions.
    RwWrite,
    /// Redisson's `RFencedLock`: the RLock hash, and a token from INCR of
    /// the counter on every acquire, re-entries included. The hold's own
    /// token is 0 (judged and released by owner, as Redisson does): a
    /// re-entry moves the counter past the first hold's token.
    Fenced,
    /// Redisson's RLock hash without a fencing counter: a RedLock member,
    /// whose owner id is unique to one acquire, so the owner alone names
    /// the hold (token 0: judged and released by owner).
    Unfenced,
    /// A permit-expirable semaphore's leased permits of one guard: the
    /// hold's "owner" is its permit ids (hex, comma-separated) and its
    /// "counter" the permits zset, `{name}:timeout`.
    Permits,
}

impl LeaseKind {
    /// The script taking a hold (`KEYS` = hash, counter).
    pub(crate) fn acquire_script(self) -> &'static Script {
        match self {
            LeaseKind::Reentrant => &REENTRANT_ACQUIRE,
            LeaseKind::NonReentrant => &NONREENTRANT_ACQUIRE,
            LeaseKind::Fair => &FAIR_ACQUIRE,
            LeaseKind::RwRead => &RW_READ_ACQUIRE,
            LeaseKind::RwWrite => &RW_WRITE_ACQUIRE,
            LeaseKind::Fenced => &FENCED_ACQUIRE,
            LeaseKind::Unfenced => &UNFENCED_ACQUIRE,
            LeaseKind::Permits => &PERMITS_ACQUIRE,
        }
    }

    /// The script dropping one hold.
    pub(crate) fn release_script(self) -> &'static Script {
        match self {
            LeaseKind::Reentrant
            | LeaseKind::NonReentrant
            | LeaseKind::Fenced
            | LeaseKind::Unfenced => &REENTRANT_RELEASE,
            LeaseKind::Fair => &FAIR_RELEASE,
            LeaseKind::RwRead => &RW_READ_RELEASE,
            LeaseKind::RwWrite => &RW_WRITE_RELEASE,
            LeaseKind::Permits => &PERMITS_RELEASE,
        }
    }

    /// The script renewing holds of one slot (`KEYS` = hash, counter pairs).
    /// A non-reentrant, fair or write hold is a hash field with its token,
    /// judged the same way; read holds have their own expiries.
    pub(crate) fn slot_script(self) -> &'static Script {
        match self {
            LeaseKind::Reentrant
            | LeaseKind::NonReentrant
            | LeaseKind::Fair
            | LeaseKind::Fenced
            | LeaseKind::Unfenced => &REENTRANT_RENEW,
            LeaseKind::RwRead | LeaseKind::RwWrite => &RW_RENEW,
            LeaseKind::Permits => &PERMITS_RENEW,
        }
    }

    /// The script renewing holds of many slots of one node (no `KEYS`).
    pub(crate) fn node_script(self) -> &'static Script {
        match self {
            LeaseKind::Reentrant
            | LeaseKind::NonReentrant
            | LeaseKind::Fair
            | LeaseKind::Fenced
            | LeaseKind::Unfenced => &REENTRANT_RENEW_NODE,
            LeaseKind::RwRead | LeaseKind::RwWrite => &RW_RENEW_NODE,
            LeaseKind::Permits => &PERMITS_RENEW_NODE,
        }
    }

    /// Whether holds of this kind get a tracked read (a change by anyone
    /// else is pushed at once). Not read holds: every other reader's
    /// acquire and release writes the same hash, so tracking it would turn
    /// each of those into a check of every reader's hold. Read holds are
    /// judged at their renewals (every third of the lease) instead.
    /// Nor permits: their "key" is the semaphore's counter, which every
    /// acquire and release of anyone writes.
    pub(crate) fn tracked(self) -> bool {
        !matches!(self, LeaseKind::RwRead | LeaseKind::Permits)
    }

    /// Whether this kind belongs to a read-write lock (its channel is
    /// `redisson_rwlock:{name}`).
    pub(crate) fn is_rw(self) -> bool {
        matches!(self, LeaseKind::RwRead | LeaseKind::RwWrite)
    }
}

/// What callers and the task share: counters, and the task's wake-up.
pub(crate) struct EngineShared {
    wake: Notify,
    /// When the task will next look unless woken (nanoseconds since the
    /// process's base instant).
    planned_wake: AtomicU64,
    renew_calls: AtomicU64,
    renew_rounds: AtomicU64,
    /// Invalidations are pushed (client tracking is on): holds older than
    /// [`TRACK_AFTER`] get a tracked read.
    tracking: bool,
}

/// The handle callers keep; the task ends when the last one is gone.
#[derive(Clone)]
pub(crate) struct Engine {
    inbox: mpsc::UnboundedSender<Arc<Hold>>,
    /// Lock names this process changed itself (see [`touched`](Self::touched)).
    touched: mpsc::UnboundedSender<Arc<str>>,
    shared: Arc<EngineShared>,
}

/// Invalidation pushes for the engine: a bounded queue, and a flag for the
/// pushes that did not fit (then every hold is checked).
pub(crate) struct Invalidations {
    pub(crate) rx: mpsc::Receiver<Invalidation>,
    pub(crate) overflow: Arc<AtomicBool>,
}

impl Engine {
    /// Starts the task on the current runtime.
    pub(crate) fn spawn(
        client: Client,
        counter_ttl_ms: String,
        invalidations: Option<Invalidations>,
    ) -> Self {
        let shared = Arc::new(EngineShared {
            wake: Notify::new(),
            planned_wake: AtomicU64::new(0),
            renew_calls: AtomicU64::new(0),
            renew_rounds: AtomicU64::new(0),
            tracking: invalidations.is_some(),
        });
        let (inbox, rx) = mpsc::unbounded_channel();
        let (touched, touched_rx) = mpsc::unbounded_channel();
        let task = actor::Actor::new(
            client,
            Arc::clone(&shared),
            rx,
            touched_rx,
            invalidations,
            counter_ttl_ms,
        );
        tokio::spawn(task.run());
        Self {
            inbox,
            touched,
            shared,
        }
    }

    /// Hands a hold confirmed at `since` to the task. Wakes it only if the
    /// hold is due before the task would look anyway: a wake-up per acquire
    /// would cost a task switch on the hot path. Loss deadlines and the max
    /// hold may not wait at all; a first renewal or tracked read may wait
    /// [`WAKE_SLACK`] for the task's next look.
    pub(crate) fn watch(&self, hold: &Arc<Hold>, since: Instant) {
        if self.inbox.send(Arc::clone(hold)).is_err() {
            return;
        }
        // In nanoseconds since the base instant: one clock conversion.
        let lease = hold.lease();
        let mut soft = lease / 3;
        if self.shared.tracking && hold.kind.tracked() {
            soft = soft.min(TRACK_AFTER);
        }
        let since = nanos(since);
        let soft = since.saturating_add(as_nanos(soft + WAKE_SLACK));
        // The loss deadline (lease − drift) comes after the first renewal
        // for any lease of 10 ms or more; only a max hold may come sooner.
        let mut urgent = u64::MAX;
        if lease < Duration::from_millis(10) {
            urgent = nanos(hold.deadline());
        }
        if let Some(end) = hold.max_hold_end {
            urgent = urgent.min(nanos(end));
        }
        let planned = self.shared.planned_wake.load(Ordering::Acquire);
        if urgent < planned || soft < planned {
            self.shared.wake.notify_one();
        }
    }

    /// A write of ours (a re-entry, a release of one count) changed the
    /// held key, which ends the server's tracking of it (NOLOOP only spares
    /// us the push): the engine reads it again, keeping its renewal plan.
    pub(crate) fn retrack(&self, hold: &Arc<Hold>) {
        if self.shared.tracking && hold.kind.tracked() && hold.is_active() {
            self.watch(hold, Instant::now());
        }
    }

    /// This process changed lock `name` itself, outside a guard's own
    /// release (a force unlock, a release by owner id, a late acquire's
    /// undoing): our own writes raise no invalidation (NOLOOP), so the
    /// engine checks that lock's holds now, as if one had come.
    pub(crate) fn touched(&self, name: &Arc<str>) {
        if self.touched.send(Arc::clone(name)).is_ok() {
            self.shared.wake.notify_one();
        }
    }

    /// Renewal script calls made so far.
    pub(crate) fn renew_calls(&self) -> u64 {
        self.shared.renew_calls.load(Ordering::Relaxed)
    }

    /// Rounds that sent at least one renewal.
    pub(crate) fn renew_rounds(&self) -> u64 {
        self.shared.renew_rounds.load(Ordering::Relaxed)
    }
}

fn as_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
