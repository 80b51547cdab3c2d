//! One `redis-server` process ([`RedisServer`], [`ServerBuilder`]), plain or
//! TLS-only, the temp dir it runs in ([`TempDir`]), and the small tools around
//! it ([`ping`], [`redis_cli`], [`free_port`]).

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::features::{self, Feature};
use crate::tls::TlsCerts;

/// How long a started server has to answer PING before start is declared failed.
const READY_TIMEOUT: Duration = Duration::from_secs(15);
/// Attempts at start: a free port found by binding port 0 can be taken by
/// another process before redis-server binds it.
const START_ATTEMPTS: usize = 5;

/// The `redis-server` binary to run.
///
/// ```
/// assert!(!keylatch_harness::server_binary().is_empty());
/// ```
pub fn server_binary() -> String {
    std::env::var("KEYLATCH_REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned())
}

/// The `redis-cli` binary to run.
///
/// ```
/// assert!(!keylatch_harness::cli_binary().is_empty());
/// ```
pub fn cli_binary() -> String {
    std::env::var("KEYLATCH_REDIS_CLI").unwrap_or_else(|_| "redis-cli".to_owned())
}

/// A directory under the system temp dir, removed with its contents on `Drop`.
///
/// ```
/// let dir = keylatch_harness::TempDir::new("doc").unwrap();
/// assert!(dir.path().is_dir());
/// ```
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates a fresh, uniquely named directory.
    ///
    /// # Errors
    /// The I/O error from creating the directory.
    pub fn new(prefix: &str) -> io::Result<Self> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!(
            "keylatch-{prefix}-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path)?;
        Ok(Self { path })
    }

    /// The directory's path.
    ///
    /// ```
    /// let dir = keylatch_harness::TempDir::new("doc").unwrap();
    /// assert!(dir.path().exists());
    /// ```
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Returns a loopback port that was free a moment ago.
///
/// ```
/// assert!(keylatch_harness::free_port().unwrap() > 0);
/// ```
///
/// # Errors
/// The I/O error from binding a probe socket.
pub fn free_port() -> io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// Configuration of a server before it starts.
///
/// ```no_run
/// let server = keylatch_harness::RedisServer::builder()
///     .arg("--enable-debug-command").arg("local")
///     .start()
///     .unwrap();
/// ```
#[derive(Clone, Debug, Default)]
pub struct ServerBuilder {
    args: Vec<String>,
    port: Option<u16>,
    tls: Option<TlsRequest>,
    needs: Vec<Feature>,
}

/// What [`ServerBuilder::tls`] and friends asked for.
#[derive(Clone, Debug, Default)]
struct TlsRequest {
    certs: Option<Arc<TlsCerts>>,
    require_client_cert: bool,
}

/// The TLS set-up of a running server.
#[derive(Clone, Debug)]
struct Tls {
    certs: Arc<TlsCerts>,
    require_client_cert: bool,
}

impl Tls {
    /// `--port 0 --tls-port P …`: the server speaks TLS only.
    fn server_args(&self, port: u16) -> Vec<String> {
        let path = |p: PathBuf| p.to_string_lossy().into_owned();
        let auth = if self.require_client_cert {
            "yes"
        } else {
            "optional"
        };
        vec![
            "--port".to_owned(),
            "0".to_owned(),
            "--tls-port".to_owned(),
            port.to_string(),
            "--tls-cert-file".to_owned(),
            path(self.certs.server_cert()),
            "--tls-key-file".to_owned(),
            path(self.certs.server_key()),
            "--tls-ca-cert-file".to_owned(),
            path(self.certs.ca_file()),
            "--tls-auth-clients".to_owned(),
            auth.to_owned(),
        ]
    }
}

impl ServerBuilder {
    /// Appends one command-line argument (`--name value` pairs are two calls).
    ///
    /// ```
    /// let builder = keylatch_harness::RedisServer::builder().arg("--maxclients").arg("100");
    /// ```
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Appends several arguments.
    ///
    /// ```
    /// let builder = keylatch_harness::RedisServer::builder().args(["--maxclients", "100"]);
    /// ```
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Uses this port instead of a free one (e.g. to restart on the same port).
    /// With a fixed port, start makes one attempt instead of retrying on
    /// another port.
    ///
    /// ```
    /// let builder = keylatch_harness::RedisServer::builder().port(16379);
    /// ```
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Serves TLS only (`--port 0 --tls-port P`, the port chosen as for a
    /// plain server) with throwaway certificates ([`TlsCerts`], made at
    /// start unless [`tls_certs`](Self::tls_certs) gives a set); client
    /// certificates are optional (`--tls-auth-clients optional`). The
    /// server's [`url`](RedisServer::url) is then `rediss://…` and
    /// [`cli`](RedisServer::cli) speaks TLS.
    ///
    /// ```no_run
    /// let server = keylatch_harness::RedisServer::builder().tls().start().unwrap();
    /// assert!(server.url().starts_with("rediss://127.0.0.1:"));
    /// let ca = server.tls_certs().unwrap().ca_file();
    /// ```
    pub fn tls(mut self) -> Self {
        self.tls.get_or_insert_with(TlsRequest::default);
        self
    }

    /// TLS ([`tls`](Self::tls)) with client certificates required
    /// (`--tls-auth-clients yes`, mutual TLS): present
    /// [`TlsCerts::client_cert`] and [`TlsCerts::client_key`].
    ///
    /// ```no_run
    /// let server = keylatch_harness::RedisServer::builder()
    ///     .tls_require_client_cert()
    ///     .start()
    ///     .unwrap();
    /// ```
    pub fn tls_require_client_cert(mut self) -> Self {
        self.tls
            .get_or_insert_with(TlsRequest::default)
            .require_client_cert = true;
        self
    }

    /// Runs on a server that offers `feature`: the configured binary
    /// (`KEYLATCH_REDIS_SERVER`) if it does, else the default `redis-server`,
    /// which the harness says once, in one line (see [`Feature`]).
    ///
    /// ```no_run
    /// use keylatch_harness::{Feature, RedisServer};
    /// let server = RedisServer::builder().needs(Feature::ShardedPubSub).start().unwrap();
    /// ```
    pub fn needs(mut self, feature: Feature) -> Self {
        self.needs.push(feature);
        self
    }

    /// TLS ([`tls`](Self::tls)) with these certificates, e.g. one set
    /// shared by the nodes of a cluster.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// let certs = Arc::new(keylatch_harness::TlsCerts::generate().unwrap());
    /// let server = keylatch_harness::RedisServer::builder().tls_certs(certs).start().unwrap();
    /// ```
    pub fn tls_certs(mut self, certs: Arc<TlsCerts>) -> Self {
        self.tls.get_or_insert_with(TlsRequest::default).certs = Some(certs);
        self
    }

    /// Starts the server and waits until it answers PING.
    ///
    /// ```no_run
    /// let server = keylatch_harness::RedisServer::builder().start().unwrap();
    /// ```
    ///
    /// # Errors
    /// The binary is missing, the process exits early, or it never answers;
    /// for TLS, `openssl` is missing or fails.
    pub fn start(self) -> io::Result<RedisServer> {
        let tls = match &self.tls {
            Some(req) => Some(Tls {
                certs: match &req.certs {
                    Some(c) => Arc::clone(c),
                    None => Arc::new(TlsCerts::generate()?),
                },
                require_client_cert: req.require_client_cert,
            }),
            None => None,
        };
        let mut last = None;
        for _ in 0..START_ATTEMPTS {
            let port = match self.port {
                Some(p) => p,
                None => free_port()?,
            };
            let dir = TempDir::new("redis")?;
            let binary = binary_for(tls.is_some(), &self.needs);
            match spawn(&binary, &self.args, port, dir.path(), tls.as_ref()) {
                Ok(child) => {
                    let mut server = RedisServer {
                        child: Some(child),
                        port,
                        args: self.args.clone(),
                        dir,
                        tls: tls.clone(),
                        binary: binary.clone(),
                    };
                    match server.wait_ready() {
                        Ok(()) => return Ok(server),
                        Err(e) => {
                            last = Some(e);
                            if tls.is_some() && binary != DEFAULT_SERVER && lacks_tls(&server.log())
                            {
                                // Again at once, on the default binary (a
                                // fixed port too: nothing held it).
                                note_without_tls(&binary);
                                continue;
                            }
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!(
                            "`{}` not found: install Debian's redis-server package \
                             or set KEYLATCH_REDIS_SERVER",
                            server_binary()
                        ),
                    ))
                }
                Err(e) => last = Some(e),
            }
            if self.port.is_some() {
                break;
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("redis-server did not start")))
    }
}

/// The server's stdout and stderr, beside its log file.
const STDERR_FILE: &str = "stderr.log";

/// The binary every test runs unless it names another (`redis-server` from
/// the PATH: Debian's, which CI installs).
const DEFAULT_SERVER: &str = "redis-server";

/// Binaries seen to lack TLS (it is a build option: some packaged servers
/// leave it out).
static WITHOUT_TLS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The binary for a server with or without TLS that needs `needs`: the
/// configured one, unless TLS is wanted and it was seen to lack it, or it
/// lacks one of `needs`; then the default one, which has them (so the test
/// still runs, on a server that can).
fn binary_for(tls: bool, needs: &[Feature]) -> String {
    let configured = server_binary();
    let lacking = WITHOUT_TLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .contains(&configured);
    if (tls && lacking)
        || (configured != DEFAULT_SERVER
            && features::first_lacking(&configured, needs, DEFAULT_SERVER).is_some())
    {
        DEFAULT_SERVER.to_owned()
    } else {
        configured
    }
}

/// Whether a server that would not start said it has no TLS: Redis 6.2
/// built without it refuses the `tls-port` directive, Valkey says "Failed
/// finding TLS support".
fn lacks_tls(log: &str) -> bool {
    let log = log.to_ascii_lowercase();
    log.contains("failed finding tls support")
        || (log.contains("bad directive") && log.contains("tls-port"))
}

/// Records that `binary` has no TLS, saying so once, in one line.
fn note_without_tls(binary: &str) {
    if binary == DEFAULT_SERVER {
        return;
    }
    let mut lacking = WITHOUT_TLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !lacking.iter().any(|b| b == binary) {
        notice(&format!(
            "{binary} has no TLS built in; TLS servers run on {DEFAULT_SERVER}"
        ));
        lacking.push(binary.to_owned());
    }
}

/// Says `what` on the process' real stderr, past the test harness' output
/// capture (which only takes the print macros), so a run shows which tests
/// ran on another server even when they pass.
pub(crate) fn notice(what: &str) {
    let _ = writeln!(io::stderr().lock(), "keylatch-harness: {what}");
}

fn spawn(
    binary: &str,
    extra: &[String],
    port: u16,
    dir: &Path,
    tls: Option<&Tls>,
) -> io::Result<Child> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(STDERR_FILE))?;
    let ports = match tls {
        Some(tls) => tls.server_args(port),
        None => vec!["--port".to_owned(), port.to_string()],
    };
    Command::new(binary)
        .args(ports)
        .args(["--bind", "127.0.0.1"])
        .arg("--dir")
        .arg(dir)
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .arg("--logfile")
        .arg(dir.join("redis.log"))
        .args(extra)
        .stdin(Stdio::null())
        // Kept: a server that refuses an option at start says why on stderr,
        // before its log file exists (`log()` shows both).
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(out))
        .spawn()
}

