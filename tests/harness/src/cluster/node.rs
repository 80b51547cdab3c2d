//! One node of a cluster.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::server::RedisServer;

/// One node of a [`RedisCluster`](crate::RedisCluster): a [`RedisServer`] plus its cluster id.
///
/// ```no_run
/// let mut cluster = keylatch_harness::RedisCluster::start();
/// let node = cluster.node_mut(3);
/// println!("{} is {}", node.url(), node.node_id());
/// node.kill();
/// node.restart().unwrap();
/// cluster.wait_healthy().unwrap();
/// ```
#[derive(Debug)]
pub struct ClusterNode {
    pub(super) server: RedisServer,
    pub(super) id: String,
    /// Set between `pause` and `resume`: a stopped process accepts TCP
    /// connections but never answers, so the harness must not query it.
    pub(super) paused: AtomicBool,
}

impl ClusterNode {
    /// The TCP port on 127.0.0.1 (the cluster bus is on port + 10000).
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// assert!(cluster.node(0).port() > 0);
    /// ```
    pub fn port(&self) -> u16 {
        self.server.port()
    }

    /// `redis://127.0.0.1:port`.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// assert!(cluster.node(0).url().starts_with("redis://127.0.0.1:"));
    /// ```
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Runs `redis-cli -p PORT args…` against this node (add `-c` to follow
    /// redirections) and returns its stdout.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// let out = cluster.node(0).cli(&["-c", "SET", "foo", "bar"]).unwrap();
    /// assert_eq!(out.trim(), "OK");
    /// ```
    ///
    /// # Errors
    /// `redis-cli` is missing, exits non-zero, or times out (see [`crate::redis_cli`]).
    pub fn cli(&self, args: &[&str]) -> io::Result<String> {
        self.server.cli(args)
    }

    /// The node's cluster id (`CLUSTER MYID`, read at start: it survives
    /// restarts, and this works while the node is down).
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// assert_eq!(cluster.node(0).node_id().len(), 40);
    /// ```
    pub fn node_id(&self) -> &str {
        &self.id
    }

    /// The process id, unless killed.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// assert!(cluster.node(0).pid().is_some());
    /// ```
    pub fn pid(&self) -> Option<u32> {
        self.server.pid()
    }

    /// Whether the harness counts this node as up: started and neither killed
    /// nor paused. Waits such as [`RedisCluster::wait_healthy`](crate::RedisCluster::wait_healthy) check only
    /// these nodes.
    ///
    /// ```no_run
    /// let mut cluster = keylatch_harness::RedisCluster::start();
    /// cluster.node_mut(5).kill();
    /// assert!(!cluster.node(5).is_live());
    /// ```
    pub fn is_live(&self) -> bool {
        self.server.pid().is_some() && !self.paused.load(Ordering::SeqCst)
    }

    /// SIGKILL, and wait for the process to go. Its data is lost (no
    /// persistence); its `nodes.conf` stays for [`restart`](Self::restart).
    ///
    /// ```no_run
    /// let mut cluster = keylatch_harness::RedisCluster::start();
    /// cluster.node_mut(5).kill();
    /// ```
    pub fn kill(&mut self) {
        self.server.kill();
        self.paused.store(false, Ordering::SeqCst);
    }

    /// Starts the node again on the same port, with the same arguments and
    /// directory, so it reads its `nodes.conf` and rejoins with the same id
    /// (a replica then resyncs from its master). Kills it first if running.
    /// Does not wait for the cluster: call [`RedisCluster::wait_healthy`](crate::RedisCluster::wait_healthy).
    ///
    /// ```no_run
    /// let mut cluster = keylatch_harness::RedisCluster::start();
    /// cluster.node_mut(5).kill();
    /// cluster.node_mut(5).restart().unwrap();
    /// cluster.wait_healthy().unwrap();
    /// ```
    ///
    /// # Errors
    /// The server did not answer PING again within 15 s.
    pub fn restart(&mut self) -> io::Result<()> {
        self.paused.store(false, Ordering::SeqCst);
        self.server.restart()
    }

    /// Pauses the process (SIGSTOP): its TCP port still accepts connections,
    /// nothing is answered, and the other nodes stop hearing from it.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// cluster.node(5).pause().unwrap();
    /// cluster.node(5).resume().unwrap();
    /// ```
    ///
    /// # Errors
    /// The node is not running, or `kill -STOP` failed.
    pub fn pause(&self) -> io::Result<()> {
        self.server.pause()?;
        self.paused.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Resumes a paused process (SIGCONT).
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// cluster.node(5).pause().unwrap();
    /// cluster.node(5).resume().unwrap();
    /// ```
    ///
    /// # Errors
    /// The node is not running, or `kill -CONT` failed.
    pub fn resume(&self) -> io::Result<()> {
        self.server.resume()?;
        self.paused.store(false, Ordering::SeqCst);
        Ok(())
    }

    /// The underlying server (working dir, log, address).
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// assert!(cluster.node(0).server().dir().join("nodes.conf").exists());
    /// ```
    pub fn server(&self) -> &RedisServer {
        &self.server
    }
}
