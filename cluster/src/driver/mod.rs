//! The connection task: the one owner of a node's socket.
//!
//! Callers queue pre-encoded requests on a bounded channel. Each time the
//! task runs it takes every ready request into one write buffer (so concurrent
//! callers share writes and round trips: automatic pipelining), writes what
//! the socket accepts, and reads and decodes whatever has arrived, answering
//! the oldest pending request per reply. Reading never waits for writing to
//! finish. When the socket fails, every pending request is failed at once and
//! the task reconnects with backoff, failing new requests fast meanwhile.
//!
//! Request timeouts are enforced here, not by a timer per caller: each
//! request carries its deadline, and the task keeps one timer armed for the
//! earliest deadline it has taken. With one timeout for all requests the
//! deadlines arrive in order, so the timer is re-armed only when it fires
//! (then the pending queue is scanned once); a request with a shorter
//! timeout than those before it moves it earlier. Requests still in the
//! queue are bounded too: while the task cannot take more (in-flight cap or
//! write buffer full, i.e. the server is not keeping up or not answering),
//! it arms the timer at the moment it became blocked plus the configured
//! request timeout, and if it is still blocked then with callers queued, it
//! gives the connection up so they fail instead of waiting without a timer.

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use keylatch_resp::{Cmd, Decoder, Frame, Limits};
use tokio::io::AsyncWrite;
use tokio::sync::mpsc;
use tokio::time::{Instant, Sleep};

use crate::backoff::Backoff;
use crate::config::ConnectionConfig;
use crate::connection::Shared;
use crate::error::{Error, Result};
use crate::handshake::Established;
use crate::health::Health;

mod rerun;
mod timer;
use crate::push::InvalidationHandler;
use crate::reply_tx::ReplyTx;
use crate::stream::Stream;
use rerun::{is_noscript, write_unsent, Rerun};
use timer::why_lost;

/// Stop taking requests while this much is waiting to be written, so a slow
/// socket pushes back on callers instead of growing the buffer.
const WRITE_HIGH_WATER: usize = 1 << 20;
/// Most replies handed out per turn of the task; the rest wait (decoded
/// lazily, still in the read buffer) until the task runs again, behind the
/// callers it just woke. Those callers' next requests then go out while the
/// server still has work, instead of the whole batch answering, then the
/// whole batch sending, with the server idle in between: 64 tasks of lock
/// pairs on a current-thread runtime went from ~55k to ~70k pairs/s
/// (multi-thread: unchanged within noise).
const DISPATCH_BUDGET: usize = 32;
/// Smallest read: enough for many small replies per syscall.
const READ_CHUNK: usize = 16 * 1024;

/// What a request carries: one command or an explicit pipeline.
#[derive(Debug)]
pub(crate) enum Payload {
    One(Cmd),
    /// A command the sender may need again (router retries).
    Shared(Arc<Cmd>),
    Many(Vec<Cmd>),
}

/// One queued request.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) payload: Payload,
    pub(crate) tx: ReplyTx,
    /// When the caller stops waiting (`None`: never).
    pub(crate) deadline: Option<Instant>,
}

/// A request written to the socket whose replies have not all come.
struct Pending {
    /// `None` once the caller was told it timed out: the replies are still
    /// read (to keep the pairing) and dropped.
    tx: Option<ReplyTx>,
    deadline: Option<Instant>,
    /// Replies still expected (pipelines).
    remaining: usize,
    /// Replies collected so far (pipelines only; empty for single commands).
    frames: Vec<Frame>,
    /// A `Written` script command, kept to run again after a `NOSCRIPT`
    /// nobody waits for (`rerun.rs`).
    rerun: Option<Box<Rerun>>,
}

/// How long a lone timer sleeps when no request has a deadline.
const IDLE_TIMER: std::time::Duration = std::time::Duration::from_secs(86_400);

/// Why the connected phase ended.
enum Exit {
    /// Every handle is gone and nothing is pending: stop the task.
    Done,
    /// The socket failed; pending requests get this error.
    Failed(Error),
}

/// The task's state across reconnects.
pub(crate) struct Driver {
    rx: mpsc::Receiver<Request>,
    shared: Arc<Shared>,
    io: Option<Established>,
}

