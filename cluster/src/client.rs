//! `Client`: one handle for a standalone server or a whole cluster.

use std::sync::Arc;
use std::time::Duration;

use keylatch_resp::{Cmd, Frame, ToArg};

use crate::client_pipeline::{cluster_pipeline, run_group};
use crate::commands::Commands;
use crate::config::ConnectionConfig;
use crate::connection::Connection;
use crate::error::{Error, Result};
use crate::pipeline::Pipeline;
use crate::router::{command_slot, seed_addr, Router, RouterOptions};
use crate::script::Script;
use crate::sentinel::Sentinels;
use crate::slot::Slot;
use crate::topology::Shard;

/// Standalone or cluster.
///
/// ```
/// assert_eq!(keylatch_cluster::ClientMode::default(), keylatch_cluster::ClientMode::Auto);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientMode {
    /// Ask the first reachable seed (`INFO cluster`).
    #[default]
    Auto,
    /// One server; no slot routing.
    Standalone,
    /// A Redis Cluster; the seeds are members.
    Cluster,
}

/// Seeds and settings for a [`Client`].
///
/// ```
/// use keylatch_cluster::{ClientConfig, ClientMode};
/// let cfg = ClientConfig::from_urls(&["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"])?
///     .mode(ClientMode::Cluster);
/// assert_eq!(cfg.seeds.len(), 2);
/// # Ok::<(), keylatch_cluster::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientConfig {
    /// Nodes to start from; their credentials and timeouts apply to every
    /// node of a cluster.
    pub seeds: Vec<ConnectionConfig>,
    /// Standalone, cluster, or detect.
    pub mode: ClientMode,
    /// Redirect and retry budget (cluster only).
    pub router: RouterOptions,
}

impl ClientConfig {
    /// One seed from a `redis://` URL.
    ///
    /// ```
    /// use keylatch_cluster::{ClientConfig, ClientMode};
    /// let cfg = ClientConfig::from_url("redis://127.0.0.1:6379")?;
    /// assert_eq!(cfg.seeds.len(), 1);
    /// assert_eq!(cfg.mode, ClientMode::Auto); // detected on connect
    /// assert!(ClientConfig::from_url("http://127.0.0.1").is_err());
    /// # Ok::<(), keylatch_cluster::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] for a bad URL.
    pub fn from_url(url: &str) -> Result<Self> {
        Self::from_urls(&[url])
    }

    /// Several seeds (cluster members).
    ///
    /// ```
    /// use keylatch_cluster::ClientConfig;
    /// let cfg = ClientConfig::from_urls(&["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])?;
    /// assert_eq!(cfg.seeds[1].host, "10.0.0.2");
    /// assert!(ClientConfig::from_urls(&[]).is_err());
    /// # Ok::<(), keylatch_cluster::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] for a bad URL or an empty list.
    pub fn from_urls(urls: &[&str]) -> Result<Self> {
        if urls.is_empty() {
            return Err(Error::Config("no URL given".to_owned()));
        }
        let seeds: Vec<ConnectionConfig> = urls
            .iter()
            .map(|u| ConnectionConfig::from_url(u))
            .collect::<Result<_>>()?;
        // The sentinels name one master: other seeds would make it a guess.
        if seeds.len() > 1 && seeds.iter().any(|s| s.sentinel.is_some()) {
            return Err(Error::Config(
                "a redis+sentinel:// URL lists every sentinel itself and takes no other URL"
                    .to_owned(),
            ));
        }
        Ok(Self {
            seeds,
            mode: ClientMode::Auto,
            router: RouterOptions::default(),
        })
    }