/// One running `redis-server`, killed (SIGKILL) and its temp dir removed on `Drop`.
///
/// ```no_run
/// let mut server = keylatch_harness::RedisServer::start();
/// server.kill();
/// server.restart().unwrap();
/// ```
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    args: Vec<String>,
    dir: TempDir,
    tls: Option<Tls>,
    /// The binary it runs (restarts run the same one).
    binary: String,
}

impl RedisServer {
    /// A builder for a server with extra arguments.
    ///
    /// ```no_run
    /// let server = keylatch_harness::RedisServer::builder()
    ///     .args(["--enable-debug-command", "local"])
    ///     .start()
    ///     .unwrap();
    /// ```
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// Starts a default server.
    ///
    /// ```no_run
    /// let server = keylatch_harness::RedisServer::start();
    /// ```
    ///
    /// # Panics
    /// When the server cannot be started: this is for tests, where a missing
    /// `redis-server` must fail the test rather than skip it.
    #[allow(clippy::panic)]
    pub fn start() -> Self {
        match ServerBuilder::default().start() {
            Ok(s) => s,
            Err(e) => panic!("cannot start redis-server: {e}"),
        }
    }

    /// The TCP port on 127.0.0.1.
    ///
    /// ```no_run
    /// let server = keylatch_harness::RedisServer::start();
    /// assert!(server.port() > 0);
    /// ```
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    ///
    /// ```no_run
    /// let server = keylatch_harness::RedisServer::start();
    /// assert!(server.addr().ip().is_loopback());
    /// ```
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `redis://127.0.0.1:port`, or `rediss://127.0.0.1:port` for a TLS
    /// server (its client must trust [`TlsCerts::ca_file`]).
    ///
    /// ```no_run
    /// let server = keylatch_harness::RedisServer::start();
    /// assert!(server.url().starts_with("redis://127.0.0.1:"));
    /// ```
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The certificates of a TLS server (`None` for a plain one).
    ///
    /// ```no_run
    /// let server = keylatch_harness::RedisServer::builder().tls().start().unwrap();
    /// println!("trust {}", server.tls_certs().unwrap().ca_file().display());
    /// ```
    pub fn tls_certs(&self) -> Option<&TlsCerts> {
        self.tls.as_ref().map(|t| t.certs.as_ref())
    }

