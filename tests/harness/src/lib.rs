//! Real `redis-server` processes for keylatch's tests, demo and benchmarks.
//!
//! Layout:
//! - [`RedisServer`]: one server on a free loopback port, in its own temp dir,
//!   without persistence, killed and cleaned up on `Drop`.
//! - [`ServerBuilder`]: extra config arguments (ACL users, renamed commands,
//!   cluster mode) before start.
//! - [`TempDir`]: a directory removed on `Drop`.
//! - [`redis_cli`]: run `redis-cli` against a server (used for cluster set-up).
//!
//! The harness is synchronous and std-only on purpose: it must not depend on
//! the client under test, and the demo binary and the benchmark crate use it too.
//! Servers are started with `--save "" --appendonly no` so a kill loses all
//! state, which the fault tests rely on.
//!
//! Environment:
//! - `KEYLATCH_REDIS_SERVER`: path of the `redis-server` binary (default: found on `PATH`).
//! - `KEYLATCH_REDIS_CLI`: path of the `redis-cli` binary (default: found on `PATH`).
//!
//! A missing binary is an error (tests fail, they never skip).
//!
//! ```no_run
//! let server = keylatch_harness::RedisServer::start();
//! println!("redis on {}", server.url());
//! ```

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
}

impl ServerBuilder {
    /// Appends one command-line argument (`--name value` pairs are two calls).
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Appends several arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Uses this port instead of a free one (e.g. to restart on the same port).
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Starts the server and waits until it answers PING.
    ///
    /// # Errors
    /// The binary is missing, the process exits early, or it never answers.
    pub fn start(self) -> io::Result<RedisServer> {
        let mut last = None;
        for _ in 0..START_ATTEMPTS {
            let port = match self.port {
                Some(p) => p,
                None => free_port()?,
            };
            let dir = TempDir::new("redis")?;
            match spawn(&self.args, port, dir.path()) {
                Ok(child) => {
                    let mut server = RedisServer {
                        child: Some(child),
                        port,
                        args: self.args.clone(),
                        dir,
                    };
                    match server.wait_ready() {
                        Ok(()) => return Ok(server),
                        Err(e) => last = Some(e),
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

fn spawn(extra: &[String], port: u16, dir: &Path) -> io::Result<Child> {
    Command::new(server_binary())
        .arg("--port")
        .arg(port.to_string())
        .args(["--bind", "127.0.0.1"])
        .arg("--dir")
        .arg(dir)
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .arg("--logfile")
        .arg(dir.join("redis.log"))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
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
}

impl RedisServer {
    /// A builder for a server with extra arguments.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// Starts a default server.
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
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `redis://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's working directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process is still alive.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// SIGKILL, and wait for the process to go. State is lost (no persistence).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Pauses the process (SIGSTOP): TCP stays up, nothing is answered.
    ///
    /// # Errors
    /// The `kill` command failed.
    pub fn pause(&self) -> io::Result<()> {
        self.signal("-STOP")
    }

    /// Resumes a paused process (SIGCONT).
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
    /// (after [`kill`](Self::kill)), and waits for PING.
    ///
    /// # Errors
    /// The server did not come back.
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill();
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            // The old socket may linger briefly; retry the bind for a while.
            let child = spawn(&self.args, self.port, self.dir.path())?;
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

    /// Runs `redis-cli -p PORT args…` and returns its stdout.
    ///
    /// # Errors
    /// `redis-cli` is missing or exits non-zero.
    pub fn cli(&self, args: &[&str]) -> io::Result<String> {
        redis_cli(self.port, args)
    }

    /// The server's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
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
            if ping(self.port).is_ok() {
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

/// Runs `redis-cli -h 127.0.0.1 -p PORT args…` and returns its stdout.
///
/// ```no_run
/// let out = keylatch_harness::redis_cli(6379, &["PING"]).unwrap();
/// assert_eq!(out.trim(), "PONG");
/// ```
///
/// # Errors
/// `redis-cli` is missing or exits non-zero.
pub fn redis_cli(port: u16, args: &[&str]) -> io::Result<String> {
    let out = Command::new(cli_binary())
        .args(["-h", "127.0.0.1", "-p"])
        .arg(port.to_string())
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "redis-cli {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
