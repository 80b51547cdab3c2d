//! Typed helpers for the commands the lock layer (and most users) need.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use keylatch_resp::{Cmd, Frame, ToArg};

use crate::connection::Connection;
use crate::error::{Error, Result, ServerErrorKind};
use crate::pipeline::Pipeline;
use crate::reply::FromReply;
use crate::script::Script;

/// When `SET` may write.
///
/// ```
/// use keylatch_cluster::SetCondition;
/// assert_ne!(SetCondition::IfAbsent, SetCondition::IfPresent);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetCondition {
    /// `NX`: only if the key does not exist.
    IfAbsent,
    /// `XX`: only if the key exists.
    IfPresent,
}

/// Options for [`Connection::set_with`].
///
/// ```
/// use std::time::Duration;
/// use keylatch_cluster::{SetCondition, SetOptions};
/// let opts = SetOptions::default().condition(SetCondition::IfAbsent).expire(Duration::from_millis(500));
/// assert_eq!(opts.expire, Some(Duration::from_millis(500)));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SetOptions {
    /// NX / XX.
    pub condition: Option<SetCondition>,
    /// `PX` in milliseconds (rounded up so a sub-millisecond TTL is not 0).
    pub expire: Option<Duration>,
    /// `KEEPTTL`: keep the existing TTL.
    pub keep_ttl: bool,
}

impl SetOptions {
    /// Sets the write condition.
    ///
    /// ```
    /// use keylatch_cluster::{SetCondition, SetOptions};
    /// let opts = SetOptions::default().condition(SetCondition::IfPresent);
    /// assert_eq!(opts.condition, Some(SetCondition::IfPresent));
    /// ```
    pub fn condition(mut self, c: SetCondition) -> Self {
        self.condition = Some(c);
        self
    }

    /// Sets a relative expiry (`PX`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use keylatch_cluster::SetOptions;
    /// let opts = SetOptions::default().expire(Duration::from_secs(30));
    /// assert_eq!(opts.expire, Some(Duration::from_secs(30)));
    /// ```
    pub fn expire(mut self, ttl: Duration) -> Self {
        self.expire = Some(ttl);
        self
    }

    /// Keeps the key's current TTL (`KEEPTTL`).
    ///
    /// ```
    /// use keylatch_cluster::SetOptions;
    /// let opts = SetOptions::default().keep_ttl();
    /// assert!(opts.keep_ttl);
    /// assert_eq!(opts.expire, None);
    /// ```
    pub fn keep_ttl(mut self) -> Self {
        self.keep_ttl = true;
        self
    }
}

/// A key's time to live, from `PTTL`.
///
/// ```
/// use keylatch_cluster::Ttl;
/// assert_eq!(Ttl::from_pttl(-2), Ttl::Missing);
/// assert_eq!(Ttl::from_pttl(-1), Ttl::Persistent);
/// assert_eq!(Ttl::from_pttl(1500), Ttl::Expires(std::time::Duration::from_millis(1500)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// The key does not exist (`-2`).
    Missing,
    /// The key exists without an expiry (`-1`).
    Persistent,
    /// The key expires after this long.
    Expires(Duration),
}

impl Ttl {
    /// Interprets a `PTTL` reply.
    ///
    /// ```
    /// use std::time::Duration;
    /// use keylatch_cluster::Ttl;
    /// assert_eq!(Ttl::from_pttl(250), Ttl::Expires(Duration::from_millis(250)));
    /// assert_eq!(Ttl::from_pttl(0), Ttl::Expires(Duration::ZERO));
    /// assert_eq!(Ttl::from_pttl(-1), Ttl::Persistent);
    /// assert_eq!(Ttl::from_pttl(-2), Ttl::Missing);
    /// ```
    pub fn from_pttl(ms: i64) -> Self {
        match ms {
            -1 => Ttl::Persistent,
            ms if ms < 0 => Ttl::Missing,
            ms => Ttl::Expires(Duration::from_millis(ms.unsigned_abs())),
        }
    }
}

