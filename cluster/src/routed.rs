//! One routed request, from first send to answer or deadline.
//!
//! Every request carries a deadline: its caller's (a lock's wait, a
//! release's lease) or, by default, the time it was sent plus the request
//! timeout. Each attempt waits for the time left (at most the request
//! timeout). Answers that say "not here" or "not now" are retried until the
//! deadline:
//!
//! - `MOVED` patches the table and is resent at once, unless it sends the
//!   request back to a node that already redirected it (a slot migration
//!   between its two `SETSLOT NODE` commands, source and target naming each
//!   other): that is a ping-pong, and waits with backoff while the table is
//!   refreshed;
//! - `ASK` goes to the target with `ASKING`, at once, under the same rule;
//! - `TRYAGAIN`, `CLUSTERDOWN`, `LOADING`, `MASTERDOWN`, `READONLY` (a
//!   demoted master), a refused connect, and [`Error::Disconnected`] (not
//!   sent) wait with backoff, refreshing the table where it may be stale.
//!
//! A pause that would end past the deadline is not taken: the request fails
//! then with [`Error::Routing`], naming the nodes tried and the last answer.
//! A timeout or a broken connection leaves the outcome unknown: it is never
//! resent, but it makes the router reload the topology (the node may be
//! dead, and its replica promoted). A read-only command (`GET`, `PTTL`,
//! `HGET`, … see [`reads_only`]) whose connection broke is the exception:
//! having run or not changes nothing, so it waits with backoff and is sent
//! again (at most 3 times), as a command that was not sent would be (a
//! master killed under a read used to fail it with `ConnectionClosed`,
//! however long its deadline).

use std::sync::Arc;
use std::time::Duration;

use keylatch_resp::{Cmd, Frame};
use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::connection::Connection;
use crate::error::{Error, Result, ServerErrorKind};
use crate::late::LateReply;
use crate::router::{command_slot, Node, Router};
use crate::script::Script;
use crate::topology::{join_host_port, split_addr};

/// How each attempt of a routed request waits for its reply.
#[derive(Clone)]
pub(crate) enum Wait {
    /// The time left, at most the request timeout (none when the client has
    /// none).
    Timed,
    /// As long as it takes: the caller bounds the wait (and may keep the
    /// future to learn a late outcome).
    Untimed,
    /// As [`Timed`](Self::Timed), but at least until the deadline when the
    /// client has no request timeout; a reply that comes after the attempt
    /// timed out goes to the handler.
    Settled(LateReply),
}

impl Router {
    /// Sends one command (a script when `script` is given), following
    /// redirects and retrying transient failures for up to the request
    /// timeout.
    pub(crate) async fn send(&self, cmd: Cmd, script: Option<&Script>) -> Result<Frame> {
        // Shared, so a resend after a redirect costs a reference count, not a copy.
        self.send_shared(Arc::new(cmd), script).await
    }

    /// [`send`](Self::send) for a command already shared (a prepared one the
    /// caller reuses).
    pub(crate) async fn send_shared(
        &self,
        cmd: Arc<Cmd>,
        script: Option<&Script>,
    ) -> Result<Frame> {
        self.send_until(cmd, script, None, Wait::Timed).await
    }

    /// The time a request sent now may take by default: the request timeout,
    /// or (without one) the router's retry window.
    pub(crate) fn default_deadline(&self) -> Instant {
        let span = self
            .base()
            .request_timeout
            .unwrap_or(self.options().retry_window);
        crate::clock::later(Instant::now(), span)
    }

