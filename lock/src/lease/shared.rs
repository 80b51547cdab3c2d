//! What the engine's task and its callers share: counters, the task's
//! wake-up, and the invalidation pushes handed over from the connection.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use keylatch_cluster::Invalidation;
use tokio::sync::{mpsc, Notify};

/// What callers and the task share: counters, and the task's wake-up.
pub(crate) struct EngineShared {
    pub(super) wake: Notify,
    /// When the task will next look unless woken (nanoseconds since the
    /// process's base instant).
    pub(super) planned_wake: AtomicU64,
    pub(super) renew_calls: AtomicU64,
    /// Holds a renewal call found held and extended (checks not counted).
    pub(super) renewed_holds: AtomicU64,
    /// Of those, calls that failed or answered something unreadable.
    pub(super) renew_failures: AtomicU64,
    pub(super) renew_rounds: AtomicU64,
    /// How long the last renewal round took, and the longest so far
    /// (microseconds; see `LockStats::last_renewal_round`).
    pub(super) round_last_us: AtomicU64,
    pub(super) round_longest_us: AtomicU64,
    /// Invalidations are pushed (client tracking is on): holds older than
    /// [`TRACK_AFTER`](super::tuning::TRACK_AFTER) get a tracked read.
    pub(super) tracking: bool,
}

/// Invalidation pushes for the engine: a bounded queue, and a flag for the
/// pushes that did not fit (then every hold is checked).
pub(crate) struct Invalidations {
    pub(crate) rx: mpsc::Receiver<Invalidation>,
    pub(crate) overflow: Arc<AtomicBool>,
}
