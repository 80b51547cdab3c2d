//! The subscriber socket task: the one owner of a node's pub/sub socket.
//!
//! Each turn it takes every queued request from handles and dropped
//! subscriptions into the [`Registry`], asks the registry what to write
//! (expired lingers as UNSUBSCRIBE, new names as batched SUBSCRIBE), writes
//! what the socket accepts, and reads and routes whatever arrived. Delivery
//! is a non-blocking push into each listener's bounded queue, so a slow
//! listener never holds up the reader or the other listeners.
//!
//! When the socket fails, the registry forgets the server's state, the task
//! reconnects with [`Backoff`] (still taking requests meanwhile), and the
//! first write on the new socket subscribes every name that has listeners.
//! Their listeners get [`Event::Gap`] once each name is live again.
//!
//! A node of a cluster hub (one with a [`Link`](super::hub::Link)) hands
//! shard channels back to the hub instead of failing or resubscribing them
//! here when the node answers `MOVED` or drops them on its own, hands back
//! what a `Control::Retain` rejects, and reports its connection going down.

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use keylatch_resp::{Cmd, Decoder, Frame, Limits};
use tokio::io::AsyncWrite;
use tokio::sync::mpsc::{self, error::TryRecvError};
use tokio::time::{Instant, Sleep};

use super::hub::{Control, Shared, Why};
use super::message::{classify, Event, Incoming, SubscriptionKind};
use super::registry::{Op, Planned, Registry};
use crate::backoff::Backoff;
use crate::error::{Error, RetryClass, ServerError, ServerErrorKind};
use crate::handshake::Established;
use crate::stream::Stream;

/// Smallest read: room for many small messages per syscall.
const READ_CHUNK: usize = 16 * 1024;

/// A command written and not yet fully answered, oldest first. Replies come
/// in command order, so the front tells which command an error reply belongs
/// to, and whether an unsubscribe confirmation was asked for or sent by the
/// server on its own.
#[derive(Debug)]
enum InFlight {
    /// (P|S)(UN)SUBSCRIBE: one confirmation per name, in argument order.
    Names {
        op: Op,
        kind: SubscriptionKind,
        names: Vec<Bytes>,
        next: usize,
    },
    /// The health-check PING.
    Ping,
}

/// Why the connected phase ended.
enum Exit {
    /// Every handle and subscription is gone: stop.
    Done,
    /// The socket failed (or stopped answering PING): reconnect.
    Failed,
}

/// The task's state across reconnects.
pub(crate) struct Task {
    control: mpsc::UnboundedReceiver<Control>,
    shared: Arc<Shared>,
    registry: Registry,
    io: Option<Established>,
}

impl Task {
    pub(crate) fn new(
        control: mpsc::UnboundedReceiver<Control>,
        shared: Arc<Shared>,
        io: Option<Established>,
    ) -> Self {
        let registry = Registry::new(shared.config.linger);
        Self {
            control,
            shared,
            registry,
            io,
        }
    }

    /// Runs until every handle and every subscription is dropped.
    pub(crate) async fn run(mut self) {
        let mut backoff = Backoff::new(
            self.shared.connection.reconnect_min,
            self.shared.connection.reconnect_max,
        );
        // A lazily started task has not connected yet: its first connection
        // is no reconnect.
        let mut first = self.io.is_none();
        loop {
            let io = match self.io.take() {
                Some(io) => io,
                None => match self.reconnect(&mut backoff, !first).await {
                    Some(io) => io,
                    None => break,
                },
            };
            first = false;
            self.shared.set_connected(true);
            let mut conn = Connected::new(io, Arc::clone(&self.shared));
            let exit = poll_fn(|cx| conn.poll(cx, &mut self.control, &mut self.registry)).await;
            self.shared.set_connected(false);
            match exit {
                Exit::Done => break,
                Exit::Failed => {
                    self.registry.disconnected();
                    tracing::warn!(
                        node = %self.shared.connection.addr(),
                        reason = %conn.why,
                        names = self.registry.queued(),
                        "pub/sub connection lost; reconnecting to resubscribe"
                    );
                    self.shared.notify_down();
                }
            }
        }
        self.registry.close_all();
    }

    /// Connects again, with backoff between failed attempts. Requests keep
    /// being taken meanwhile: a `subscribe` during a blip waits for the
    /// reconnect (bounded by its own timeout) instead of failing at once.
    /// Returns `None` when every handle and subscription is gone.
    async fn reconnect(&mut self, backoff: &mut Backoff, count: bool) -> Option<Established> {
        let shared = Arc::clone(&self.shared);
        let registry = &mut self.registry;
        let io = crate::reconnect::reconnect(
            &shared.connection,
            backoff,
            &mut self.control,
            |c| apply(registry, &shared, c, Instant::now()),
            // Still down: in a cluster, maybe for good (a dead master whose
            // replica takes over); the hub keeps checking.
            || shared.notify_down(),
        )
        .await?;
        if count {
            shared.count_reconnect();
            tracing::info!(node = %shared.connection.addr(), names = self.registry.queued(),
                "pub/sub reconnected; resubscribing");
        }
        Some(io)
    }
}

