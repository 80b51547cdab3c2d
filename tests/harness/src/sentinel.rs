//! A Sentinel deployment: a master, its replicas, and sentinels watching it
//! (`redis-server sentinel.conf --sentinel`), for the tests of clients that
//! find the master through sentinels and follow its failovers.

use std::io;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::server::{free_port, ping, redis_cli_timeout, server_binary, RedisServer, TempDir};

/// The name the sentinels know the master by.
pub const MASTER_NAME: &str = "mymaster";

/// One sentinel process; killed on drop.
#[derive(Debug)]
pub struct SentinelNode {
    port: u16,
    child: Option<Child>,
    dir: TempDir,
}

impl SentinelNode {
    fn start(master_port: u16, quorum: usize) -> io::Result<Self> {
        let dir = TempDir::new("keylatch-sentinel")?;
        let port = free_port()?;
        let conf = dir.path().join("sentinel.conf");
        // Fast detection for tests: a master silent for 1 s is subjectively
        // down; a failover that stalls is retried after 4 s.
        let text = format!(
            "port {port}\nbind 127.0.0.1\ndir {dir}\nlogfile {dir}/sentinel.log\n\
             sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} {quorum}\n\
             sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
             sentinel failover-timeout {MASTER_NAME} 4000\n\
             sentinel parallel-syncs {MASTER_NAME} 2\n",
            dir = dir.path().display()
        );
        std::fs::write(&conf, text)?;
        let child = Command::new(server_binary())
            .arg(&conf)
            .arg("--sentinel")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let node = Self {
            port,
            child: Some(child),
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while ping(port).is_err() {
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "sentinel on port {port} never answered; log:\n{}",
                    node.log()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(node)
    }

    /// The sentinel's port.
    ///
    /// ```no_run
    /// let group = keylatch_harness::SentinelGroup::start();
    /// println!("{}", group.sentinel(0).port());
    /// ```
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its log so far.
    ///
    /// ```no_run
    /// let group = keylatch_harness::SentinelGroup::start();
    /// println!("{}", group.sentinel(0).log());
    /// ```
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sentinel.log")).unwrap_or_default()
    }

    /// Whether the process runs.
    ///
    /// ```no_run
    /// let group = keylatch_harness::SentinelGroup::start();
    /// assert!(group.sentinel(0).is_running());
    /// ```
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// SIGKILL, and wait for the process to go.
    ///
    /// ```no_run
    /// let mut group = keylatch_harness::SentinelGroup::start();
    /// group.sentinel_mut(0).kill();
    /// ```
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGSTOP (`-STOP`) or SIGCONT (`-CONT`): a paused sentinel keeps its
    /// port open and answers nothing.
    ///
    /// ```no_run
    /// let group = keylatch_harness::SentinelGroup::start();
    /// group.sentinel(0).signal("-STOP").unwrap();
    /// group.sentinel(0).signal("-CONT").unwrap();
    /// ```
    ///
    /// # Errors
    /// The process is gone, or `kill` failed.
    pub fn signal(&self, sig: &str) -> io::Result<()> {
        let pid = self
            .child
            .as_ref()
            .map(Child::id)
            .ok_or_else(|| io::Error::other("sentinel not running"))?;
        let ok = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()?
            .success();
        if ok {
            Ok(())
        } else {
            Err(io::Error::other(format!("kill {sig} {pid} failed")))
        }
    }

    /// `redis-cli` against this sentinel, for at most [`QUICK`] (a paused
    /// sentinel answers nothing).
    fn cli(&self, args: &[&str]) -> io::Result<String> {
        redis_cli_timeout(self.port, args, QUICK)
    }
}

impl Drop for SentinelNode {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A master, `replicas` replicas of it, and `sentinels` sentinels watching
/// it under [`MASTER_NAME`] (quorum: a majority of the sentinels). Started
/// once every sentinel knows every replica and the other sentinels, so a
/// failover can run at once. `Drop` kills them all.
///
/// ```no_run
/// let mut group = keylatch_harness::SentinelGroup::start();
/// let url = group.url(); // redis+sentinel://127.0.0.1:p1,…/mymaster
/// let old = group.master();
/// group.failover().unwrap();
/// assert_ne!(group.master(), old);
/// ```
#[derive(Debug)]
pub struct SentinelGroup {
    nodes: Vec<RedisServer>,
    sentinels: Vec<SentinelNode>,
}

impl SentinelGroup {
    /// A master, 2 replicas and 3 sentinels.
    ///
    /// ```no_run
    /// let group = keylatch_harness::SentinelGroup::start();
    /// ```
    ///
    /// # Panics
    /// When the group cannot be started (a test must fail, not skip).
    #[allow(clippy::panic)]
    pub fn start() -> Self {
        match Self::start_with(2, 3) {
            Ok(g) => g,
            Err(e) => panic!("cannot start a sentinel group: {e}"),
        }
    }

