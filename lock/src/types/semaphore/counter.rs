//! What both semaphores share: their names, the counter's calls, the
//! wait for permits, and the replies of their scripts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::Commands;
use keylatch_resp::Frame;

use crate::context::Inner;
use crate::error::{LockError, LockResult};
use crate::lease::Renewal;
use crate::lock::retriable;

use super::permit_id::PermitId;
use crate::names::{companion, suffixed};
use crate::owner::Owner;
use crate::reply::parse_pair as pair;
use crate::scripts::{
    PERMITS_RELEASE, PERMITS_RENEW, PERMITS_RENEW_NODE, SEMAPHORE_CHANGE, SEMAPHORE_DRAIN,
    SEMAPHORE_SET,
};
use crate::shape::wrong_type;
use crate::wake::Wake;

/// Most permits one [`ExpirableSemaphore`](crate::ExpirableSemaphore) acquire may lease: each is an id
/// in the request, the zset and the guard, so the bound keeps one call's
/// script (and the guard) small.
pub const MAX_LEASED_PERMITS: u64 = 10_000;

/// The largest count a semaphore or a latch takes (set, added, taken,
/// given back): 2^53 − 1. The scripts count in Lua numbers (doubles),
/// exact up to there; past it, 2^53 + 1 permits asked of 2^53 would be
/// granted, and a count could be read back as another number.
///
/// ```
/// assert_eq!(keylatch_lock::MAX_COUNT, (1 << 53) - 1);
/// ```
pub const MAX_COUNT: u64 = (1 << 53) - 1;

/// `n` when a semaphore or latch may count it; else
/// [`LockError::CountTooLarge`], before anything is sent.
pub(crate) fn bounded(n: u64) -> LockResult<u64> {
    if n > MAX_COUNT {
        return Err(LockError::CountTooLarge {
            asked: n,
            max: MAX_COUNT,
        });
    }
    Ok(n)
}

/// Leased permits of one guard: the hold's "owner" is its permit ids (hex,
/// comma-separated) and its "counter" the permits zset, `{name}:timeout`.
/// Not tracked: the hold's key is the semaphore's counter, which every
/// acquire and release of anyone writes.
pub(super) static PERMITS_LEASE: Renewal = Renewal {
    slot: &PERMITS_RENEW,
    node: &PERMITS_RENEW_NODE,
    tracked: false,
    counter: permits_zset,
    by_owner: None,
    owner_only: false,
};

/// The permits zset, `{name}:timeout` (the hold's field is its permit ids).
fn permits_zset(name: &str, _field: &Owner) -> String {
    suffixed(name, Some("timeout"))
}

/// The names one semaphore uses.
#[derive(Clone, Debug)]
pub(super) struct SemNames {
    /// The counter: the user's name.
    pub(super) key: Arc<str>,
    /// `redisson_sc:{name}`.
    pub(super) channel: String,
    /// `{name}:timeout` (permit-expirable semaphores only).
    pub(super) timeouts: Arc<str>,
}

impl SemNames {
    pub(super) fn new(name: &str) -> Self {
        Self {
            key: Arc::from(name),
            channel: companion("redisson_sc", name),
            timeouts: Arc::from(suffixed(name, Some("timeout"))),
        }
    }
}

/// What a force unlock needs of a semaphore `name`: its leased permits'
/// zset and its channel.
pub(crate) fn force_keys(name: &str) -> (String, String) {
    let n = SemNames::new(name);
    (n.timeouts.to_string(), n.channel)
}

/// A permit count as the scripts' signed delta: `u64` counts past
/// `i64::MAX` are capped (no server holds more).
pub(super) fn signed(permits: u64) -> i64 {
    i64::try_from(permits).unwrap_or(i64::MAX)
}