/// Milliseconds for `PX`/`PEXPIRE`, rounded up and at least 1 (0 is an error
/// for Redis, and rounding down could make a key expire early).
pub(crate) fn millis_arg(d: Duration) -> u64 {
    let ms = d.as_nanos().div_ceil(1_000_000);
    u64::try_from(ms).unwrap_or(u64::MAX).max(1)
}

fn keys_cmd<K: ToArg>(name: &str, keys: impl IntoIterator<Item = K>) -> Cmd {
    let mut cmd = Cmd::new(name);
    for k in keys {
        cmd.push_key(k);
    }
    cmd
}

fn script_cmd<K: ToArg, A: ToArg>(
    name: &str,
    script: impl ToArg,
    keys: impl IntoIterator<Item = K>,
    args: impl IntoIterator<Item = A>,
) -> Cmd {
    let keys: Vec<K> = keys.into_iter().collect();
    let mut cmd = Cmd::new(name).arg(script).arg(keys.len());
    for k in keys {
        cmd.push_key(k);
    }
    for a in args {
        cmd.push_arg(a);
    }
    cmd
}

/// The commands every client type speaks: one required method, [`send`](Commands::send),
/// and typed helpers on top of it.
///
/// Implemented by [`Connection`] (one node) and [`Client`](crate::Client)
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
/// Every helper is cancel safe in the sense of [`Connection::send`]: a
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
    /// See [`Connection::send`] and, for clusters, [`Error::Routing`] and
    /// [`Error::CrossSlot`].
    ///
    /// # Cancel safety
    /// Cancel safe: see [`Connection::send`].
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
        async move {
            match self.send(make()).await {
                Err(e) if e.server_kind() == Some(ServerErrorKind::NoScript) => {
                    // Load, then run again: two round trips on this rare path
                    // (Connection and Client override this with one write).
                    self.send(script.load_cmd()).await?;
                    self.send(make()).await
                }
                other => other,
            }
        }
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
        async move {
            match self.send(Cmd::clone(cmd)).await {
                Err(e) if e.server_kind() == Some(ServerErrorKind::NoScript) => {
                    self.send(script.load_cmd()).await?;
                    self.send(Cmd::clone(cmd)).await
                }
                other => other,
            }
        }
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
        let mut cmd = Cmd::new("SET").key(key).arg(value);
        match opts.condition {
            Some(SetCondition::IfAbsent) => cmd.push_arg("NX"),
            Some(SetCondition::IfPresent) => cmd.push_arg("XX"),
            None => {}
        }
        if let Some(ttl) = opts.expire {
            cmd.push_arg("PX");
            cmd.push_arg(millis_arg(ttl));
        } else if opts.keep_ttl {
            cmd.push_arg("KEEPTTL");
        }
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
        let cmd = keys_cmd("DEL", keys);
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
        let cmd = Cmd::new("PEXPIRE").key(key).arg(millis_arg(ttl));
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
        let cmd = script_cmd("EVAL", script, keys, args);
        self.send(cmd)
    }

    /// `EVALSHA sha numkeys keys… args…`. A script the server does not have
    /// answers [`ServerErrorKind::NoScript`]; prefer
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
        let cmd = script_cmd("EVALSHA", sha, keys, args);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_round_up_and_never_zero() {
        assert_eq!(millis_arg(Duration::from_micros(1)), 1);
        assert_eq!(millis_arg(Duration::ZERO), 1);
        assert_eq!(millis_arg(Duration::from_micros(1500)), 2);
        assert_eq!(millis_arg(Duration::from_secs(3)), 3000);
    }

    #[test]
    fn script_cmd_marks_keys() {
        let cmd = script_cmd("EVALSHA", "abc", ["k1", "k2"], ["a"]);
        let args: Vec<&[u8]> = cmd.args().collect();
        assert_eq!(args, [&b"EVALSHA"[..], b"abc", b"2", b"k1", b"k2", b"a"]);
        let keys: Vec<&[u8]> = cmd.keys().collect();
        assert_eq!(keys, [&b"k1"[..], b"k2"]);
    }
}