impl Driver {
    pub(crate) fn new(rx: mpsc::Receiver<Request>, shared: Arc<Shared>, io: Established) -> Self {
        Self {
            rx,
            shared,
            io: Some(io),
        }
    }

    /// Runs until every [`Connection`](crate::Connection) handle is dropped.
    pub(crate) async fn run(mut self) {
        let mut backoff = Backoff::new(
            self.shared.config.reconnect_min,
            self.shared.config.reconnect_max,
        );
        // The deadline timer, kept across reconnects (one allocation).
        let mut timer: Option<Pin<Box<Sleep>>> = None;
        // `Written` requests that met a reconnect unsent, their callers gone.
        let mut unsent: Vec<Request> = Vec::new();
        loop {
            let io = match self.io.take() {
                Some(io) => io,
                None => match self.reconnect(&mut backoff, &mut unsent).await {
                    Some(io) => io,
                    None => return,
                },
            };
            self.shared.set_connected(Some(io.protocol));
            if let Some(handler) = &self.shared.config.tracking {
                // A new socket tracks nothing yet: tell the holder to read again.
                handler.reset();
            }
            let mut conn = Connected::new(
                io,
                Arc::clone(&self.shared),
                self.shared.config.max_in_flight,
                self.shared.config.tracking.clone(),
                timer.take(),
            );
            conn.blocked_bound = self.shared.config.request_timeout;
            if let Some(interval) = self.shared.config.health_interval {
                let cfg = &self.shared.config;
                let bound = cfg
                    .request_timeout
                    .map_or(cfg.connect_timeout, |rt| rt.min(cfg.connect_timeout));
                conn.watch_health(Health::new(interval, bound, Instant::now()));
            }
            write_unsent(&mut conn, &mut unsent);
            let exit = poll_fn(|cx| conn.poll(cx, &mut self.rx)).await;
            self.shared.set_connected(None);
            self.shared.stalled.store(false, Ordering::Relaxed);
            match exit {
                Exit::Done => {
                    tracing::debug!(node = %self.shared.config.addr(),
                        "connection closed: every handle dropped");
                    return;
                }
                Exit::Failed(e) => {
                    log_lost(&self.shared.config, &conn, &e);
                    conn.fail_all(&e);
                }
            }
            timer = Some(conn.timer);
        }
    }

    /// Connects again, with backoff between attempts. Requests arriving
    /// meanwhile fail at once with [`Error::Disconnected`]: they were not
    /// sent, and a lock caller would rather retry or give up than wait
    /// blind. A `Written` request whose caller already left is kept in
    /// `unsent` instead, to be written once connected (nobody is there to
    /// retry it). Returns `None` when every handle is gone.
    async fn reconnect(
        &mut self,
        backoff: &mut Backoff,
        unsent: &mut Vec<Request>,
    ) -> Option<Established> {
        let io = crate::reconnect::reconnect(
            &self.shared.config,
            backoff,
            &mut self.rx,
            |req: Request| match &req.tx {
                ReplyTx::Written(tx, _) if tx.is_closed() => unsent.push(req),
                _ => req.tx.fail(Error::Disconnected),
            },
            || {},
        )
        .await?;
        let n = self.shared.reconnects.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::info!(node = %self.shared.config.addr(), reconnects = n, "reconnected");
        Some(io)
    }
}

/// The connected phase: socket, buffers and the FIFO of pending replies.
struct Connected {
    stream: Stream,
    rbuf: BytesMut,
    wbuf: BytesMut,
    decoder: Decoder,
    pending: VecDeque<Pending>,
    max_in_flight: usize,
    rx_closed: bool,
    /// Counted by `dispatch`: replies handed out since `poll` last looked.
    answered_since_poll: usize,
    tracking: Option<InvalidationHandler>,
    /// Fires at `timer_at`: the earliest deadline taken since it last fired.
    timer: Pin<Box<Sleep>>,
    timer_at: Option<Instant>,
    /// How long the task may stay unable to take queued requests before it
    /// gives the connection up (the configured request timeout).
    blocked_bound: Option<std::time::Duration>,
    /// While unable to take requests: when that becomes too long.
    blocked_until: Option<Instant>,
    /// Replies handed out in this turn (see [`DISPATCH_BUDGET`]).
    handed_out: usize,
    /// The health check, when on.
    health: Option<Health>,
    /// Whether this task last told the handles the socket is stalled.
    stalled: bool,
    /// A `READONLY` reply came: the node was demoted (a standalone server
    /// turned replica, or a name that now points elsewhere). Nothing more is
    /// taken; once the pending replies are in, the connection is given up
    /// and made again.
    demoted: bool,
    /// Through sentinels: their switch count at connect (`check_switch`).
    sentinel_epoch: Option<u64>,
    shared: Arc<Shared>,
}

