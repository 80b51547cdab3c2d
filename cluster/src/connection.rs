//! The cheap, cloneable handle to one node's connection task.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use keylatch_resp::{Cmd, Frame};
use tokio::sync::{mpsc, oneshot};

use crate::config::{ConnectionConfig, Negotiated};
use crate::driver::{Driver, Payload, Request};
use crate::error::{Error, Result};
use crate::handshake::establish;
use crate::pipeline::Pipeline;
use crate::reply::{check, FromReply};
use crate::reply_tx::ReplyTx;

/// State shared between the handles and the task.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: ConnectionConfig,
    /// 0 = disconnected, 2 = RESP2, 3 = RESP3.
    protocol: AtomicU8,
    pub(crate) reconnects: AtomicU64,
    /// Set by the task while requests wait and the socket has read nothing
    /// for a whole health interval; cleared by the next read.
    pub(crate) stalled: AtomicBool,
}

impl Shared {
    pub(crate) fn set_connected(&self, protocol: Option<Negotiated>) {
        let v = match protocol {
            None => 0,
            Some(Negotiated::Resp2) => 2,
            Some(Negotiated::Resp3) => 3,
        };
        self.protocol.store(v, Ordering::Release);
    }
}

/// A multiplexed connection to one Redis node.
///
/// Clones share one socket and one connection task. Concurrent requests from
/// any number of tasks are pipelined automatically: whatever is queued when
/// the task runs goes out in one write. Replies come back in order.
///
/// ```no_run
/// use keylatch_cluster::{Commands, Connection};
/// use keylatch_resp::Cmd;
/// # async fn demo() -> keylatch_cluster::Result<()> {
/// let conn = Connection::connect("redis://127.0.0.1:6379").await?;
/// conn.set("greeting", "hello").await?;
/// let n: i64 = conn.cmd(Cmd::new("INCR").key("hits")).await?;
/// assert!(n >= 1);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Connection {
    tx: mpsc::Sender<Request>,
    shared: Arc<Shared>,
}

/// Commands that would turn the connection into a subscriber or a monitor:
/// replies would no longer match requests one to one.
const REFUSED: &[&[u8]] = &[
    b"SUBSCRIBE",
    b"PSUBSCRIBE",
    b"SSUBSCRIBE",
    b"UNSUBSCRIBE",
    b"PUNSUBSCRIBE",
    b"SUNSUBSCRIBE",
    b"MONITOR",
    b"HELLO",
    b"RESET",
    b"QUIT",
];