    /// The server's working directory.
    ///
    /// ```no_run
    /// let server = keylatch_harness::RedisServer::start();
    /// assert!(server.dir().is_dir());
    /// ```
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The process id, while running.
    ///
    /// ```no_run
    /// let server = keylatch_harness::RedisServer::start();
    /// assert!(server.pid().is_some());
    /// ```
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process is still alive.
    ///
    /// ```no_run
    /// let mut server = keylatch_harness::RedisServer::start();
    /// assert!(server.is_running());
    /// ```
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// SIGKILL, and wait for the process to go. State is lost (no persistence).
    ///
    /// ```no_run
    /// let mut server = keylatch_harness::RedisServer::start();
    /// server.kill();
    /// assert!(!server.is_running());
    /// ```
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Pauses the process (SIGSTOP): TCP stays up, nothing is answered.
    ///
    /// ```no_run
    /// let server = keylatch_harness::RedisServer::start();
    /// server.pause().unwrap();
    /// server.resume().unwrap();
    /// ```
    ///
    /// # Errors
    /// The `kill` command failed.
    pub fn pause(&self) -> io::Result<()> {
        self.signal("-STOP")
    }

    /// Resumes a paused process (SIGCONT).
    ///
    /// ```no_run
    /// let server = keylatch_harness::RedisServer::start();
    /// server.pause().unwrap();
    /// server.resume().unwrap();
    /// ```
    ///
    /// # Errors
    /// The `kill` command failed.
    pub fn resume(&self) -> io::Result<()> {
        self.signal("-CONT")
    }

