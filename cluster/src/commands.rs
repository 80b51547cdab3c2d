//! Typed helpers for the commands the lock layer (and most users) need.

use std::time::Duration;

use bytes::Bytes;
use keylatch_resp::{Cmd, Frame, ToArg};

use crate::connection::Connection;
use crate::error::{Error, Result};
use crate::reply::FromReply;

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
    pub fn condition(mut self, c: SetCondition) -> Self {
        self.condition = Some(c);
        self
    }

    /// Sets a relative expiry (`PX`).
    pub fn expire(mut self, ttl: Duration) -> Self {
        self.expire = Some(ttl);
        self
    }

    /// Keeps the key's current TTL (`KEEPTTL`).
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

impl Connection {
    /// `PING`.
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// conn.ping().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send), or [`Error::UnexpectedReply`] if not `PONG`.
    ///
    /// # Cancel safety
    /// Cancel safe (as [`send`](Self::send)).
    pub async fn ping(&self) -> Result<()> {
        let reply = self.send(Cmd::new("PING")).await?;
        if reply == "PONG" {
            Ok(())
        } else {
            Err(Error::UnexpectedReply(format!("PING answered {reply}")))
        }
    }

    /// `GET key`.
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// let v: Option<bytes::Bytes> = conn.get("k").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn get(&self, key: impl ToArg) -> Result<Option<Bytes>> {
        self.cmd(Cmd::new("GET").key(key)).await
    }

    /// `SET key value`.
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// conn.set("k", "v").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn set(&self, key: impl ToArg, value: impl ToArg) -> Result<()> {
        self.send(Cmd::new("SET").key(key).arg(value))
            .await
            .map(drop)
    }

    /// `SET key value [NX|XX] [PX ms|KEEPTTL]`; `true` when the value was written.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use keylatch_cluster::{SetCondition, SetOptions};
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// let opts = SetOptions::default().condition(SetCondition::IfAbsent).expire(Duration::from_secs(1));
    /// let won = conn.set_with("k", "v", opts).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn set_with(
        &self,
        key: impl ToArg,
        value: impl ToArg,
        opts: SetOptions,
    ) -> Result<bool> {
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
        Ok(!matches!(self.send(cmd).await?, Frame::Null))
    }

    /// `SET key value NX PX ttl`: `true` when the key was absent and is now set.
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// let won = conn.set_nx_px("lock", "me", std::time::Duration::from_secs(10)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send).
    ///
    /// # Cancel safety
    /// Cancel safe (but a cancelled call may still have set the key).
    pub async fn set_nx_px(
        &self,
        key: impl ToArg,
        value: impl ToArg,
        ttl: Duration,
    ) -> Result<bool> {
        let opts = SetOptions::default()
            .condition(SetCondition::IfAbsent)
            .expire(ttl);
        self.set_with(key, value, opts).await
    }

    /// `DEL key…`: how many keys were removed.
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// let n = conn.del(["a", "b"]).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn del<K: ToArg>(&self, keys: impl IntoIterator<Item = K>) -> Result<i64> {
        self.cmd(keys_cmd("DEL", keys)).await
    }

    /// `PEXPIRE key ms`: `true` when the key exists and got the TTL.
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// conn.pexpire("k", std::time::Duration::from_millis(250)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn pexpire(&self, key: impl ToArg, ttl: Duration) -> Result<bool> {
        self.cmd(Cmd::new("PEXPIRE").key(key).arg(millis_arg(ttl)))
            .await
    }

    /// `PTTL key`.
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// if let keylatch_cluster::Ttl::Expires(left) = conn.pttl("k").await? { println!("{left:?}"); }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn pttl(&self, key: impl ToArg) -> Result<Ttl> {
        Ok(Ttl::from_pttl(self.cmd(Cmd::new("PTTL").key(key)).await?))
    }

    /// `EVAL script numkeys keys… args…`.
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// let reply = conn.eval("return redis.call('GET', KEYS[1])", ["k"], [0u8; 0].iter()).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send); script errors are [`Error::Server`].
    ///
    /// # Cancel safety
    /// Cancel safe (a cancelled script may still have run).
    pub async fn eval<K: ToArg, A: ToArg>(
        &self,
        script: &str,
        keys: impl IntoIterator<Item = K>,
        args: impl IntoIterator<Item = A>,
    ) -> Result<Frame> {
        self.send(script_cmd("EVAL", script, keys, args)).await
    }

    /// `EVALSHA sha numkeys keys… args…`. A script the server does not have
    /// answers [`ServerErrorKind::NoScript`](crate::ServerErrorKind::NoScript).
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// let sha = conn.script_load("return ARGV[1]").await?;
    /// let reply = conn.evalsha(&sha, [0u8; 0].iter(), ["hi"]).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send).
    ///
    /// # Cancel safety
    /// Cancel safe (a cancelled script may still have run).
    pub async fn evalsha<K: ToArg, A: ToArg>(
        &self,
        sha: &str,
        keys: impl IntoIterator<Item = K>,
        args: impl IntoIterator<Item = A>,
    ) -> Result<Frame> {
        self.send(script_cmd("EVALSHA", sha, keys, args)).await
    }

    /// `SCRIPT LOAD script`: the script's SHA1 in hex.
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// let sha = conn.script_load("return 1").await?;
    /// assert_eq!(sha.len(), 40);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn script_load(&self, script: &str) -> Result<String> {
        self.cmd(Cmd::new("SCRIPT").arg("LOAD").arg(script)).await
    }

    /// `PUBLISH channel message`: how many subscribers received it.
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// let receivers = conn.publish("news", "hello").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn publish(&self, channel: impl ToArg, message: impl ToArg) -> Result<i64> {
        self.cmd(Cmd::new("PUBLISH").arg(channel).arg(message))
            .await
    }

    /// `TIME`: the server's clock as time since the Unix epoch.
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// let now = conn.time().await?;
    /// assert!(now.as_secs() > 1_600_000_000);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send), or [`Error::UnexpectedReply`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn time(&self) -> Result<Duration> {
        let parts: Vec<u64> = self.cmd(Cmd::new("TIME")).await?;
        match parts.as_slice() {
            [secs, micros] if *micros < 1_000_000 => {
                Ok(Duration::from_secs(*secs) + Duration::from_micros(*micros))
            }
            _ => Err(Error::UnexpectedReply(format!("TIME answered {parts:?}"))),
        }
    }

    /// `WAIT numreplicas timeout`: how many replicas acknowledged the
    /// connection's writes so far.
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
        let cmd = Cmd::new("WAIT")
            .arg(replicas)
            .arg(timeout.as_millis().min(u128::from(u64::MAX)) as u64);
        i64::from_reply(self.send_timeout(cmd, budget).await?)
    }

    /// `INFO [section]` as text.
    ///
    /// ```no_run
    /// # async fn demo(conn: keylatch_cluster::Connection) -> keylatch_cluster::Result<()> {
    /// let info = conn.info(Some("server")).await?;
    /// assert!(info.contains("redis_version"));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`send`](Self::send).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn info(&self, section: Option<&str>) -> Result<String> {
        let mut cmd = Cmd::new("INFO");
        if let Some(s) = section {
            cmd.push_arg(s);
        }
        self.cmd(cmd).await
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
