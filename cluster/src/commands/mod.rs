//! Typed helpers for the commands the lock layer (and most users) need.
//!
//! The [`Commands`] trait lives here, one method per command with its
//! documentation; what its methods build on lives by command group:
//! - `keys.rs`: `SET`'s options ([`SetOptions`], [`SetCondition`]), [`Ttl`]
//!   (a `PTTL` reply), and the key commands' builders;
//! - `scripting.rs`: `EVAL`/`EVALSHA` commands, and the two-round-trip
//!   `NOSCRIPT` healing of implementations without a faster path;
//! - `connection.rs`: what [`Connection`](crate::Connection) does better (one-write `NOSCRIPT`
//!   healing) or alone (`WAIT`, which must run on the writes' connection).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use keylatch_resp::{Cmd, Frame, ToArg};

use crate::error::{Error, Result};
use crate::reply::FromReply;
use crate::script::Script;

mod connection;
mod keys;
mod scripting;

pub use keys::{SetCondition, SetOptions, Ttl};

/// The commands every client type speaks: one required method, [`send`](Commands::send),
/// and typed helpers on top of it.
///
/// Implemented by [`Connection`](crate::Connection) (one node) and [`Client`](crate::Client)
/// (standalone or cluster, with routing). Bring it into scope to use the
/// helpers: `use keylatch_cluster::Commands;`.
///
/// ```no_run
/// use keylatch_cluster::{Commands, Connection};
/// # async fn demo() -> keylatch_cluster::Result<()> {
/// let conn = Connection::connect("redis://127.0.0.1:6379").await?;
/// conn.set("k", "v").await?;
/// assert_eq!(conn.get("k").await?.as_deref(), Some(&b"v"[..]));
/// # Ok(()) }
/// ```
///
/// # Cancel safety
/// Every helper is cancel safe in the sense of [`Connection::send`](crate::Connection::send): a
/// dropped call never desynchronises the connection, but a command already
/// written may still run.
pub trait Commands: Sync {
    /// Sends one command; an error reply becomes [`Error::Server`].
    ///
    /// ```no_run
    /// use keylatch_cluster::Commands;
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// let pong = c.send(keylatch_resp::Cmd::new("PING")).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// See [`Connection::send`](crate::Connection::send) and, for clusters, [`Error::Routing`] and
    /// [`Error::CrossSlot`].
    ///
    /// # Cancel safety
    /// Cancel safe: see [`Connection::send`](crate::Connection::send).
    fn send(&self, cmd: Cmd) -> impl Future<Output = Result<Frame>> + Send;

    /// Sends one command and converts the reply.
    ///
    /// ```no_run
    /// use keylatch_cluster::Commands;
    /// use keylatch_resp::Cmd;
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// let n: i64 = c.cmd(Cmd::new("INCR").key("hits")).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send), plus [`Error::UnexpectedReply`] when the
    /// reply does not convert.
    ///
    /// # Cancel safety
    /// Cancel safe.
    fn cmd<T: FromReply + Send>(&self, cmd: Cmd) -> impl Future<Output = Result<T>> + Send {
        async move { T::from_reply(self.send(cmd).await?) }
    }

    /// Runs a [`Script`]: `EVALSHA` first; on `NOSCRIPT`, `SCRIPT LOAD` and
    /// the retry in one write to the same node.
    ///
    /// ```no_run
    /// use keylatch_cluster::{Commands, Script};
    /// static GET: Script = Script::new("get", "return redis.call('GET', KEYS[1])");
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// let v = c.eval_script(&GET, &["k"], &[] as &[&str]).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send); script errors are [`Error::Server`].
    ///
    /// # Cancel safety
    /// Cancel safe (a cancelled script may still have run).
    fn eval_script<K: ToArg + Sync, A: ToArg + Sync>(
        &self,
        script: &Script,
        keys: &[K],
        args: &[A],
    ) -> impl Future<Output = Result<Frame>> + Send {
        self.eval_with(script, move || script.evalsha_cmd(keys, args))
    }

    /// Runs the `EVALSHA` command of `script` that `make` builds (for
    /// commands put together from prepared parts, see
    /// [`Cmd::clone_with_room`]). `make` runs once, and again only for the
    /// retry after `NOSCRIPT`.
    ///
    /// ```no_run
    /// use keylatch_cluster::{Commands, Script};
    /// static GET: Script = Script::new("get", "return redis.call('GET', KEYS[1])");
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// let head = GET.evalsha_cmd(&["k"], &[] as &[&str]);
    /// let v = c.eval_with(&GET, || head.clone_with_room(0)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`eval_script`](Commands::eval_script).
    ///
    /// # Cancel safety
    /// Cancel safe (a cancelled script may still have run).
    fn eval_with<F: Fn() -> Cmd + Send>(
        &self,
        script: &Script,
        make: F,
    ) -> impl Future<Output = Result<Frame>> + Send {
        scripting::load_on_noscript(self, script, make)
    }

