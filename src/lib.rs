//! keylatch: distributed locks on Redis and Valkey, with a RESP client of its own.
//!
//! Layout (one crate per layer, dependencies point one way):
//! - [`resp`] (`keylatch-resp`): RESP2/RESP3 frames, the zero-copy incremental
//!   decoder, the command encoder.
//! - [`cluster`] (`keylatch-cluster`): multiplexed auto-pipelined connections,
//!   handshake, reconnect, typed commands, the cluster router (slots,
//!   MOVED/ASK, scripts with NOSCRIPT healing) and the shared pub/sub hub.
//! - [`lock`] (`keylatch-lock`): the lock family, wire-compatible with
//!   Redisson: reentrant, non-reentrant, fair, spin and fenced locks
//!   ([`Locks`], [`Lock`], [`LockGuard`]), the read-write lock
//!   ([`RwLock`]), semaphores ([`Semaphore`], [`ExpirableSemaphore`] with
//!   [`PermitGuard`]), the count-down latch ([`CountDownLatch`]),
//!   [`MultiLock`] and [`RedLock`]; one batched watchdog and a loss signal
//!   for every kind of hold.
//! - [`bench`](mod@bench): the lock benchmark kit (scenarios generic over a lock
//!   client, a log-linear histogram, text tables, an SVG CDF plot) shared by
//!   `keylatch bench` and the comparison binary in `benches/`.
//! - this crate: the facade users depend on, and the `keylatch` CLI.
//!
//! ```no_run
//! use keylatch::{Client, Commands};
//! # async fn demo() -> keylatch::Result<()> {
//! // Standalone or cluster: detected from the server.
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! client.set("greeting", "hello").await?;
//! assert_eq!(client.get("greeting").await?.as_deref(), Some(&b"hello"[..]));
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

pub use keylatch_cluster as cluster;
pub use keylatch_lock as lock;
pub use keylatch_resp as resp;

pub use keylatch_cluster::redact_url;
pub use keylatch_cluster::{
    Client, ClientConfig, ClientMode, Commands, Connection, ConnectionConfig, Error, Event,
    FromReply, Negotiated, Pipeline, Protocol, PubSub, PubSubConfig, Result, RouterOptions, Script,
    ServerError, ServerErrorKind, SetCondition, SetOptions, Shard, Slot, Subscription,
    SubscriptionKind, TlsConfig, Ttl,
};
pub use keylatch_lock::{
    CountDownLatch, ExpirableSemaphore, ForceUnlocked, Holder, Inspection, KeyShape, LeasedPermit,
    Lock, LockError, LockGuard, LockResult, Locks, LocksConfig, LossReason, LostToken, MultiGuard,
    MultiLock, PermitGuard, PermitId, QueuedWaiter, Reader, RedLock, RedLockGuard, RedLockHandle,
    ReplicaSync, RwLock, Semaphore, SemaphorePermits, WaitingWriter,
};
pub use keylatch_resp::{Attributed, Cmd, Frame};

pub mod bench;
