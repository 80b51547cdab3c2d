//! Connection settings and `redis://` / `rediss://` URL parsing
//! (`redis+sentinel://` is parsed in `sentinel/`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::push::InvalidationHandler;
use crate::sentinel::Sentinels;
use crate::tls::TlsConfig;

/// Which RESP version to speak.
///
/// ```
/// use keylatch_cluster::Protocol;
/// assert_eq!(Protocol::default(), Protocol::Auto);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Protocol {
    /// Try `HELLO 3`; fall back to RESP2 when the server refuses `HELLO`.
    #[default]
    Auto,
    /// RESP2 only (no `HELLO`).
    Resp2,
    /// RESP3 required: a server that refuses `HELLO 3` is an error.
    Resp3,
}

/// The protocol a connection ended up speaking.
///
/// ```
/// use keylatch_cluster::Negotiated;
/// assert_ne!(Negotiated::Resp2, Negotiated::Resp3);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Negotiated {
    /// RESP2 (arrays for maps, no push frames).
    Resp2,
    /// RESP3 (maps, sets, doubles, push frames).
    Resp3,
}

/// Everything needed to open one connection to one node.
///
/// ```
/// use std::time::Duration;
/// use keylatch_cluster::ConnectionConfig;
/// let cfg = ConnectionConfig::from_url("redis://app:secret@127.0.0.1:6380/2")?
///     .request_timeout(Some(Duration::from_secs(5)));
/// assert_eq!(cfg.host, "127.0.0.1");
/// assert_eq!(cfg.port, 6380);
/// assert_eq!(cfg.db, 2);
/// assert_eq!(cfg.username.as_deref(), Some("app"));
/// # Ok::<(), keylatch_cluster::Error>(())
/// ```
/// `Debug` prints the password as `***` (see [`redact_url`](crate::redact_url)).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionConfig {
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// ACL user name (`None`: the default user).
    pub username: Option<String>,
    /// Password (`AUTH`).
    pub password: Option<String>,
    /// Database index (`SELECT`); clusters only have 0.
    pub db: i64,
    /// RESP version preference.
    pub protocol: Protocol,
    /// `CLIENT SETNAME` value.
    pub client_name: Option<String>,
    /// Time allowed for TCP connect plus handshake.
    pub connect_timeout: Duration,
    /// Time a request may wait for its reply (`None`: no limit). Counted from
    /// when it is queued. Default 30 s: a paused server must not hang callers.
    pub request_timeout: Option<Duration>,
    /// Requests queued for the connection task before senders wait
    /// (backpressure).
    pub queue_capacity: usize,
    /// Replies outstanding on the socket before the task stops taking new
    /// requests (backpressure towards the queue).
    pub max_in_flight: usize,
    /// First reconnect delay; doubles per failed attempt, with jitter.
    pub reconnect_min: Duration,
    /// Cap on the reconnect delay.
    pub reconnect_max: Duration,
    /// Client-side-caching tracking (RESP3 only): invalidation pushes for
    /// keys this connection read go to the handler. `None`: off.
    pub tracking: Option<InvalidationHandler>,
    /// With [`tracking`](Self::tracking): `CLIENT TRACKING ON NOLOOP OPTIN`,
    /// so only reads right after `CLIENT CACHING YES` are tracked (the lock
    /// layer tracks exactly the keys it holds, not every key its scripts
    /// read). Default off: every read is tracked.
    pub tracking_optin: bool,
    /// Health check of the connection (`None`: off). Every interval the
    /// task looks at its socket: idle, it sends a `PING`; a `PING` left
    /// unanswered for [`connect_timeout`](Self::connect_timeout) gives the
    /// connection up (it reconnects); requests pending with nothing read for
    /// a whole interval mark the connection stalled, which a cluster client
    /// takes as a cue to reload the topology (a silently dead master). A
    /// slow command is not cut short: only a node that answers nothing at
    /// all is given up, and only when idle otherwise. Default 1 s.
    pub health_interval: Option<Duration>,
    /// TLS settings: `Some` for `rediss://` (or after any `tls_*` builder
    /// method), `None` for plain TCP. A cluster's nodes and the pub/sub
    /// hub's connections inherit them; each verifies its own host.
    pub tls: Option<TlsConfig>,
    /// The sentinels that name this node (a `redis+sentinel://` URL): the
    /// address is asked of them at every connect, and [`host`](Self::host)
    /// and [`port`](Self::port) are only the master's name and 0.
    pub sentinel: Option<Arc<Sentinels>>,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".to_owned(),
            port: 6379,
            username: None,
            password: None,
            db: 0,
            protocol: Protocol::Auto,
            client_name: None,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Some(Duration::from_secs(30)),
            queue_capacity: 4096,
            max_in_flight: 16384,
            reconnect_min: Duration::from_millis(10),
            reconnect_max: Duration::from_secs(2),
            tracking: None,
            tracking_optin: false,
            health_interval: Some(Duration::from_secs(1)),
            tls: None,
            sentinel: None,
        }
    }
}

