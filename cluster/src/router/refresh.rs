//! Where the slot table comes from: `CLUSTER SHARDS` (or `CLUSTER SLOTS`)
//! from the healthiest nodes first, hedged so a silent node costs a fraction
//! of a second, and the background watch that reloads it periodically and
//! while a master looks sick.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use keylatch_resp::Cmd;
use std::time::Instant;

use super::{Node, Router, Table, HEALTH_TICK};
use crate::error::{Error, Result, ServerErrorKind};
use crate::topology::{split_addr, Topology};

impl Router {
    /// Reloads the topology from the known masters, then the seeds: `CLUSTER
    /// SHARDS`, or `CLUSTER SLOTS` where SHARDS is unknown. Unless `force`,
    /// a refresh within `refresh_min_interval` of the last one is skipped.
    pub(crate) async fn refresh(&self, force: bool) -> Result<()> {
        let mut last_done = self.refresh_lock.lock().await;
        if !force && last_done.elapsed() < self.opts.refresh_min_interval {
            return Ok(());
        }
        let mut candidates: Vec<String> = self
            .table()
            .masters
            .iter()
            .map(|n| n.addr.clone())
            .collect();
        for s in &self.seeds {
            if !candidates.contains(s) {
                candidates.push(s.clone());
            }
        }
        // Nodes that look dead (down, or not answering) last: each one
        // asked costs up to the topology wait.
        candidates.sort_by_key(|addr| !self.looks_healthy(addr));
        let result = match self.self_arc() {
            Some(me) => me.fetch_hedged(candidates).await,
            None => Err(Error::ConnectionClosed),
        };
        *last_done = Instant::now();
        match &result {
            // The first failure of a streak at warn, the rest at debug.
            Err(e) if !self.refresh_failing.swap(true, Ordering::Relaxed) => {
                tracing::warn!(error = %e, "cluster topology refresh failed: no node answered with slots");
            }
            Err(e) => tracing::debug!(error = %e, "cluster topology refresh failed again"),
            Ok(_) if self.refresh_failing.swap(false, Ordering::Relaxed) => {
                tracing::info!("cluster topology refresh succeeded again");
            }
            Ok(_) => {}
        }
        self.install(result?);
        Ok(())
    }

    /// Asks the candidates for the topology, in order, and takes the first
    /// answer that names slot owners. A candidate that has not answered
    /// within [`HEDGE_AFTER`] gets company from the next one (and so on), so
    /// a node that died without a word, still first in line because nobody
    /// noticed yet, costs a fraction of a second, not the topology wait.
    async fn fetch_hedged(self: Arc<Self>, candidates: Vec<String>) -> Result<Topology> {
        let mut left = candidates.into_iter();
        let mut asking = tokio::task::JoinSet::new();
        let mut last_err = Error::Config("no cluster nodes to ask for the topology".to_owned());
        loop {
            if asking.is_empty() {
                let Some(addr) = left.next() else {
                    return Err(last_err);
                };
                self.ask_topology(&mut asking, addr);
            }
            tokio::select! {
                joined = asking.join_next() => match joined {
                    Some(Ok((_, Ok(topo)))) if !topo.shards.is_empty() => return Ok(topo),
                    Some(Ok((addr, Ok(_)))) => {
                        last_err = Error::UnexpectedReply(format!("{addr} reported no slots"));
                    }
                    Some(Ok((_, Err(e)))) => last_err = e,
                    // A task cannot panic here short of a bug; the next
                    // candidate is asked.
                    Some(Err(_)) | None => {}
                },
                () = tokio::time::sleep(HEDGE_AFTER) => {
                    if let Some(addr) = left.next() {
                        self.ask_topology(&mut asking, addr);
                    }
                }
            }
        }
    }

    fn ask_topology(
        self: &Arc<Self>,
        asking: &mut tokio::task::JoinSet<(String, Result<Topology>)>,
        addr: String,
    ) {
        let me = Arc::clone(self);
        asking.spawn(async move {
            let topo = me.fetch_topology(&addr).await;
            (addr, topo)
        });
    }

    async fn fetch_topology(&self, addr: &str) -> Result<Topology> {
        let conn = self.node(addr).connection(&self.base).await?;
        let host = split_addr(addr).map(|(h, _)| h).unwrap_or_default();
        // Bounded by the connect timeout, not the request timeout (which may
        // be none): a refresh holds the refresh lock, and a node that does
        // not answer (paused, overloaded) must not stall every later
        // refresh; the next candidate is asked instead.
        let bound = Some(self.base.connect_timeout.max(MIN_TOPOLOGY_WAIT));
        match conn
            .send_timeout(Cmd::new("CLUSTER").arg("SHARDS"), bound)
            .await
        {
            // CLUSTER SLOTS needs no such choice: a node reports the
            // port of the kind (TLS or not) of the connection asking.
            Ok(reply) => {
                self.modern.store(true, Ordering::Relaxed);
                Topology::from_shards(reply, &host, self.base.tls.is_some())
            }
            Err(e) if e.server_kind() == Some(ServerErrorKind::UnknownCommand) => {
                // Redis 6.2: no CLUSTER SHARDS, and (same release) no
                // sharded pub/sub and no script flags either.
                self.modern.store(false, Ordering::Relaxed);
                let reply = conn
                    .send_timeout(Cmd::new("CLUSTER").arg("SLOTS"), bound)
                    .await?;
                Topology::from_slots(reply, &host)
            }
            Err(e) => Err(e),
        }
    }

    fn install(&self, topo: Topology) {
        let masters: Vec<Arc<Node>> = topo.shards.iter().map(|s| self.node(&s.master)).collect();
        // Forget nodes that left the topology so their connection tasks end
        // (seeds stay: they are the way back in if everything else moves).
        {
            let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
            nodes.retain(|addr, _| {
                self.seeds.contains(addr)
                    || topo
                        .shards
                        .iter()
                        .any(|s| &s.master == addr || s.replicas.contains(addr))
            });
        }
        self.store(Table { topo, masters });
    }
}

/// The router's background watch: reloads the topology every
/// `refresh_interval`, and every [`HEALTH_TICK`] while a master looks sick.
/// Holds the router weakly and ends with it.
pub(super) async fn watch_health(router: Weak<Router>) {
    let mut since_refresh = Duration::ZERO;
    loop {
        tokio::time::sleep(HEALTH_TICK).await;
        let Some(router) = router.upgrade() else {
            return;
        };
        since_refresh += HEALTH_TICK;
        let due = router
            .opts
            .refresh_interval
            .is_some_and(|every| since_refresh >= every);
        if due || router.master_sick() {
            since_refresh = Duration::ZERO;
            let _ = router.refresh(false).await;
        }
    }
}

/// How long a refresh waits for one node's topology before asking the next
/// one as well.
const HEDGE_AFTER: Duration = Duration::from_millis(200);

/// Least time a node gets to answer CLUSTER SHARDS, whatever the connect
/// timeout (a short one, set for fast failover, must not make every refresh
/// of a large cluster fail).
const MIN_TOPOLOGY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
