//! The pub/sub hub: one subscriber connection per node, shared by every
//! listener in the process.
//!
//! Layout:
//! - [`PubSub`] (this file): the cloneable front, standalone (one node) or
//!   cluster (a `ClusterHub`); hands out [`Subscription`]s. [`PubSubConfig`].
//! - `hub.rs`: `NodeSubscriber`, the handle to one node's task, the
//!   `Control` messages it and subscriptions send the task, and the `Notice`s
//!   a cluster node's task sends back.
//! - `task.rs`: the task that owns the socket: batches (un)subscribes into
//!   one write, routes messages, confirms subscriptions, reconnects; in a
//!   cluster, hands shard channels back on `MOVED` or when the node drops
//!   them.
//! - `registry/`: the refcounted registry: one server subscription per
//!   name however many listeners, linger before UNSUBSCRIBE, what to
//!   resubscribe after a reconnect; `handoff.rs` moves a name's listeners
//!   between nodes. Pure logic, unit-tested.
//! - `cluster.rs`: `ClusterHub`: one node subscriber per master in use,
//!   shard channels on their slot's master (the router's table), channels
//!   and patterns on one chosen master, names moved when that changes.
//! - `coordinator.rs`: the cluster hub's task: places handed-back listeners,
//!   rebalances when the router's slot owners change, retries while a node
//!   is down or listeners wait for an owner.
//! - `subscription.rs`: [`Subscription`] and its bounded, never-blocking
//!   queue ([`Event::Lagged`] when it overflows).
//! - `message.rs`: [`Event`], [`SubscriptionKind`], and the classification of
//!   RESP2 array / RESP3 push frames.
//!
//! A message's path: socket → decoder → `classify` → registry lookup by
//! (kind, channel or pattern) → a non-blocking push into each listener's
//! queue → `Subscription::recv`.

mod cluster;
mod coordinator;
mod hub;
mod message;
mod registry;
mod subscription;
mod task;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::client::Client;
use crate::config::ConnectionConfig;
use crate::error::Result;
use cluster::ClusterHub;
use hub::NodeSubscriber;

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use message::{classify, Incoming};
pub use message::{Event, SubscriptionKind};
pub use subscription::Subscription;

/// Settings of the pub/sub hub (the connection itself is configured by a
/// [`ConnectionConfig`]: address, credentials, protocol, reconnect backoff).
///
/// ```
/// use std::time::Duration;
/// use keylatch_cluster::PubSubConfig;
/// let cfg = PubSubConfig::default()
///     .linger(Duration::from_millis(250))
///     .listener_capacity(64);
/// assert_eq!(cfg.subscribe_timeout, Duration::from_secs(5));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PubSubConfig {
    /// How long a name stays subscribed after its last listener left, so a
    /// hot lock's channel is not unsubscribed and subscribed again between
    /// waiters. A listener arriving meanwhile reuses the live subscription.
    /// Default 1 s.
    pub linger: Duration,
    /// Messages queued per listener before further ones are dropped for it
    /// and reported as [`Event::Lagged`]. Default 1024.
    pub listener_capacity: usize,
    /// How long `subscribe` waits for the server's confirmation, including a
    /// reconnect in progress (in a cluster also a move to the slot's owner
    /// after `MOVED`, or a failover that has to finish first). Default 5 s.
    pub subscribe_timeout: Duration,
    /// How often the hub checks its connection with PING; a PING unanswered
    /// after one interval means a dead connection, which is then replaced
    /// (listeners get [`Event::Gap`]). `None` turns the check off.
    /// Default 15 s.
    pub ping_interval: Option<Duration>,
}

impl Default for PubSubConfig {
    fn default() -> Self {
        Self {
            linger: Duration::from_secs(1),
            listener_capacity: 1024,
            subscribe_timeout: Duration::from_secs(5),
            ping_interval: Some(Duration::from_secs(15)),
        }
    }
}

