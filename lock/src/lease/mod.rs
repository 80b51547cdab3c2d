//! The lease engine: one actor task per [`Locks`](crate::Locks) that keeps
//! holds alive and tells holders when a hold is lost.
//!
//! Callers hand it a hold once, when a first acquire (or a re-entry that
//! revives an ended hold) succeeds: a lock-free push on its inbox, and a
//! wake-up only when the hold is due before the task's planned wake. From
//! then on the task alone owns the hold's bookkeeping (renewal grid, calls
//! in flight, tracking); callers and the task share only the hold's atomics
//! ([`Hold`]), never a lock. What a lease is made of on the server is its
//! [`Renewal`], which the hold's lock type names: the engine batches holds
//! by it and names no lock type.
//!
//! Files, each importing only its siblings listed before it: `reason.rs`
//! and `tuning.rs` (leaves), `renewal.rs`, `signal.rs` (a hold's loss
//! signal), `hold.rs`, `calls.rs` (the server calls), `schedule.rs` (when
//! each hold is next due), `table.rs` (the plan), `actor.rs` (the task);
//! this file is the handle callers keep.
//!
//! Renewals are batched per node (in a cluster with a script allowed to touch
//! several slots of its node; where refused, per slot), at most
//! [`RENEW_BATCH`] holds per call, one round per lease/3 on a fixed grid, so
//! 10,000 holds cost about 79 calls per round. Each hold is judged on its
//! own by the script (owner present, token current, key a hash): one bad key
//! is that hold's loss, never its batch's.
//!
//! Loss is signalled when a renewal or check finds the hold gone, when no
//! renewal has succeeded by the local deadline (send time + lease − drift),
//! when the max hold is reached, or when a newer hold of the same owner
//! appears (its token is higher).

mod actor;
mod calls;
mod counters;
mod entry;
pub(crate) mod hold;
pub(crate) mod key;
mod reason;
mod renewal;
mod schedule;
mod shared;
mod signal;
mod table;
mod tuning;

pub(crate) use calls::extend_one;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use calls::{found, parse as verdicts};
pub(crate) use counters::{Counters, Renewals, WaitEnd};
pub use counters::{LockStats, WaitStats};
pub use reason::LossReason;
pub(crate) use renewal::Renewal;
pub(crate) use tuning::INVALIDATION_QUEUE;
pub use tuning::RENEW_BATCH;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::Client;
use tokio::sync::{mpsc, Notify};

use hold::{nanos, Hold};
use shared::EngineShared;
pub(crate) use shared::Invalidations;
use tuning::{TRACK_AFTER, WAKE_SLACK};

/// The handle callers keep; the task ends when the last one is gone.
#[derive(Clone)]
pub(crate) struct Engine {
    inbox: mpsc::UnboundedSender<Arc<Hold>>,
    /// Lock names this process changed itself (see [`touched`](Self::touched)).
    touched: mpsc::UnboundedSender<Arc<str>>,
    shared: Arc<EngineShared>,
}

impl Engine {
    /// Starts the task on the current runtime.
    pub(crate) fn spawn(
        client: Client,
        counter_ttl_ms: String,
        invalidations: Option<Invalidations>,
        tracked_holds: usize,
    ) -> Self {
        let shared = Arc::new(EngineShared {
            wake: Notify::new(),
            planned_wake: AtomicU64::new(0),
            renew_calls: AtomicU64::new(0),
            renewed_holds: AtomicU64::new(0),
            renew_failures: AtomicU64::new(0),
            renew_rounds: AtomicU64::new(0),
            round_last_us: AtomicU64::new(0),
            round_longest_us: AtomicU64::new(0),
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
            tracked_holds,
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
        if self.shared.tracking && hold.renewal().tracked {
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
        if let Some(end) = hold.max_hold_end() {
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
        if self.shared.tracking && hold.renewal().tracked && hold.is_active() {
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

    /// What the engine did, for [`LockStats`]: its calls, the failed ones,
    /// and how long its rounds took.
    pub(crate) fn renewals(&self) -> Renewals {
        let s = &self.shared;
        let us = |a: &AtomicU64| Duration::from_micros(a.load(Ordering::Relaxed));
        Renewals {
            calls: s.renew_calls.load(Ordering::Relaxed),
            renewed: s.renewed_holds.load(Ordering::Relaxed),
            failures: s.renew_failures.load(Ordering::Relaxed),
            last_round: us(&s.round_last_us),
            longest_round: us(&s.round_longest_us),
        }
    }

    /// Rounds that sent at least one renewal.
    pub(crate) fn renew_rounds(&self) -> u64 {
        self.shared.renew_rounds.load(Ordering::Relaxed)
    }
}

fn as_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