/// The calls both semaphores make on their counter (the name, set, add,
/// reduce, count, drain), written once: each type gives its constructor and a name
/// for the examples, and its own words for what each call does.
macro_rules! count_methods {
    (
        ctor: $ctor:literal,
        name: $name:literal,
        set: $set:literal,
        add: $add:literal,
        reduce: $reduce:literal,
        available: $available:literal,
        drain: $drain:literal $(,)?
    ) => {
        /// The semaphore's name.
        ///
        /// ```no_run
        /// # fn demo(locks: keylatch_lock::Locks) {
        #[doc = concat!("assert_eq!(locks.", $ctor, "(\"", $name, "\").name(), \"", $name, "\");")]
        /// # }
        /// ```
        pub fn name(&self) -> &str {
            &self.c.names.key
        }

        #[doc = $set]
        ///
        /// ```no_run
        /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
        #[doc = concat!("let set = locks.", $ctor, "(\"", $name, "\").try_set_permits(3).await?;")]
        /// # Ok(()) }
        /// ```
        ///
        /// # Errors
        /// [`LockError::WrongType`](crate::LockError::WrongType) when the
        /// name holds something that is no count (another type, a name
        /// reused); [`LockError::Client`](crate::LockError::Client).
        /// [`LockError::CountTooLarge`](crate::LockError::CountTooLarge)
        /// above [`MAX_COUNT`](crate::MAX_COUNT), before anything is sent.
        ///
        /// # Cancel safety
        /// Cancel safe; a cancelled call may still have set them.
        pub async fn try_set_permits(&self, permits: u64) -> LockResult<bool> {
            self.c.try_set(permits).await
        }

        #[doc = $add]
        ///
        /// ```no_run
        /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
        #[doc = concat!("let now = locks.", $ctor, "(\"", $name, "\").add_permits(2).await?;")]
        /// # Ok(()) }
        /// ```
        ///
        /// # Errors
        /// [`LockError::WrongType`](crate::LockError::WrongType) when the
        /// key holds something else than a count (the name reused by another
        /// type); [`LockError::Client`](crate::LockError::Client).
        /// [`LockError::CountTooLarge`](crate::LockError::CountTooLarge)
        /// above [`MAX_COUNT`](crate::MAX_COUNT), before anything is sent.
        ///
        /// # Cancel safety
        /// Cancel safe; a cancelled call may still have added them.
        pub async fn add_permits(&self, permits: u64) -> LockResult<i64> {
            self.c
                .change(super::counter::signed(super::counter::bounded(permits)?))
                .await
        }

        #[doc = $reduce]
        ///
        /// ```no_run
        /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
        #[doc = concat!("let now = locks.", $ctor, "(\"", $name, "\").reduce_permits(1).await?;")]
        /// # Ok(()) }
        /// ```
        ///
        /// # Errors
        /// [`LockError::WrongType`](crate::LockError::WrongType) when the
        /// key holds something else than a count (the name reused by another
        /// type); [`LockError::Client`](crate::LockError::Client).
        /// [`LockError::CountTooLarge`](crate::LockError::CountTooLarge)
        /// above [`MAX_COUNT`](crate::MAX_COUNT), before anything is sent.
        ///
        /// # Cancel safety
        /// Cancel safe; a cancelled call may still have removed them.
        pub async fn reduce_permits(&self, permits: u64) -> LockResult<i64> {
            self.c
                .change(-super::counter::signed(super::counter::bounded(permits)?))
                .await
        }

        #[doc = $available]
        ///
        /// ```no_run
        /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
        #[doc = concat!("let free = locks.", $ctor, "(\"", $name, "\").available().await?;")]
        /// # Ok(()) }
        /// ```
        ///
        /// # Errors
        /// [`LockError::WrongType`](crate::LockError::WrongType) when the
        /// key holds something else than a count (the name reused by another
        /// type); [`LockError::Client`](crate::LockError::Client).
        ///
        /// # Cancel safety
        /// Cancel safe.
        pub async fn available(&self) -> LockResult<i64> {
            self.c.drain(true).await
        }

        #[doc = $drain]
        ///
        /// ```no_run
        /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
        #[doc = concat!("let taken = locks.", $ctor, "(\"", $name, "\").drain().await?;")]
        /// # Ok(()) }
        /// ```
        ///
        /// # Errors
        /// [`LockError::WrongType`](crate::LockError::WrongType) when the
        /// key holds something else than a count (the name reused by another
        /// type); [`LockError::Client`](crate::LockError::Client).
        ///
        /// # Cancel safety
        /// Cancel safe; a cancelled call may still have drained.
        pub async fn drain(&self) -> LockResult<u64> {
            // A count below zero is set to 0 as well (Redisson's
            // drainPermits), but no permit was taken then.
            Ok(self.c.drain(false).await?.max(0).unsigned_abs())
        }
    };
}
pub(super) use count_methods;

/// What one try of an acquire found.
pub(super) enum Try<T> {
    Got(T),
    /// Not enough permits; the hint (ms) bounds the nap (-1: none).
    Short(i64),
}

