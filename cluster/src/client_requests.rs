//! The client's request paths for callers that bound their own waits or
//! must not lose a request: late replies handed to a handler
//! ([`Client::eval_shared_settled`]), commands written once queued
//! ([`Client::eval_with_written`]), and untimed scripts
//! ([`Client::eval_shared_untimed`]).

use std::sync::Arc;
use std::time::Duration;

use keylatch_resp::{Cmd, Frame};

use crate::client::{Client, Inner};
use crate::error::{Result, ServerErrorKind};
use crate::routed::Wait;

/// The least time a written command gets in a cluster, whatever its
/// caller's deadline (see [`Client::eval_with_written`]).
const RELEASE_FLOOR: Duration = Duration::from_secs(1);
use crate::script::Script;

impl Client {
    /// The request timeout the client's connections use (`None`: none).
    ///
    /// ```no_run
    /// # fn demo(c: keylatch_cluster::Client) {
    /// println!("requests time out after {:?}", c.request_timeout());
    /// # }
    /// ```
    pub fn request_timeout(&self) -> Option<Duration> {
        match &self.inner {
            Inner::Standalone(conn) => conn.config().request_timeout,
            Inner::Cluster(router) => router.base().request_timeout,
        }
    }

    /// [`eval_shared`](crate::Commands::eval_shared) whose reply is awaited however
    /// long it takes on a standalone server: the connection's request timeout
    /// does not apply, so a caller that bounds the wait itself can hand the
    /// still-pending future on (e.g. to learn, later, whether a lock acquire
    /// it gave up on took the lock). In a cluster each routed attempt is
    /// untimed too (redirects and transient errors are still followed).
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// # async fn demo(c: keylatch_cluster::Client, s: &keylatch_cluster::Script) -> keylatch_cluster::Result<()> {
    /// let cmd = Arc::new(s.evalsha_cmd(&["k"], &["1"]));
    /// let reply = tokio::time::timeout(Duration::from_secs(1), c.eval_shared_untimed(s, &cmd)).await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`eval_shared`](crate::Commands::eval_shared), without [`Error::Timeout`](crate::Error::Timeout)
    /// on a standalone server.
    ///
    /// # Cancel safety
    /// As [`Connection::send`](crate::Connection::send).
    pub async fn eval_shared_untimed(&self, script: &Script, cmd: &Arc<Cmd>) -> Result<Frame> {
        match &self.inner {
            Inner::Standalone(conn) => {
                match conn.send_shared_timeout(Arc::clone(cmd), None).await {
                    Err(e) if e.server_kind() == Some(ServerErrorKind::NoScript) => {
                        // SCRIPT LOAD and the command again, in one write.
                        Box::pin(conn.load_and_run(script, Cmd::clone(cmd))).await
                    }
                    other => other,
                }
            }
            Inner::Cluster(router) => {
                Box::pin(router.send_until(Arc::clone(cmd), Some(script), None, Wait::Untimed))
                    .await
            }
        }
    }

    /// [`eval_shared`](crate::Commands::eval_shared) bounded by `timeout` (`None`:
    /// the request timeout), whose reply, if it comes after the caller timed
    /// out or dropped this future once the command was written, goes to
    /// `late` (see [`LateReply`](crate::LateReply)); dropped before it was
    /// written, the command is never sent. Each attempt waits at most the
    /// request timeout. In a cluster, redirects and transient refusals
    /// (`TRYAGAIN`, a failover under way) are retried until `timeout` has
    /// passed, so a caller with a long wait rides a slot migration out. A
    /// `NOSCRIPT` retry is settled the same way, within what is left.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// # async fn demo(c: keylatch_cluster::Client, s: &keylatch_cluster::Script) -> keylatch_cluster::Result<()> {
    /// let cmd = Arc::new(s.evalsha_cmd(&["k"], &["1"]));
    /// let late = Arc::new(|frame| eprintln!("answered after all: {frame}"));
    /// let reply = c.eval_shared_settled(s, &cmd, Some(Duration::from_millis(200)), late).await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`eval_shared`](crate::Commands::eval_shared); [`Error::Timeout`](crate::Error::Timeout) past
    /// `timeout` (the outcome then goes to `late`, if it comes).
    ///
    /// # Cancel safety
    /// Cancel safe: not yet written, never sent; written, its reply goes to
    /// `late`.
    pub async fn eval_shared_settled(
        &self,
        script: &Script,
        cmd: &Arc<Cmd>,
        timeout: Option<Duration>,
        late: crate::LateReply,
    ) -> Result<Frame> {
        match &self.inner {
            Inner::Standalone(conn) => {
                let started = tokio::time::Instant::now();
                let rt = conn.config().request_timeout;
                let timeout = match (timeout, rt) {
                    (Some(t), Some(rt)) => Some(t.min(rt)),
                    (t, rt) => t.or(rt),
                };
                match conn
                    .send_settled(Arc::clone(cmd), timeout, Arc::clone(&late))
                    .await
                {
                    Err(e) if e.server_kind() == Some(ServerErrorKind::NoScript) => {
                        // Load, then the command again, settled too and
                        // within what is left of the caller's bound.
                        Box::pin(async {
                            script.log_reload(Some(&conn.config().addr()));
                            conn.send(script.load_cmd()).await?;
                            let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
                            conn.send_settled(Arc::clone(cmd), left, late).await
                        })
                        .await
                    }
                    other => other,
                }
            }
            Inner::Cluster(router) => {
                let deadline = timeout.map(|t| crate::clock::later(tokio::time::Instant::now(), t));
                let wait = Wait::Settled(late);
                Box::pin(router.send_until(Arc::clone(cmd), Some(script), deadline, wait)).await
            }
        }
    }

