//! Why a hold was lost: what the engine and a guard that finds its hold
//! replaced tell the holder.

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