    fn signal(&self, sig: &str) -> io::Result<()> {
        let pid = self
            .pid()
            .ok_or_else(|| io::Error::other("server not running"))?;
        let status = Command::new("kill")
            .arg(sig)
            .arg(pid.to_string())
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!("kill {sig} {pid} failed")))
        }
    }

    /// Starts the server again on the same port with the same arguments
    /// (after [`kill`](Self::kill)), and waits for PING. The working
    /// directory is kept, so files in it (e.g. a cluster's `nodes.conf`)
    /// survive the restart.
    ///
    /// ```no_run
    /// let mut server = keylatch_harness::RedisServer::start();
    /// server.kill();
    /// server.restart().unwrap();
    /// ```
    ///
    /// # Errors
    /// The server did not come back.
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill();
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            // The old socket may linger briefly; retry the bind for a while.
            let child = spawn(
                &self.binary,
                &self.args,
                self.port,
                self.dir.path(),
                self.tls.as_ref(),
            )?;
            self.child = Some(child);
            match self.wait_ready() {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => {
                    self.kill();
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    /// Runs `redis-cli -p PORT args…` (with `--tls` and the certificates
    /// for a TLS server) and returns its stdout (see [`redis_cli`]).
    ///
    /// ```no_run
    /// let server = keylatch_harness::RedisServer::start();
    /// assert_eq!(server.cli(&["SET", "k", "v"]).unwrap().trim(), "OK");
    /// ```
    ///
    /// # Errors
    /// `redis-cli` is missing, exits non-zero, or times out.
    pub fn cli(&self, args: &[&str]) -> io::Result<String> {
        self.cli_timeout(args, CLI_TIMEOUT)
    }

    /// [`cli`](Self::cli) with its own time limit (see [`redis_cli_timeout`]).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let server = keylatch_harness::RedisServer::start();
    /// let out = server.cli_timeout(&["PING"], Duration::from_secs(2)).unwrap();
    /// assert_eq!(out.trim(), "PONG");
    /// ```
    ///
    /// # Errors
    /// `redis-cli` is missing, exits non-zero, or times out.
    pub fn cli_timeout(&self, args: &[&str], timeout: Duration) -> io::Result<String> {
        let tls = self
            .tls
            .as_ref()
            .map(|t| t.certs.cli_args())
            .unwrap_or_default();
        let mut all: Vec<&str> = tls.iter().map(String::as_str).collect();
        all.extend_from_slice(args);
        // A server moved to the default binary (the configured one has no
        // TLS) is asked with the default redis-cli, whose TLS it can trust
        // to be there too.
        let cli = if self.binary == DEFAULT_SERVER && server_binary() != DEFAULT_SERVER {
            DEFAULT_CLI.to_owned()
        } else {
            cli_binary()
        };
        run_cli(&cli, self.port, &all, timeout)
    }

    /// One sign of life: [`ping`] for a plain server, `redis-cli --tls PING`
    /// for a TLS one.
    fn ping(&self) -> io::Result<()> {
        if self.tls.is_none() {
            return ping(self.port);
        }
        let out = self.cli_timeout(&["PING"], Duration::from_secs(2))?;
        if out.starts_with("PONG") || out.starts_with("NOAUTH") {
            Ok(())
        } else {
            Err(io::Error::other(format!("unexpected PING reply {out:?}")))
        }
    }

    /// The server's log so far, and what it printed on stdout or stderr (a
    /// refused option at start is only said there), for failure messages.
    ///
    /// ```no_run
    /// let server = keylatch_harness::RedisServer::start();
    /// assert!(server.log().contains("Ready to accept connections"));
    /// ```
    pub fn log(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default();
        let stderr = std::fs::read_to_string(self.dir.path().join(STDERR_FILE)).unwrap_or_default();
        if stderr.trim().is_empty() {
            log
        } else {
            format!("{log}--- stdout/stderr ---\n{stderr}")
        }
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(io::Error::other(format!(
                        "redis-server exited early ({status}); log:\n{}",
                        self.log()
                    )));
                }
            }
            if self.ping().is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("redis-server on port {} never answered PING", self.port),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // A paused server ignores SIGKILL only until continued; SIGKILL works on
        // stopped processes, so kill() is enough.
        self.kill();
    }
}