impl PubSubConfig {
    /// Sets the linger before UNSUBSCRIBE (zero: unsubscribe at once).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let cfg = keylatch_cluster::PubSubConfig::default().linger(Duration::ZERO);
    /// assert_eq!(cfg.linger, Duration::ZERO);
    /// ```
    pub fn linger(mut self, linger: Duration) -> Self {
        self.linger = linger;
        self
    }

    /// Sets the per-listener queue capacity (at least 1).
    ///
    /// ```
    /// let cfg = keylatch_cluster::PubSubConfig::default().listener_capacity(0);
    /// assert_eq!(cfg.listener_capacity, 1);
    /// ```
    pub fn listener_capacity(mut self, capacity: usize) -> Self {
        self.listener_capacity = capacity.max(1);
        self
    }

    /// Sets how long `subscribe` may wait for its confirmation.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let cfg = keylatch_cluster::PubSubConfig::default().subscribe_timeout(Duration::from_secs(1));
    /// assert_eq!(cfg.subscribe_timeout, Duration::from_secs(1));
    /// ```
    pub fn subscribe_timeout(mut self, timeout: Duration) -> Self {
        self.subscribe_timeout = timeout;
        self
    }

    /// Sets the health-check interval (`None`: no PING).
    ///
    /// ```
    /// let cfg = keylatch_cluster::PubSubConfig::default().ping_interval(None);
    /// assert_eq!(cfg.ping_interval, None);
    /// ```
    pub fn ping_interval(mut self, interval: Option<Duration>) -> Self {
        self.ping_interval = interval;
        self
    }
}

/// The pub/sub hub: one shared subscriber connection per node, however many
/// listeners the process has.
///
/// Clones share the connection. Each name (channel, pattern or shard
/// channel) is subscribed on the server once, whatever the number of
/// [`Subscription`]s to it; the last one dropped unsubscribes after
/// [`PubSubConfig::linger`]. There is no limit on the number of distinct
/// names. Requests made together are batched into one command and one write.
///
/// The connection is RESP3 (`HELLO 3`) when the server supports it, RESP2
/// otherwise. After a connection failure the hub reconnects with backoff,
/// subscribes every live name again in one write, and sends [`Event::Gap`] to
/// every listener. Publishing goes through a [`Connection`](crate::Connection)
/// or a [`Client`] ([`Commands::publish`](crate::Commands::publish),
/// [`Commands::spublish`](crate::Commands::spublish)).
///
/// # In a cluster
///
/// A hub made with [`from_client`](Self::from_client) from a cluster
/// [`Client`] opens one subscriber connection per master it needs, on first
/// use, and reads the client's slot table (so both follow the same `MOVED`s
/// and refreshes):
/// - [`ssubscribe`](Self::ssubscribe) (sharded pub/sub, Redis 7) subscribes
///   on the master of the channel's slot (CRC16 with the hash-tag rule, like
///   a key); messages sent with `SPUBLISH` stay within that shard. When the
///   slot gets another master (failover, resharding, a dead master's replica
///   promoted), the subscription follows it and its listeners get
///   [`Event::Gap`].
/// - [`subscribe`](Self::subscribe) and [`psubscribe`](Self::psubscribe)
///   (classic pub/sub) use one master for every name, kept while it stays a
///   master; a cluster carries every `PUBLISH` to every node, so publishing
///   through any node reaches them.
///
/// ```no_run
/// use keylatch_cluster::{Commands, Connection, Event, PubSub};
/// # async fn demo() -> keylatch_cluster::Result<()> {
/// let hub = PubSub::connect("redis://127.0.0.1:6379").await?;
/// let mut sub = hub.subscribe("redisson_lock__channel:{orders}").await?;
/// // Subscribed: a message published from now on is delivered.
/// let conn = Connection::connect("redis://127.0.0.1:6379").await?;
/// conn.publish("redisson_lock__channel:{orders}", "0").await?;
/// assert!(matches!(sub.recv().await, Some(Event::Message { .. })));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct PubSub {
    front: Front,
}

#[derive(Clone, Debug)]
enum Front {
    /// One node: a standalone server, or a URL given directly.
    Node(NodeSubscriber),
    /// A cluster client's hub: one node subscriber per master in use.
    Cluster(Arc<ClusterHub>),
}