impl Connected {
    fn new(
        io: Established,
        shared: Arc<Shared>,
        max_in_flight: usize,
        tracking: Option<InvalidationHandler>,
        timer: Option<Pin<Box<Sleep>>>,
    ) -> Self {
        let mut rbuf = io.read_buf;
        rbuf.reserve(READ_CHUNK);
        Self {
            sentinel_epoch: io.sentinel_epoch,
            stream: io.stream,
            rbuf,
            wbuf: BytesMut::with_capacity(READ_CHUNK),
            decoder: Decoder::new(Limits::default()),
            pending: VecDeque::with_capacity(64),
            max_in_flight: max_in_flight.max(1),
            rx_closed: false,
            answered_since_poll: 0,
            tracking,
            timer: timer
                .unwrap_or_else(|| Box::pin(tokio::time::sleep_until(Instant::now() + IDLE_TIMER))),
            timer_at: None,
            blocked_bound: None,
            blocked_until: None,
            handed_out: 0,
            health: None,
            stalled: false,
            demoted: false,
            shared,
        }
    }

    /// One turn of the loop: take requests, write, read; repeat while any of
    /// them made progress, so the task parks only when all three would block.
    fn poll(&mut self, cx: &mut Context<'_>, rx: &mut mpsc::Receiver<Request>) -> Poll<Exit> {
        if let Some(e) = self.check_switch() {
            return Poll::Ready(Exit::Failed(e));
        }
        let mut answered = 0usize;
        self.handed_out = 0;
        loop {
            let mut progress = self.take_requests(cx, rx);
            match self.write(cx) {
                Ok(p) => progress |= p,
                Err(e) => return Poll::Ready(Exit::Failed(e)),
            }
            match self.read(cx) {
                Ok(Some(_)) => progress = true,
                Ok(None) => {}
                Err(e) => return Poll::Ready(Exit::Failed(e)),
            }
            answered += self.answered_since_poll;
            self.answered_since_poll = 0;
            if self.timer_at.is_some() && self.timer.as_mut().poll(cx).is_ready() {
                if let Some(e) = self.expire(rx) {
                    return Poll::Ready(Exit::Failed(e));
                }
                progress = true;
            }
            if self.rx_closed && self.pending.is_empty() && self.wbuf.is_empty() {
                return Poll::Ready(Exit::Done);
            }
            // Demoted: reconnect once no caller waits on this socket any
            // more (replies nobody waits for are not worth the wait).
            if self.demoted && self.wbuf.is_empty() && self.pending.iter().all(|p| p.tx.is_none()) {
                return Poll::Ready(Exit::Failed(Error::Disconnected));
            }
            if !progress {
                // Replies left in the buffer by the budget need another turn.
                let more = self.handed_out >= DISPATCH_BUDGET;
                if more
                    || (!self.rx_closed
                        && (answered > 1 || (answered == 1 && !self.pending.is_empty())))
                {
                    // Several callers were just answered: they are queued to
                    // run on this worker and will each send a request. Parked,
                    // the task would be woken by the first of them (straight
                    // into the runtime's LIFO slot) and write one request per
                    // syscall. Waking itself now queues it behind them
                    // instead, so their requests go out in one write. A lone
                    // sequential caller skips this: the yield would only add
                    // a scheduler round trip to its latency.
                    cx.waker().wake_by_ref();
                }
                return Poll::Pending;
            }
        }
    }

