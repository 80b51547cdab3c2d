//! The engine's timings and limits, shared by its task and the callers
//! that hand it holds.

use std::time::Duration;

/// Most holds renewed by one script call (a million holds: 7,813 calls a
/// round; 100 a call was 10,000, the most issue 31 allows, with nothing to
/// spare).
pub const RENEW_BATCH: usize = 128;

/// A hold a renewal may judge by its owner alone is judged by its fencing
/// token at every this-many-th renewal anyway (a 3-bit count in its entry,
/// started apart per name so the token reads spread over the rounds): a
/// replaced hold this process cannot know of (its owner id read off the
/// server and given to another process's `lock_with_owner`) is found
/// within this many renewals, 2⅔ leases. One renewal in 8 reading the
/// counter costs about an eighth of the difference between the two scripts.
pub(crate) const TOKEN_EVERY: u8 = 8;

/// Renewal and check calls in flight at once, for each master (a cluster
/// of 3 allows 3 × this in all, and a round's calls take their groups in
/// turns, so they spread over the nodes the holds are on). A
/// round's calls go out a few at a time, not all at once: sent together,
/// a million holds' ten thousand calls queue seconds of server work ahead
/// of every acquire on the same connection (acquires timed out at 1 s in
/// the scale bench). Checks (an invalidation's) go ahead of queued
/// renewals.
pub(crate) const CALLS_IN_FLIGHT: usize = 8;

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