    /// [`eval_with`](crate::Commands::eval_with) whose command, once queued, is
    /// written even if this future is dropped before that (on a standalone
    /// server; in a cluster, exactly `eval_with`, whose routing lives in the
    /// future). For a command that must go out once asked for, such as a
    /// lock release, without keeping the future alive: a connection that
    /// fails before writing it writes it once reconnected (loading the
    /// script first, the server may have restarted). A `NOSCRIPT` answered
    /// after the caller left or timed out is healed by the connection
    /// (`SCRIPT LOAD`, then the command again: `NOSCRIPT` proves it did not
    /// run); while the caller waits, its future heals it. The reply is waited
    /// for until `until` (at most the request timeout from now, at least 1 s
    /// so that it is sent even when `until` has passed; `None`: the request
    /// timeout); past it the caller gets [`Error::Timeout`](crate::Error::Timeout)
    /// and the command, written, may still run. In a cluster, redirects and
    /// transient refusals are retried until then.
    ///
    /// ```no_run
    /// static RELEASE: keylatch_cluster::Script =
    ///     keylatch_cluster::Script::new("release", "return redis.call('del', KEYS[1])");
    /// # async fn demo(c: keylatch_cluster::Client) -> keylatch_cluster::Result<()> {
    /// let reply = c.eval_with_written(&RELEASE, || RELEASE.evalsha_cmd(&["k"], &[] as &[&str]), None).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`eval_with`](crate::Commands::eval_with).
    ///
    /// # Cancel safety
    /// Dropped once polled, the command still runs (standalone); its reply
    /// is read and discarded.
    pub async fn eval_with_written<F: Fn() -> Cmd + Send>(
        &self,
        script: &'static Script,
        make: F,
        until: Option<std::time::Instant>,
    ) -> Result<Frame> {
        // At least RELEASE_FLOOR: a release asked for goes out once even
        // when its caller's deadline has passed (the server may still hold
        // the key a little past it).
        let floor = crate::clock::later(tokio::time::Instant::now(), RELEASE_FLOOR);
        let bound = until.map(|u| tokio::time::Instant::from_std(u).max(floor));
        match &self.inner {
            Inner::Standalone(conn) => match conn.send_written(make(), Some(script), bound).await {
                Err(e) if e.server_kind() == Some(ServerErrorKind::NoScript) => {
                    // Healed within the same bound: a server that lost its
                    // scripts and then stalls must not hold the caller for
                    // a whole request timeout.
                    let heal = Box::pin(conn.load_and_run(script, make()));
                    match bound {
                        Some(b) => tokio::time::timeout_at(b, heal)
                            .await
                            .unwrap_or(Err(crate::Error::Timeout)),
                        None => heal.await,
                    }
                }
                other => other,
            },
            Inner::Cluster(router) => {
                let default = router.default_deadline();
                let deadline = bound.map_or(default, |b| b.min(default));
                let cmd = Arc::new(make());
                Box::pin(router.send_until(cmd, Some(script), Some(deadline), Wait::Timed)).await
            }
        }
    }
}