    /// Sends `cmd` until it is answered or `deadline` (`None`: the default
    /// one) comes; each attempt waits as `wait` says.
    pub(crate) async fn send_until(
        &self,
        cmd: Arc<Cmd>,
        script: Option<&Script>,
        deadline: Option<Instant>,
        wait: Wait,
    ) -> Result<Frame> {
        let slot = command_slot(&cmd)?;
        let deadline = deadline.unwrap_or_else(|| self.default_deadline());
        let opts = self.options();
        let mut retry = Retries {
            backoff: Backoff::new(opts.retry_min, opts.retry_max),
            ask: None,
            tried: Vec::new(),
            last: Error::Disconnected,
            read_only: false,
            read_resends: 0,
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let asking = retry.ask.is_some();
            let next = match retry.ask.take().or_else(|| self.master_for(slot)) {
                Some(node) => {
                    match tokio::time::timeout_at(deadline, node.connection(self.base())).await {
                        Ok(Ok(conn)) => {
                            let (timeout, late) = self.attempt_wait(&wait, left);
                            match run(&conn, &cmd, script, asking, timeout, late).await {
                                Ok(frame) => return Ok(frame),
                                Err(e) => {
                                    // Asked on failure only: the answered
                                    // path does not look at the name.
                                    retry.read_only = script.is_none() && reads_only(cmd.name());
                                    self.after_reply_error(e, &node.addr, &mut retry)
                                }
                            }
                        }
                        Ok(Err(e)) => self.after_connect_failure(Some(e), &node.addr, &mut retry),
                        Err(_) => self.after_connect_failure(None, &node.addr, &mut retry),
                    }
                }
                None => {
                    // Nobody serves the slot (failover under way): refresh,
                    // within the time left, and try again after a pause.
                    retry.last = Error::from_server_error(b"CLUSTERDOWN slot not served");
                    let _ = tokio::time::timeout_at(deadline, Box::pin(self.refresh(false))).await;
                    Next::AfterPause
                }
            };
            match next {
                Next::Now => {}
                Next::AfterPause => {
                    if !pause(&mut retry.backoff, deadline).await {
                        break;
                    }
                }
                Next::GiveUp => break,
                Next::Fail(err) => return Err(err),
            }
        }
        Err(Error::Routing {
            slot,
            tried: retry.tried,
            last: Box::new(retry.last),
        })
    }

    /// How long one attempt waits for its reply, and where a reply that
    /// comes after that goes (`Wait::Settled` only).
    #[inline]
    fn attempt_wait<'w>(
        &self,
        wait: &'w Wait,
        left: Duration,
    ) -> (Option<Duration>, Option<&'w LateReply>) {
        match wait {
            Wait::Untimed => (None, None),
            Wait::Timed => (self.base().request_timeout.map(|rt| rt.min(left)), None),
            Wait::Settled(late) => (
                Some(self.base().request_timeout.map_or(left, |rt| rt.min(left))),
                Some(late),
            ),
        }
    }

    /// After the node at `addr` could not be reached: an error (a refused
    /// connect, a handshake failure) waits with backoff; the deadline
    /// passing while connecting (`None`) ends the request.
    fn after_connect_failure(&self, err: Option<Error>, addr: &str, retry: &mut Retries) -> Next {
        note_tried(&mut retry.tried, addr);
        let next = match err {
            Some(e) => {
                retry.last = e;
                Next::AfterPause
            }
            None => {
                retry.last = Error::Timeout;
                Next::GiveUp
            }
        };
        self.refresh_soon();
        next
    }

    /// What the error the node at `addr` answered leads to: a redirect
    /// followed, a transient failure retried after a pause, anything else
    /// (or an outcome unknown) to the caller.
    fn after_reply_error(&self, err: Error, addr: &str, retry: &mut Retries) -> Next {
        match err.server_kind() {
            Some(kind @ (ServerErrorKind::Moved | ServerErrorKind::Ask)) => {
                note_tried(&mut retry.tried, addr);
                let Some((s, to)) = err.as_server_error().and_then(|e| e.redirect()) else {
                    return Next::Fail(err);
                };
                let to = redirect_addr(to, addr);
                // Sent back to a node that already turned it away: the
                // two disagree for now (a migration between its two
                // SETSLOT NODE commands). The table is not patched (each
                // patch would flip the slot back and forth, and move
                // every shard subscription with it): wait, with backoff,
                // for the nodes and a refresh to settle it.
                let ping_pong = retry.tried.contains(&to);
                // Per redirected request, so debug: a migration can redirect
                // many of them, and the table change itself is logged once.
                tracing::debug!(
                    redirect = if kind == ServerErrorKind::Ask { "ASK" } else { "MOVED" },
                    slot = s,
                    from = %addr,
                    to = %to,
                    ping_pong,
                    "redirected"
                );
                if kind == ServerErrorKind::Ask {
                    retry.ask = Some(self.node(&to));
                } else if !ping_pong {
                    self.apply_moved(s, &to);
                }
                self.refresh_soon();
                retry.last = err;
                if ping_pong {
                    Next::AfterPause
                } else {
                    Next::Now
                }
            }
            Some(
                ServerErrorKind::TryAgain | ServerErrorKind::Loading | ServerErrorKind::MasterDown,
            ) => {
                note_tried(&mut retry.tried, addr);
                retry.last = err;
                Next::AfterPause
            }
            Some(ServerErrorKind::ClusterDown | ServerErrorKind::ReadOnly) => {
                // The table may be stale: a failover, or a master demoted
                // to replica (which refuses writes, and ran nothing).
                note_tried(&mut retry.tried, addr);
                retry.last = err;
                self.refresh_soon();
                Next::AfterPause
            }
            _ if matches!(err, Error::Disconnected) || retry.resend_read(&err) => {
                // Not sent: the node is down or reconnecting. Another
                // node may know who serves the slot now.
                note_tried(&mut retry.tried, addr);
                retry.last = err;
                self.refresh_soon();
                Next::AfterPause
            }
            _ => {
                if err.is_unknown_outcome() {
                    // Never resent (it may have run), but the node may
                    // be dead: look at the topology again.
                    self.refresh_soon();
                }
                Next::Fail(err)
            }
        }
    }
}

