//! The key and string commands' parts: `SET`'s options, a `PTTL` reply as
//! a [`Ttl`], and the commands built from them.

use std::time::Duration;

use keylatch_resp::{Cmd, ToArg};

/// When `SET` may write.
///
/// ```
/// use keylatch_cluster::SetCondition;
/// assert_ne!(SetCondition::IfAbsent, SetCondition::IfPresent);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SetCondition {
    /// `NX`: only if the key does not exist.
    IfAbsent,
    /// `XX`: only if the key exists.
    IfPresent,
}

/// Options for [`Commands::set_with`](super::Commands::set_with).
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
pub(super) fn millis_arg(d: Duration) -> u64 {
    let ms = d.as_nanos().div_ceil(1_000_000);
    u64::try_from(ms).unwrap_or(u64::MAX).max(1)
}

/// `name key…`, every argument a key.
pub(super) fn keys_cmd<K: ToArg>(name: &str, keys: impl IntoIterator<Item = K>) -> Cmd {
    let mut cmd = Cmd::new(name);
    for k in keys {
        cmd.push_key(k);
    }
    cmd
}

/// `SET key value [NX|XX] [PX ms|KEEPTTL]`.
pub(super) fn set_cmd(key: impl ToArg, value: impl ToArg, opts: SetOptions) -> Cmd {
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
    cmd
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
}
