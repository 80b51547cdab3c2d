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
//! - this crate: the facade users depend on. The `keylatch` command line
//!   and its benchmark kit are a crate of their own (`keylatch-cli`), so an
//!   application that depends on this one compiles neither.
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
    SentinelError, Sentinels, ServerError, ServerErrorKind, SetCondition, SetOptions, Shard, Slot,
    Subscription, SubscriptionKind, TlsConfig, Ttl,
};
pub use keylatch_lock::{
    CountDownLatch, ExpirableSemaphore, ForceUnlocked, Holder, Inspection, KeyShape, Leader,
    LeaderGuard, LeaderInfo, LeaderObserver, LeasedPermit, Lock, LockError, LockGuard, LockResult,
    LockStats, Locks, LocksConfig, LossReason, LostToken, MultiGuard, MultiLock, PermitGuard,
    PermitId, QueuedWaiter, Reader, RedLock, RedLockGuard, RedLockHandle, ReplicaSync, RwLock,
    Semaphore, SemaphorePermits, WaitingWriter,
};
pub use keylatch_resp::{Attributed, Cmd, Frame};