impl ConnectionConfig {
    /// Parses `redis[s]://[user[:password]@]host[:port][/db][?param=value&…]`.
    ///
    /// User and password may be percent-encoded; IPv6 hosts go in brackets.
    /// `rediss://` turns TLS on: the server's certificate must chain to a
    /// trusted root and name the host (a DNS name, or an IP address SAN).
    ///
    /// Parameters: `protocol=resp2|resp3|auto`, `name=` (client name), `db=`;
    /// with `rediss://` also `ca=FILE` (a PEM CA bundle trusted instead of
    /// the system roots; repeat it for several) and `cert=FILE&key=FILE` (a
    /// client certificate chain and its key, for mutual TLS). File paths may
    /// be percent-encoded. Without the `tls` cargo feature, `rediss://` is
    /// refused.
    ///
    /// `redis+sentinel://[user:pass@]host[:port][,host[:port]…]/MASTER[/db]`
    /// (`rediss+sentinel://` for TLS) names sentinels instead, and the
    /// master they watch: see [`Sentinels`]. The sentinels' own
    /// credentials are the parameters `sentinel_username=` and
    /// `sentinel_password=`; sentinels default to port 26379.
    ///
    /// ```
    /// use keylatch_cluster::{ConnectionConfig, Protocol};
    /// let s = ConnectionConfig::from_url("redis+sentinel://:pw@10.0.0.1,10.0.0.2/cache")?;
    /// assert_eq!(s.sentinel.as_ref().map(|s| s.nodes().len()), Some(2));
    /// assert_eq!(s.addr(), "sentinel:cache");
    ///
    /// let cfg = ConnectionConfig::from_url("redis://:p%40ss@[::1]?protocol=resp2")?;
    /// assert_eq!(cfg.password.as_deref(), Some("p@ss"));
    /// assert_eq!(cfg.host, "::1");
    /// assert_eq!(cfg.protocol, Protocol::Resp2);
    /// assert!(cfg.tls.is_none());
    ///
    /// let tls = ConnectionConfig::from_url("rediss://app:secret@cache.example.com:6380/0")?;
    /// assert!(tls.tls.is_some());
    /// assert_eq!(tls.port, 6380);
    /// # Ok::<(), keylatch_cluster::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] naming what is wrong; [`Error::Tls`] for a `ca`,
    /// `cert` or `key` file that cannot be read or parsed.
    pub fn from_url(url: &str) -> Result<Self> {
        if let Some(sentinel) = crate::sentinel::parse_url(url) {
            return sentinel;
        }
        let (rest, tls) = split_scheme(url)?;
        let mut cfg = Self::default();
        if tls {
            cfg.tls = Some(TlsConfig::default());
        }
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = match rest.split_once('/') {
            Some((a, p)) => (a, p),
            None => (rest, ""),
        };
        let hostport = match authority.rsplit_once('@') {
            Some((userinfo, hostport)) => {
                cfg.set_credentials(userinfo)?;
                hostport
            }
            None => authority,
        };
        let (host, port) = split_host_port(hostport)?;
        if host.is_empty() {
            return Err(Error::Config(format!(
                "URL has no host: {:?}",
                crate::redact_url(url)
            )));
        }
        cfg.host = host.to_owned();
        if let Some(port) = port {
            cfg.port = port;
        }
        if !path.is_empty() {
            cfg.db = path
                .parse::<i64>()
                .ok()
                .filter(|db| *db >= 0)
                .ok_or_else(|| Error::Config(format!("bad database index {path:?} in URL")))?;
        }
        cfg.apply_query(query.unwrap_or(""), tls)
    }

