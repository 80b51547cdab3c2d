//! Opening a socket (TCP, or TLS for `rediss://`: see `stream.rs`) and the
//! connection handshake (HELLO 3 or the RESP2 path).
//!
//! Runs before the connection task takes the socket over, as a plain
//! request/response exchange: nothing else can be in flight yet.

use std::fmt::Write as _;

use bytes::BytesMut;
use keylatch_resp::{Cmd, Decoder, Frame, Limits, ProtocolError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::{ConnectionConfig, Negotiated, Protocol};
use crate::error::{Error, Result, ServerErrorKind};
use crate::reply::check;
use crate::stream::Stream;

/// A socket that has completed the handshake, with any bytes read past it.
#[derive(Debug)]
pub(crate) struct Established {
    pub(crate) stream: Stream,
    pub(crate) read_buf: BytesMut,
    pub(crate) protocol: Negotiated,
    /// For a master found through sentinels: their `+switch-master` count
    /// before it was asked for (a later switch means this socket is stale).
    pub(crate) sentinel_epoch: Option<u64>,
}

/// Connects and runs the handshake within `cfg.connect_timeout`.
///
/// Every connect and reconnect passes here, so this is where an operator
/// sees them: `connected` at info (address, protocol, how the handshake
/// went, never a credential), `connect failed` at warn with the step that
/// failed and why.
pub(crate) async fn establish(cfg: &ConnectionConfig) -> Result<Established> {
    establish_logged(cfg, true).await
}

/// [`establish`], its failure logged at warn only when `warn` (else at
/// debug): a reconnect loop warns on some attempts, not on every one of
/// an outage that lasts.
pub(crate) async fn establish_logged(cfg: &ConnectionConfig, warn: bool) -> Result<Established> {
    match &cfg.sentinel {
        Some(sentinels) => crate::sentinel::resolve::establish_master(cfg, sentinels, warn).await,
        None => establish_direct(cfg, warn, false).await,
    }
}

/// Connects to `cfg`'s own address (never through sentinels), and with
/// `must_be_master` checks that the node says it is the master (`ROLE`).
pub(crate) async fn establish_direct(
    cfg: &ConnectionConfig,
    warn: bool,
    must_be_master: bool,
) -> Result<Established> {
    let started = std::time::Instant::now();
    let mut step = Step::Connect;
    let inner = establish_inner(cfg, &mut step, must_be_master);
    let outcome = tokio::time::timeout(cfg.connect_timeout, inner).await;
    let result = match outcome {
        Ok(r) => r,
        // Which step was still waiting: the connection itself, or a
        // server that accepted it and never answered (a stopped
        // process, a port that serves something else).
        Err(_) => Err(Error::io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "connect to {} timed out after {:?}: {}",
                cfg.addr(),
                cfg.connect_timeout,
                match step {
                    Step::Connect => "no connection was made",
                    Step::Tls => {
                        "the TCP connection was made but the TLS handshake did not complete \
                         (does the port serve TLS?)"
                    }
                    _ => "the server accepted the connection but did not answer the handshake",
                }
            ),
        ))),
    };
    match &result {
        Ok(io) => tracing::info!(
            node = %cfg.addr(),
            tls = cfg.tls.is_some(),
            protocol = match io.protocol {
                Negotiated::Resp2 => 2u8,
                Negotiated::Resp3 => 3u8,
            },
            handshake = step.label(),
            auth = auth_label(cfg),
            db = cfg.db,
            took_ms = elapsed_ms(started),
            "connected"
        ),
        // The error says what the server or the socket said; the address
        // is host:port only, and no command's arguments (AUTH's password)
        // are ever part of an error.
        Err(e) if warn => tracing::warn!(
            node = %cfg.addr(),
            step = step.label(),
            error = %e,
            took_ms = elapsed_ms(started),
            "connect failed"
        ),
        Err(e) => tracing::debug!(
            node = %cfg.addr(),
            step = step.label(),
            error = %e,
            took_ms = elapsed_ms(started),
            "connect failed"
        ),
    }
    result
}

/// How far a connect got: the step that failed, or how the handshake went.
#[derive(Clone, Copy)]
enum Step {
    /// TCP connect.
    Connect,
    /// TCP connected; the TLS handshake under way.
    Tls,
    /// `HELLO 3` (with AUTH and SETNAME) sent.
    Hello,
    /// HELLO answered; SELECT / CLIENT TRACKING after it.
    HelloSetup,
    /// HELLO done, nothing after it.
    HelloDone,
    /// HELLO refused as unknown: AUTH / SELECT / SETNAME the RESP2 way.
    Resp2Fallback,
    /// RESP2 asked for: AUTH / SELECT / SETNAME.
    Resp2,
}

