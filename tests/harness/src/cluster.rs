//! A real Redis Cluster made of [`RedisServer`](crate::RedisServer) processes
//! on loopback ports, with the fault and resharding operations the cluster
//! router tests need.
//!
//! Every wait is bounded by the cluster's wait timeout (30 s by default) and
//! fails with the tail of every node's log. Queries the harness makes while
//! polling use short `redis-cli` time limits, so a paused node costs seconds,
//! not the whole deadline.
//!
//! Ownership and roles come from `CLUSTER NODES` (one text line per node,
//! robust to parse) and `ROLE`; see `parse.rs` for why not `CLUSTER SLOTS`.
//!
//! Files: this one has the cluster itself, its queries and health checks;
//! `builder.rs` starts it, `node.rs` is one node, `failover.rs` and
//! `migration.rs` are the scripted faults and resharding, `tests.rs` runs
//! them all against real servers.

use std::fmt::Write as _;
use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::parse::{info_field, parse_role, NodesView, Role};
use crate::slot::{self, SLOTS};

mod builder;
mod failover;
mod migration;
mod node;
#[cfg(test)]
mod tests;

pub use builder::ClusterBuilder;
pub use failover::FailoverMode;
pub use node::ClusterNode;

/// Default deadline of every wait (start, health, failover, migration).
const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Time between two checks of a wait loop.
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Limit of one `redis-cli` query made by the harness itself.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);
/// Lines of each node's log quoted in a failure message.
const LOG_TAIL_LINES: usize = 40;

/// A running Redis Cluster: `masters × (1 + replicas)` nodes on free loopback
/// ports, each in its own temp dir. `Drop` kills every node and removes the dirs.
///
/// Node indices are positions in [`nodes`](Self::nodes) and never change; which
/// indices are masters does (failovers), so roles are always asked from the
/// servers.
///
/// ```no_run
/// use keylatch_harness::{FailoverMode, RedisCluster};
///
/// let cluster = RedisCluster::start();
/// let master = cluster.master_for_slot(RedisCluster::slot_of("foo"));
/// let replica = cluster.replicas_of(master)[0];
/// cluster.failover(replica, FailoverMode::Default).unwrap();
/// assert_eq!(cluster.master_for_slot(RedisCluster::slot_of("foo")), replica);
/// ```
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<ClusterNode>,
    wait_timeout: Duration,
}

impl RedisCluster {
    /// A builder for a cluster of another shape or with extra arguments.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::builder()
    ///     .masters(3)
    ///     .replicas(0)
    ///     .start()
    ///     .unwrap();
    /// ```
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// Starts a healthy 3-master, 1-replica-each cluster (6 nodes).
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// assert_eq!(cluster.masters().len(), 3);
    /// ```
    ///
    /// # Panics
    /// When the cluster cannot be started, with every node's log: this is for
    /// tests, where a missing `redis-server` must fail rather than skip.
    #[allow(clippy::panic)]
    pub fn start() -> Self {
        match ClusterBuilder::default().start() {
            Ok(cluster) => cluster,
            Err(e) => panic!("cannot start a redis cluster: {e}"),
        }
    }

    /// All nodes, by index.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// for node in cluster.nodes() {
    ///     println!("{} {}", node.port(), node.node_id());
    /// }
    /// ```
    pub fn nodes(&self) -> &[ClusterNode] {
        &self.nodes
    }

    /// Node `idx`.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// let first = cluster.node(0);
    /// ```
    ///
    /// # Panics
    /// `idx` is out of range.
    pub fn node(&self, idx: usize) -> &ClusterNode {
        &self.nodes[idx]
    }

    /// Node `idx`, to kill or restart it.
    ///
    /// ```no_run
    /// let mut cluster = keylatch_harness::RedisCluster::start();
    /// cluster.node_mut(0).kill();
    /// ```
    ///
    /// # Panics
    /// `idx` is out of range.
    pub fn node_mut(&mut self, idx: usize) -> &mut ClusterNode {
        &mut self.nodes[idx]
    }

    /// `redis://127.0.0.1:port` of every node, killed ones included (seeds
    /// for a client, which must cope with dead seeds).
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// assert_eq!(cluster.seed_urls().len(), 6);
    /// ```
    pub fn seed_urls(&self) -> Vec<String> {
        self.nodes.iter().map(ClusterNode::url).collect()
    }

