//! keylatch's lock family: reentrant, fair, read-write and fenced locks,
//! semaphores, count-down latches, multi-lock and RedLock.
//!
//! Layout: empty for now. The locks arrive on top of the cluster router, the
//! script runner and the pub/sub hub; this crate exists so the workspace has
//! its final shape and the dependency direction (resp → cluster → lock →
//! facade) is fixed from the start.
//!
//! ```
//! // Nothing to call yet: the crate only re-exports the client layer.
//! use keylatch_lock::cluster::Connection as _;
//! ```

#![forbid(unsafe_code)]

/// The client layer the locks are built on.
pub use keylatch_cluster as cluster;