impl Connection {
    /// Connects to the node a `redis://` URL names and spawns the connection
    /// task on the current tokio runtime.
    ///
    /// ```no_run
    /// use keylatch_cluster::Commands;
    /// # async fn demo() -> keylatch_cluster::Result<()> {
    /// let conn = keylatch_cluster::Connection::connect("redis://127.0.0.1:6379/0").await?;
    /// conn.ping().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A bad URL ([`Error::Config`]), an unreachable server ([`Error::Io`]),
    /// or a refused handshake (e.g. `WRONGPASS` as [`Error::Server`]).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future closes the half-open socket.
    ///
    /// # Panics
    /// Outside a tokio runtime (the task must be spawned).
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(ConnectionConfig::from_url(url)?).await
    }

    /// Connects with an explicit configuration and spawns the task.
    ///
    /// ```no_run
    /// use keylatch_cluster::{Connection, ConnectionConfig};
    /// # async fn demo() -> keylatch_cluster::Result<()> {
    /// let cfg = ConnectionConfig::from_url("redis://127.0.0.1:6379")?.client_name("worker-1");
    /// let conn = Connection::connect_with(cfg).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub async fn connect_with(config: ConnectionConfig) -> Result<Self> {
        let (conn, task) = Self::connect_unspawned(config).await?;
        tokio::spawn(task);
        Ok(conn)
    }

    /// Connects and returns the handle with its connection task *not*
    /// spawned: the caller decides where it runs (tests use this to hold
    /// the task still while they arrange requests).
    ///
    /// ```no_run
    /// use keylatch_cluster::{Commands, Connection, ConnectionConfig};
    /// # async fn demo() -> keylatch_cluster::Result<()> {
    /// let (conn, task) = Connection::connect_unspawned(ConnectionConfig::default()).await?;
    /// tokio::spawn(task);
    /// conn.ping().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn connect_unspawned(
        config: ConnectionConfig,
    ) -> Result<(Self, impl Future<Output = ()> + Send + 'static)> {
        let io = establish(&config).await?;
        let (tx, rx) = mpsc::channel(config.queue_capacity.max(1));
        let shared = Arc::new(Shared {
            config,
            protocol: AtomicU8::new(0),
            reconnects: AtomicU64::new(0),
            stalled: AtomicBool::new(false),
        });
        shared.set_connected(Some(io.protocol));
        let driver = Driver::new(rx, Arc::clone(&shared), io);
        Ok((Self { tx, shared }, driver.run()))
    }

    /// Sends one command and returns its reply frame. An error reply becomes
    /// [`Error::Server`].
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// let frame = conn.send(keylatch_resp::Cmd::new("PING")).await?;
    /// assert_eq!(frame, "PONG");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Server`] for an error reply; [`Error::Timeout`] past the
    /// request timeout; [`Error::Disconnected`] while reconnecting (not sent);
    /// [`Error::ConnectionClosed`]/[`Error::Io`] when the socket died with the
    /// request pending; [`Error::InvalidCommand`] for SUBSCRIBE, MONITOR and
    /// other commands that would break request/reply pairing.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped request that was not yet written is never
    /// written; one already written has its reply read and discarded, so later
    /// replies stay matched to their requests.
    // Plain fns returning the one request future (rather than `async fn`s
    // wrapping it): each wrapping level would store the command again and
    // copy the inner future into its own.
    pub fn send(&self, cmd: Cmd) -> impl Future<Output = Result<Frame>> + Send + '_ {
        self.send_payload(Payload::One(cmd), self.shared.config.request_timeout)
    }

    /// [`send`](Self::send) with a timeout for this request only (`None`: none).
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// use std::time::Duration;
    /// let cmd = keylatch_resp::Cmd::new("BLPOP").key("jobs").arg(0);
    /// let job = conn.send_timeout(cmd, None).await?; // blocks as long as it takes
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send).
    ///
    /// # Cancel safety
    /// As [`send`](Self::send).
    pub fn send_timeout(
        &self,
        cmd: Cmd,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<Frame>> + Send + '_ {
        self.send_payload(Payload::One(cmd), timeout)
    }

    /// Sends a shared command: the router keeps its own reference so it can
    /// resend after a redirect without copying the command first.
    pub(crate) fn send_shared(
        &self,
        cmd: Arc<Cmd>,
    ) -> impl Future<Output = Result<Frame>> + Send + '_ {
        self.send_payload(Payload::Shared(cmd), self.shared.config.request_timeout)
    }

    /// [`send_shared`](Self::send_shared) with a timeout for this request
    /// only (`None`: none; the caller bounds the wait itself).
    pub(crate) fn send_shared_timeout(
        &self,
        cmd: Arc<Cmd>,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<Frame>> + Send + '_ {
        self.send_payload(Payload::Shared(cmd), timeout)
    }

    /// [`send_shared_timeout`](Self::send_shared_timeout) whose reply, if
    /// it comes after the caller timed out or left (once written), goes to
    /// `late` (see [`LateReply`](crate::LateReply)).
    pub(crate) async fn send_settled(
        &self,
        cmd: Arc<Cmd>,
        timeout: Option<Duration>,
        late: crate::LateReply,
    ) -> Result<Frame> {
        refuse(&cmd)?;
        self.settle(Payload::Shared(cmd), timeout, late).await
    }

    /// [`send_settled`](Self::send_settled) of several commands in one
    /// write (`ASKING` + the command, `SCRIPT LOAD` + the command): only the
    /// last one's reply is returned, or goes to `late`.
    pub(crate) async fn send_settled_last(
        &self,
        cmds: Vec<Cmd>,
        timeout: Option<Duration>,
        late: crate::LateReply,
    ) -> Result<Frame> {
        for cmd in &cmds {
            refuse(cmd)?;
        }
        self.settle(Payload::Many(cmds), timeout, late).await
    }

    async fn settle(
        &self,
        payload: Payload,
        timeout: Option<Duration>,
        late: crate::LateReply,
    ) -> Result<Frame> {
        let (tx, rx) = oneshot::channel();
        // Dropped with the reply already in it (the caller left between its
        // arrival and being read), the reply still reaches the late handler.
        let mut rx = SettledRx {
            rx: Some(rx),
            late: Arc::clone(&late),
        };
        self.enqueue(Request {
            payload,
            tx: ReplyTx::Settle(tx, late),
            deadline: deadline(timeout),
        })
        .await?;
        check((&mut rx).await.unwrap_or(Err(Error::ConnectionClosed))?)
    }

    /// [`send`](Self::send) whose command, once queued, is written even if
    /// the caller drops this future before that.
    pub(crate) async fn send_written(
        &self,
        cmd: Cmd,
        script: Option<&'static crate::Script>,
        until: Option<tokio::time::Instant>,
    ) -> Result<Frame> {
        refuse(&cmd)?;
        let (tx, rx) = oneshot::channel();
        // The caller's bound, within the request timeout (a release waits no
        // longer than its hold's lease on a stalled server).
        let deadline = match (deadline(self.shared.config.request_timeout), until) {
            (Some(d), Some(u)) => Some(d.min(u)),
            (d, u) => d.or(u),
        };
        self.enqueue(Request {
            payload: Payload::One(cmd),
            tx: ReplyTx::Written(tx, script),
            deadline,
        })
        .await?;
        // Bounded here too: a request still queued when the connection task
        // cannot write (a stopped server with its socket buffers full) is
        // timed out by the task only once it is taken, or after a whole
        // request timeout blocked. The request stays queued and is written
        // when it can be (its reply then goes nowhere): Timeout, unknown
        // outcome.
        let reply = match deadline {
            Some(d) => tokio::time::timeout_at(d, rx)
                .await
                .unwrap_or(Ok(Err(Error::Timeout))),
            None => rx.await,
        };
        check(reply.unwrap_or(Err(Error::ConnectionClosed))?)
    }

    async fn send_payload(&self, payload: Payload, timeout: Option<Duration>) -> Result<Frame> {
        match &payload {
            Payload::One(cmd) => refuse(cmd)?,
            Payload::Shared(cmd) => refuse(cmd)?,
            Payload::Many(cmds) => {
                for cmd in cmds {
                    refuse(cmd)?;
                }
            }
        }
        let (tx, rx) = oneshot::channel();
        let deadline = deadline(timeout);
        self.enqueue(Request {
            payload,
            tx: ReplyTx::One(tx),
            deadline,
        })
        .await?;
        // The connection task answers by the deadline (a timeout, a reply,
        // or the socket's failure): no timer of our own on this path.
        check(rx.await.unwrap_or(Err(Error::ConnectionClosed))?)
    }

    /// Queues a request: at once when there is room (the common case, no
    /// timer), else waiting for room until the request's deadline.
    async fn enqueue(&self, request: Request) -> Result<()> {
        match self.tx.try_send(request) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(Error::ConnectionClosed),
            // Boxed: the wait (a timer and a semaphore acquire) is rare, and
            // inline it would make every request's future larger.
            Err(mpsc::error::TrySendError::Full(request)) => {
                Box::pin(self.enqueue_when_room(request)).await
            }
        }
    }

    /// Sends one command and converts the reply.
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// use keylatch_resp::Cmd;
    /// let members: Vec<String> = conn.cmd(Cmd::new("SMEMBERS").key("s")).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send), plus [`Error::UnexpectedReply`] when the
    /// reply does not convert to `T`.
    ///
    /// # Cancel safety
    /// As [`send`](Self::send).
    pub async fn cmd<T: FromReply>(&self, cmd: Cmd) -> Result<T> {
        T::from_reply(self.send(cmd).await?)
    }

    /// Sends a pipeline: every command in one write, every reply in order,
    /// each its own `Result`. The outer `Result` fails only when the
    /// connection does.
    ///
    /// ```no_run
    /// use keylatch_cluster::Pipeline;
    /// use keylatch_resp::Cmd;
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// let mut p = Pipeline::new();
    /// p.add(Cmd::new("SET").key("a").arg(1)).add(Cmd::new("INCR").key("a"));
    /// let replies = conn.pipeline(p).await?;
    /// assert_eq!(replies.len(), 2);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The outer error as for [`send`](Self::send) (the connection failed, or
    /// a refused command is in the pipeline); inner errors are per command.
    ///
    /// # Cancel safety
    /// As [`send`](Self::send): a pipeline is written whole or not at all.
    pub async fn pipeline(&self, pipeline: Pipeline) -> Result<Vec<Result<Frame>>> {
        self.pipeline_timeout(pipeline, self.shared.config.request_timeout)
            .await
    }

    /// [`pipeline`](Self::pipeline) with a timeout for this request only
    /// (`None`: none).
    pub(crate) async fn pipeline_timeout(
        &self,
        pipeline: Pipeline,
        timeout: Option<Duration>,
    ) -> Result<Vec<Result<Frame>>> {
        let cmds = pipeline.into_cmds();
        if cmds.is_empty() {
            return Ok(Vec::new());
        }
        for cmd in &cmds {
            refuse(cmd)?;
        }
        let (tx, rx) = oneshot::channel();
        self.enqueue(Request {
            payload: Payload::Many(cmds),
            tx: ReplyTx::Many(tx),
            deadline: deadline(timeout),
        })
        .await?;
        let frames = rx.await.unwrap_or(Err(Error::ConnectionClosed))?;
        Ok(frames.into_iter().map(check).collect())
    }

    async fn enqueue_when_room(&self, request: Request) -> Result<()> {
        let deadline = request.deadline;
        let send = async {
            self.tx
                .send(request)
                .await
                .map_err(|_| Error::ConnectionClosed)
        };
        match deadline {
            Some(d) => tokio::time::timeout_at(d, send)
                .await
                .unwrap_or(Err(Error::Timeout)),
            None => send.await,
        }
    }

    /// The protocol of the current socket, or `None` while reconnecting.
    ///
    /// ```no_run
    /// # fn demo(conn: keylatch_cluster::Connection) {
    /// if conn.protocol() == Some(keylatch_cluster::Negotiated::Resp3) { /* maps are maps */ }
    /// # }
    /// ```
    pub fn protocol(&self) -> Option<Negotiated> {
        match self.shared.protocol.load(Ordering::Acquire) {
            2 => Some(Negotiated::Resp2),
            3 => Some(Negotiated::Resp3),
            _ => None,
        }
    }

    /// Whether the task currently holds a live socket.
    ///
    /// ```no_run
    /// # fn demo(conn: keylatch_cluster::Connection) { let _up = conn.is_connected(); }
    /// ```
    pub fn is_connected(&self) -> bool {
        self.protocol().is_some()
    }

    /// Whether requests are waiting on a socket that has read nothing for a
    /// whole health interval (the node may be dead without a word: paused,
    /// or cut off). Cleared as soon as anything is read.
    pub(crate) fn is_stalled(&self) -> bool {
        self.shared.stalled.load(Ordering::Relaxed)
    }

    /// Whether the node looks able to answer: connected and not stalled.
    pub(crate) fn is_healthy(&self) -> bool {
        self.is_connected() && !self.is_stalled()
    }

    /// How many times the task has reconnected since it started.
    ///
    /// ```no_run
    /// # fn demo(conn: keylatch_cluster::Connection) { assert_eq!(conn.reconnects(), 0); }
    /// ```
    pub fn reconnects(&self) -> u64 {
        self.shared.reconnects.load(Ordering::Relaxed)
    }

    /// The configuration this connection was opened with.
    ///
    /// ```no_run
    /// # fn demo(conn: keylatch_cluster::Connection) { println!("{}", conn.config().addr()); }
    /// ```
    pub fn config(&self) -> &ConnectionConfig {
        &self.shared.config
    }
}