/// Sends one inline PING and accepts any sign of life: `+PONG`, or an error
/// such as `-NOAUTH` or `-LOADING` that shows the server is up and speaking RESP.
///
/// ```no_run
/// keylatch_harness::ping(6379).unwrap();
/// ```
///
/// # Errors
/// No connection, or no reply within a second.
pub fn ping(port: u16) -> io::Result<()> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
    stream.set_read_timeout(Some(Duration::from_secs(1)))?;
    stream.write_all(b"PING\r\n")?;
    let mut buf = [0u8; 64];
    let n = stream.read(&mut buf)?;
    let reply = &buf[..n];
    if reply.starts_with(b"+PONG") || reply.starts_with(b"-NOAUTH") {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "unexpected PING reply {:?}",
            String::from_utf8_lossy(reply)
        )))
    }
}

/// How long [`redis_cli`] lets one `redis-cli` run before killing it. Generous:
/// `--cluster create` and `MIGRATE … 5000` take seconds, but a paused
/// (SIGSTOPped) server accepts the connection and never answers, and an
/// unbounded `redis-cli` would hang the test for ever.
pub const CLI_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `redis-cli -h 127.0.0.1 -p PORT args…` and returns its stdout,
/// giving up after [`CLI_TIMEOUT`].
///
/// `redis-cli` prints plain values when its stdout is not a terminal, and an
/// error reply (`ERR …`, `MOVED …`) is printed on stdout with exit status 0:
/// callers check the text.
///
/// ```no_run
/// let out = keylatch_harness::redis_cli(6379, &["PING"]).unwrap();
/// assert_eq!(out.trim(), "PONG");
/// ```
///
/// # Errors
/// `redis-cli` is missing, exits non-zero, or runs longer than [`CLI_TIMEOUT`].
pub fn redis_cli(port: u16, args: &[&str]) -> io::Result<String> {
    redis_cli_timeout(port, args, CLI_TIMEOUT)
}

