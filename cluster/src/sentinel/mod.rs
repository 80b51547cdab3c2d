//! Sentinel deployments: the master found through sentinels, and followed
//! across failovers.
//!
//! A data-node [`ConnectionConfig`] with [`sentinel`](ConnectionConfig::sentinel)
//! set has no address of its own: every connect and reconnect (the command
//! connection's and the pub/sub hub's alike, since both pass through the
//! handshake) asks the sentinels which node is the master
//! ([`resolve`](resolve::resolve): a majority of the configured sentinels
//! must name it), connects there, and checks with `ROLE` that it is the
//! master before the connection is used. A reconnect therefore lands on the
//! new master after a failover; what triggers it is the old master going
//! away, a health check it fails, a `READONLY` reply (the driver's demotion),
//! the sentinels' `CLIENT KILL` of the old master's clients, or a
//! `+switch-master` message ([`watch`]), whichever comes first.
//!
//! URL form (the `redis+sentinel` convention of redis-py's URL helpers,
//! Lettuce-style lists): `redis+sentinel://[user:pass@]host[:port][,host[:port]…]/MASTER[/db][?params]`,
//! `rediss+sentinel://` for TLS to both the sentinels and the data nodes.
//! Sentinels default to port 26379. `user:pass` is the data nodes'; the
//! sentinels' own credentials are `sentinel_username=` / `sentinel_password=`
//! parameters. The other parameters are those of a `redis://` URL and apply
//! to both.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::config::ConnectionConfig;
use crate::error::{Error, Result};

pub(crate) mod resolve;
mod watch;

/// The sentinels that watch a master, and what the client last learnt from
/// them. Shared (in an `Arc`) by every connection made from one config.
///
/// ```
/// use keylatch_cluster::{ConnectionConfig, Sentinels};
/// let s = Sentinels::new(
///     "mymaster",
///     vec![ConnectionConfig::from_url("redis://10.0.0.1:26379")?],
/// );
/// assert_eq!(s.master_name(), "mymaster");
/// # Ok::<(), keylatch_cluster::Error>(())
/// ```
pub struct Sentinels {
    master_name: String,
    nodes: Vec<ConnectionConfig>,
    /// Bumped by each `+switch-master` for this master: a connection made
    /// before it reconnects.
    epoch: AtomicU64,
    /// The last resolution: the master's address and the sentinel that
    /// named it first.
    last: Mutex<Option<(String, String)>>,
    /// Whether the `+switch-master` listener runs.
    watching: AtomicBool,
}

impl Sentinels {
    /// The sentinels at `nodes` (their own credentials and TLS), watching
    /// the master named `master_name`.
    ///
    /// ```
    /// use keylatch_cluster::{ConnectionConfig, Sentinels};
    /// let s = Sentinels::new("cache", vec![ConnectionConfig::default()]);
    /// assert_eq!(s.nodes().len(), 1);
    /// ```
    pub fn new(master_name: impl Into<String>, nodes: Vec<ConnectionConfig>) -> Self {
        Self {
            master_name: master_name.into(),
            nodes,
            epoch: AtomicU64::new(0),
            last: Mutex::new(None),
            watching: AtomicBool::new(false),
        }
    }

    /// The master's name as the sentinels know it.
    ///
    /// ```
    /// # let s = keylatch_cluster::Sentinels::new("cache", vec![]);
    /// assert_eq!(s.master_name(), "cache");
    /// ```
    pub fn master_name(&self) -> &str {
        &self.master_name
    }

    /// The sentinels' connection settings.
    ///
    /// ```
    /// # let s = keylatch_cluster::Sentinels::new("cache", vec![]);
    /// assert!(s.nodes().is_empty());
    /// ```
    pub fn nodes(&self) -> &[ConnectionConfig] {
        &self.nodes
    }

    /// The master last connected to (`host:port`) and the sentinel that
    /// named it; `None` before the first connect.
    ///
    /// ```
    /// # let s = keylatch_cluster::Sentinels::new("cache", vec![]);
    /// assert_eq!(s.last_master(), None);
    /// ```
    pub fn last_master(&self) -> Option<(String, String)> {
        self.last.lock().ok().and_then(|l| l.clone())
    }

    /// How many `+switch-master` messages for this master were seen.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    fn switched(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    fn remember(&self, master: String, via: String) {
        if let Ok(mut l) = self.last.lock() {
            *l = Some((master, via));
        }
    }
}

impl PartialEq for Sentinels {
    fn eq(&self, other: &Self) -> bool {
        self.master_name == other.master_name && self.nodes == other.nodes
    }
}

impl Eq for Sentinels {}

impl fmt::Debug for Sentinels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<String> = self.nodes.iter().map(ConnectionConfig::addr).collect();
        f.debug_struct("Sentinels")
            .field("master_name", &self.master_name)
            .field("nodes", &nodes)
            .finish_non_exhaustive()
    }
}

/// The default sentinel port.
const SENTINEL_PORT: u16 = 26379;

