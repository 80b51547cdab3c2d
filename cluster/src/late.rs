//! `LateReply`: what receives a reply its caller no longer waits for.
//!
//! A request sent with a late handler ([`Client::eval_shared_settled`]) is
//! bounded by its deadline like any other (the connection's one timer, no
//! timer per request), but a reply that arrives after the caller timed out,
//! or after the caller dropped its future once the request was written, is
//! handed to the handler instead of being discarded. A request whose caller
//! left before it was written is never sent, so the handler never runs for
//! it. The lock layer uses this to learn whether an acquire it gave up on
//! took the lock, and to release that hold.
//!
//! [`Client::eval_shared_settled`]: crate::Client::eval_shared_settled

use std::sync::Arc;

use keylatch_resp::Frame;

/// Called on the connection's task with the late reply (an error reply
/// included, as a frame), at most once per request. It must not block:
/// spawn anything slow. Shared (`Arc`), so a caller can keep one handler for
/// many requests and pay a reference count, not an allocation, per request.
///
/// ```
/// use std::sync::Arc;
/// use keylatch_cluster::LateReply;
/// let late: LateReply = Arc::new(|frame| eprintln!("late: {frame}"));
/// # drop(late);
/// ```
pub type LateReply = Arc<dyn Fn(Frame) + Send + Sync + 'static>;