    /// The URL of node 0.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// assert_eq!(cluster.url(), cluster.node(0).url());
    /// ```
    pub fn url(&self) -> String {
        self.nodes[0].url()
    }

    /// Indices of the live nodes whose `ROLE` says master, ascending.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// assert_eq!(cluster.masters().len(), 3);
    /// ```
    ///
    /// # Panics
    /// A live node does not answer `ROLE` (message with the node logs).
    pub fn masters(&self) -> Vec<usize> {
        self.try_masters().unwrap_or_else(|e| self.fail(&e))
    }

    /// Indices of the live nodes whose `ROLE` says they replicate node
    /// `master_idx`, ascending.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// let master = cluster.masters()[0];
    /// assert_eq!(cluster.replicas_of(master).len(), 1);
    /// ```
    ///
    /// # Panics
    /// `master_idx` is out of range, or a live node does not answer `ROLE`.
    pub fn replicas_of(&self, master_idx: usize) -> Vec<usize> {
        let master_port = self.nodes[master_idx].port();
        self.live()
            .into_iter()
            .filter(|&i| {
                i != master_idx
                    && self.role(i).unwrap_or_else(|e| self.fail(&e))
                        == Role::Replica { master_port }
            })
            .collect()
    }

    /// The index of the node that owns `slot`, according to `CLUSTER NODES`
    /// of the first live node that answers. During a change the nodes may
    /// disagree: call [`wait_healthy`](Self::wait_healthy) first for a settled
    /// answer.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// assert!(cluster.masters().contains(&cluster.master_for_slot(0)));
    /// ```
    ///
    /// # Panics
    /// `slot` is not below 16384, or no live node names a known owner.
    pub fn master_for_slot(&self, slot: u16) -> usize {
        assert!(slot < SLOTS, "slot {slot} out of range 0..{SLOTS}");
        let mut why = String::from("no live node");
        for i in self.live() {
            match self.view(i) {
                Ok(view) => match view.owner(slot).and_then(|id| self.node_index_by_id(id)) {
                    Some(owner) => return owner,
                    None => why = format!("node {i} names no known owner of slot {slot}"),
                },
                Err(e) => why = e,
            }
        }
        self.fail(&format!("no owner for slot {slot}: {why}"))
    }