    /// Runs a prepared `EVALSHA` command of `script` (built once with
    /// [`Script::evalsha_cmd`] and kept): each call costs a reference count,
    /// not building and encoding the arguments again. `NOSCRIPT` heals as in
    /// [`eval_script`](Commands::eval_script), resending the same command.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use keylatch_cluster::{Commands, Script};
    /// static GET: Script = Script::new("get", "return redis.call('GET', KEYS[1])");
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// let prepared = Arc::new(GET.evalsha_cmd(&["k"], &[] as &[&str]));
    /// for _ in 0..3 {
    ///     let v = c.eval_shared(&GET, &prepared).await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`eval_script`](Commands::eval_script).
    ///
    /// # Cancel safety
    /// Cancel safe (a cancelled script may still have run).
    fn eval_shared(
        &self,
        script: &Script,
        cmd: &Arc<Cmd>,
    ) -> impl Future<Output = Result<Frame>> + Send {
        // Without a shared path of its own, an implementation copies.
        scripting::load_on_noscript(self, script, || Cmd::clone(cmd))
    }

    /// `PING`.
    ///
    /// ```no_run
    /// # use keylatch_cluster::Commands;
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// c.ping().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send), or [`Error::UnexpectedReply`] if not `PONG`.
    ///
    /// # Cancel safety
    /// Cancel safe.
    fn ping(&self) -> impl Future<Output = Result<()>> + Send {
        async move {
            let reply = self.send(Cmd::new("PING")).await?;
            if reply == "PONG" {
                Ok(())
            } else {
                Err(Error::UnexpectedReply(format!("PING answered {reply}")))
            }
        }
    }