/// One routed request's state across its attempts. Addresses are recorded
/// only on failure: the common path allocates nothing for bookkeeping.
struct Retries {
    backoff: Backoff,
    /// The node an `ASK` sent the next attempt to.
    ask: Option<Arc<Node>>,
    /// Nodes that failed or redirected this request, in order, once each.
    tried: Vec<String>,
    /// The last failure, for [`Error::Routing`].
    last: Error,
    /// The command changes nothing: a broken connection under it is
    /// retried like one that was not sent (at most [`READ_RESENDS`] times).
    read_only: bool,
    read_resends: u8,
}

/// How often a read whose connection broke under it is sent again: enough
/// for a failover (the connection dies once), and bounded for a read whose
/// reply itself gets the connection dropped (an output buffer limit), which
/// would cut the writes sharing the connection at every resend.
const READ_RESENDS: u8 = 3;

impl Retries {
    /// Whether `err` (after sending) leaves a read-only command to be sent
    /// again; counts the resend.
    fn resend_read(&mut self, err: &Error) -> bool {
        let again = self.read_only
            && self.read_resends < READ_RESENDS
            && matches!(err, Error::ConnectionClosed | Error::Io(_));
        self.read_resends += u8::from(again);
        again
    }
}

/// Commands that only read (a small list of what clients send; anything
/// else counts as a write): sending one again after its connection broke
/// cannot do twice what the caller asked once.
#[rustfmt::skip]
const READS: &[&str] = &[
    "GET", "MGET", "STRLEN", "GETRANGE", "EXISTS", "TYPE", "TTL", "PTTL", "EXPIRETIME",
    "PEXPIRETIME", "HGET", "HMGET", "HEXISTS", "HGETALL", "HLEN", "HKEYS", "HVALS", "HSTRLEN",
    "LLEN", "LRANGE", "LINDEX", "SCARD", "SISMEMBER", "SMEMBERS", "ZCARD", "ZSCORE", "ZRANGE",
    "ZRANGEBYSCORE", "ZRANK", "ZCOUNT", "PING", "ECHO", "DBSIZE",
];

/// Whether the command named `name` (any case) only reads.
pub(crate) fn reads_only(name: &[u8]) -> bool {
    READS
        .iter()
        .any(|r| r.as_bytes().eq_ignore_ascii_case(name))
}

/// What a failed attempt leads to.
enum Next {
    /// Another attempt at once (a redirect followed).
    Now,
    /// Another attempt after a backoff pause, if one fits before the deadline.
    AfterPause,
    /// No more attempts: [`Error::Routing`].
    GiveUp,
    /// This error to the caller.
    Fail(Error),
}

/// Records `addr` as tried (once).
fn note_tried(tried: &mut Vec<String>, addr: &str) {
    if !tried.iter().any(|t| t == addr) {
        tried.push(addr.to_owned());
    }
}

/// The address a redirect names, with the redirecting node's host filled in
/// when the node left it out (`MOVED 3999 :6381`: the node knows no
/// address for itself, e.g. `cluster-announce-hostname` unset and an
/// unknown endpoint type; "same host as me" is what it means).
pub(crate) fn redirect_addr(to: &str, from: &str) -> String {
    match split_addr(to) {
        Some((host, port)) if host.is_empty() => {
            let from_host = split_addr(from).map(|(h, _)| h).unwrap_or_default();
            join_host_port(&from_host, port)
        }
        _ => to.to_owned(),
    }
}

/// Pauses for the next backoff delay, unless the deadline would pass first;
/// `false` then (no pause after the last attempt).
async fn pause(backoff: &mut Backoff, deadline: Instant) -> bool {
    let delay = backoff.next_delay();
    if Instant::now()
        .checked_add(delay)
        .map_or(true, |end| end >= deadline)
    {
        return false;
    }
    // Boxed: retries are rare, and an inline timer would enlarge every
    // routed request's future.
    Box::pin(tokio::time::sleep(delay)).await;
    true
}

