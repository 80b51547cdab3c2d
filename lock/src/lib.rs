//! keylatch's lock family: reentrant, fair, read-write and fenced locks,
//! semaphores, count-down latches, multi-lock and RedLock.
//!
//! Layout:
//! - [`scripts`]: the static catalogue of Lua scripts compiled in from `lua/`.
//!
//! The lock types arrive on top of the cluster router, the script runner and
//! the pub/sub hub.
//!
//! ```
//! use keylatch_lock::scripts::REENTRANT_ACQUIRE;
//! assert_eq!(REENTRANT_ACQUIRE.name(), "reentrant_acquire");
//! ```

#![forbid(unsafe_code)]

pub mod scripts;

/// The client layer the locks are built on.
pub use keylatch_cluster as cluster;
