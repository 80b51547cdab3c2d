//! Independent standalone servers, for algorithms that lock on several
//! unrelated masters (RedLock).

use std::io;

use crate::server::{RedisServer, ServerBuilder};

/// `n` independent standalone `redis-server`s (no replication, no cluster),
/// each on its own free port and temp dir. `Drop` kills them all.
///
/// ```no_run
/// let mut masters = keylatch_harness::Masters::start(5);
/// assert_eq!(masters.urls().len(), 5);
/// masters.get_mut(2).kill();
/// masters.get_mut(2).restart().unwrap();
/// ```
#[derive(Debug)]
pub struct Masters {
    servers: Vec<RedisServer>,
}

impl Masters {
    /// Starts `n` default servers.
    ///
    /// ```no_run
    /// let masters = keylatch_harness::Masters::start(3);
    /// ```
    ///
    /// # Panics
    /// A server cannot be started: this is for tests, where a missing
    /// `redis-server` must fail rather than skip.
    #[allow(clippy::panic)]
    pub fn start(n: usize) -> Self {
        match Self::start_with(n, &ServerBuilder::default()) {
            Ok(masters) => masters,
            Err(e) => panic!("cannot start {n} redis-servers: {e}"),
        }
    }

    /// Starts `n` servers configured by `builder` (which should not fix a
    /// port: each server needs its own).
    ///
    /// ```no_run
    /// use keylatch_harness::{Masters, RedisServer};
    /// let builder = RedisServer::builder().args(["--enable-debug-command", "local"]);
    /// let masters = Masters::start_with(5, &builder).unwrap();
    /// ```
    ///
    /// # Errors
    /// A server did not start; those already started are killed.
    pub fn start_with(n: usize, builder: &ServerBuilder) -> io::Result<Self> {
        let servers = (0..n)
            .map(|_| builder.clone().start())
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Self { servers })
    }

    /// `redis://127.0.0.1:port` of every server, in index order.
    ///
    /// ```no_run
    /// let masters = keylatch_harness::Masters::start(3);
    /// assert_eq!(masters.urls()[0], masters.get(0).url());
    /// ```
    pub fn urls(&self) -> Vec<String> {
        self.servers.iter().map(RedisServer::url).collect()
    }

    /// Server `i`.
    ///
    /// ```no_run
    /// let masters = keylatch_harness::Masters::start(3);
    /// assert!(masters.get(1).port() > 0);
    /// ```
    ///
    /// # Panics
    /// `i` is out of range.
    pub fn get(&self, i: usize) -> &RedisServer {
        &self.servers[i]
    }

    /// Server `i`, to kill, pause or restart it.
    ///
    /// ```no_run
    /// let mut masters = keylatch_harness::Masters::start(3);
    /// masters.get_mut(1).kill();
    /// ```
    ///
    /// # Panics
    /// `i` is out of range.
    pub fn get_mut(&mut self, i: usize) -> &mut RedisServer {
        &mut self.servers[i]
    }

    /// How many servers.
    ///
    /// ```no_run
    /// assert_eq!(keylatch_harness::Masters::start(3).len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Whether there are none (`Masters::start(0)`).
    ///
    /// ```no_run
    /// assert!(keylatch_harness::Masters::start(0).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The servers, in index order.
    ///
    /// ```no_run
    /// let masters = keylatch_harness::Masters::start(3);
    /// let ports: Vec<u16> = masters.iter().map(|s| s.port()).collect();
    /// ```
    pub fn iter(&self) -> std::slice::Iter<'_, RedisServer> {
        self.servers.iter()
    }
}

impl<'a> IntoIterator for &'a Masters {
    type Item = &'a RedisServer;
    type IntoIter = std::slice::Iter<'a, RedisServer>;

    fn into_iter(self) -> Self::IntoIter {
        self.servers.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::ping;

    #[test]
    fn three_independent_servers() {
        let masters = Masters::start(3);
        assert_eq!(masters.len(), 3);
        let mut ports: Vec<u16> = masters.iter().map(RedisServer::port).collect();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 3, "distinct ports");
        for server in &masters {
            ping(server.port()).unwrap();
        }
        // Independent: a write on one is not seen by the others.
        assert_eq!(masters.get(0).cli(&["SET", "k", "v"]).unwrap().trim(), "OK");
        assert_eq!(masters.get(1).cli(&["EXISTS", "k"]).unwrap().trim(), "0");
        assert_eq!(masters.get(2).cli(&["EXISTS", "k"]).unwrap().trim(), "0");
        for url in masters.urls() {
            assert!(url.starts_with("redis://127.0.0.1:"), "{url}");
        }
    }

    #[test]
    fn dropping_kills_all() {
        let mut masters = Masters::start(2);
        // Pids, not ports: a port freed here may be taken by a server of a
        // test running in parallel, a reaped pid is gone from /proc.
        let pids: Vec<u32> = masters.iter().filter_map(RedisServer::pid).collect();
        assert_eq!(pids.len(), 2);
        masters.get_mut(0).kill();
        assert!(!alive(pids[0]));
        assert!(alive(pids[1]));
        drop(masters);
        assert!(!alive(pids[1]));
    }

    fn alive(pid: u32) -> bool {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    }
}