    /// A master, `replicas` replicas and `sentinels` sentinels.
    ///
    /// ```no_run
    /// let group = keylatch_harness::SentinelGroup::start_with(1, 3).unwrap();
    /// ```
    ///
    /// # Errors
    /// A process did not start, or the sentinels did not learn the group
    /// within 30 s.
    pub fn start_with(replicas: usize, sentinels: usize) -> io::Result<Self> {
        // A full sync starts at once (diskless sync waits 5 s for more
        // replicas by default), on every node since any may be promoted.
        let node = || RedisServer::builder().args(["--repl-diskless-sync-delay", "0"]);
        let master = node().start()?;
        let port = master.port().to_string();
        let mut nodes = vec![master];
        for _ in 0..replicas {
            let replica = node().args(["--replicaof", "127.0.0.1", &port]).start()?;
            nodes.push(replica);
        }
        let quorum = sentinels / 2 + 1;
        let sentinels = (0..sentinels)
            .map(|_| SentinelNode::start(nodes[0].port(), quorum))
            .collect::<io::Result<Vec<_>>>()?;
        let group = Self { nodes, sentinels };
        group.wait_known(replicas)?;
        group.wait_replicas_online(replicas, Duration::from_secs(30))?;
        Ok(group)
    }

    /// Until every sentinel sees `replicas` replicas and every other
    /// sentinel.
    fn wait_known(&self, replicas: usize) -> io::Result<()> {
        let others = self.sentinels.len() - 1;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = self.sentinels.iter().all(|s| {
                let info = s
                    .cli(&["SENTINEL", "MASTER", MASTER_NAME])
                    .unwrap_or_default();
                field(&info, "num-slaves") == Some(replicas)
                    && field(&info, "num-other-sentinels") == Some(others)
            });
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "the sentinels never learnt the group; first sentinel's log:\n{}",
                    self.sentinels[0].log()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `redis+sentinel://127.0.0.1:p1,127.0.0.1:p2,…/mymaster`: every
    /// sentinel, the master's name.
    ///
    /// ```no_run
    /// let group = keylatch_harness::SentinelGroup::start();
    /// assert!(group.url().starts_with("redis+sentinel://127.0.0.1:"));
    /// ```
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// The data nodes (index 0 started as the master).
    ///
    /// ```no_run
    /// let group = keylatch_harness::SentinelGroup::start();
    /// assert_eq!(group.nodes().len(), 3);
    /// ```
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Data node `i`, to kill, pause or restart.
    ///
    /// ```no_run
    /// let mut group = keylatch_harness::SentinelGroup::start();
    /// let m = group.master();
    /// group.node_mut(m).kill();
    /// ```
    pub fn node_mut(&mut self, i: usize) -> &mut RedisServer {
        &mut self.nodes[i]
    }

    /// Sentinel `i`.
    ///
    /// ```no_run
    /// let group = keylatch_harness::SentinelGroup::start();
    /// println!("{}", group.sentinel(2).port());
    /// ```
    pub fn sentinel(&self, i: usize) -> &SentinelNode {
        &self.sentinels[i]
    }

    /// Sentinel `i`, to kill.
    ///
    /// ```no_run
    /// let mut group = keylatch_harness::SentinelGroup::start();
    /// group.sentinel_mut(1).kill();
    /// ```
    pub fn sentinel_mut(&mut self, i: usize) -> &mut SentinelNode {
        &mut self.sentinels[i]
    }

    /// The data node a running sentinel names as master now.
    ///
    /// ```no_run
    /// let group = keylatch_harness::SentinelGroup::start();
    /// assert_eq!(group.master(), 0);
    /// ```
    ///
    /// # Panics
    /// No running sentinel names a node of this group.
    #[allow(clippy::panic)]
    pub fn master(&self) -> usize {
        self.master_by_sentinels()
            .unwrap_or_else(|| panic!("no sentinel names a master of this group"))
    }

    fn master_by_sentinels(&self) -> Option<usize> {
        self.sentinels
            .iter()
            .filter(|s| s.is_running())
            .find_map(|s| {
                let out = s
                    .cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME])
                    .ok()?;
                let port: u16 = out.lines().nth(1)?.trim().parse().ok()?;
                self.nodes.iter().position(|n| n.port() == port)
            })
    }

    /// `SENTINEL FAILOVER` (a replica promoted without agreement, the old
    /// master turned into its replica later), then waits (30 s at most)
    /// until every running sentinel names the new master and it says so
    /// itself. The old master is demoted up to ~10 s after that (the
    /// sentinels' next look at it): [`wait_demoted`](Self::wait_demoted).
    ///
    /// ```no_run
    /// let mut group = keylatch_harness::SentinelGroup::start();
    /// group.failover().unwrap();
    /// ```
    ///
    /// # Errors
    /// The sentinel refused, or the switch did not complete in time.
    pub fn failover(&self) -> io::Result<usize> {
        let old = self.master();
        let sentinel = self
            .sentinels
            .iter()
            .find(|s| s.is_running())
            .ok_or_else(|| io::Error::other("no sentinel running"))?;
        let out = sentinel.cli(&["SENTINEL", "FAILOVER", MASTER_NAME])?;
        if !out.trim().starts_with("OK") {
            return Err(io::Error::other(format!("SENTINEL FAILOVER: {out}")));
        }
        self.wait_new_master(old, Duration::from_secs(30))
    }