    /// The URL's `user[:password]` part, percent-decoded.
    fn set_credentials(&mut self, userinfo: &str) -> Result<()> {
        let (user, pass) = match userinfo.split_once(':') {
            Some((u, p)) => (u, Some(p)),
            None => (userinfo, None),
        };
        // The error names no part: the user may be the password.
        let decode = |s: &str| {
            percent_decode(s).map_err(|_| {
                Error::Config("bad percent-encoding or non-UTF-8 in the URL's credentials".into())
            })
        };
        if !user.is_empty() {
            self.username = Some(decode(user)?);
        }
        if let Some(p) = pass {
            self.password = Some(decode(p)?);
        } else if !user.is_empty() {
            // `redis://secret@host` is the common password-only form.
            self.password = self.username.take();
        }
        Ok(())
    }

    /// The URL's `?param=value&…` part (see [`from_url`](Self::from_url));
    /// the TLS files only with `tls` (a `rediss://` URL).
    fn apply_query(mut self, query: &str, tls: bool) -> Result<Self> {
        let (mut cert, mut key) = (None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "protocol" => {
                    self.protocol = match v {
                        "resp2" | "2" => Protocol::Resp2,
                        "resp3" | "3" => Protocol::Resp3,
                        "auto" => Protocol::Auto,
                        _ => return Err(Error::Config(format!("unknown protocol {v:?}"))),
                    }
                }
                "name" | "client_name" => self.client_name = Some(percent_decode(v)?),
                "db" => {
                    self.db = v
                        .parse()
                        .map_err(|_| Error::Config(format!("bad db {v:?}")))?
                }
                "ca" | "cert" | "key" if !tls => {
                    return Err(Error::Config(format!(
                        "URL parameter {k:?} needs a rediss:// (TLS) URL"
                    )))
                }
                "ca" => self = self.tls_ca_file(percent_decode(v)?)?,
                "cert" => cert = Some(percent_decode(v)?),
                "key" => key = Some(percent_decode(v)?),
                _ => return Err(Error::Config(format!("unknown URL parameter {k:?}"))),
            }
        }
        match (cert, key) {
            (Some(cert), Some(key)) => self.tls_client_cert(cert, key),
            (None, None) => Ok(self),
            _ => Err(Error::Config(
                "URL parameters cert= and key= go together (mutual TLS)".to_owned(),
            )),
        }
    }

    /// Sets the request timeout (`None`: wait forever).
    ///
    /// ```
    /// use std::time::Duration;
    /// use keylatch_cluster::ConnectionConfig;
    /// let cfg = ConnectionConfig::default().request_timeout(Some(Duration::from_secs(2)));
    /// assert_eq!(cfg.request_timeout, Some(Duration::from_secs(2)));
    /// assert_eq!(cfg.request_timeout(None).request_timeout, None);
    /// ```
    pub fn request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets the health-check interval (`None`: off); see
    /// [`health_interval`](Self::health_interval).
    ///
    /// ```
    /// use std::time::Duration;
    /// use keylatch_cluster::ConnectionConfig;
    /// let cfg = ConnectionConfig::default().health_interval(Some(Duration::from_millis(500)));
    /// assert_eq!(cfg.health_interval, Some(Duration::from_millis(500)));
    /// assert_eq!(cfg.health_interval(None).health_interval, None);
    /// ```
    pub fn health_interval(mut self, interval: Option<Duration>) -> Self {
        self.health_interval = interval;
        self
    }

    /// Sets the RESP version preference.
    ///
    /// ```
    /// use keylatch_cluster::{ConnectionConfig, Protocol};
    /// let cfg = ConnectionConfig::default().protocol(Protocol::Resp3);
    /// assert_eq!(cfg.protocol, Protocol::Resp3);
    /// ```
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Sets the client name sent with `HELLO … SETNAME`/`CLIENT SETNAME`.
    ///
    /// ```
    /// use keylatch_cluster::ConnectionConfig;
    /// let cfg = ConnectionConfig::default().client_name("billing-worker");
    /// assert_eq!(cfg.client_name.as_deref(), Some("billing-worker"));
    /// ```
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = Some(name.into());
        self
    }

    /// Turns on `CLIENT TRACKING ON NOLOOP` (RESP3 connections) with this
    /// handler for the invalidations.
    ///
    /// ```
    /// use keylatch_cluster::{ConnectionConfig, InvalidationHandler};
    /// let (tx, _rx) = std::sync::mpsc::channel();
    /// let handler = InvalidationHandler::new(move |inv| { let _ = tx.send(inv); });
    /// let cfg = ConnectionConfig::default().tracking(handler.clone());
    /// assert_eq!(cfg.tracking, Some(handler));
    /// ```
    pub fn tracking(mut self, handler: InvalidationHandler) -> Self {
        self.tracking = Some(handler);
        self
    }

    /// Turns TLS on (as `rediss://` does) or off. Turning it on keeps
    /// settings already made; off forgets them.
    ///
    /// ```
    /// use keylatch_cluster::ConnectionConfig;
    /// let cfg = ConnectionConfig::from_url("redis://10.0.0.5:6380")?.tls(true);
    /// assert!(cfg.tls.is_some());
    /// # Ok::<(), keylatch_cluster::Error>(())
    /// ```
    pub fn tls(mut self, on: bool) -> Self {
        if !on {
            self.tls = None;
        } else if self.tls.is_none() {
            self.tls = Some(TlsConfig::default());
        }
        self
    }

    fn tls_mut(&mut self) -> &mut TlsConfig {
        self.tls.get_or_insert_with(TlsConfig::default)
    }

    /// Trusts the CA certificates of a PEM bundle (and turns TLS on). Call
    /// it again to add more bundles. Once a bundle is given, the system's
    /// roots are no longer trusted unless
    /// [`tls_system_roots(true)`](Self::tls_system_roots) says so.
    ///
    /// ```no_run
    /// use keylatch_cluster::ConnectionConfig;
    /// let cfg = ConnectionConfig::from_url("rediss://redis.internal:6380")?
    ///     .tls_ca_file("/etc/keylatch/ca.pem")?;
    /// assert_eq!(cfg.tls.unwrap().ca_files().len(), 1);
    /// # Ok::<(), keylatch_cluster::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Tls`] when the file cannot be read, holds no PEM
    /// certificate, or a certificate cannot be parsed;
    /// [`Error::Config`] in a build without the `tls` feature.
    pub fn tls_ca_file(mut self, path: impl AsRef<Path>) -> Result<Self> {
        self.tls_mut().add_ca_file(path.as_ref())?;
        Ok(self)
    }

    /// Presents a client certificate (PEM chain, leaf first) with its
    /// private key (PEM: PKCS#8, PKCS#1 or SEC1) for servers that require
    /// one (`tls-auth-clients yes`). Turns TLS on.
    ///
    /// ```no_run
    /// use keylatch_cluster::ConnectionConfig;
    /// let cfg = ConnectionConfig::from_url("rediss://redis.internal:6380")?
    ///     .tls_ca_file("/etc/keylatch/ca.pem")?
    ///     .tls_client_cert("/etc/keylatch/client.pem", "/etc/keylatch/client.key")?;
    /// # Ok::<(), keylatch_cluster::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Tls`] when either file cannot be read or parsed, or the key
    /// is of a kind rustls cannot sign with; [`Error::Config`] in a build
    /// without the `tls` feature.
    pub fn tls_client_cert(
        mut self,
        cert_chain: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<Self> {
        self.tls_mut()
            .set_client_cert(cert_chain.as_ref(), key.as_ref())?;
        Ok(self)
    }

    /// Whether to trust the system's root certificates (Debian:
    /// `/etc/ssl/certs`, from the `ca-certificates` package; `SSL_CERT_FILE`
    /// and `SSL_CERT_DIR` are honoured). Default: yes when no CA file is
    /// given, no when one is. Turns TLS on.
    ///
    /// ```no_run
    /// use keylatch_cluster::ConnectionConfig;
    /// // A private CA for this server, public roots for anything else.
    /// let cfg = ConnectionConfig::from_url("rediss://redis.internal:6380")?
    ///     .tls_ca_file("/etc/keylatch/ca.pem")?
    ///     .tls_system_roots(true);
    /// # Ok::<(), keylatch_cluster::Error>(())
    /// ```
    pub fn tls_system_roots(mut self, on: bool) -> Self {
        self.tls_mut().set_system_roots(on);
        self
    }

    /// **Dangerous**: accepts any server certificate, for any name, signed
    /// by anyone. The connection is encrypted but not authenticated: anyone
    /// on the path can impersonate the server. For test setups with
    /// throwaway certificates only. Turns TLS on.
    ///
    /// ```
    /// use keylatch_cluster::ConnectionConfig;
    /// let cfg = ConnectionConfig::from_url("rediss://127.0.0.1:6380")?
    ///     .danger_accept_invalid_certs(true);
    /// assert!(cfg.tls.unwrap().accepts_invalid_certs());
    /// # Ok::<(), keylatch_cluster::Error>(())
    /// ```
    pub fn danger_accept_invalid_certs(mut self, accept: bool) -> Self {
        self.tls_mut().set_accept_invalid_certs(accept);
        self
    }

    /// Sets the request queue capacity (at least 1).
    ///
    /// ```
    /// use keylatch_cluster::ConnectionConfig;
    /// assert_eq!(ConnectionConfig::default().queue_capacity(256).queue_capacity, 256);
    /// assert_eq!(ConnectionConfig::default().queue_capacity(0).queue_capacity, 1);
    /// ```
    pub fn queue_capacity(mut self, capacity: usize) -> Self {
        self.queue_capacity = capacity.max(1);
        self
    }

    /// `host:port` as used by `connect` (IPv6 in brackets); for a node
    /// found through sentinels, `sentinel:MASTER`.
    ///
    /// ```
    /// use keylatch_cluster::ConnectionConfig;
    /// assert_eq!(ConnectionConfig::from_url("redis://cache.local")?.addr(), "cache.local:6379");
    /// assert_eq!(ConnectionConfig::from_url("redis://[::1]:6380")?.addr(), "[::1]:6380");
    /// # Ok::<(), keylatch_cluster::Error>(())
    /// ```
    pub fn addr(&self) -> String {
        if let Some(s) = &self.sentinel {
            return format!("sentinel:{}", s.master_name());
        }
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// The part after `redis://` or `rediss://`, and whether it asked for TLS
/// (refused without the `tls` cargo feature).
fn split_scheme(url: &str) -> Result<(&str, bool)> {
    if let Some(rest) = url.strip_prefix("redis://") {
        Ok((rest, false))
    } else if let Some(rest) = url.strip_prefix("rediss://") {
        #[cfg(not(feature = "tls"))]
        {
            let _ = rest;
            Err(Error::Config(crate::tls::NO_TLS.to_owned()))
        }
        #[cfg(feature = "tls")]
        Ok((rest, true))
    } else {
        Err(Error::Config(format!(
            "URL must start with redis://, rediss://, redis+sentinel:// or rediss+sentinel:// (got {:?})",
            crate::redact_url(url)
        )))
    }
}

fn split_host_port(s: &str) -> Result<(&str, Option<u16>)> {
    // The text is not quoted: a password holding an unencoded `/`, `?` or
    // `@` ends the URL's userinfo early, and its tail is read as the port.
    let bad_port = |_: &str| {
        Error::Config(
            "bad port in URL (a password holding '/', '?' or '@' must be percent-encoded: %2F, %3F, %40)"
                .into(),
        )
    };
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| Error::Config(format!("unclosed '[' in host {s:?}")))?;
        return match after.strip_prefix(':') {
            Some(p) => Ok((host, Some(p.parse().map_err(|_| bad_port(p))?))),
            None if after.is_empty() => Ok((host, None)),
            None => Err(Error::Config(format!("junk after host {s:?}"))),
        };
    }
    match s.rsplit_once(':') {
        Some((h, p)) => Ok((h, Some(p.parse().map_err(|_| bad_port(p))?))),
        None => Ok((s, None)),
    }
}