/// The command name of `op` for `kind` (`SUBSCRIBE`, `SUNSUBSCRIBE`, …).
fn op_command(op: Op, kind: SubscriptionKind) -> &'static str {
    match op {
        Op::Subscribe => kind.subscribe_command(),
        Op::Unsubscribe => kind.unsubscribe_command(),
    }
}

/// Applies one request to the registry; names a `Retain` rejects go back to
/// the cluster hub.
fn apply(registry: &mut Registry, shared: &Shared, control: Control, now: Instant) {
    match control {
        Control::Retain(keep) => {
            let moving = registry.retain(|kind, name| keep.keeps(kind, name), now);
            shared.hand_off(Why::Retained, moving);
        }
        other => registry.apply(other, now),
    }
}

/// The connected phase: socket, buffers, commands awaiting answers, timers.
struct Connected {
    shared: Arc<Shared>,
    stream: Stream,
    rbuf: BytesMut,
    wbuf: BytesMut,
    decoder: Decoder,
    inflight: VecDeque<InFlight>,
    linger: Pin<Box<Sleep>>,
    /// The deadline `linger` is set to, if it is armed.
    linger_armed: Option<Instant>,
    ping: Option<(Duration, Pin<Box<Sleep>>)>,
    ping_outstanding: bool,
    /// Why the connection was given up, for the `connection lost` event
    /// (set only on that path).
    why: String,
}

impl Connected {
    fn new(io: Established, shared: Arc<Shared>) -> Self {
        let mut rbuf = io.read_buf;
        rbuf.reserve(READ_CHUNK);
        let now = Instant::now();
        let ping_interval = shared.config.ping_interval;
        Self {
            shared,
            stream: io.stream,
            rbuf,
            wbuf: BytesMut::with_capacity(4096),
            decoder: Decoder::new(Limits::default()),
            inflight: VecDeque::new(),
            linger: Box::pin(tokio::time::sleep_until(now)),
            linger_armed: None,
            ping: ping_interval.map(|d| {
                (
                    d,
                    Box::pin(tokio::time::sleep_until(crate::clock::later(now, d))),
                )
            }),
            ping_outstanding: false,
            why: String::new(),
        }
    }

    /// One turn: requests, plan, timers, write, read; repeated while any of
    /// them made progress, so the task parks only when all would wait.
    fn poll(
        &mut self,
        cx: &mut Context<'_>,
        control: &mut mpsc::UnboundedReceiver<Control>,
        registry: &mut Registry,
    ) -> Poll<Exit> {
        loop {
            let mut progress = false;
            let now = Instant::now();
            // Take everything queued first, so that subscribe() calls made
            // together share one command and one write. `try_recv` first:
            // `poll_recv` spends tokio's cooperative budget (128 per poll),
            // which would cut a burst of requests into many commands; it is
            // only called once the queue looks empty, to register the waker.
            loop {
                let c = match control.try_recv() {
                    Ok(c) => c,
                    Err(TryRecvError::Empty) => match control.poll_recv(cx) {
                        Poll::Ready(Some(c)) => c,
                        Poll::Ready(None) => return Poll::Ready(Exit::Done),
                        Poll::Pending => break,
                    },
                    // Nobody can listen any more; closing the socket
                    // unsubscribes everything.
                    Err(TryRecvError::Disconnected) => return Poll::Ready(Exit::Done),
                };
                apply(registry, &self.shared, c, now);
                progress = true;
            }
            for planned in registry.plan(now) {
                self.encode(planned);
                progress = true;
            }
            progress |= self.poll_linger(cx, registry.next_deadline());
            match self.poll_ping(cx) {
                Ok(p) => progress |= p,
                Err(()) => return Poll::Ready(Exit::Failed),
            }
            match self.write(cx) {
                Ok(p) => progress |= p,
                Err(()) => return Poll::Ready(Exit::Failed),
            }
            match self.read(cx, registry) {
                Ok(p) => progress |= p,
                Err(()) => return Poll::Ready(Exit::Failed),
            }
            if !progress {
                return Poll::Pending;
            }
        }
    }