/// Sends on one connection: with `ASKING` first when redirected by ASK, and
/// with `SCRIPT LOAD` + retry in one write when a script is missing. The
/// reply waits `timeout`; with `late`, a reply that comes after that goes
/// there (the `ASKING` and `SCRIPT LOAD` writes too: only the command's
/// reply counts).
pub(crate) async fn run(
    conn: &Connection,
    cmd: &Arc<Cmd>,
    script: Option<&Script>,
    asking: bool,
    timeout: Option<Duration>,
    late: Option<&LateReply>,
) -> Result<Frame> {
    let started = Instant::now();
    let first = if asking {
        // Rare (slot migration): the copy for the two-command write is fine.
        Box::pin(several(
            conn,
            vec![Cmd::new("ASKING"), Cmd::clone(cmd)],
            timeout,
            late,
        ))
        .await
    } else if let Some(late) = late {
        conn.send_settled(Arc::clone(cmd), timeout, Arc::clone(late))
            .await
    } else {
        conn.send_shared_timeout(Arc::clone(cmd), timeout).await
    };
    match (first, script) {
        (Err(e), Some(script)) if e.server_kind() == Some(ServerErrorKind::NoScript) => {
            script.log_reload(Some(&conn.config().addr()));
            let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
            let mut batch = Vec::with_capacity(4);
            if asking {
                batch.push(Cmd::new("ASKING"));
            }
            batch.push(script.load_cmd());
            if asking {
                batch.push(Cmd::new("ASKING"));
            }
            batch.push(Cmd::clone(cmd));
            Box::pin(several(conn, batch, left, late)).await
        }
        (result, _) => result,
    }
}

/// Several commands in one write; the last one's reply. Settled (a late
/// reply to `late`) when a handler is given; otherwise a failed earlier
/// command (a `SCRIPT LOAD`) is reported, as it explains the failure better
/// than the last one's.
async fn several(
    conn: &Connection,
    cmds: Vec<Cmd>,
    timeout: Option<Duration>,
    late: Option<&LateReply>,
) -> Result<Frame> {
    if let Some(late) = late {
        return conn
            .send_settled_last(cmds, timeout, Arc::clone(late))
            .await;
    }
    let replies = conn
        .pipeline_timeout(cmds.into_iter().collect(), timeout)
        .await?;
    let n = replies.len();
    for (i, reply) in replies.iter().enumerate() {
        if let Err(e) = reply {
            // ASKING never fails; a failed SCRIPT LOAD does.
            if i + 1 < n && e.server_kind() != Some(ServerErrorKind::NoScript) {
                return Err(e.clone());
            }
        }
    }
    last_of(replies)
}

fn last_of(replies: Vec<Result<Frame>>) -> Result<Frame> {
    replies
        .into_iter()
        .last()
        .unwrap_or(Err(Error::ConnectionClosed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_told_from_writes_in_any_case() {
        assert!(reads_only(b"GET") && reads_only(b"get") && reads_only(b"Pttl"));
        assert!(reads_only(b"HMGET") && reads_only(b"zscore"));
        for write in [
            &b"SET"[..],
            b"DEL",
            b"EVALSHA",
            b"EVAL",
            b"INCR",
            b"GETDEL",
            b"GETEX",
        ] {
            assert!(!reads_only(write), "{}", String::from_utf8_lossy(write));
        }
    }

    #[test]
    fn an_empty_redirect_host_is_the_redirecting_nodes() {
        assert_eq!(redirect_addr(":7001", "10.0.0.5:7000"), "10.0.0.5:7001");
        assert_eq!(redirect_addr(":7001", "[::1]:7000"), "[::1]:7001");
        assert_eq!(
            redirect_addr("10.0.0.6:7001", "10.0.0.5:7000"),
            "10.0.0.6:7001"
        );
    }

    #[tokio::test]
    async fn no_pause_that_would_end_past_the_deadline() {
        let mut b = Backoff::new(Duration::from_secs(60), Duration::from_secs(60));
        // At least 30 s: never fits before a deadline 1 s away.
        assert!(!pause(&mut b, Instant::now() + Duration::from_secs(1)).await);
        let mut b = Backoff::new(Duration::from_millis(2), Duration::from_millis(2));
        assert!(pause(&mut b, Instant::now() + Duration::from_secs(60)).await);
    }
}