fn refuse(cmd: &Cmd) -> Result<()> {
    let name = cmd.name();
    if name.eq_ignore_ascii_case(b"CLIENT")
        && cmd
            .args()
            .nth(1)
            .is_some_and(|sub| sub.eq_ignore_ascii_case(b"REPLY"))
    {
        // CLIENT REPLY OFF/SKIP suppresses replies: every later reply would
        // be handed to the wrong caller.
        return Err(Error::InvalidCommand(
            "CLIENT REPLY is not allowed on a multiplexed connection".to_owned(),
        ));
    }
    if name.len() <= 12 && REFUSED.iter().any(|r| r.eq_ignore_ascii_case(name)) {
        return Err(Error::InvalidCommand(format!(
            "{} is not allowed on a multiplexed connection",
            String::from_utf8_lossy(name)
        )));
    }
    Ok(())
}

/// When a request sent now with `timeout` stops waiting (`None`: never, as
/// for a timeout too large to represent).
fn deadline(timeout: Option<Duration>) -> Option<tokio::time::Instant> {
    timeout.and_then(|d| tokio::time::Instant::now().checked_add(d))
}

/// The receiving end of a settled request: a reply it holds unread when
/// dropped goes to the late handler.
struct SettledRx {
    rx: Option<oneshot::Receiver<Result<Frame>>>,
    late: crate::LateReply,
}

impl Future for SettledRx {
    type Output = std::result::Result<Result<Frame>, oneshot::error::RecvError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let Some(rx) = self.rx.as_mut() else {
            return std::task::Poll::Ready(Ok(Err(Error::ConnectionClosed)));
        };
        let out = std::pin::Pin::new(rx).poll(cx);
        if out.is_ready() {
            self.rx = None;
        }
        out
    }
}

impl Drop for SettledRx {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            // Closed first: a reply sent after this fails in the driver and
            // goes to the late handler there, so none slips between the two.
            rx.close();
            if let Ok(Ok(frame)) = rx.try_recv() {
                (self.late)(frame);
            }
        }
    }
}
