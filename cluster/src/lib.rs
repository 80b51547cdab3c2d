//! keylatch's Redis client: connections, handshake, reconnect, typed commands.
//!
//! Layout:
//! - [`Connection`] (`connection.rs`): the cheap, cloneable handle; requests
//!   go to one task per socket over a bounded queue.
//! - `driver/`: that task. It drains every ready request into one write
//!   (automatic pipelining), reads while it writes, answers a FIFO of pending
//!   replies, fails everything pending when the socket dies, and reconnects
//!   with [`Backoff`]; `timer.rs` keeps the deadlines and the health ticks
//!   (`health.rs`: idle `PING`, a silent node given up, stalled flag).
//! - `handshake.rs`: connect, `HELLO 3 [AUTH] [SETNAME]`, or the RESP2 path
//!   (`AUTH`, `SELECT`, `CLIENT SETNAME`) when `HELLO` is refused.
//! - `stream.rs`: the socket, an enum of TCP or TLS-over-TCP (`rediss://`);
//!   TCP pays one `match` per poll, no box or dynamic dispatch.
//! - [`TlsConfig`] (`tls.rs`, cargo feature `tls`, on by default): CA
//!   bundles, system roots, client certificate, the rustls configuration
//!   (ring provider) built once and shared by clones.
//! - [`ConnectionConfig`] (`config.rs`): settings and `redis://` /
//!   `rediss://` URL parsing.
//! - [`Pipeline`]: explicit batches, one write, replies in order.
//! - `commands/`: typed helpers (`get`, `set_with`, `evalsha`, `pttl`, …):
//!   the [`Commands`] trait in `mod.rs`, its parts by command group.
//! - [`FromReply`] (`reply.rs`): reply frames into Rust values.
//! - [`Error`] (`error.rs`): the one error type; server errors are parsed
//!   once into [`ServerErrorKind`]s with a [`RetryClass`].
//! - [`Client`] (`client.rs`; `client_pipeline.rs`: its pipelines, split
//!   per master in a cluster): standalone or cluster; the router
//!   (`router/`: slot table, nodes; `refresh.rs`: reloads and the health watch;
//!   `routed.rs`: one request's redirects and retries until its deadline), [`Slot`]s
//!   (`slot.rs`), topology parsing (`topology.rs`), [`Script`]s.
//! - `fuzzing/` (cargo feature `fuzzing`, off by default, hidden): checks
//!   of the reply, server error and push parsers on arbitrary bytes, for
//!   the libFuzzer targets in the repository's `fuzz/` and the corpus
//!   replay in this crate's unit tests.
//! - [`PubSub`] (`pubsub/`): the pub/sub hub: one shared subscriber
//!   connection per node, a refcounted registry (one server subscription per
//!   name), [`Subscription`]s yielding [`Event`]s from bounded queues,
//!   resubscribe after reconnect. For a cluster [`Client`]
//!   ([`PubSub::from_client`]): one connection per master, shard channels on
//!   their slot's master (the router's table), moved with an [`Event::Gap`]
//!   when the slot changes hands (`pubsub/cluster.rs`,
//!   `pubsub/coordinator.rs`).
//!
//! ```no_run
//! use keylatch_cluster::{Commands, Connection, Pipeline};
//! use keylatch_resp::Cmd;
//! # async fn demo() -> keylatch_cluster::Result<()> {
//! let conn = Connection::connect("redis://127.0.0.1:6379").await?;
//! conn.set("k", "v").await?;
//! let replies = conn
//!     .pipeline(Pipeline::new().cmd(Cmd::new("GET").key("k")).cmd(Cmd::new("DBSIZE")))
//!     .await?;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

mod backoff;
mod client;
mod client_pipeline;
mod client_requests;
mod clock;
mod commands;
mod config;
mod connection;
mod driver;
mod error;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod handshake;
mod health;
mod late;
mod pipeline;
mod pubsub;
mod push;
mod reconnect;
mod redact;
mod reply;
mod reply_tx;
mod routed;
mod router;
mod script;
mod sentinel;
mod server_error;
mod sha1;
mod slot;
mod stream;
mod tls;
mod topology;

pub use backoff::Backoff;
pub use client::{Client, ClientConfig, ClientMode};
pub use commands::{Commands, SetCondition, SetOptions, Ttl};
pub use config::{ConnectionConfig, Negotiated, Protocol};
pub use connection::Connection;
pub use error::{Error, Result, RetryClass, SentinelError, ServerError, ServerErrorKind};
pub use late::LateReply;
pub use pipeline::Pipeline;
pub use pubsub::{Event, PubSub, PubSubConfig, Subscription, SubscriptionKind};
pub use push::{Invalidation, InvalidationHandler};
pub use redact::redact_url;
pub use reply::FromReply;
pub use router::RouterOptions;
pub use script::Script;
pub use sentinel::Sentinels;
pub use slot::{hash_tag, Slot, SLOT_COUNT};
pub use tls::TlsConfig;
pub use topology::Shard;