/// [`redis_cli`] with its own time limit: the cluster helpers poll with a
/// short one so a paused node costs seconds, not the whole deadline.
///
/// ```no_run
/// use std::time::Duration;
/// let out = keylatch_harness::redis_cli_timeout(6379, &["PING"], Duration::from_secs(2)).unwrap();
/// assert_eq!(out.trim(), "PONG");
/// ```
///
/// # Errors
/// `redis-cli` is missing, exits non-zero, or runs longer than `timeout`
/// (then it is killed and the error kind is [`io::ErrorKind::TimedOut`]).
pub fn redis_cli_timeout(port: u16, args: &[&str], timeout: Duration) -> io::Result<String> {
    run_cli(&cli_binary(), port, args, timeout)
}

/// The redis-cli that goes with [`DEFAULT_SERVER`].
const DEFAULT_CLI: &str = "redis-cli";

fn run_cli(cli: &str, port: u16, args: &[&str], timeout: Duration) -> io::Result<String> {
    let mut child = Command::new(cli)
        .args(["-h", "127.0.0.1", "-p"])
        .arg(port.to_string())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "`{}` not found: install Debian's redis-tools package \
                         or set KEYLATCH_REDIS_CLI",
                        cli
                    ),
                )
            } else {
                e
            }
        })?;
    // Drain both pipes on their own threads: a child blocked on a full pipe
    // would never exit, and std has no wait-with-timeout.
    let stdout = child.stdout.take().map(read_in_background);
    let stderr = child.stderr.take().map(read_in_background);
    let deadline = Instant::now() + timeout;
    let mut nap = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(nap);
                // Most commands finish in a few ms; back off for slow ones.
                nap = (nap * 2).min(Duration::from_millis(20));
            }
            Ok(None) => {
                break Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("redis-cli -p {port} {args:?} gave no answer within {timeout:?}"),
                ))
            }
            Err(e) => break Err(e),
        }
    };
    if status.is_err() {
        let _ = child.kill();
        let _ = child.wait();
    }
    // The pipes close when the child is gone, so these joins end.
    let out = stdout.map(join_output).unwrap_or_default();
    let err = stderr.map(join_output).unwrap_or_default();
    let status = status?;
    if !status.success() {
        return Err(io::Error::other(format!(
            "redis-cli -p {port} {args:?} failed ({status}): {}",
            String::from_utf8_lossy(&err)
        )));
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn read_in_background(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        buf
    })
}

fn join_output(reader: JoinHandle<Vec<u8>>) -> Vec<u8> {
    reader.join().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_server_speaks_tls_only() {
        let mut server = ServerBuilder::default().tls().start().unwrap();
        assert!(server.url().starts_with("rediss://127.0.0.1:"));
        assert!(server.tls_certs().unwrap().ca_file().exists());
        assert_eq!(server.cli(&["SET", "a", "1"]).unwrap().trim(), "OK");
        // No plaintext on the port: the inline PING gets no RESP answer.
        assert!(ping(server.port()).is_err());
        server.restart().unwrap();
        assert_eq!(server.cli(&["EXISTS", "a"]).unwrap().trim(), "0");
    }

    #[test]
    fn temp_dir_is_removed_on_drop() {
        let dir = TempDir::new("t").unwrap();
        let path = dir.path().to_owned();
        std::fs::write(path.join("f"), b"x").unwrap();
        drop(dir);
        assert!(!path.exists());
    }

    #[test]
    fn server_starts_restarts_and_is_killed() {
        let mut server = RedisServer::start();
        let port = server.port();
        ping(port).unwrap();
        assert_eq!(server.cli(&["SET", "a", "1"]).unwrap().trim(), "OK");
        server.kill();
        assert!(ping(port).is_err());
        server.restart().unwrap();
        // No persistence: the key is gone after the restart.
        assert_eq!(server.cli(&["EXISTS", "a"]).unwrap().trim(), "0");
        let dir = server.dir().to_owned();
        drop(server);
        assert!(ping(port).is_err());
        assert!(!dir.exists());
    }

    #[test]
    fn redis_cli_gives_up_on_a_paused_server() {
        let server = RedisServer::start();
        server.pause().unwrap();
        let started = Instant::now();
        let err =
            redis_cli_timeout(server.port(), &["PING"], Duration::from_millis(300)).unwrap_err();
        server.resume().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(server.cli(&["PING"]).unwrap().trim(), "PONG");
    }

    #[test]
    fn redis_cli_reports_a_missing_server() {
        let port = free_port().unwrap();
        // redis-cli exits non-zero when it cannot connect.
        assert!(redis_cli(port, &["PING"]).is_err());
    }
}
