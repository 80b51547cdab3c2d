//! Scripted failover.

use std::io;
use std::time::{Duration, Instant};

use super::RedisCluster;
use crate::parse::Role;

/// Redis aborts a manual failover that has not completed after 5 s
/// (`CLUSTER_MF_TIMEOUT`); the harness sends it again after this long.
const MANUAL_FAILOVER_RETRY: Duration = Duration::from_secs(6);

/// How [`RedisCluster::failover`] asks a replica to take over.
///
/// ```
/// use keylatch_harness::FailoverMode;
/// assert_eq!(FailoverMode::default(), FailoverMode::Default);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FailoverMode {
    /// `CLUSTER FAILOVER`: the master stops writes until the replica has
    /// caught up, so nothing acknowledged is lost. Needs a live master.
    #[default]
    Default,
    /// `CLUSTER FAILOVER FORCE`: no hand-shake with the master (which may be
    /// dead or paused), but the other masters still vote.
    Force,
    /// `CLUSTER FAILOVER TAKEOVER`: no hand-shake and no vote; the replica
    /// bumps its epoch on its own.
    Takeover,
}

impl FailoverMode {
    fn option(self) -> Option<&'static str> {
        match self {
            Self::Default => None,
            Self::Force => Some("FORCE"),
            Self::Takeover => Some("TAKEOVER"),
        }
    }
}

impl RedisCluster {
    /// Promotes replica `replica_idx`: sends `CLUSTER FAILOVER [FORCE|TAKEOVER]`
    /// to it, polls `ROLE` until it says master (re-sending a default-mode
    /// request that Redis abandoned after its 5 s limit), then waits until
    /// every live node agrees it owns its slots and the cluster is healthy
    /// (the old master, if live, then replicates it with its link up).
    ///
    /// A replica whose master is dead or paused promotes itself about a node
    /// timeout after the other masters mark the master failed; a scripted
    /// failover racing that gets an error saying the node is a master already.
    /// Tests that want to choose the moment start the cluster with
    /// `.args(["--cluster-replica-no-failover", "yes"])`, which stops
    /// automatic failover but still allows this one.
    ///
    /// ```no_run
    /// use keylatch_harness::{FailoverMode, RedisCluster};
    /// let cluster = RedisCluster::start();
    /// let replica = cluster.replicas_of(cluster.masters()[0])[0];
    /// cluster.failover(replica, FailoverMode::Force).unwrap();
    /// assert!(cluster.masters().contains(&replica));
    /// ```
    ///
    /// # Errors
    /// The node is not a live replica, refuses the command (e.g. default mode
    /// with a dead master), or the promotion or agreement does not happen
    /// within the wait timeout (message with the node logs).
    ///
    /// # Panics
    /// `replica_idx` is out of range.
    pub fn failover(&self, replica_idx: usize, mode: FailoverMode) -> io::Result<()> {
        let node = &self.nodes[replica_idx];
        match self.role(replica_idx).map_err(io::Error::other)? {
            Role::Replica { .. } => {}
            Role::Master => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("node {replica_idx} is a master already"),
                ))
            }
        }
        let mut command = vec!["CLUSTER", "FAILOVER"];
        command.extend(mode.option());
        let send = || -> io::Result<()> { self.expect_ok(replica_idx, &command) };
        send()?;
        let mut sent_at = Instant::now();
        self.wait_for(
            &format!("node {replica_idx} to report master in ROLE after {command:?}"),
            || {
                let role = self.role(replica_idx)?;
                if role == Role::Master {
                    return Ok(());
                }
                if mode == FailoverMode::Default && sent_at.elapsed() >= MANUAL_FAILOVER_RETRY {
                    sent_at = Instant::now();
                    send().map_err(|e| format!("re-sent failover: {e}"))?;
                }
                Err(format!("ROLE says {role:?}"))
            },
        )?;
        let id = node.node_id();
        self.wait_for(
            &format!("every live node to agree that node {replica_idx} owns slots"),
            || {
                let view = self.health()?;
                match view.node(id) {
                    Some(line) if line.master && !line.slots.is_empty() => Ok(()),
                    line => Err(format!("node {replica_idx} is {line:?}")),
                }
            },
        )
    }
}