impl Step {
    fn label(self) -> &'static str {
        match self {
            Step::Connect => "connect",
            Step::Tls => "TLS handshake",
            Step::Hello => "HELLO 3",
            Step::HelloSetup => "HELLO 3, then SELECT/CLIENT TRACKING",
            Step::HelloDone => "HELLO 3",
            Step::Resp2Fallback => "HELLO refused, RESP2 AUTH/SELECT/SETNAME",
            Step::Resp2 => "RESP2 AUTH/SELECT/SETNAME",
        }
    }
}

/// Which credentials were presented (never the credentials).
fn auth_label(cfg: &ConnectionConfig) -> &'static str {
    match (&cfg.username, &cfg.password) {
        (_, None) => "none",
        (None, Some(_)) => "password",
        (Some(_), Some(_)) => "user and password",
    }
}

fn elapsed_ms(since: std::time::Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

async fn establish_inner(
    cfg: &ConnectionConfig,
    step: &mut Step,
    must_be_master: bool,
) -> Result<Established> {
    let tcp = Stream::tcp(cfg).await?;
    if cfg.tls.is_some() {
        *step = Step::Tls;
    }
    let stream = Stream::over(cfg, tcp).await?;
    let mut ex = Exchange {
        stream,
        buf: BytesMut::with_capacity(4096),
        decoder: Decoder::new(Limits::default()),
        cfg,
    };
    let protocol = match cfg.protocol {
        Protocol::Resp2 => {
            *step = Step::Resp2;
            resp2_setup(&mut ex, cfg).await?;
            Negotiated::Resp2
        }
        Protocol::Auto | Protocol::Resp3 => {
            *step = Step::Hello;
            let reply = ex.round_trip(&[hello(cfg)]).await?;
            match reply.into_iter().next().map(check) {
                Some(Ok(f)) if matches!(f.value(), Frame::Map(_) | Frame::Array(_)) => {
                    let mut setup = Vec::with_capacity(2);
                    if cfg.db != 0 {
                        setup.push(select(cfg.db));
                    }
                    if cfg.tracking.is_some() {
                        // NOLOOP: our own writes (acquire, renew, release)
                        // must not invalidate what we track.
                        let mut on = Cmd::new("CLIENT").arg("TRACKING").arg("ON").arg("NOLOOP");
                        if cfg.tracking_optin {
                            on = on.arg("OPTIN");
                        }
                        setup.push(on);
                    }
                    if !setup.is_empty() {
                        *step = Step::HelloSetup;
                        expect_ok(ex.round_trip(&setup).await?)?;
                    } else {
                        *step = Step::HelloDone;
                    }
                    Negotiated::Resp3
                }
                Some(Err(e))
                    if cfg.protocol == Protocol::Auto
                        && matches!(
                            e.server_kind(),
                            Some(ServerErrorKind::UnknownCommand | ServerErrorKind::NoProto)
                        ) =>
                {
                    *step = Step::Resp2Fallback;
                    resp2_setup(&mut ex, cfg).await?;
                    Negotiated::Resp2
                }
                Some(Err(e)) => return Err(e),
                Some(Ok(other)) => {
                    return Err(Error::UnexpectedReply(format!("HELLO answered {other}")))
                }
                None => return Err(Error::ConnectionClosed),
            }
        }
    };
    if must_be_master {
        check_master(&mut ex).await?;
    }
    Ok(Established {
        stream: ex.stream,
        read_buf: ex.buf,
        protocol,
        sentinel_epoch: None,
    })
}

/// `ROLE`'s first element must be `master`: a node the sentinels named is
/// used only once it says so itself (a demoted master, or a stale answer,
/// says `slave`).
async fn check_master(ex: &mut Exchange<'_>) -> Result<()> {
    let reply = ex.round_trip(&[Cmd::new("ROLE")]).await?;
    let frame = check(reply.into_iter().next().ok_or(Error::ConnectionClosed)?)?;
    let role = match frame.value() {
        Frame::Array(items) => items.first().and_then(|f| f.as_bytes()),
        _ => None,
    };
    match role {
        Some(r) if r.as_ref() == b"master" => Ok(()),
        other => Err(Error::Sentinel(crate::error::SentinelError::NotMaster {
            addr: ex.cfg.addr(),
            role: other.map_or_else(
                || frame.to_string(),
                |r| String::from_utf8_lossy(r).into_owned(),
            ),
        })),
    }
}

/// Connects to `cfg` (directly), sends `cmds` and returns their replies:
/// a one-off exchange (a question to a sentinel).
pub(crate) async fn ask(cfg: &ConnectionConfig, cmds: &[Cmd]) -> Result<Vec<Frame>> {
    let io = establish_direct(cfg, false, false).await?;
    let mut ex = Exchange {
        stream: io.stream,
        buf: io.read_buf,
        decoder: Decoder::new(Limits::default()),
        cfg,
    };
    tokio::time::timeout(cfg.connect_timeout, ex.round_trip(cmds))
        .await
        .map_err(|_| Error::Timeout)?
}

fn hello(cfg: &ConnectionConfig) -> Cmd {
    let mut cmd = Cmd::new("HELLO").arg("3");
    if let Some(pass) = &cfg.password {
        cmd.push_arg("AUTH");
        cmd.push_arg(cfg.username.as_deref().unwrap_or("default"));
        cmd.push_arg(pass.as_str());
    }
    if let Some(name) = &cfg.client_name {
        cmd.push_arg("SETNAME");
        cmd.push_arg(name.as_str());
    }
    cmd
}

fn select(db: i64) -> Cmd {
    Cmd::new("SELECT").arg(db)
}

/// AUTH, SELECT and CLIENT SETNAME in one write.
async fn resp2_setup(ex: &mut Exchange<'_>, cfg: &ConnectionConfig) -> Result<()> {
    let mut cmds = Vec::with_capacity(3);
    if let Some(pass) = &cfg.password {
        let mut auth = Cmd::new("AUTH");
        if let Some(user) = &cfg.username {
            auth.push_arg(user.as_str());
        }
        auth.push_arg(pass.as_str());
        cmds.push(auth);
    }
    if cfg.db != 0 {
        cmds.push(select(cfg.db));
    }
    let named = cfg.client_name.is_some();
    if let Some(name) = &cfg.client_name {
        cmds.push(Cmd::new("CLIENT").arg("SETNAME").arg(name.as_str()));
    }
    if cmds.is_empty() {
        return Ok(());
    }
    let mut replies = ex.round_trip(&cmds).await?;
    if named {
        // A server too old for CLIENT SETNAME still works: the name is cosmetic.
        replies.pop();
    }
    expect_ok(replies)
}

fn expect_ok(replies: Vec<Frame>) -> Result<()> {
    for r in replies {
        check(r)?;
    }
    Ok(())
}

struct Exchange<'a> {
    stream: Stream,
    buf: BytesMut,
    decoder: Decoder,
    cfg: &'a ConnectionConfig,
}