    fn encode(&mut self, planned: Planned) {
        let Planned { op, kind, names } = planned;
        let command = op_command(op, kind);
        // One event per command (up to 1,024 names), not per name: a burst
        // of waiters subscribing together is one line.
        tracing::debug!(
            node = %self.shared.connection.addr(),
            command,
            names = names.len(),
            first = %names.first().map(|n| String::from_utf8_lossy(n)).unwrap_or_default(),
            "pub/sub"
        );
        let bytes = names.iter().map(|n| n.len() + 16).sum();
        let mut cmd = Cmd::with_capacity(command, bytes);
        for name in &names {
            // A shard channel hashes to a slot like a key does.
            match kind {
                SubscriptionKind::Shard => cmd.push_key(name),
                _ => cmd.push_arg(name),
            }
        }
        cmd.encode(&mut self.wbuf);
        self.inflight.push_back(InFlight::Names {
            op,
            kind,
            names,
            next: 0,
        });
    }

    /// Keeps the linger timer on the registry's next deadline; `true` when it
    /// fired (the next turn's plan unsubscribes what expired).
    fn poll_linger(&mut self, cx: &mut Context<'_>, deadline: Option<Instant>) -> bool {
        let Some(deadline) = deadline else {
            self.linger_armed = None;
            return false;
        };
        if self.linger_armed != Some(deadline) {
            self.linger.as_mut().reset(deadline);
            self.linger_armed = Some(deadline);
        }
        if self.linger.as_mut().poll(cx).is_ready() {
            self.linger_armed = None;
            return true;
        }
        false
    }

    /// Sends a PING every interval; a PING still unanswered when the next is
    /// due means the connection is dead (a half-open socket reads nothing and
    /// never fails on its own).
    fn poll_ping(&mut self, cx: &mut Context<'_>) -> std::result::Result<bool, ()> {
        let Some((interval, sleep)) = self.ping.as_mut() else {
            return Ok(false);
        };
        if sleep.as_mut().poll(cx).is_pending() {
            return Ok(false);
        }
        if self.ping_outstanding {
            "PING unanswered for a whole interval".clone_into(&mut self.why);
            return Err(());
        }
        let next = crate::clock::later(Instant::now(), *interval);
        sleep.as_mut().reset(next);
        Cmd::new("PING").encode(&mut self.wbuf);
        self.inflight.push_back(InFlight::Ping);
        self.ping_outstanding = true;
        Ok(true)
    }

    fn write(&mut self, cx: &mut Context<'_>) -> std::result::Result<bool, ()> {
        let mut progress = false;
        while !self.wbuf.is_empty() {
            match Pin::new(&mut self.stream).poll_write(cx, &self.wbuf) {
                Poll::Ready(Ok(0)) => {
                    "write failed: socket closed".clone_into(&mut self.why);
                    return Err(());
                }
                Poll::Ready(Err(e)) => {
                    self.why = format!("write failed: {e}");
                    return Err(());
                }
                Poll::Ready(Ok(n)) => {
                    self.wbuf.advance(n);
                    progress = true;
                }
                Poll::Pending => break,
            }
        }
        if self.wbuf.is_empty() {
            // TLS may hold encrypted bytes back (see `stream.rs`); a no-op
            // for TCP.
            if let Poll::Ready(Err(e)) = Pin::new(&mut self.stream).poll_flush(cx) {
                self.why = format!("write failed: {e}");
                return Err(());
            }
        }
        Ok(progress)
    }

    /// Reads and routes what has arrived; `Ok(true)` when anything did.
    fn read(
        &mut self,
        cx: &mut Context<'_>,
        registry: &mut Registry,
    ) -> std::result::Result<bool, ()> {
        let mut progress = false;
        loop {
            loop {
                match self.decoder.decode(&mut self.rbuf) {
                    Ok(Some(frame)) => {
                        self.dispatch(frame, registry)?;
                        progress = true;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        self.why = format!("the server sent invalid RESP: {e}");
                        return Err(());
                    }
                }
            }
            let want = self.decoder.needed().max(READ_CHUNK);
            if self.rbuf.capacity() - self.rbuf.len() < want {
                self.rbuf.reserve(want);
            }
            match tokio_util::io::poll_read_buf(Pin::new(&mut self.stream), cx, &mut self.rbuf) {
                Poll::Ready(Ok(0)) => {
                    "the server closed the connection".clone_into(&mut self.why);
                    return Err(());
                }
                Poll::Ready(Err(e)) => {
                    self.why = format!("read failed: {e}");
                    return Err(());
                }
                Poll::Ready(Ok(_)) => progress = true,
                Poll::Pending => return Ok(progress),
            }
        }
    }

