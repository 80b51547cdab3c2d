//! The router: which node a command goes to, and where the slot table
//! comes from.
//!
//! Standalone is the one-node case (no slots, no redirects). In a cluster the
//! command's first key picks the slot; the slot table (an `Arc` swapped whole)
//! picks the master; each master has one lazily opened multiplexed
//! [`Connection`]. What a request does when a node redirects or refuses it,
//! and how long it keeps trying, lives in `routed.rs`.
//!
//! The table is reloaded (`CLUSTER SHARDS`, or `CLUSTER SLOTS` where SHARDS
//! is unknown) when a request meets a redirect or a failure, and by a
//! background watch: every [`RouterOptions::refresh_interval`], and every
//! [`HEALTH_TICK`] while a master's connection is down or stalled (a master
//! that died without a word: its replica is found once promoted). Healthy
//! nodes are asked first.
//!
//! The table is also the pub/sub hub's map of where shard channels live: it
//! reads it through [`Router::table`] and learns of changes to slot owners
//! through [`Router::watch_owners`], so there is one slot → master map.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use keylatch_resp::{Cmd, Frame};
use tokio::sync::{watch, OnceCell};

use crate::config::ConnectionConfig;
use crate::connection::Connection;
use crate::error::{Error, Result};
use crate::slot::Slot;
use crate::topology::{join_host_port, split_addr, Shard, Topology, NO_NODE};

mod refresh;

use refresh::watch_health;

/// How the router retries and how often it reloads the topology.
///
/// A request is retried (redirects, `TRYAGAIN`, a failover under way) until
/// its deadline: the caller's, or the request timeout.
///
/// ```
/// use std::time::Duration;
/// let opts = keylatch_cluster::RouterOptions::default();
/// assert!(opts.retry_min <= opts.retry_max);
/// assert_eq!(opts.refresh_interval, Some(Duration::from_secs(10)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RouterOptions {
    /// First delay before retrying after `TRYAGAIN`, `CLUSTERDOWN`, a
    /// redirect ping-pong, or an unreachable node; doubles per retry.
    pub retry_min: Duration,
    /// Cap on that delay.
    pub retry_max: Duration,
    /// Minimum time between two topology refreshes triggered by redirects
    /// or failures (a refresh asked for sooner joins the last one).
    pub refresh_min_interval: Duration,
    /// Reload the topology this often even when nothing seems wrong
    /// (`None`: only when something does).
    pub refresh_interval: Option<Duration>,
    /// How long a request is retried when the client has no request timeout
    /// (a caller that names its own deadline uses that).
    pub retry_window: Duration,
}

impl Default for RouterOptions {
    fn default() -> Self {
        Self {
            retry_min: Duration::from_millis(10),
            retry_max: Duration::from_millis(400),
            refresh_min_interval: Duration::from_millis(100),
            refresh_interval: Some(Duration::from_secs(10)),
            retry_window: Duration::from_secs(30),
        }
    }
}

/// How often the background watch looks at the masters' connections; while
/// one is down or stalled, the topology is reloaded at this pace.
pub(crate) const HEALTH_TICK: Duration = Duration::from_millis(250);

/// One node and its lazily opened connection.
#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) addr: String,
    conn: OnceCell<Connection>,
}

impl Node {
    fn new(addr: String) -> Arc<Self> {
        Arc::new(Self {
            addr,
            conn: OnceCell::new(),
        })
    }

    pub(crate) async fn connection(&self, base: &ConnectionConfig) -> Result<Connection> {
        if let Some(conn) = self.conn.get() {
            return Ok(conn.clone());
        }
        // Boxed: connecting happens once per node, and inline its future
        // would enlarge every routed request's.
        Box::pin(self.conn.get_or_try_init(|| async {
            Connection::connect_with(node_config(base, &self.addr)?).await
        }))
        .await
        .cloned()
    }
}

/// The settings of a connection to the node at `addr`: the seed's
/// credentials, timeouts and name, that node's host and port.
pub(crate) fn node_config(base: &ConnectionConfig, addr: &str) -> Result<ConnectionConfig> {
    let (host, port) =
        split_addr(addr).ok_or_else(|| Error::Config(format!("bad node address {addr:?}")))?;
    let mut cfg = base.clone();
    cfg.host = host;
    cfg.port = port;
    // Cluster nodes only have database 0.
    cfg.db = 0;
    Ok(cfg)
}