    /// Waits until data node `old` says it is a replica: the sentinels
    /// reconfigure a demoted master (and kill its clients' connections)
    /// after they name the new one.
    ///
    /// ```no_run
    /// let group = keylatch_harness::SentinelGroup::start();
    /// group.wait_demoted(0, std::time::Duration::from_secs(30)).unwrap();
    /// ```
    ///
    /// # Errors
    /// Not within `within`.
    pub fn wait_demoted(&self, old: usize, within: Duration) -> io::Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let role = self.role(old);
            if role.as_deref() == Some("slave") {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "node {old} still says {role:?} after {within:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until every running sentinel that answers names a master other
    /// than `old`, and that node reports the master role; its index.
    ///
    /// ```no_run
    /// let mut group = keylatch_harness::SentinelGroup::start();
    /// let old = group.master();
    /// group.node_mut(old).kill();
    /// let new = group.wait_new_master(old, std::time::Duration::from_secs(30)).unwrap();
    /// ```
    ///
    /// # Errors
    /// Not within `within`.
    pub fn wait_new_master(&self, old: usize, within: Duration) -> io::Result<usize> {
        let deadline = Instant::now() + within;
        loop {
            let named: Vec<Option<usize>> = self
                .sentinels
                .iter()
                .filter(|s| s.is_running())
                .map(|s| {
                    let out = s
                        .cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME])
                        .ok()?;
                    let port: u16 = out.lines().nth(1)?.trim().parse().ok()?;
                    self.nodes.iter().position(|n| n.port() == port)
                })
                .collect();
            // Every sentinel that answers (a paused one does not) names
            // the same node.
            let answered: Vec<usize> = named.iter().flatten().copied().collect();
            if let Some(&new) = answered.first() {
                // The old master may be paused: only the new one is asked,
                // and never for long.
                let agreed = new != old && answered.iter().all(|n| *n == new);
                if agreed && self.role(new).as_deref() == Some("master") {
                    return Ok(new);
                }
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "no new master within {within:?}: sentinels name {named:?}; log:\n{}",
                    self.sentinels[0].log()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl SentinelGroup {
    /// Waits until the master the sentinels name has `n` replicas online
    /// (`state=online` in its `INFO replication`: synced, not waiting for
    /// their first copy), as after a killed master was restarted and turned
    /// into a replica by the sentinels.
    ///
    /// ```no_run
    /// let group = keylatch_harness::SentinelGroup::start();
    /// group.wait_replicas_online(2, std::time::Duration::from_secs(30)).unwrap();
    /// ```
    ///
    /// # Errors
    /// Not within `within`.
    pub fn wait_replicas_online(&self, n: usize, within: Duration) -> io::Result<()> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(m) = self.master_by_sentinels() {
                let info = self.nodes[m]
                    .cli_timeout(&["INFO", "replication"], QUICK)
                    .unwrap_or_default();
                let online = info.lines().filter(|l| l.contains("state=online")).count();
                if online == n {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "the master never had {n} replicas online within {within:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// How long the group's waits let one question to a data node take (a
/// paused node never answers).
const QUICK: Duration = Duration::from_secs(1);

impl SentinelGroup {
    /// What `ROLE` says first on data node `i` (`master`, `slave`), if it
    /// answers within [`QUICK`].
    fn role(&self, i: usize) -> Option<String> {
        let out = self.nodes[i].cli_timeout(&["ROLE"], QUICK).ok()?;
        out.lines().next().map(|l| l.trim().to_owned())
    }
}

/// A number field of `SENTINEL MASTER`'s reply as redis-cli prints it (a
/// name line, then its value line).
fn field(info: &str, name: &str) -> Option<usize> {
    let mut lines = info.lines();
    while let Some(line) = lines.next() {
        if line.trim() == name {
            return lines.next()?.trim().parse().ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_of_sentinel_master() {
        let info = "name\nmymaster\nnum-slaves\n2\nnum-other-sentinels\n2\n";
        assert_eq!(field(info, "num-slaves"), Some(2));
        assert_eq!(field(info, "num-other-sentinels"), Some(2));
        assert_eq!(field(info, "quorum"), None);
    }

    #[test]
    fn a_group_starts_and_fails_over() {
        let group = SentinelGroup::start();
        assert_eq!(group.master(), 0);
        let new = group.failover().unwrap();
        assert_ne!(new, 0);
        assert_eq!(group.master(), new);
    }
}