    /// Routes one frame: a message to its listeners, a confirmation to its
    /// registry entry (by name), an error to the command it answers.
    fn dispatch(&mut self, frame: Frame, registry: &mut Registry) -> std::result::Result<(), ()> {
        match classify(frame) {
            Incoming::Message {
                kind,
                channel,
                pattern,
                payload,
            } => {
                // Pattern listeners are registered under the pattern.
                let name = pattern.as_ref().unwrap_or(&channel).clone();
                registry.deliver(
                    kind,
                    &name,
                    Event::Message {
                        channel,
                        pattern,
                        payload,
                    },
                );
            }
            Incoming::Confirm {
                kind,
                subscribed,
                name,
            } => {
                let op = if subscribed {
                    Op::Subscribe
                } else {
                    Op::Unsubscribe
                };
                if self.take_confirmation(op, kind, &name) {
                    registry.confirmed(kind, &name);
                } else if !subscribed && self.relocates(kind) {
                    let moving = registry.dropped(kind, &name);
                    self.shared
                        .hand_off(Why::Dropped, moving.into_iter().collect());
                } else if !subscribed {
                    registry.server_dropped(kind, &name);
                }
                // A subscribe confirmation nobody asked for cannot happen
                // (the server subscribes only on request); ignore it.
            }
            Incoming::Pong => {
                if let Some(InFlight::Ping) = self.inflight.front() {
                    self.inflight.pop_front();
                    self.ping_outstanding = false;
                }
            }
            Incoming::Error(line) => {
                let err = Error::Server(ServerError::parse(line));
                self.refused(err, registry)?;
            }
            Incoming::Other => {}
        }
        Ok(())
    }

    /// An error reply: the refusal of the command in flight (its names fail
    /// or move to another node), or, for a PING or nothing in flight, a
    /// connection in a state this task does not know (`Err`: reconnect).
    fn refused(&mut self, err: Error, registry: &mut Registry) -> std::result::Result<(), ()> {
        match self.inflight.pop_front() {
            Some(InFlight::Names {
                op,
                kind,
                names,
                next,
            }) => {
                let names = names.get(next..).unwrap_or_default();
                match self.relocation(op, kind, &err) {
                    Some(why) => {
                        let moving = names.iter().filter_map(|n| registry.refused(kind, n));
                        self.shared.hand_off(why, moving.collect());
                    }
                    None => {
                        tracing::warn!(
                            node = %self.shared.connection.addr(),
                            command = op_command(op, kind),
                            names = names.len(),
                            error = %err,
                            "pub/sub command refused"
                        );
                        for name in names {
                            registry.failed(kind, name, op, &err);
                        }
                    }
                }
            }
            // PING refused, or an error nobody asked for: the
            // connection is in a state this task does not know.
            Some(InFlight::Ping) | None => {
                self.why = format!("unexpected error reply: {err}");
                return Err(());
            }
        }
        Ok(())
    }

    /// Whether this node hands `kind` back to a cluster hub rather than
    /// keeping it through refusals and server-side drops: shard channels
    /// belong to their slot's master, which may be another node now.
    fn relocates(&self, kind: SubscriptionKind) -> bool {
        kind == SubscriptionKind::Shard && self.shared.link.is_some()
    }

    /// Where the names of a refused subscribe go: `None` to fail them
    /// (e.g. `NOPERM`), otherwise back to the cluster hub, to the node a
    /// `MOVED` names or to be tried again after a transient refusal.
    fn relocation(&self, op: Op, kind: SubscriptionKind, err: &Error) -> Option<Why> {
        if op != Op::Subscribe || !self.relocates(kind) {
            return None;
        }
        let server = err.as_server_error()?;
        match (server.redirect(), server.kind().retry_class()) {
            (Some((slot, addr)), _) if server.kind() == ServerErrorKind::Moved => {
                Some(Why::Moved {
                    slot,
                    addr: addr.to_owned(),
                })
            }
            // ASK (not expected: a migrating slot's shard channels stay on
            // the source until the slot moves) or a transient state.
            (_, RetryClass::Redirect | RetryClass::AfterBackoff) => Some(Why::Retry),
            _ => None,
        }
    }

    /// Whether a confirmation answers the oldest command in flight (and
    /// counts it if so). Confirmations reach the registry by name; this only
    /// tells asked-for answers from unsubscribes the server sent on its own.
    fn take_confirmation(&mut self, op: Op, kind: SubscriptionKind, name: &[u8]) -> bool {
        let Some(InFlight::Names {
            op: want_op,
            kind: want_kind,
            names,
            next,
        }) = self.inflight.front_mut()
        else {
            return false;
        };
        if *want_op != op || *want_kind != kind || names.get(*next).map(|n| &n[..]) != Some(name) {
            return false;
        }
        *next += 1;
        if *next == names.len() {
            self.inflight.pop_front();
        }
        true
    }
}