pub(crate) fn percent_decode(s: &str) -> Result<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| Error::Config(format!("bad percent-encoding in {s:?}")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| Error::Config(format!("non-UTF-8 credentials in {s:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "tls")]
    #[test]
    fn rediss_urls_turn_tls_on() {
        let c = ConnectionConfig::from_url("rediss://u:p@10.1.2.3:6380/1?protocol=resp2").unwrap();
        assert_eq!((c.host.as_str(), c.port, c.db), ("10.1.2.3", 6380, 1));
        let tls = c.tls.unwrap();
        assert!(tls.uses_system_roots() && !tls.accepts_invalid_certs());
        assert!(ConnectionConfig::from_url("redis://h")
            .unwrap()
            .tls
            .is_none());
        // A CA file that is not there: the TLS error names it.
        match ConnectionConfig::from_url("rediss://h?ca=/nonexistent/ca%2Epem") {
            Err(Error::Tls(m)) => assert!(m.contains("/nonexistent/ca.pem"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn rediss_is_refused_without_the_feature() {
        assert!(matches!(
            ConnectionConfig::from_url("rediss://h"),
            Err(Error::Config(_))
        ));
        assert!(ConnectionConfig::default().tls_ca_file("/x").is_err());
    }

    #[test]
    fn parses_full_url() {
        let c =
            ConnectionConfig::from_url("redis://alice:p%3Ass@example.test:7000/3?name=w1").unwrap();
        assert_eq!(c.username.as_deref(), Some("alice"));
        assert_eq!(c.password.as_deref(), Some("p:ss"));
        assert_eq!(c.host, "example.test");
        assert_eq!(c.port, 7000);
        assert_eq!(c.db, 3);
        assert_eq!(c.client_name.as_deref(), Some("w1"));
        assert_eq!(c.addr(), "example.test:7000");
    }

    #[test]
    fn defaults_and_short_forms() {
        let c = ConnectionConfig::from_url("redis://localhost").unwrap();
        assert_eq!((c.host.as_str(), c.port, c.db), ("localhost", 6379, 0));
        assert_eq!(c.username, None);
        let c = ConnectionConfig::from_url("redis://secret@h:1/").unwrap();
        assert_eq!((c.username, c.password.as_deref()), (None, Some("secret")));
        let c = ConnectionConfig::from_url("redis://:pw@h").unwrap();
        assert_eq!((c.username, c.password.as_deref()), (None, Some("pw")));
        let c = ConnectionConfig::from_url("redis://[::1]:6390?protocol=resp3").unwrap();
        assert_eq!((c.host.as_str(), c.port), ("::1", 6390));
        assert_eq!(c.protocol, Protocol::Resp3);
        assert_eq!(c.addr(), "[::1]:6390");
    }

    #[test]
    fn rejects_bad_urls() {
        for url in [
            "http://h",
            "redis://h?ca=/x.pem",
            "rediss://h?cert=/x.pem",
            "redis://h:notaport",
            "redis://h:70000",
            "redis://h/x",
            "redis://h/-1",
            "redis://[::1",
            "redis://",
            "redis://h?protocol=9",
            "redis://h?nope=1",
            "redis://u:%zz@h",
        ] {
            assert!(
                matches!(ConnectionConfig::from_url(url), Err(Error::Config(_))),
                "{url}"
            );
        }
    }
}
