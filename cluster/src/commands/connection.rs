//! What [`Connection`] does its own way: `NOSCRIPT` healed in one write
//! (`SCRIPT LOAD` and the retry together), and `WAIT`, which only means
//! something on the connection that did the writes.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use keylatch_resp::{Cmd, Frame};

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