    /// `GET key`.
    ///
    /// ```no_run
    /// # use keylatch_cluster::Commands;
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// let v: Option<bytes::Bytes> = c.get("k").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    fn get(&self, key: impl ToArg) -> impl Future<Output = Result<Option<Bytes>>> + Send {
        let cmd = Cmd::new("GET").key(key);
        async move { self.cmd(cmd).await }
    }

    /// `SET key value`.
    ///
    /// ```no_run
    /// # use keylatch_cluster::Commands;
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// c.set("k", "v").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    fn set(&self, key: impl ToArg, value: impl ToArg) -> impl Future<Output = Result<()>> + Send {
        let cmd = Cmd::new("SET").key(key).arg(value);
        async move { self.send(cmd).await.map(drop) }
    }

    /// `SET key value [NX|XX] [PX ms|KEEPTTL]`; `true` when the value was written.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use keylatch_cluster::{Commands, SetCondition, SetOptions};
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// let opts = SetOptions::default().condition(SetCondition::IfAbsent).expire(Duration::from_secs(1));
    /// let won = c.set_with("k", "v", opts).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    fn set_with(
        &self,
        key: impl ToArg,
        value: impl ToArg,
        opts: SetOptions,
    ) -> impl Future<Output = Result<bool>> + Send {
        let cmd = keys::set_cmd(key, value, opts);
        async move { Ok(!matches!(self.send(cmd).await?.value(), Frame::Null)) }
    }

    /// `SET key value NX PX ttl`: `true` when the key was absent and is now set.
    ///
    /// ```no_run
    /// # use keylatch_cluster::Commands;
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// let won = c.set_nx_px("lock", "me", std::time::Duration::from_secs(10)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send).
    ///
    /// # Cancel safety
    /// Cancel safe (but a cancelled call may still have set the key).
    fn set_nx_px(
        &self,
        key: impl ToArg,
        value: impl ToArg,
        ttl: Duration,
    ) -> impl Future<Output = Result<bool>> + Send {
        let opts = SetOptions::default()
            .condition(SetCondition::IfAbsent)
            .expire(ttl);
        self.set_with(key, value, opts)
    }

    /// `DEL key…`: how many keys were removed. In a cluster all keys must
    /// share a slot.
    ///
    /// ```no_run
    /// # use keylatch_cluster::Commands;
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// let n = c.del(["{user}:a", "{user}:b"]).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    fn del<K: ToArg>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> impl Future<Output = Result<i64>> + Send {
        let cmd = keys::keys_cmd("DEL", keys);
        async move { self.cmd(cmd).await }
    }

    /// `PEXPIRE key ms`: `true` when the key exists and got the TTL.
    ///
    /// ```no_run
    /// # use keylatch_cluster::Commands;
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// c.pexpire("k", std::time::Duration::from_millis(250)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    fn pexpire(&self, key: impl ToArg, ttl: Duration) -> impl Future<Output = Result<bool>> + Send {
        let cmd = Cmd::new("PEXPIRE").key(key).arg(keys::millis_arg(ttl));
        async move { self.cmd(cmd).await }
    }

    /// `PTTL key`.
    ///
    /// ```no_run
    /// # use keylatch_cluster::Commands;
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// if let keylatch_cluster::Ttl::Expires(left) = c.pttl("k").await? { println!("{left:?}"); }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    fn pttl(&self, key: impl ToArg) -> impl Future<Output = Result<Ttl>> + Send {
        let cmd = Cmd::new("PTTL").key(key);
        async move { Ok(Ttl::from_pttl(self.cmd(cmd).await?)) }
    }

    /// `EVAL script numkeys keys… args…`.
    ///
    /// ```no_run
    /// # use keylatch_cluster::Commands;
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// let reply = c.eval("return redis.call('GET', KEYS[1])", ["k"], [0u8; 0].iter()).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send); script errors are [`Error::Server`].
    ///
    /// # Cancel safety
    /// Cancel safe (a cancelled script may still have run).
    fn eval<K: ToArg, A: ToArg>(
        &self,
        script: &str,
        keys: impl IntoIterator<Item = K>,
        args: impl IntoIterator<Item = A>,
    ) -> impl Future<Output = Result<Frame>> + Send {
        let cmd = scripting::script_cmd("EVAL", script, keys, args);
        self.send(cmd)
    }

    /// `EVALSHA sha numkeys keys… args…`. A script the server does not have
    /// answers [`ServerErrorKind::NoScript`](crate::ServerErrorKind::NoScript); prefer
    /// [`eval_script`](Commands::eval_script), which handles that.
    ///
    /// ```no_run
    /// # use keylatch_cluster::Commands;
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// let sha = c.script_load("return ARGV[1]").await?;
    /// let reply = c.evalsha(&sha, [0u8; 0].iter(), ["hi"]).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send).
    ///
    /// # Cancel safety
    /// Cancel safe (a cancelled script may still have run).
    fn evalsha<K: ToArg, A: ToArg>(
        &self,
        sha: &str,
        keys: impl IntoIterator<Item = K>,
        args: impl IntoIterator<Item = A>,
    ) -> impl Future<Output = Result<Frame>> + Send {
        let cmd = scripting::script_cmd("EVALSHA", sha, keys, args);
        self.send(cmd)
    }

    /// `SCRIPT LOAD script`: the script's SHA1 in hex. On a cluster client
    /// this loads on one master only; [`eval_script`](Commands::eval_script)
    /// loads wherever needed.
    ///
    /// ```no_run
    /// # use keylatch_cluster::Commands;
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// let sha = c.script_load("return 1").await?;
    /// assert_eq!(sha.len(), 40);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    fn script_load(&self, script: &str) -> impl Future<Output = Result<String>> + Send {
        let cmd = Cmd::new("SCRIPT").arg("LOAD").arg(script);
        async move { self.cmd(cmd).await }
    }

    /// `PUBLISH channel message`: how many subscribers received it.
    ///
    /// ```no_run
    /// # use keylatch_cluster::Commands;
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// let receivers = c.publish("news", "hello").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    fn publish(
        &self,
        channel: impl ToArg,
        message: impl ToArg,
    ) -> impl Future<Output = Result<i64>> + Send {
        let cmd = Cmd::new("PUBLISH").arg(channel).arg(message);
        async move { self.cmd(cmd).await }
    }

    /// `SPUBLISH shardchannel message` (Redis 7+): publishes to a shard
    /// channel, received by [`PubSub::ssubscribe`](crate::PubSub::ssubscribe)
    /// listeners; the reply counts the receivers on the channel's shard.
    ///
    /// ```no_run
    /// # use keylatch_cluster::Commands;
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// let receivers = c.spublish("redisson_lock__channel:{orders}", "0").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send); an unknown-command [`Error::Server`]
    /// before Redis 7.
    ///
    /// # Cancel safety
    /// Cancel safe.
    fn spublish(
        &self,
        channel: impl ToArg,
        message: impl ToArg,
    ) -> impl Future<Output = Result<i64>> + Send {
        // The shard channel is the command's key, so a cluster client sends
        // it to the node owning the channel's slot.
        let cmd = Cmd::new("SPUBLISH").key(channel).arg(message);
        async move { self.cmd(cmd).await }
    }

    /// `TIME`: the server's clock as time since the Unix epoch.
    ///
    /// ```no_run
    /// # use keylatch_cluster::Commands;
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// let now = c.time().await?;
    /// assert!(now.as_secs() > 1_600_000_000);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send), or [`Error::UnexpectedReply`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    fn time(&self) -> impl Future<Output = Result<Duration>> + Send {
        async move {
            let parts: Vec<u64> = self.cmd(Cmd::new("TIME")).await?;
            match parts.as_slice() {
                [secs, micros] if *micros < 1_000_000 => {
                    Ok(Duration::from_secs(*secs) + Duration::from_micros(*micros))
                }
                _ => Err(Error::UnexpectedReply(format!("TIME answered {parts:?}"))),
            }
        }
    }

    /// `INFO [section]` as text.
    ///
    /// ```no_run
    /// # use keylatch_cluster::Commands;
    /// # async fn demo(c: &impl Commands) -> keylatch_cluster::Result<()> {
    /// let info = c.info(Some("server")).await?;
    /// assert!(info.contains("redis_version"));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Commands::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    fn info(&self, section: Option<&str>) -> impl Future<Output = Result<String>> + Send {
        let mut cmd = Cmd::new("INFO");
        if let Some(s) = section {
            cmd.push_arg(s);
        }
        async move { self.cmd(cmd).await }
    }
}
