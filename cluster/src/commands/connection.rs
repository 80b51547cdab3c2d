//! What [`Connection`] does its own way: `NOSCRIPT` healed in one write
//! (`SCRIPT LOAD` and the retry together), and `WAIT`, which only means
//! something on the connection that did the writes.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use keylatch_resp::{Cmd, Frame, ToArg};

use super::keys::millis_arg;
use super::Commands;
use crate::connection::Connection;
use crate::error::{Error, Result, ServerErrorKind};
use crate::pipeline::Pipeline;
use crate::reply::FromReply;
use crate::script::Script;

impl Commands for Connection {
    fn send(&self, cmd: Cmd) -> impl Future<Output = Result<Frame>> + Send {
        Connection::send(self, cmd)
    }

    async fn eval_with<F: Fn() -> Cmd + Send>(&self, script: &Script, make: F) -> Result<Frame> {
        match Connection::send(self, make()).await {
            Err(e) if e.server_kind() == Some(ServerErrorKind::NoScript) => {
                // Boxed: rare, and inline it would enlarge every script
                // call's future.
                Box::pin(self.load_and_run(script, make())).await
            }
            other => other,
        }
    }

    async fn eval_shared(&self, script: &Script, cmd: &Arc<Cmd>) -> Result<Frame> {
        match self.send_shared(Arc::clone(cmd)).await {
            Err(e) if e.server_kind() == Some(ServerErrorKind::NoScript) => {
                Box::pin(self.load_and_run(script, Cmd::clone(cmd))).await
            }
            other => other,
        }
    }
}

impl Connection {
    /// Heals `NOSCRIPT`: `SCRIPT LOAD` and the script command again, in one
    /// write.
    pub(crate) async fn load_and_run(&self, script: &Script, cmd: Cmd) -> Result<Frame> {
        script.log_reload(Some(&self.config().addr()));
        let p: Pipeline = [script.load_cmd(), cmd].into_iter().collect();
        let mut replies = self.pipeline(p).await?;
        let retry = replies.pop().unwrap_or(Err(Error::ConnectionClosed));
        match replies.pop() {
            Some(Err(load_err)) => Err(load_err),
            _ => retry,
        }
    }
}

impl Connection {
    /// Runs `script` with its reads tracked, on a connection with opt-in
    /// client tracking (`CLIENT TRACKING ON OPTIN`): `CLIENT CACHING YES`
    /// and the `EVALSHA` go in one write, so no other request on this
    /// multiplexed connection can take the opt-in between them. Every key
    /// the script reads is then tracked for this connection: a later change
    /// by anyone else is pushed as an invalidation. On `NOSCRIPT`, `SCRIPT
    /// LOAD`, `CLIENT CACHING YES` and the retry go in one write (the opt-in
    /// lasts one command, so it is sent again right before the retry).
    ///
    /// ```no_run
    /// use keylatch_cluster::Script;
    /// static READ: Script = Script::new("read", "return redis.call('GET', KEYS[1])");
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// let v = conn.eval_script_tracked(&READ, &["k"], &[] as &[&str]).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send); the script's own error is [`Error::Server`].
    /// On a connection without opt-in tracking, `CLIENT CACHING YES` is
    /// refused and that error is returned (the script did not run).
    ///
    /// # Cancel safety
    /// Cancel safe in the sense of [`send`](Self::send): the write is whole
    /// or not at all, and a dropped call's script may still have run.
    pub async fn eval_script_tracked<K: ToArg, A: ToArg>(
        &self,
        script: &Script,
        keys: &[K],
        args: &[A],
    ) -> Result<Frame> {
        let p: Pipeline = [caching_yes(), script.evalsha_cmd(keys, args)]
            .into_iter()
            .collect();
        let mut replies = self.pipeline(p).await?.into_iter();
        let opted = replies.next().unwrap_or(Err(Error::ConnectionClosed));
        let ran = replies.next().unwrap_or(Err(Error::ConnectionClosed));
        opted?;
        match ran {
            Err(e) if e.server_kind() == Some(ServerErrorKind::NoScript) => {
                script.log_reload(Some(&self.config().addr()));
                let retry = script.evalsha_cmd(keys, args);
                let p: Pipeline = [script.load_cmd(), caching_yes(), retry]
                    .into_iter()
                    .collect();
                let mut replies = self.pipeline(p).await?.into_iter();
                let loaded = replies.next().unwrap_or(Err(Error::ConnectionClosed));
                let opted = replies.next().unwrap_or(Err(Error::ConnectionClosed));
                let ran = replies.next().unwrap_or(Err(Error::ConnectionClosed));
                loaded?;
                opted?;
                ran
            }
            other => other,
        }
    }
}

/// Opt-in tracking for the next command only.
fn caching_yes() -> Cmd {
    Cmd::new("CLIENT").arg("CACHING").arg("YES")
}

impl Connection {
    /// `WAIT numreplicas timeout`: how many replicas acknowledged this
    /// connection's writes so far. It must run on the connection that did
    /// the writes, hence here and not on [`Commands`].
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// let acked = conn.wait(1, std::time::Duration::from_millis(100)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait(&self, replicas: u32, timeout: Duration) -> Result<i64> {
        // WAIT blocks server-side up to `timeout`: give the request that much more.
        let budget = self
            .config()
            .request_timeout
            .map(|t| t.max(timeout + Duration::from_secs(1)));
        // Rounded up and never 0: `WAIT n 0` would block the connection forever.
        let cmd = Cmd::new("WAIT").arg(replicas).arg(millis_arg(timeout));
        i64::from_reply(self.send_timeout(cmd, budget).await?)
    }
}