    /// A master found through sentinels: `node` holds the data nodes'
    /// settings (credentials, database, TLS, timeouts; its address is not
    /// used), `sentinels` the sentinels and the master's name. The same as
    /// a `redis+sentinel://` URL.
    ///
    /// ```
    /// use keylatch_cluster::{ClientConfig, ConnectionConfig, Sentinels};
    /// let sentinels = Sentinels::new(
    ///     "cache",
    ///     vec![
    ///         ConnectionConfig::from_url("redis://10.0.0.1:26379")?,
    ///         ConnectionConfig::from_url("redis://10.0.0.2:26379")?,
    ///     ],
    /// );
    /// let node = ConnectionConfig::from_url("redis://:secret@unused")?;
    /// let cfg = ClientConfig::from_sentinels(sentinels, node);
    /// assert_eq!(cfg.seeds[0].addr(), "sentinel:cache");
    /// # Ok::<(), keylatch_cluster::Error>(())
    /// ```
    pub fn from_sentinels(sentinels: Sentinels, mut node: ConnectionConfig) -> Self {
        node.host = sentinels.master_name().to_owned();
        node.port = 0;
        node.sentinel = Some(Arc::new(sentinels));
        Self {
            seeds: vec![node],
            mode: ClientMode::Standalone,
            router: RouterOptions::default(),
        }
    }

    /// Sets the mode.
    ///
    /// ```
    /// use keylatch_cluster::{ClientConfig, ClientMode};
    /// let cfg = ClientConfig::from_url("redis://127.0.0.1:6379")?.mode(ClientMode::Standalone);
    /// assert_eq!(cfg.mode, ClientMode::Standalone);
    /// # Ok::<(), keylatch_cluster::Error>(())
    /// ```
    pub fn mode(mut self, mode: ClientMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets the router options.
    ///
    /// ```
    /// use keylatch_cluster::{ClientConfig, RouterOptions};
    /// let mut opts = RouterOptions::default();
    /// opts.refresh_interval = Some(std::time::Duration::from_secs(5));
    /// let cfg = ClientConfig::from_url("redis://127.0.0.1:7000")?.router(opts);
    /// assert_eq!(cfg.router.refresh_interval, Some(std::time::Duration::from_secs(5)));
    /// # Ok::<(), keylatch_cluster::Error>(())
    /// ```
    pub fn router(mut self, opts: RouterOptions) -> Self {
        self.router = opts;
        self
    }
}

#[derive(Clone, Debug)]
pub(crate) enum Inner {
    Standalone(Connection),
    Cluster(Arc<Router>),
}

/// A client for a standalone server or a Redis Cluster, chosen from the
/// seeds (or told). Cheap to clone; clones share connections.
///
/// In a cluster, a command goes to the master of its keys' slot (all keys of
/// one command must share a slot: [`Error::CrossSlot`] otherwise, before
/// anything is sent); keyless commands go to any master. `MOVED`, `ASK`,
/// `TRYAGAIN`, `CLUSTERDOWN` and unreachable nodes are retried until the
/// request's deadline (its caller's, or the request timeout), and a master
/// that stops answering is routed around once its replica is promoted.
///
/// ```no_run
/// use keylatch_cluster::{Client, Commands};
/// # async fn demo() -> keylatch_cluster::Result<()> {
/// let client = Client::connect("redis://127.0.0.1:7000").await?;
/// client.set("{user:1}:name", "ada").await?;
/// println!("cluster: {}", client.is_cluster());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    pub(crate) inner: Inner,
}