/// Parses a `redis+sentinel://` / `rediss+sentinel://` URL (see the module
/// docs) into the data nodes' config; `None` for another scheme.
pub(crate) fn parse_url(url: &str) -> Option<Result<ConnectionConfig>> {
    let (rest, tls) = if let Some(r) = url.strip_prefix("redis+sentinel://") {
        (r, false)
    } else {
        (url.strip_prefix("rediss+sentinel://")?, true)
    };
    Some(parse(url, rest, tls))
}

fn parse(url: &str, rest: &str, tls: bool) -> Result<ConnectionConfig> {
    let bad = |what: &str| Error::Config(format!("{what} in {:?}", crate::redact_url(url)));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest
        .split_once('/')
        .ok_or_else(|| bad("no master name (…/MASTER)"))?;
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let (name, db) = match path.split_once('/') {
        Some((n, d)) => (n, Some(d)),
        None => (path, None),
    };
    if name.is_empty() {
        return Err(bad("no master name (…/MASTER)"));
    }
    // The query without the sentinels' own credentials: the rest is a
    // redis:// URL's, for both kinds of node.
    let (mut s_user, mut s_pass, mut common) = (None, None, Vec::new());
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("sentinel_username", v)) => s_user = Some(v),
            Some(("sentinel_password", v)) => s_pass = Some(v),
            _ => common.push(pair),
        }
    }
    let scheme = if tls { "rediss" } else { "redis" };
    let query = common.join("&");
    let node_url = |auth: Option<&str>, host: &str, db: Option<&str>| {
        let auth = auth.map(|a| format!("{a}@")).unwrap_or_default();
        let db = db.map(|d| format!("/{d}")).unwrap_or_default();
        format!("{scheme}://{auth}{host}{db}?{query}")
    };
    // The sentinels' credentials are query values, where `/`, `?` and `@`
    // may stand unencoded: set, percent-decoded, not pasted into a URL's
    // userinfo (where they would end it: refused, the rest read as a
    // port and printed). The error names no part: it may be the password.
    let decode = |v: &str| {
        crate::config::percent_decode(v).map_err(|_| {
            Error::Config("bad percent-encoding or non-UTF-8 in the sentinel credentials".into())
        })
    };
    let (s_user, s_pass) = (
        s_user.map(decode).transpose()?,
        s_pass.map(decode).transpose()?,
    );
    let mut nodes = Vec::new();
    for host in hosts.split(',').filter(|h| !h.is_empty()) {
        let mut cfg = ConnectionConfig::from_url(&node_url(None, host, None))?;
        if !has_port(host) {
            cfg.port = SENTINEL_PORT;
        }
        cfg.username.clone_from(&s_user);
        cfg.password.clone_from(&s_pass);
        nodes.push(cfg);
    }
    if nodes.is_empty() {
        return Err(bad("no sentinel address"));
    }
    // The data nodes: the URL's credentials, database and parameters; the
    // address is the sentinels' to give.
    let mut data = ConnectionConfig::from_url(&node_url(userinfo, "sentinel", db))?;
    data.host = name.to_owned();
    data.port = 0;
    data.sentinel = Some(std::sync::Arc::new(Sentinels::new(name, nodes)));
    Ok(data)
}

/// Whether `host` (`h`, `h:p`, `[v6]`, `[v6]:p`) names a port.
fn has_port(host: &str) -> bool {
    match host.rsplit_once(']') {
        Some((_, after)) => after.starts_with(':'),
        None => host.contains(':'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sentinels(cfg: &ConnectionConfig) -> &Sentinels {
        cfg.sentinel.as_deref().expect("a sentinel config")
    }

    #[test]
    fn a_sentinel_url_names_the_sentinels_and_the_master() {
        let cfg = parse_url("redis+sentinel://app:pw@10.0.0.1,10.0.0.2:26380,[::1]/cache/2?protocol=resp2&sentinel_password=sp")
            .unwrap()
            .unwrap();
        let s = sentinels(&cfg);
        assert_eq!(s.master_name(), "cache");
        let addrs: Vec<String> = s.nodes().iter().map(ConnectionConfig::addr).collect();
        assert_eq!(addrs, ["10.0.0.1:26379", "10.0.0.2:26380", "[::1]:26379"]);
        // The sentinels' own password, never the data nodes'.
        assert!(s
            .nodes()
            .iter()
            .all(|n| n.password.as_deref() == Some("sp")));
        assert!(s.nodes().iter().all(|n| n.username.is_none()));
        assert_eq!(cfg.username.as_deref(), Some("app"));
        assert_eq!(cfg.password.as_deref(), Some("pw"));
        assert_eq!(cfg.db, 2);
        assert_eq!(cfg.protocol, crate::Protocol::Resp2);
        assert!(s
            .nodes()
            .iter()
            .all(|n| n.protocol == crate::Protocol::Resp2));
        assert_eq!(cfg.addr(), "sentinel:cache");
    }

    #[test]
    fn bad_sentinel_urls_are_refused() {
        for url in [
            "redis+sentinel://10.0.0.1",
            "redis+sentinel://10.0.0.1/",
            "redis+sentinel:///cache",
            "redis+sentinel://10.0.0.1/cache/x",
            "redis+sentinel://10.0.0.1/cache?nope=1",
        ] {
            assert!(parse_url(url).unwrap().is_err(), "{url}");
        }
        assert!(parse_url("redis://10.0.0.1").is_none());
    }
}