/// Tries until it gets, or `deadline` passes (`Ok(None)`). The first try
/// needs no subscription; after it the waiter listens on `channel` and
/// tries again on a message, a gap, the hint or the re-check.
pub(super) async fn wait_for<T, F, Fut>(
    inner: &Inner,
    name: &str,
    channel: &str,
    deadline: Option<Instant>,
    mut once: F,
) -> LockResult<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = LockResult<Try<T>>>,
{
    let mut wake: Option<Wake> = None;
    // The acquire event's clock, read only when debug events are wanted.
    let started = tracing::enabled!(tracing::Level::DEBUG).then(Instant::now);
    let log = |outcome: &str, error: Option<&LockError>| {
        let waited_ms = started.map_or(0, |s| {
            u64::try_from(s.elapsed().as_millis()).unwrap_or(u64::MAX)
        });
        match error {
            Some(e) => tracing::debug!(lock = %name, kind = "semaphore", outcome, waited_ms,
                error = %e, "acquire"),
            None => {
                tracing::debug!(lock = %name, kind = "semaphore", outcome, waited_ms, "acquire")
            }
        }
    };
    loop {
        let hint = match once().await {
            Ok(Try::Got(v)) => {
                log("acquired", None);
                return Ok(Some(v));
            }
            Ok(Try::Short(hint)) => hint,
            Err(e) => {
                log("failed", Some(&e));
                return Err(e);
            }
        };
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
            log("not acquired in time", None);
            return Ok(None);
        }
        let wake = match wake.as_mut() {
            Some(w) => w,
            None => {
                // Subscribed, try again at once: a release in between would
                // otherwise be missed until the re-check.
                wake = Some(Wake::subscribe(inner, name, channel, deadline).await);
                continue;
            }
        };
        let mut nap = inner.config.recheck;
        if hint > 0 {
            nap = nap.min(Duration::from_millis(hint.unsigned_abs()));
        }
        if let Some(left) = left {
            nap = nap.min(left);
        }
        wake.pause(nap).await;
    }
}

/// What a semaphore acquire script's `{status, hint}` reply says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SemReply {
    /// The permits were taken (status 1).
    Got,
    /// The semaphore does not exist (status -1).
    Missing,
    /// Its key holds something else than a count (status -3).
    WrongType,
    /// Not enough permits (any other status); the hint, in milliseconds,
    /// until a leased permit expires (or -1).
    Short(i64),
}

/// Reads a semaphore acquire reply; any other shape is
/// [`LockError::Protocol`].
pub(crate) fn sem_reply(frame: &Frame) -> LockResult<SemReply> {
    Ok(match pair(frame)? {
        (1, _) => SemReply::Got,
        (-1, _) => SemReply::Missing,
        (-3, _) => SemReply::WrongType,
        (_, hint) => SemReply::Short(hint),
    })
}

/// Reads a `permits_renew` reply for one guard's permits: `true` when
/// they stand (renewed), `false` when gone; any other shape is
/// [`LockError::Protocol`].
pub(crate) fn renew_reply(reply: Frame) -> LockResult<bool> {
    let first = |v: &[Frame]| v.first().map(Frame::value).cloned();
    match reply.into_value() {
        Frame::Array(v) if first(&v) == Some(Frame::Integer(1)) => Ok(true),
        Frame::Array(v) if first(&v) == Some(Frame::Integer(0)) => Ok(false),
        other => Err(LockError::Protocol(other.shown())),
    }
}

/// An integer reply; any other shape is [`LockError::Protocol`].
pub(crate) fn integer(frame: &Frame) -> LockResult<i64> {
    match frame.value() {
        Frame::Integer(n) => Ok(*n),
        other => Err(LockError::Protocol(other.shown())),
    }
}

pub(super) fn wait_deadline(wait: Duration) -> Option<Instant> {
    if wait.is_zero() {
        Some(Instant::now())
    } else {
        Instant::now().checked_add(wait)
    }
}

/// How long one acquire attempt may take: the remaining wait, at least
/// [`LocksConfig::attempt_timeout`](crate::LocksConfig::attempt_timeout).
pub(super) fn bound(inner: &Inner, deadline: Option<Instant>) -> Duration {
    let floor = inner.config.attempt_timeout;
    deadline.map_or(floor, |d| {
        d.saturating_duration_since(Instant::now()).max(floor)
    })
}

/// The operations both kinds share, on their counter.
#[derive(Clone)]
pub(super) struct Counter {
    pub(super) inner: Arc<Inner>,
    pub(super) names: SemNames,
    /// Permit-expirable: expired permits are returned before counting.
    pub(super) expirable: bool,
}

impl Counter {
    pub(super) async fn try_set(&self, permits: u64) -> LockResult<bool> {
        let n = bounded(permits)?.to_string();
        let reply = self
            .inner
            .client
            .eval_script(
                &SEMAPHORE_SET,
                &[&*self.names.key],
                &[
                    n.as_str(),
                    self.names.channel.as_str(),
                    self.inner.publish_command(),
                    n.as_str(),
                ],
            )
            .await?;
        match integer(&reply)? {
            // No count at the name: another type, or a name reused.
            -1 => Err(wrong_type(&self.inner, &self.names.key).await),
            n => Ok(n == 1),
        }
    }