    /// The index of the node listening on `port`.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// assert_eq!(cluster.node_index_by_port(cluster.node(2).port()), Some(2));
    /// ```
    pub fn node_index_by_port(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.port() == port)
    }

    /// The index of the node with cluster id `id`.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// let id = cluster.node(4).node_id().to_owned();
    /// assert_eq!(cluster.node_index_by_id(&id), Some(4));
    /// ```
    pub fn node_index_by_id(&self, id: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.node_id() == id)
    }

    /// Waits until the cluster is healthy as far as its live nodes (see
    /// [`ClusterNode::is_live`]) go: each says `cluster_state:ok`; their
    /// `CLUSTER NODES` views agree on every slot's master, cover all 16384
    /// slots, and agree on each live node's role and master, with none flagged
    /// `fail`, `fail?` or `handshake`; each live replica's `ROLE` names the same
    /// master, a live one, and its `master_link_status` is `up`.
    ///
    /// ```no_run
    /// let mut cluster = keylatch_harness::RedisCluster::start();
    /// cluster.node_mut(5).kill();
    /// cluster.wait_healthy().unwrap(); // a dead replica does not count
    /// ```
    ///
    /// # Errors
    /// Not healthy within the wait timeout: the last failed check and the
    /// node logs ([`io::ErrorKind::TimedOut`]).
    pub fn wait_healthy(&self) -> io::Result<()> {
        self.wait_for("a healthy cluster", || self.health().map(drop))
    }

    /// Waits until node `idx` says `cluster_state:ok` in `CLUSTER INFO`.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// cluster.wait_state_ok_on(3).unwrap();
    /// ```
    ///
    /// # Errors
    /// Not within the wait timeout ([`io::ErrorKind::TimedOut`], with logs).
    ///
    /// # Panics
    /// `idx` is out of range.
    pub fn wait_state_ok_on(&self, idx: usize) -> io::Result<()> {
        assert!(idx < self.nodes.len(), "no node {idx}");
        self.wait_for(&format!("cluster_state:ok on node {idx}"), || {
            self.state_ok(idx)
        })
    }

    /// A key that hashes to `slot`: the first of `k0`, `k1`, … that does.
    ///
    /// ```
    /// use keylatch_harness::RedisCluster;
    /// let key = RedisCluster::key_for_slot(12182);
    /// assert_eq!(RedisCluster::slot_of(&key), 12182);
    /// ```
    ///
    /// # Panics
    /// `slot` is not below 16384.
    pub fn key_for_slot(slot: u16) -> String {
        Self::keys_for_slot(slot, 1).swap_remove(0)
    }

    /// The `count` first keys among `k0`, `k1`, … that hash to `slot` (no
    /// hash tags, so tests may wrap them in their own).
    ///
    /// ```
    /// use keylatch_harness::RedisCluster;
    /// let keys = RedisCluster::keys_for_slot(7, 3);
    /// assert!(keys.iter().all(|k| RedisCluster::slot_of(k) == 7));
    /// ```
    ///
    /// # Panics
    /// `slot` is not below 16384.
    pub fn keys_for_slot(slot: u16, count: usize) -> Vec<String> {
        slot::keys_for_slot(slot, count)
    }

    /// The hash slot of `key` (CRC16-XMODEM of the key or its hash tag, mod
    /// 16384), computed in the harness independently of the client under test.
    ///
    /// ```
    /// use keylatch_harness::RedisCluster;
    /// assert_eq!(RedisCluster::slot_of("foo"), 12182);
    /// assert_eq!(RedisCluster::slot_of("{foo}.bar"), 12182);
    /// ```
    pub fn slot_of(key: impl AsRef<[u8]>) -> u16 {
        slot::slot_for_key(key.as_ref())
    }

    /// The last lines of every node's log, headed by index, port, id and
    /// state, for failure messages.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// eprintln!("{}", cluster.logs());
    /// ```
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let state = if node.pid().is_none() {
                "killed"
            } else if node.paused.load(Ordering::SeqCst) {
                "paused"
            } else {
                "running"
            };
            let _ = writeln!(
                out,
                "--- node {i} port {} id {} ({state}), last {LOG_TAIL_LINES} log lines ---",
                node.port(),
                node.node_id()
            );
            let log = node.server.log();
            let lines: Vec<&str> = log.lines().collect();
            for line in &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..] {
                let _ = writeln!(out, "{line}");
            }
        }
        out
    }

    /// The deadline of this cluster's waits (see [`ClusterBuilder::wait_timeout`]).
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// assert_eq!(cluster.wait_timeout().as_secs(), 30);
    /// ```
    pub fn wait_timeout(&self) -> Duration {
        self.wait_timeout
    }

    /// Changes the deadline of this cluster's later waits, e.g. to expect a
    /// wait to fail without spending 30 s on it.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let mut cluster = keylatch_harness::RedisCluster::start();
    /// cluster.set_wait_timeout(Duration::from_secs(2));
    /// ```
    pub fn set_wait_timeout(&mut self, timeout: Duration) {
        self.wait_timeout = timeout;
    }

    // ----- internals -----

    fn live(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_live())
            .collect()
    }

    fn query(&self, idx: usize, args: &[&str]) -> Result<String, String> {
        self.nodes[idx]
            .server()
            .cli_timeout(args, QUERY_TIMEOUT)
            .map_err(|e| format!("node {idx} (port {}): {e}", self.nodes[idx].port()))
    }

    fn expect_ok(&self, idx: usize, args: &[&str]) -> io::Result<()> {
        let reply = self.query(idx, args).map_err(io::Error::other)?;
        if reply.trim() == "OK" {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "node {idx} (port {}) answered {args:?} with {:?}",
                self.nodes[idx].port(),
                reply.trim()
            )))
        }
    }

    fn role(&self, idx: usize) -> Result<Role, String> {
        parse_role(&self.query(idx, &["ROLE"])?).map_err(|e| format!("node {idx}: {e}"))
    }

    fn view(&self, idx: usize) -> Result<NodesView, String> {
        NodesView::parse(&self.query(idx, &["CLUSTER", "NODES"])?)
            .map_err(|e| format!("node {idx}: {e}"))
    }

    fn state_ok(&self, idx: usize) -> Result<(), String> {
        let info = self.query(idx, &["CLUSTER", "INFO"])?;
        match info_field(&info, "cluster_state") {
            Some("ok") => Ok(()),
            state => Err(format!("node {idx} has cluster_state {state:?}")),
        }
    }

    fn try_masters(&self) -> Result<Vec<usize>, String> {
        let mut masters = Vec::new();
        for i in self.live() {
            if self.role(i)? == Role::Master {
                masters.push(i);
            }
        }
        Ok(masters)
    }

    /// One pass of the [`wait_healthy`](Self::wait_healthy) checks; returns
    /// the (agreed) view of the first live node.
    fn health(&self) -> Result<NodesView, String> {
        let live = self.live();
        if live.is_empty() {
            return Err("no live node".to_owned());
        }
        for &i in &live {
            self.state_ok(i)?;
        }
        type Summary = (Vec<(u16, u16, String)>, Vec<(usize, bool, Option<String>)>);
        let mut reference: Option<(usize, Summary, NodesView)> = None;
        for &i in &live {
            let view = self.view(i)?;
            let slots = view
                .slot_map()
                .map_err(|e| format!("node {i}'s view: {e}"))?;
            let mut roles = Vec::with_capacity(live.len());
            for &j in &live {
                let line = view
                    .node(self.nodes[j].node_id())
                    .ok_or_else(|| format!("node {i} does not know node {j}"))?;
                if line.troubled {
                    return Err(format!("node {i} sees node {j} as {}", line.flags));
                }
                roles.push((j, line.master, line.master_id.clone()));
            }
            let summary = (slots, roles);
            match &reference {
                None => reference = Some((i, summary, view)),
                Some((r, agreed, _)) if *agreed != summary => {
                    return Err(format!(
                        "nodes {r} and {i} disagree: {agreed:?} versus {summary:?}"
                    ))
                }
                Some(_) => {}
            }
        }
        let Some((_, (_, roles), view)) = reference else {
            return Err("no live node".to_owned());
        };
        for (j, is_master, master_id) in roles {
            match (self.role(j)?, is_master) {
                (Role::Master, true) => {}
                (Role::Replica { master_port }, false) => {
                    let master = self
                        .node_index_by_port(master_port)
                        .filter(|&m| self.nodes[m].is_live())
                        .ok_or_else(|| {
                            format!("node {j} replicates port {master_port}, not a live node")
                        })?;
                    if master_id.as_deref() != Some(self.nodes[master].node_id()) {
                        return Err(format!(
                            "node {j}: ROLE names node {master}, CLUSTER NODES {master_id:?}"
                        ));
                    }
                    let info = self.query(j, &["INFO", "replication"])?;
                    let link = info_field(&info, "master_link_status");
                    if link != Some("up") {
                        return Err(format!("node {j} has master_link_status {link:?}"));
                    }
                }
                (role, _) => {
                    return Err(format!(
                        "node {j}: ROLE says {role:?}, CLUSTER NODES says master={is_master}"
                    ))
                }
            }
        }
        Ok(view)
    }

    /// Polls `check` until it passes or the wait timeout ends; the error
    /// carries `check`'s last complaint and the node logs.
    fn wait_for(
        &self,
        what: &str,
        mut check: impl FnMut() -> Result<(), String>,
    ) -> io::Result<()> {
        let deadline = Instant::now() + self.wait_timeout;
        loop {
            let why = match check() {
                Ok(()) => return Ok(()),
                Err(why) => why,
            };
            if Instant::now() >= deadline {
                return Err(self.error(
                    io::ErrorKind::TimedOut,
                    &format!(
                        "timed out after {:?} waiting for {what}; last check: {why}",
                        self.wait_timeout
                    ),
                ));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    fn error(&self, kind: io::ErrorKind, message: &str) -> io::Error {
        io::Error::new(kind, format!("{message}\n{}", self.logs()))
    }

    #[allow(clippy::panic)]
    fn fail(&self, message: &str) -> ! {
        panic!("{message}\n{}", self.logs())
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        // Kill all before any dir is removed (each node's own Drop), so the
        // survivors do not spend the 2 cores on failure detection and
        // elections while the others are torn down.
        for node in &mut self.nodes {
            node.kill();
        }
    }
}