/// The slot table with the node handle of each shard's master.
#[derive(Clone, Debug)]
pub(crate) struct Table {
    topo: Topology,
    /// `masters[i]` serves `topo.shards[i]`.
    masters: Vec<Arc<Node>>,
}

impl Table {
    /// The address of the master serving `slot`, if any does.
    pub(crate) fn owner(&self, slot: u16) -> Option<&str> {
        let i = *self.topo.slots.get(usize::from(slot))?;
        self.masters.get(usize::from(i)).map(|n| n.addr.as_str())
    }

    /// The masters' addresses, in shard order.
    pub(crate) fn masters(&self) -> impl Iterator<Item = &str> {
        self.masters.iter().map(|n| n.addr.as_str())
    }

    /// Whether `addr` is one of the masters.
    pub(crate) fn is_master(&self, addr: &str) -> bool {
        self.masters().any(|m| m == addr)
    }

    /// Whether both tables send every slot to the same master. Compared by
    /// shard index and master list, so an equivalent table listed in another
    /// order counts as a change (a harmless extra rebalance).
    fn same_owners(&self, other: &Table) -> bool {
        self.topo.slots == other.topo.slots && self.masters().eq(other.masters())
    }
}

/// The cluster router (also used, trivially, for standalone).
#[derive(Debug)]
pub(crate) struct Router {
    base: ConnectionConfig,
    seeds: Vec<String>,
    opts: RouterOptions,
    table: RwLock<Arc<Table>>,
    /// Every node handle ever used and still in the topology, by address.
    nodes: Mutex<HashMap<String, Arc<Node>>>,
    refresh_lock: tokio::sync::Mutex<Instant>,
    refreshing: AtomicBool,
    /// The last refresh failed: the next failure is logged at debug, not
    /// warn (the watch retries every 250 ms while a master looks sick).
    refresh_failing: AtomicBool,
    /// The nodes know `CLUSTER SHARDS`, so Redis 7+ or Valkey: sharded
    /// pub/sub and script flags too. Learnt from every refresh.
    modern: AtomicBool,
    /// Round-robin for keyless commands.
    next_any: AtomicUsize,
    /// Bumped whenever a slot changes master (refresh or MOVED), so the
    /// pub/sub hub can move shard channels without polling the table.
    owners: watch::Sender<u64>,
    /// Itself, so background refreshes can own a reference.
    me: Weak<Router>,
}

impl Router {
    /// Builds the router from a seed node already known to be a cluster
    /// member and loads the topology.
    pub(crate) async fn new(
        base: ConnectionConfig,
        seeds: Vec<String>,
        opts: RouterOptions,
        initial: Option<Connection>,
    ) -> Result<Arc<Self>> {
        let empty = Table {
            topo: Topology::from_slots(Frame::Array(Vec::new()), &base.host)?,
            masters: Vec::new(),
        };
        let router = Arc::new_cyclic(|me| Self {
            base,
            seeds,
            opts,
            table: RwLock::new(Arc::new(empty)),
            nodes: Mutex::new(HashMap::new()),
            refresh_lock: tokio::sync::Mutex::new(Instant::now()),
            refreshing: AtomicBool::new(false),
            refresh_failing: AtomicBool::new(false),
            modern: AtomicBool::new(true),
            next_any: AtomicUsize::new(0),
            owners: watch::Sender::new(0),
            me: me.clone(),
        });
        if let Some(conn) = initial {
            // Reuse the connection the caller already opened to this seed.
            let node = router.node(&seed_addr(conn.config()));
            let _ = node.conn.set(conn);
        }
        router.refresh(true).await?;
        tokio::spawn(watch_health(Arc::downgrade(&router)));
        Ok(router)
    }