    /// Encodes one request into the write buffer and queues its pending
    /// entry (a request whose caller already left is dropped unsent).
    fn take(&mut self, req: Request) {
        if req.tx.is_closed() {
            return;
        }
        if let Some(h) = &mut self.health {
            h.took();
        }
        if let Some(d) = req.deadline {
            // Deadlines of one timeout arrive in order: the
            // timer moves only for an earlier one.
            if self.timer_at.map_or(true, |at| d < at) {
                self.timer_at = Some(d);
                self.timer.as_mut().reset(d);
            }
        }
        let remaining = match &req.payload {
            Payload::One(cmd) => {
                cmd.encode(&mut self.wbuf);
                1
            }
            Payload::Shared(cmd) => {
                cmd.encode(&mut self.wbuf);
                1
            }
            Payload::Many(cmds) => {
                self.wbuf.reserve(cmds.iter().map(Cmd::encoded_len).sum());
                for cmd in cmds {
                    cmd.encode(&mut self.wbuf);
                }
                cmds.len()
            }
        };
        let frames = match &req.tx {
            ReplyTx::Many(_) => Vec::with_capacity(remaining),
            _ => Vec::new(),
        };
        let rerun = Rerun::keep(&req.tx, req.payload);
        self.pending.push_back(Pending {
            tx: Some(req.tx),
            deadline: req.deadline,
            remaining,
            frames,
            rerun,
        });
    }

    /// Moves every ready request into the write buffer (while under the
    /// in-flight and buffer caps). A request whose caller already left is
    /// dropped unsent.
    fn take_requests(&mut self, cx: &mut Context<'_>, rx: &mut mpsc::Receiver<Request>) -> bool {
        let mut progress = false;
        while !self.rx_closed
            && !self.demoted
            && self.pending.len() < self.max_in_flight
            && self.wbuf.len() < WRITE_HIGH_WATER
        {
            // try_recv first: it does not spend tokio's cooperative budget,
            // which would cap one write at 128 requests; poll_recv only
            // when the queue looks empty, to register for the next one.
            let next = match rx.try_recv() {
                Ok(req) => Poll::Ready(Some(req)),
                Err(mpsc::error::TryRecvError::Disconnected) => Poll::Ready(None),
                Err(mpsc::error::TryRecvError::Empty) => rx.poll_recv(cx),
            };
            match next {
                Poll::Ready(Some(req)) => {
                    progress = true;
                    self.take(req);
                }
                Poll::Ready(None) => {
                    self.rx_closed = true;
                    progress = true;
                }
                Poll::Pending => break,
            }
        }
        self.note_blocked();
        progress
    }