impl Client {
    /// Connects to the server or cluster a `redis://` URL names.
    ///
    /// ```no_run
    /// # async fn demo() -> keylatch_cluster::Result<()> {
    /// let client = keylatch_cluster::Client::connect("redis://127.0.0.1:6379").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`connect_with`](Self::connect_with).
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(ClientConfig::from_url(url)?).await
    }

    /// Connects with explicit seeds and mode. In `Auto` mode, the first
    /// reachable seed is asked `INFO cluster`.
    ///
    /// ```no_run
    /// use keylatch_cluster::{Client, ClientConfig};
    /// # async fn demo() -> keylatch_cluster::Result<()> {
    /// let cfg = ClientConfig::from_urls(&["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"])?;
    /// let client = Client::connect_with(cfg).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// No seed reachable ([`Error::Io`] of the last one), a refused
    /// handshake ([`Error::Server`]), or a cluster whose topology cannot be
    /// read.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub async fn connect_with(cfg: ClientConfig) -> Result<Self> {
        // A connection cut while the client is being set up (a CLIENT KILL,
        // a failover) is no reason to fail: the seeds are tried again, a
        // few times, with a short pause.
        let mut pause = Duration::from_millis(50);
        let mut round = 0;
        loop {
            match Self::connect_once(&cfg).await {
                Err(e) if round < CONNECT_ROUNDS && set_up_cut_short(&e) => {
                    round += 1;
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
                other => return other,
            }
        }
    }

    /// One try of every seed in turn.
    async fn connect_once(cfg: &ClientConfig) -> Result<Self> {
        let mut last = Error::Config("no seeds".to_owned());
        for seed in &cfg.seeds {
            let conn = match Connection::connect_with(seed.clone()).await {
                Ok(c) => c,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            let cluster = match cfg.mode {
                // Sentinels watch a standalone master.
                _ if seed.sentinel.is_some() => false,
                ClientMode::Standalone => false,
                ClientMode::Cluster => true,
                ClientMode::Auto => match cluster_enabled(&conn).await {
                    Ok(on) => on,
                    Err(e) => {
                        last = e;
                        continue;
                    }
                },
            };
            if !cluster {
                return Ok(Self {
                    inner: Inner::Standalone(conn),
                });
            }
            let seeds = cfg.seeds.iter().map(seed_addr).collect();
            match Router::new(seed.clone(), seeds, cfg.router.clone(), Some(conn)).await {
                Ok(router) => {
                    return Ok(Self {
                        inner: Inner::Cluster(router),
                    })
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// For a client that found its master through sentinels: the master it
    /// last connected to (`host:port`) and the sentinel that named it.
    /// `None` for other clients, and before the first connect.
    ///
    /// ```no_run
    /// # async fn demo() -> keylatch_cluster::Result<()> {
    /// let c = keylatch_cluster::Client::connect("redis+sentinel://10.0.0.1,10.0.0.2,10.0.0.3/cache").await?;
    /// if let Some((master, via)) = c.sentinel_master() {
    ///     println!("master {master}, named by sentinel {via}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn sentinel_master(&self) -> Option<(String, String)> {
        match &self.inner {
            Inner::Standalone(conn) => conn.config().sentinel.as_ref()?.last_master(),
            Inner::Cluster(_) => None,
        }
    }

    /// True when talking to a Redis Cluster.
    ///
    /// ```no_run
    /// # fn demo(c: keylatch_cluster::Client) { if c.is_cluster() { /* hash-tag your keys */ } }
    /// ```
    pub fn is_cluster(&self) -> bool {
        matches!(self.inner, Inner::Cluster(_))
    }

    /// Whether this is a cluster whose nodes offer sharded pub/sub
    /// (`SSUBSCRIBE`/`SPUBLISH`) and script flags (`#!lua flags=…`): Redis 7+
    /// and Valkey do, Redis 6.2 does not. Learnt from the topology calls (a
    /// node that does not know `CLUSTER SHARDS` predates all three).
    /// Standalone: `false` (plain pub/sub reaches every subscriber there).
    ///
    /// ```no_run
    /// # fn demo(c: keylatch_cluster::Client) {
    /// let publish = if c.has_sharded_pubsub() { "SPUBLISH" } else { "PUBLISH" };
    /// # }
    /// ```
    pub fn has_sharded_pubsub(&self) -> bool {
        match &self.inner {
            Inner::Standalone(_) => false,
            Inner::Cluster(router) => router.is_modern(),
        }
    }

    /// Sends a pipeline. In a cluster it is split per node, the parts are
    /// sent concurrently (one write each), entries that meet a redirect or a
    /// transient error are retried alone, and the replies come back in the
    /// caller's order, each its own `Result`.
    ///
    /// ```no_run
    /// use keylatch_cluster::Pipeline;
    /// use keylatch_resp::Cmd;
    /// # async fn demo(c: keylatch_cluster::Client) -> keylatch_cluster::Result<()> {
    /// let p: Pipeline = (0..100).map(|i| Cmd::new("INCR").key(format!("k{i}"))).collect();
    /// let replies = c.pipeline(p).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The outer error only for a refused command in standalone mode or a
    /// standalone connection failure; in a cluster, failures are per entry.
    ///
    /// # Cancel safety
    /// Cancel safe in the sense of [`Connection::send`]; entries already
    /// written may run.
    pub async fn pipeline(&self, pipeline: Pipeline) -> Result<Vec<Result<Frame>>> {
        let entries = pipeline.into_entries();
        match &self.inner {
            Inner::Standalone(conn) => Ok(run_group(conn, &entries).await),
            Inner::Cluster(router) => Ok(cluster_pipeline(router, entries).await),
        }
    }

    /// The connection of the master that serves `key` (standalone: the one
    /// connection). For commands that must share a connection with earlier
    /// writes, such as `WAIT`.
    ///
    /// ```no_run
    /// # async fn demo(c: keylatch_cluster::Client) -> keylatch_cluster::Result<()> {
    /// let conn = c.connection_for_key("lock:{order-7}").await?;
    /// let acked = conn.wait(1, std::time::Duration::from_millis(50)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The node cannot be reached, or no master serves the slot.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn connection_for_key(&self, key: impl ToArg) -> Result<Connection> {
        match &self.inner {
            Inner::Standalone(conn) => Ok(conn.clone()),
            Inner::Cluster(router) => {
                let cmd = Cmd::new("X").key(key);
                let slot = command_slot(&cmd)?;
                router.connection_for_slot(slot).await
            }
        }
    }

    /// Reloads the cluster topology now (no-op for standalone).
    ///
    /// ```no_run
    /// # async fn demo(c: keylatch_cluster::Client) -> keylatch_cluster::Result<()> {
    /// c.refresh_topology().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// No node could be asked.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn refresh_topology(&self) -> Result<()> {
        match &self.inner {
            Inner::Standalone(_) => Ok(()),
            Inner::Cluster(router) => router.refresh(true).await,
        }
    }

    /// The shards (masters and replicas) as last seen; standalone: one
    /// shard without replicas.
    ///
    /// ```no_run
    /// # fn demo(c: keylatch_cluster::Client) {
    /// for shard in c.shards() { println!("{} -> {:?}", shard.master, shard.replicas); }
    /// # }
    /// ```
    pub fn shards(&self) -> Vec<Shard> {
        match &self.inner {
            Inner::Standalone(conn) => vec![Shard {
                master: seed_addr(conn.config()),
                replicas: Vec::new(),
            }],
            Inner::Cluster(router) => router.shards(),
        }
    }

    /// Address (`host:port`) of the master that serves `slot`, as last seen
    /// (standalone: the server). Lets callers batch work per node.
    ///
    /// ```no_run
    /// # fn demo(c: keylatch_cluster::Client) {
    /// let node = c.master_for_slot(keylatch_cluster::Client::slot_of("orders"));
    /// # }
    /// ```
    pub fn master_for_slot(&self, slot: u16) -> Option<String> {
        match &self.inner {
            Inner::Standalone(conn) => Some(seed_addr(conn.config())),
            Inner::Cluster(router) => router.master_addr(slot),
        }
    }

    /// The cluster router, if this is a cluster client.
    pub(crate) fn router(&self) -> Option<&Arc<Router>> {
        match &self.inner {
            Inner::Cluster(router) => Some(router),
            Inner::Standalone(_) => None,
        }
    }

    /// The connection, if this is a standalone client.
    pub(crate) fn standalone(&self) -> Option<&Connection> {
        match &self.inner {
            Inner::Standalone(conn) => Some(conn),
            Inner::Cluster(_) => None,
        }
    }

    /// The slot of a key (meaningful in a cluster; computed either way).
    ///
    /// ```
    /// assert_eq!(keylatch_cluster::Client::slot_of("foo"), 12182);
    /// ```
    pub fn slot_of(key: impl ToArg) -> u16 {
        let cmd = Cmd::new("X").key(key);
        cmd.first_key().map_or(0, |k| Slot::of(k).get())
    }
}

/// Extra rounds over the seeds after a set-up cut short (about 0.35 s of
/// pauses in all).
const CONNECT_ROUNDS: u32 = 3;

/// Whether a failed connect may succeed at once if tried again: the
/// connection was cut while being set up (not a refused connect, a silent
/// node's timeout, a bad password or a TLS failure, which fail as before).
fn set_up_cut_short(e: &Error) -> bool {
    match e {
        Error::ConnectionClosed | Error::Disconnected => true,
        // A timeout is a silent node, not a cut: trying again would wait
        // out the connect timeout once more (4 × 5 s before this rule).
        // A cut is a reset, an abort or an early end; a refused connect, a
        // name that does not resolve or a TLS failure is no cut.
        Error::Io(io) => matches!(
            io.kind(),
            std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::UnexpectedEof
        ),
        _ => false,
    }
}

/// Whether the node runs in cluster mode (`INFO cluster`). An error reply
/// (a proxy that refuses INFO) means standalone. A failed connection is
/// asked again for a moment, as it reconnects by itself, and then fails the
/// seed: guessing standalone (as this once did) would send a cluster's
/// commands without routing, and a connection killed right after the
/// handshake made every command of that client fail.
///
/// Part of connecting: each ask is bounded by the connect timeout, and a
/// node that answered the handshake but not this (a timeout) fails the seed
/// at once; asked again, it would cost the whole bound each time.
async fn cluster_enabled(conn: &Connection) -> Result<bool> {
    let mut pause = Duration::from_millis(20);
    let mut tries = 0;
    let bound = Some(conn.config().connect_timeout);
    loop {
        match conn
            .send_timeout(Cmd::new("INFO").arg("cluster"), bound)
            .await
        {
            Ok(f) => {
                let info = f.as_bytes();
                return Ok(info.is_some_and(|i| i.windows(17).any(|w| w == b"cluster_enabled:1")));
            }
            Err(e) if e.as_server_error().is_some() => return Ok(false),
            Err(e @ Error::Timeout) => return Err(e),
            // About 0.6 s in all.
            Err(e) if tries == 5 => return Err(e),
            Err(_) => {
                tries += 1;
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
        }
    }
}

impl Commands for Client {
    async fn send(&self, cmd: Cmd) -> Result<Frame> {
        match &self.inner {
            Inner::Standalone(conn) => conn.send(cmd).await,
            // Boxed: the routed future (redirects, retries) is larger than a
            // plain send, and inline it would be copied along with every
            // standalone request's future too.
            Inner::Cluster(router) => Box::pin(router.send(cmd, None)).await,
        }
    }

    async fn eval_with<F: Fn() -> Cmd + Send>(&self, script: &Script, make: F) -> Result<Frame> {
        match &self.inner {
            // The connection's own NOSCRIPT healing (load + retry in one write).
            Inner::Standalone(conn) => conn.eval_with(script, make).await,
            // Boxed, as in `send`; the router keeps the command for retries.
            Inner::Cluster(router) => Box::pin(router.send(make(), Some(script))).await,
        }
    }

    async fn eval_shared(&self, script: &Script, cmd: &Arc<Cmd>) -> Result<Frame> {
        match &self.inner {
            Inner::Standalone(conn) => conn.eval_shared(script, cmd).await,
            // Boxed, as in `send`.
            Inner::Cluster(router) => {
                Box::pin(router.send_shared(Arc::clone(cmd), Some(script))).await
            }
        }
    }
}