impl Exchange<'_> {
    async fn round_trip(&mut self, cmds: &[Cmd]) -> Result<Vec<Frame>> {
        let mut out = BytesMut::with_capacity(cmds.iter().map(Cmd::encoded_len).sum());
        for c in cmds {
            c.encode(&mut out);
        }
        let addr = || self.cfg.addr();
        // flush: a TLS stream may hold encrypted bytes back (no-op for TCP).
        let written = match self.stream.write_all(&out).await {
            Ok(()) => self.stream.flush().await,
            Err(e) => Err(e),
        };
        // A server refusing our client certificate says so in an alert that
        // arrives here, at the first exchange after the TLS handshake.
        written.map_err(|e| self.stream.error(&addr(), e))?;
        let mut replies = Vec::with_capacity(cmds.len());
        while replies.len() < cmds.len() {
            let decoded = self.decoder.decode(&mut self.buf);
            if let Some(frame) = decoded.map_err(|e| not_redis(&addr(), &self.buf, e))? {
                if !matches!(frame.value(), Frame::Push(_)) {
                    replies.push(frame);
                }
                continue;
            }
            self.buf.reserve(4096);
            match self.stream.read_buf(&mut self.buf).await {
                Ok(0) => return Err(Error::ConnectionClosed),
                Ok(_) => {}
                Err(e) => return Err(self.stream.error(&addr(), e)),
            }
        }
        Ok(replies)
    }
}

/// A handshake reply that is not RESP, named for what it looks like: the
/// usual cause is a URL pointing at the wrong port (an HTTP server, a TLS
/// port without `rediss://`), which "invalid RESP type byte 0x3c" hides.
fn not_redis(addr: &str, buf: &[u8], e: ProtocolError) -> Error {
    let looks_like = if buf.starts_with(b"HTTP/") || buf.starts_with(b"<") {
        "HTTP"
    } else if buf.len() >= 2 && matches!(buf[0], 0x15 | 0x16) && buf[1] == 0x03 {
        // A TLS record header: alert (0x15) or handshake (0x16), version 3.x.
        "TLS"
    } else if buf.is_empty() {
        return Error::Protocol(e);
    } else {
        "another protocol"
    };
    let mut first_bytes = String::new();
    for &b in buf.iter().take(40) {
        match b {
            b'\r' => first_bytes.push_str("\\r"),
            b'\n' => first_bytes.push_str("\\n"),
            b' '..=b'~' if b != b'"' && b != b'\\' => first_bytes.push(char::from(b)),
            _ => {
                let _ = write!(first_bytes, "\\x{b:02x}");
            }
        }
    }
    Error::NotRedis {
        addr: addr.to_owned(),
        looks_like,
        first_bytes,
    }
}