    fn write(&mut self, cx: &mut Context<'_>) -> Result<bool> {
        let mut progress = false;
        while !self.wbuf.is_empty() {
            match Pin::new(&mut self.stream).poll_write(cx, &self.wbuf) {
                Poll::Ready(Ok(0)) => {
                    return Err(Error::io(std::io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => {
                    self.wbuf.advance(n);
                    progress = true;
                }
                Poll::Ready(Err(e)) => return Err(Error::io(e)),
                Poll::Pending => break,
            }
        }
        if self.wbuf.is_empty() {
            // TLS may hold encrypted bytes the socket did not take yet;
            // Pending registers for write readiness so they go out. For
            // TCP this returns at once without a syscall.
            if let Poll::Ready(Err(e)) = Pin::new(&mut self.stream).poll_flush(cx) {
                return Err(Error::io(e));
            }
        }
        Ok(progress)
    }

    /// Reads and dispatches what has arrived; `Some(())` when anything did.
    fn read(&mut self, cx: &mut Context<'_>) -> Result<Option<()>> {
        let mut progress = false;
        loop {
            loop {
                if self.handed_out >= DISPATCH_BUDGET {
                    return Ok(progress.then_some(()));
                }
                let Some(frame) = self.decoder.decode(&mut self.rbuf)? else {
                    break;
                };
                self.handed_out += 1;
                self.dispatch(frame)?;
                progress = true;
            }
            let want = self.decoder.needed().max(READ_CHUNK);
            if self.rbuf.capacity() - self.rbuf.len() < want {
                self.rbuf.reserve(want);
            }
            match tokio_util::io::poll_read_buf(Pin::new(&mut self.stream), cx, &mut self.rbuf) {
                Poll::Ready(Ok(0)) => return Err(Error::ConnectionClosed),
                Poll::Ready(Ok(_)) => {
                    progress = true;
                    if let Some(h) = &mut self.health {
                        h.read();
                    }
                    if self.stalled {
                        // Only on the stalled → answering change, never per read.
                        self.stalled = false;
                        self.shared.stalled.store(false, Ordering::Relaxed);
                        tracing::info!(node = %self.shared.config.addr(),
                            "node answering again");
                    }
                }
                Poll::Ready(Err(e)) => return Err(Error::io(e)),
                Poll::Pending => return Ok(progress.then_some(())),
            }
        }
    }

    /// Hands one reply to the oldest pending request.
    fn dispatch(&mut self, frame: Frame) -> Result<()> {
        self.answered_since_poll += 1;
        // Classified by what the frame is, attributes or not (`value`); the
        // caller gets it as received.
        if let Frame::Push(_) = frame.value() {
            // RESP3 out-of-band data is not a reply. Invalidations go to the
            // tracking handler (non-blocking by contract); this connection
            // never subscribes, so anything else has nobody to go to.
            self.answered_since_poll -= 1;
            if let Some(handler) = &self.tracking {
                handler.handle(frame.value());
            }
            return Ok(());
        }
        if let Frame::Error(msg) = frame.value() {
            // By kind, not first word: Redis 6.2 wraps a script's READONLY
            // in its own ERR (`error::kind_of`).
            if crate::error::kind_of(msg) == crate::error::ServerErrorKind::ReadOnly {
                self.demoted = true;
            }
        }
        let Some(front) = self.pending.front_mut() else {
            return Err(Error::UnexpectedReply(format!(
                "reply with no request pending: {frame}"
            )));
        };
        front.remaining -= 1;
        if front.remaining > 0 {
            if let Some(ReplyTx::Many(_)) = front.tx {
                front.frames.push(frame);
            }
            return Ok(());
        }
        if let Some(p) = self.pending.pop_front() {
            // Caller gone or timed out: the replies were read, nothing else
            // to do.
            match p.tx {
                Some(ReplyTx::Many(tx)) => {
                    let mut frames = p.frames;
                    frames.push(frame);
                    drop(tx.send(Ok(frames)));
                }
                Some(ReplyTx::One(tx)) => drop(tx.send(Ok(frame))),
                Some(ReplyTx::Written(tx, _)) => {
                    let noscript = is_noscript(&frame);
                    if tx.send(Ok(frame)).is_err() && noscript {
                        self.rerun(p.rerun);
                    }
                }
                Some(ReplyTx::Settle(tx, late)) => {
                    // The caller left after the request was written.
                    if let Err(Ok(frame)) = tx.send(Ok(frame)) {
                        late(frame);
                    }
                }
                Some(ReplyTx::Late(late)) => late(frame),
                // Timed out: a `Written` command's `NOSCRIPT` is healed here.
                None if is_noscript(&frame) => self.rerun(p.rerun),
                None => {}
            }
        }
        Ok(())
    }

    /// Fails every pending request with the socket's error.
    fn fail_all(&mut self, e: &Error) {
        for p in self.pending.drain(..) {
            if let Some(tx) = p.tx {
                tx.fail(e.clone());
            }
        }
        self.timer_at = None;
        self.blocked_until = None;
        self.wbuf.clear();
        self.rbuf.clear();
        self.decoder.reset();
    }
}

/// Why the old connection died, and what it cost: the requests written and
/// unanswered, which fail with `e`.
fn log_lost(config: &ConnectionConfig, conn: &Connected, e: &Error) {
    let reason = if conn.demoted && conn.sentinel_epoch.is_some() {
        "READONLY reply or +switch-master: the sentinels name another master"
    } else if conn.demoted {
        "READONLY reply: the node was demoted to replica"
    } else {
        why_lost(e)
    };
    tracing::warn!(
        node = %config.addr(),
        reason,
        error = %e,
        pending = conn.pending.iter().filter(|p| p.tx.is_some()).count(),
        "connection lost; reconnecting"
    );
}