    /// The slot table as last seen.
    pub(crate) fn table(&self) -> Arc<Table> {
        match self.table.read() {
            Ok(t) => Arc::clone(&t),
            // A panic while holding the lock cannot leave a half-written
            // table: writers swap a whole Arc.
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    fn store(&self, table: Table) {
        let table = Arc::new(table);
        let (changed, previous) = {
            let mut current = self.table.write().unwrap_or_else(|p| p.into_inner());
            // Compared under the write lock: two refreshes racing cannot
            // both miss the change.
            let changed = !current.same_owners(&table);
            let previous = std::mem::replace(&mut *current, Arc::clone(&table));
            (changed, previous)
        };
        if changed {
            self.owners.send_modify(|generation| *generation += 1);
        }
        log_topology(&previous, &table, changed);
    }

    /// A receiver that is marked changed whenever a slot gets another master.
    pub(crate) fn watch_owners(&self) -> watch::Receiver<u64> {
        self.owners.subscribe()
    }

    /// The seeds' connection settings (credentials, timeouts, client name).
    pub(crate) fn base(&self) -> &ConnectionConfig {
        &self.base
    }

    /// Whether the cluster's nodes have sharded pub/sub and script flags
    /// (Redis 7+ and Valkey; not Redis 6.2), as the last refresh found.
    pub(crate) fn is_modern(&self) -> bool {
        self.modern.load(Ordering::Relaxed)
    }

    /// The retry and refresh settings.
    pub(crate) fn options(&self) -> &RouterOptions {
        &self.opts
    }

    /// Whether some master's connection is down or stalled (opened ones
    /// only: a master nobody used yet is not known to be sick).
    fn master_sick(&self) -> bool {
        self.table()
            .masters
            .iter()
            .any(|n| n.conn.get().is_some_and(|c| !c.is_healthy()))
    }

    /// Whether `addr`'s connection, if open, looks able to answer.
    fn looks_healthy(&self, addr: &str) -> bool {
        let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        nodes
            .get(addr)
            .and_then(|n| n.conn.get())
            .map_or(true, Connection::is_healthy)
    }

    pub(crate) fn node(&self, addr: &str) -> Arc<Node> {
        let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(
            nodes
                .entry(addr.to_owned())
                .or_insert_with(|| Node::new(addr.to_owned())),
        )
    }

    /// The shards as last seen.
    pub(crate) fn shards(&self) -> Vec<Shard> {
        self.table().topo.shards.clone()
    }

    /// Address of the master serving `slot`, as last seen.
    pub(crate) fn master_addr(&self, slot: u16) -> Option<String> {
        self.master_for(Some(slot)).map(|n| n.addr.clone())
    }

    /// The master serving `slot` (`None`: any master, for keyless commands).
    pub(crate) fn master_for(&self, slot: Option<u16>) -> Option<Arc<Node>> {
        let table = self.table();
        match slot {
            Some(s) => {
                let i = *table.topo.slots.get(usize::from(s))?;
                if i == NO_NODE {
                    return None;
                }
                table.masters.get(usize::from(i)).cloned()
            }
            None => {
                if table.masters.is_empty() {
                    return None;
                }
                let i = self.next_any.fetch_add(1, Ordering::Relaxed) % table.masters.len();
                table.masters.get(i).cloned()
            }
        }
    }

    /// The connection of the master that serves `key`'s slot.
    pub(crate) async fn connection_for_slot(&self, slot: Option<u16>) -> Result<Connection> {
        let node = match self.master_for(slot) {
            Some(n) => n,
            None => {
                // Within the request timeout: a refresh can wait on a slow
                // node, and the caller on this one must not wait longer.
                let deadline = self.default_deadline();
                tokio::time::timeout_at(deadline, self.refresh(true))
                    .await
                    .map_err(|_| Error::Timeout)??;
                self.master_for(slot).ok_or_else(|| Error::Routing {
                    slot,
                    tried: Vec::new(),
                    last: Box::new(Error::from_server_error(b"CLUSTERDOWN slot not served")),
                })?
            }
        };
        node.connection(&self.base).await
    }

    /// Patches the table after `MOVED slot addr` (the pub/sub hub calls it
    /// for a refused SSUBSCRIBE too).
    pub(crate) fn apply_moved(&self, slot: u16, addr: &str) {
        let idx = usize::from(slot);
        // Patched under the write lock, from the table current at that
        // moment: a refresh installed meanwhile is not overwritten.
        let changed = {
            let mut current = self.table.write().unwrap_or_else(|p| p.into_inner());
            let already = current
                .topo
                .slots
                .get(idx)
                .and_then(|&i| current.masters.get(usize::from(i)))
                .is_some_and(|n| n.addr == addr);
            if already {
                return;
            }
            let mut table = (**current).clone();
            let shard = table.topo.shard_index(addr);
            if usize::from(shard) >= table.masters.len() {
                table.masters.push(self.node(addr));
            }
            if let Some(s) = table.topo.slots.get_mut(idx) {
                *s = shard;
            }
            let changed = !current.same_owners(&table);
            *current = Arc::new(table);
            changed
        };
        if changed {
            tracing::debug!(slot, node = %addr, "slot moved: table patched from MOVED");
            self.owners.send_modify(|generation| *generation += 1);
        }
    }

    /// Starts a background refresh unless one is running.
    pub(crate) fn refresh_soon(&self) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        // A refresh needs its own reference to outlive the caller.
        if let Some(me) = self.self_arc() {
            tokio::spawn(async move {
                let _ = me.refresh(false).await;
                me.refreshing.store(false, Ordering::Release);
            });
        } else {
            self.refreshing.store(false, Ordering::Release);
        }
    }

    fn self_arc(&self) -> Option<Arc<Self>> {
        self.me.upgrade()
    }
}

/// The topology event of a refresh: at info when a slot changed master
/// (with what changed), at debug when the reload found the same table.
/// Runs once per refresh, off the request path; the slot comparison is
/// 16,384 lookups, done only when something changed.
fn log_topology(old: &Table, new: &Table, changed: bool) {
    // Closures: the macros evaluate fields only for an enabled event, so
    // an unchanged refresh under an info subscriber scans nothing.
    let covered = || new.topo.slots.iter().filter(|&&i| i != NO_NODE).count();
    let replicas = || -> usize { new.topo.shards.iter().map(|s| s.replicas.len()).sum() };
    if !changed {
        tracing::debug!(
            masters = new.masters.len(),
            replicas = replicas(),
            slots = covered(),
            "cluster topology refreshed: unchanged"
        );
        return;
    }
    let moved = (0..crate::slot::SLOT_COUNT)
        .filter(|&slot| old.owner(slot) != new.owner(slot))
        .count();
    let added: Vec<&str> = new.masters().filter(|m| !old.is_master(m)).collect();
    let removed: Vec<&str> = old.masters().filter(|m| !new.is_master(m)).collect();
    tracing::info!(
        masters = new.masters.len(),
        replicas = replicas(),
        slots = covered(),
        slots_moved = moved,
        added = ?added,
        removed = ?removed,
        "cluster topology changed"
    );
}

/// The slot of a command's keys; `None` for keyless commands.
///
/// # Errors
/// [`Error::CrossSlot`] when two keys hash to different slots.
pub(crate) fn command_slot(cmd: &Cmd) -> Result<Option<u16>> {
    let mut keys = cmd.keys();
    let Some(first) = keys.next() else {
        return Ok(None);
    };
    let slot = Slot::of(first).get();
    for k in keys {
        let other = Slot::of(k).get();
        if other != slot {
            return Err(Error::CrossSlot { first: slot, other });
        }
    }
    Ok(Some(slot))
}

/// `host:port` of a seed configuration.
pub(crate) fn seed_addr(cfg: &ConnectionConfig) -> String {
    join_host_port(&cfg.host, cfg.port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyless_and_cross_slot() {
        assert_eq!(command_slot(&Cmd::new("PING")).unwrap(), None);
        let same = Cmd::new("DEL").key("{a}1").key("{a}2");
        assert_eq!(command_slot(&same).unwrap(), Some(Slot::of(b"a").get()));
        let cross = Cmd::new("DEL").key("a").key("b");
        assert!(matches!(command_slot(&cross), Err(Error::CrossSlot { .. })));
    }

    fn table(ranges: &[(i64, i64, i64)]) -> Table {
        let entries = ranges
            .iter()
            .map(|&(start, end, port)| {
                let node =
                    Frame::Array(vec![Frame::Bulk("127.0.0.1".into()), Frame::Integer(port)]);
                Frame::Array(vec![Frame::Integer(start), Frame::Integer(end), node])
            })
            .collect();
        let topo = Topology::from_slots(Frame::Array(entries), "h").unwrap();
        let masters = topo
            .shards
            .iter()
            .map(|s| Node::new(s.master.clone()))
            .collect();
        Table { topo, masters }
    }

    #[test]
    fn table_owners_and_changes() {
        let a = table(&[(0, 8000, 7000), (8001, 16383, 7001)]);
        assert_eq!(a.owner(8000), Some("127.0.0.1:7000"));
        assert_eq!(a.owner(8001), Some("127.0.0.1:7001"));
        assert!(a.is_master("127.0.0.1:7001") && !a.is_master("127.0.0.1:7002"));
        assert!(a.same_owners(&table(&[(0, 8000, 7000), (8001, 16383, 7001)])));
        // A slot moved, or a master replaced by its replica: a change.
        assert!(!a.same_owners(&table(&[(0, 8001, 7000), (8002, 16383, 7001)])));
        assert!(!a.same_owners(&table(&[(0, 8000, 7000), (8001, 16383, 7004)])));
        // An unserved slot has no owner.
        assert_eq!(table(&[(0, 99, 7000)]).owner(100), None);
    }
}