impl PubSub {
    /// Connects to the node a `redis://` URL names and spawns the hub's task
    /// on the current tokio runtime.
    ///
    /// ```no_run
    /// # async fn demo() -> keylatch_cluster::Result<()> {
    /// let hub = keylatch_cluster::PubSub::connect("redis://127.0.0.1:6379").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A bad URL ([`Error::Config`](crate::Error::Config)), an unreachable
    /// server ([`Error::Io`](crate::Error::Io)), or a refused handshake.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future closes the half-open socket.
    ///
    /// # Panics
    /// Outside a tokio runtime (the task must be spawned).
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(ConnectionConfig::from_url(url)?, PubSubConfig::default()).await
    }

    /// Connects with explicit settings and spawns the hub's task.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use keylatch_cluster::{ConnectionConfig, PubSub, PubSubConfig};
    /// # async fn demo() -> keylatch_cluster::Result<()> {
    /// let conn = ConnectionConfig::from_url("redis://127.0.0.1:6379")?.client_name("waiters");
    /// let hub = PubSub::connect_with(conn, PubSubConfig::default().linger(Duration::from_millis(500))).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub async fn connect_with(connection: ConnectionConfig, config: PubSubConfig) -> Result<Self> {
        let node = NodeSubscriber::connect(connection, config).await?;
        Ok(Self {
            front: Front::Node(node),
        })
    }

    /// The hub for a [`Client`], with default settings: for a standalone
    /// client, one subscriber connection to its server (same address,
    /// credentials and client name); for a cluster client, the cluster hub
    /// described [above](Self#in-a-cluster), which shares the client's
    /// topology.
    ///
    /// ```no_run
    /// use keylatch_cluster::{Client, Commands, Event, PubSub};
    /// # async fn demo() -> keylatch_cluster::Result<()> {
    /// let client = Client::connect("redis://127.0.0.1:7000").await?;
    /// let hub = PubSub::from_client(&client).await?;
    /// let mut sub = hub.ssubscribe("redisson_lock__channel:{orders}").await?;
    /// client.spublish("redisson_lock__channel:{orders}", "0").await?;
    /// assert!(matches!(sub.recv().await, Some(Event::Message { .. })));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Standalone: as [`connect`](Self::connect). A cluster hub connects
    /// lazily and does not fail here.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub async fn from_client(client: &Client) -> Result<Self> {
        Self::from_client_with(client, PubSubConfig::default()).await
    }

    /// [`from_client`](Self::from_client) with explicit settings.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use keylatch_cluster::{Client, PubSub, PubSubConfig};
    /// # async fn demo(client: Client) -> keylatch_cluster::Result<()> {
    /// let config = PubSubConfig::default().linger(Duration::from_millis(250));
    /// let hub = PubSub::from_client_with(&client, config).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`from_client`](Self::from_client).
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub async fn from_client_with(client: &Client, config: PubSubConfig) -> Result<Self> {
        if let Some(router) = client.router() {
            return Ok(Self {
                front: Front::Cluster(ClusterHub::start(Arc::clone(router), config)),
            });
        }
        let conn = client.standalone().ok_or_else(|| {
            crate::Error::Config("a client is standalone or a cluster".to_owned())
        })?;
        Self::connect_with(conn.config().clone(), config).await
    }

    /// Subscribes to a channel (`SUBSCRIBE`). Returns once the server has
    /// confirmed the subscription, so a `PUBLISH` issued after this returns
    /// is delivered. A channel that already has listeners in this process is
    /// not subscribed again; the call then returns without a round trip.
    ///
    /// ```no_run
    /// # async fn demo(hub: keylatch_cluster::PubSub) -> keylatch_cluster::Result<()> {
    /// let mut sub = hub.subscribe("events").await?;
    /// let event = sub.recv().await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Disconnected`](crate::Error::Disconnected) when the hub could
    /// not reconnect within [`PubSubConfig::subscribe_timeout`];
    /// [`Error::Timeout`](crate::Error::Timeout) when connected but the
    /// server did not confirm in time; [`Error::Server`](crate::Error::Server)
    /// when the server refused (e.g. `NOPERM` for an ACL user without the
    /// channel); [`Error::ConnectionClosed`](crate::Error::ConnectionClosed)
    /// if the hub's task is gone.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future releases the listener it registered,
    /// exactly as dropping the `Subscription` would (the name is unsubscribed
    /// after the linger if nobody else listens).
    pub async fn subscribe(&self, channel: impl AsRef<[u8]>) -> Result<Subscription> {
        self.subscribe_kind(SubscriptionKind::Channel, channel.as_ref())
            .await
    }

    /// Subscribes to a glob pattern (`PSUBSCRIBE`). Messages carry the
    /// channel they were published on and the pattern.
    ///
    /// ```no_run
    /// # async fn demo(hub: keylatch_cluster::PubSub) -> keylatch_cluster::Result<()> {
    /// use keylatch_cluster::Event;
    /// let mut sub = hub.psubscribe("redisson_lock__channel:*").await?;
    /// if let Some(Event::Message { channel, pattern, .. }) = sub.recv().await {
    ///     assert_eq!(pattern.as_deref(), Some(&b"redisson_lock__channel:*"[..]));
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`subscribe`](Self::subscribe).
    ///
    /// # Cancel safety
    /// As [`subscribe`](Self::subscribe).
    pub async fn psubscribe(&self, pattern: impl AsRef<[u8]>) -> Result<Subscription> {
        self.subscribe_kind(SubscriptionKind::Pattern, pattern.as_ref())
            .await
    }

    /// Subscribes to a shard channel (`SSUBSCRIBE`, Redis 7+), which receives
    /// what [`Commands::spublish`](crate::Commands::spublish) sends. On a
    /// cluster a shard message stays on the shard that owns the channel's
    /// slot instead of crossing the cluster bus; a standalone server accepts
    /// it too.
    ///
    /// ```no_run
    /// # async fn demo(hub: keylatch_cluster::PubSub) -> keylatch_cluster::Result<()> {
    /// let mut sub = hub.ssubscribe("redisson_lock__channel:{orders}").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`subscribe`](Self::subscribe); a server older than 7.0 answers
    /// with an unknown-command [`Error::Server`](crate::Error::Server).
    ///
    /// # Cancel safety
    /// As [`subscribe`](Self::subscribe).
    pub async fn ssubscribe(&self, channel: impl AsRef<[u8]>) -> Result<Subscription> {
        self.subscribe_kind(SubscriptionKind::Shard, channel.as_ref())
            .await
    }

    /// Whether the hub's connections are up (in a cluster: every connection
    /// to a master in use; `true` before the first subscribe opens one).
    ///
    /// ```no_run
    /// # fn demo(hub: keylatch_cluster::PubSub) { let _up = hub.is_connected(); }
    /// ```
    pub fn is_connected(&self) -> bool {
        match &self.front {
            Front::Node(node) => node.is_connected(),
            Front::Cluster(hub) => hub.is_connected(),
        }
    }

    /// How many times the hub has reconnected since it started (in a
    /// cluster: the sum over the connections to the masters in use; moving
    /// a subscription to another master is no reconnect).
    ///
    /// ```no_run
    /// # fn demo(hub: keylatch_cluster::PubSub) { assert_eq!(hub.reconnects(), 0); }
    /// ```
    pub fn reconnects(&self) -> u64 {
        match &self.front {
            Front::Node(node) => node.reconnects(),
            Front::Cluster(hub) => hub.reconnects(),
        }
    }

    async fn subscribe_kind(&self, kind: SubscriptionKind, name: &[u8]) -> Result<Subscription> {
        let name = Bytes::copy_from_slice(name);
        match &self.front {
            Front::Node(node) => node.subscribe(kind, name).await,
            Front::Cluster(hub) => hub.subscribe(kind, name).await,
        }
    }
}