    pub(super) async fn change(&self, delta: i64) -> LockResult<i64> {
        let reply = self
            .inner
            .client
            .eval_script(
                &SEMAPHORE_CHANGE,
                &[&*self.names.key],
                &[
                    delta.to_string().as_str(),
                    self.names.channel.as_str(),
                    self.inner.publish_command(),
                ],
            )
            .await?;
        self.count_or_wrong_type(&reply).await
    }

    /// A count script's integer, or (nil: the key holds something else
    /// than a count) [`LockError::WrongType`] naming what it holds.
    pub(super) async fn count_or_wrong_type(&self, reply: &Frame) -> LockResult<i64> {
        if *reply.value() == Frame::Null {
            return Err(wrong_type(&self.inner, &self.names.key).await);
        }
        integer(reply)
    }

    pub(super) async fn drain(&self, only_count: bool) -> LockResult<i64> {
        let mut keys = vec![&*self.names.key];
        if self.expirable {
            keys.push(&*self.names.timeouts);
        }
        let reply = self
            .inner
            .client
            .eval_script(
                &SEMAPHORE_DRAIN,
                &keys,
                &[if only_count { "1" } else { "0" }],
            )
            .await?;
        if *reply.value() == Frame::Null {
            return Err(wrong_type(&self.inner, &self.names.key).await);
        }
        exact_count(&reply)
    }
}

/// The drain script's count: the counter's text (exact, whatever its
/// size), or an integer (a missing semaphore's 0).
fn exact_count(frame: &Frame) -> LockResult<i64> {
    match frame.value() {
        Frame::Integer(n) => Ok(*n),
        f => f
            .as_bytes()
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|t| t.parse::<i64>().ok())
            .ok_or_else(|| LockError::Protocol(format!("a count that is no i64: {}", f.shown()))),
    }
}

/// Gives `permits` back to the pool by count (a plain semaphore's release),
/// returning the permits available after. Retried, as [`release_ids`] is,
/// only while it surely did not run: a count given twice would create a
/// permit.
///
/// A server out of memory refuses the count's write (nothing ran): that is
/// tried again for up to `oom_patience` (at least as long as the rest),
/// since plain permits have no lease and a count never given back is a
/// permit lost for good.
pub(super) async fn give_back(
    c: &Counter,
    permits: u64,
    oom_patience: Duration,
) -> LockResult<i64> {
    let cfg = &c.inner.config;
    let start = Instant::now();
    let patience = cfg.attempt_timeout.max(Duration::from_secs(1));
    let until = start + patience;
    let until_oom = start + oom_patience.max(patience);
    let mut pause = Duration::from_millis(20);
    loop {
        match c.change(signed(permits)).await {
            Err(LockError::Client(e))
                if retriable(&e) && Instant::now() + pause < oom_or(&e, until, until_oom) =>
            {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            other => return other,
        }
    }
}

/// Whether `e` is a refusal for want of memory (`OOM`).
pub(super) fn is_oom(e: &LockError) -> bool {
    matches!(e, LockError::Client(e) if e.server_kind() == Some(keylatch_cluster::ServerErrorKind::Oom))
}

/// `until_oom` for a refusal for want of memory, else `until`.
fn oom_or(e: &keylatch_cluster::Error, until: Instant, until_oom: Instant) -> Instant {
    if e.server_kind() == Some(keylatch_cluster::ServerErrorKind::Oom) {
        until_oom
    } else {
        until
    }
}

/// `permits_release.lua` for `ids`: (released, of those expired). Retried
/// while it surely did not run (not sent, a redirect, a slot migrating),
/// for up to the attempt timeout.
pub(super) async fn release_ids(c: &Counter, ids: &[PermitId]) -> LockResult<(usize, usize)> {
    if ids.is_empty() {
        return Ok((0, 0));
    }
    let hex: Vec<String> = ids.iter().map(ToString::to_string).collect();
    let mut args: Vec<&str> = vec![c.names.channel.as_str(), c.inner.publish_command()];
    args.extend(hex.iter().map(String::as_str));
    let keys = [&*c.names.key, &*c.names.timeouts];
    let until = Instant::now() + c.inner.config.attempt_timeout.max(Duration::from_secs(1));
    let mut pause = Duration::from_millis(20);
    let frame = loop {
        match c
            .inner
            .client
            .eval_script(&PERMITS_RELEASE, &keys, &args)
            .await
        {
            Ok(f) => break f,
            Err(e) if retriable(&e) && Instant::now() + pause < until => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            Err(e) => return Err(e.into()),
        }
    };
    let (released, expired) = pair(&frame)?;
    Ok((
        usize::try_from(released).unwrap_or(0),
        usize::try_from(expired).unwrap_or(0),
    ))
}
