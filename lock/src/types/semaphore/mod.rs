//! Semaphores in Redisson's layouts: [`Semaphore`] (`RSemaphore`: one
//! string, the available permits) and [`ExpirableSemaphore`]
//! (`RPermitExpirableSemaphore`: the same string plus a zset of leased
//! permit ids), with [`PermitGuard`] for the leased permits.
//!
//! Waiting is the locks' (`wake.rs`): subscribe to `redisson_sc:{name}`
//! (every release publishes the new count), try again on a message, a gap,
//! the nearest permit's expiry or the bounded re-check, so a lost message
//! costs at most [`LocksConfig::recheck`](crate::LocksConfig::recheck).
//! A wait on a semaphore that does not exist fails at once
//! ([`LockError::NoSuchSemaphore`]).
//!
//! An acquire whose reply comes after its caller left (dropped, or past
//! its bound) is settled by the connection's late handler: permits it took
//! are given back (plain permits by count; leased ones by their ids), so a
//! cancelled acquire never leaks permits.
//!
//! Leased permits are holds of the lease engine (`PERMITS_LEASE`):
//! one hold per guard, named by its permit ids, renewed by the watchdog
//! (their expiries are server time + lease) while the guard lives without a
//! fixed lease, so a process that dies gives its permits back within one
//! lease; `lost()` fires when a permit is gone or expired.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::{Commands, Error as ClientError};
use keylatch_resp::Frame;

use crate::context::Inner;
use crate::error::{LockError, LockResult};
use crate::hold_key::HoldKey;
use crate::lease::hold::{clamp_span, millis, Hold, NewHold};
use crate::lease::{LossReason, Renewal};
use crate::lock::{retriable, Detached};
use crate::names::{companion, suffixed};
use crate::reply::parse_pair as pair;
use crate::scripts::{
    PERMITS_ACQUIRE, PERMITS_RELEASE, PERMITS_RENEW, PERMITS_RENEW_NODE, SEMAPHORE_ACQUIRE,
    SEMAPHORE_CHANGE, SEMAPHORE_DRAIN, SEMAPHORE_SET,
};
use crate::shape::wrong_type;
use crate::wake::Wake;

/// Most permits one [`ExpirableSemaphore`] acquire may lease: each is an id
/// in the request, the zset and the guard, so the bound keeps one call's
/// script (and the guard) small.
pub const MAX_LEASED_PERMITS: u64 = 10_000;

/// Leased permits of one guard: the hold's "owner" is its permit ids (hex,
/// comma-separated) and its "counter" the permits zset, `{name}:timeout`.
/// Not tracked: the hold's key is the semaphore's counter, which every
/// acquire and release of anyone writes.
static PERMITS_LEASE: Renewal = Renewal {
    slot: &PERMITS_RENEW,
    node: &PERMITS_RENEW_NODE,
    tracked: false,
};

/// The names one semaphore uses.
#[derive(Clone, Debug)]
struct SemNames {
    /// The counter: the user's name.
    key: Arc<str>,
    /// `redisson_sc:{name}`.
    channel: String,
    /// `{name}:timeout` (permit-expirable semaphores only).
    timeouts: Arc<str>,
}

impl SemNames {
    fn new(name: &str) -> Self {
        Self {
            key: Arc::from(name),
            channel: companion("redisson_sc", name),
            timeouts: Arc::from(suffixed(name, Some("timeout"))),
        }
    }
}

/// What one try of an acquire found.
enum Try<T> {
    Got(T),
    /// Not enough permits; the hint (ms) bounds the nap (-1: none).
    Short(i64),
}

/// Tries until it gets, or `deadline` passes (`Ok(None)`). The first try
/// needs no subscription; after it the waiter listens on `channel` and
/// tries again on a message, a gap, the hint or the re-check.
async fn wait_for<T, F, Fut>(
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
    loop {
        let hint = match once().await? {
            Try::Got(v) => return Ok(Some(v)),
            Try::Short(hint) => hint,
        };
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
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
        other => Err(LockError::Protocol(other.to_string())),
    }
}

/// An integer reply; any other shape is [`LockError::Protocol`].
pub(crate) fn integer(frame: &Frame) -> LockResult<i64> {
    match frame.value() {
        Frame::Integer(n) => Ok(*n),
        other => Err(LockError::Protocol(other.to_string())),
    }
}

fn wait_deadline(wait: Duration) -> Option<Instant> {
    if wait.is_zero() {
        Some(Instant::now())
    } else {
        Instant::now().checked_add(wait)
    }
}

/// How long one acquire attempt may take: the remaining wait, at least
/// [`LocksConfig::attempt_timeout`](crate::LocksConfig::attempt_timeout).
fn bound(inner: &Inner, deadline: Option<Instant>) -> Duration {
    let floor = inner.config.attempt_timeout;
    deadline.map_or(floor, |d| {
        d.saturating_duration_since(Instant::now()).max(floor)
    })
}

/// The operations both kinds share, on their counter.
#[derive(Clone)]
struct Counter {
    inner: Arc<Inner>,
    names: SemNames,
    /// Permit-expirable: expired permits are returned before counting.
    expirable: bool,
}

impl Counter {
    async fn try_set(&self, permits: u64) -> LockResult<bool> {
        let n = permits.to_string();
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

    async fn change(&self, delta: i64) -> LockResult<i64> {
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
    async fn count_or_wrong_type(&self, reply: &Frame) -> LockResult<i64> {
        if *reply.value() == Frame::Null {
            return Err(wrong_type(&self.inner, &self.names.key).await);
        }
        integer(reply)
    }

    async fn drain(&self, only_count: bool) -> LockResult<i64> {
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
        self.count_or_wrong_type(&reply).await
    }
}

/// A semaphore in Redisson's `RSemaphore` layout: the key named after it
/// holds the available permits; releases publish the new count on
/// `redisson_sc:{name}`. Permits belong to nobody: a holder that crashes
/// never gives its permits back (see [`ExpirableSemaphore`] for permits
/// that come back by themselves).
///
/// ```no_run
/// use std::time::Duration;
/// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
/// let sem = locks.semaphore("downloads");
/// sem.try_set_permits(3).await?; // only when not set yet
/// if sem.try_acquire(1, Duration::from_secs(5)).await? {
///     // … one of at most three …
///     sem.release(1).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    c: Counter,
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.c.names.key)
            .finish_non_exhaustive()
    }
}

impl Semaphore {
    pub(crate) fn new(inner: Arc<Inner>, name: &str) -> Self {
        Self {
            c: Counter {
                inner,
                names: SemNames::new(name),
                expirable: false,
            },
        }
    }

    /// The semaphore's name.
    ///
    /// ```no_run
    /// # fn demo(locks: keylatch_lock::Locks) {
    /// assert_eq!(locks.semaphore("downloads").name(), "downloads");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.c.names.key
    }

    /// Sets the permits when the semaphore does not exist yet; `true` when
    /// set (the count is published), `false` when it existed (unchanged).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let first = locks.semaphore("downloads").try_set_permits(3).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the name holds something that is no
    /// count (another type, a name reused); [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have set them.
    pub async fn try_set_permits(&self, permits: u64) -> LockResult<bool> {
        self.c.try_set(permits).await
    }

    /// Adds `delta` permits (negative: takes them away, even below zero),
    /// keeping the key's expiry (Redisson's `addPermits` drops it). Returns
    /// the permits available after; waiters are told.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let now = locks.semaphore("downloads").add_permits(2).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the key holds something else than a
    /// count (the name reused by another type); [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have added them.
    pub async fn add_permits(&self, delta: i64) -> LockResult<i64> {
        self.c.change(delta).await
    }

    /// Permits available now (0 when the semaphore does not exist).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// println!("{} free", locks.semaphore("downloads").available().await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the key holds something else than a
    /// count (the name reused by another type); [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn available(&self) -> LockResult<i64> {
        self.c.drain(true).await
    }

    /// Takes every available permit at once; returns how many.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let taken = locks.semaphore("downloads").drain().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the key holds something else than a
    /// count (the name reused by another type); [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have drained.
    pub async fn drain(&self) -> LockResult<i64> {
        self.c.drain(false).await
    }

    /// Gives `permits` back and tells waiters; returns the permits
    /// available after. (Anyone may release: permits have no owner.)
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// locks.semaphore("downloads").release(1).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the key holds something else than a
    /// count (the name reused by another type); [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have released.
    pub async fn release(&self, permits: u64) -> LockResult<i64> {
        self.c
            .change(i64::try_from(permits).unwrap_or(i64::MAX))
            .await
    }

    /// Waits as long as it takes for `permits`.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let sem = locks.semaphore("downloads");
    /// sem.acquire(1).await?;
    /// sem.release(1).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// See [`try_acquire`](Self::try_acquire).
    ///
    /// # Cancel safety
    /// See [`try_acquire`](Self::try_acquire).
    pub async fn acquire(&self, permits: u64) -> LockResult<()> {
        self.wait(permits, None).await.map(drop)
    }

    /// Tries for up to `wait` to take `permits`; `false` when not in time.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let sem = locks.semaphore("downloads");
    /// if sem.try_acquire(2, Duration::from_secs(1)).await? {
    ///     sem.release(2).await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::NoSuchSemaphore`] at once when the semaphore was never
    /// set (nothing to wait for); [`LockError::WrongType`] at once when its
    /// key holds something else than a count (a lock, a list, …);
    /// [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe: permits taken by an attempt whose reply comes after the
    /// caller left are given back in the background.
    pub async fn try_acquire(&self, permits: u64, wait: Duration) -> LockResult<bool> {
        Ok(self.wait(permits, wait_deadline(wait)).await?.is_some())
    }

    async fn wait(&self, permits: u64, deadline: Option<Instant>) -> LockResult<Option<()>> {
        if permits == 0 {
            // Nothing to take (Redisson answers at once too).
            return Ok(Some(()));
        }
        let n = permits.to_string();
        let names = &self.c.names;
        let cmd = Arc::new(SEMAPHORE_ACQUIRE.evalsha_cmd(&[&*names.key], &[n.as_str()]));
        // A reply nobody waits for any more: permits it took go back.
        let late: keylatch_cluster::LateReply = {
            let c = self.c.clone();
            Arc::new(move |frame| {
                if matches!(sem_reply(&frame), Ok(SemReply::Got)) {
                    if let Ok(rt) = tokio::runtime::Handle::try_current() {
                        let c = c.clone();
                        rt.spawn(async move {
                            let _ = c.change(i64::try_from(permits).unwrap_or(i64::MAX)).await;
                        });
                    }
                }
            })
        };
        let inner = &self.c.inner;
        wait_for(inner, &names.key, &names.channel, deadline, || {
            let (cmd, late) = (Arc::clone(&cmd), Arc::clone(&late));
            async move {
                let frame = inner
                    .client
                    .eval_shared_settled(
                        &SEMAPHORE_ACQUIRE,
                        &cmd,
                        Some(bound(inner, deadline)),
                        late,
                    )
                    .await?;
                match sem_reply(&frame)? {
                    SemReply::Got => Ok(Try::Got(())),
                    SemReply::Missing => Err(LockError::NoSuchSemaphore {
                        name: names.key.to_string(),
                    }),
                    SemReply::WrongType => Err(wrong_type(inner, &names.key).await),
                    // Short: waits for a release (no hint).
                    SemReply::Short(_) => Ok(Try::Short(-1)),
                }
            }
        })
        .await
    }
}

/// A permit id: 16 random bytes, shown as 32 hex digits (Redisson's
/// `RPermitExpirableSemaphore` ids; stored raw in `{name}:timeout`).
///
/// ```
/// use keylatch_lock::PermitId;
/// let id: PermitId = "00112233445566778899aabbccddeeff".parse().unwrap();
/// assert_eq!(id.to_string(), "00112233445566778899aabbccddeeff");
/// assert!("xyz".parse::<PermitId>().is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PermitId([u8; 16]);

impl PermitId {
    fn random() -> Self {
        Self(*uuid::Uuid::new_v4().as_bytes())
    }

    /// The raw 16 bytes, as stored on the server.
    ///
    /// ```
    /// use keylatch_lock::PermitId;
    /// let id: PermitId = "000102030405060708090a0b0c0d0e0f".parse().unwrap();
    /// assert_eq!(id.as_bytes()[15], 15);
    /// ```
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl fmt::Display for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PermitId({self})")
    }
}

/// A text that is not 32 hex digits.
///
/// ```
/// assert!("nope".parse::<keylatch_lock::PermitId>().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadPermitId;

impl fmt::Display for BadPermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a permit id is 32 hex digits")
    }
}

impl std::error::Error for BadPermitId {}

impl FromStr for PermitId {
    type Err = BadPermitId;

    fn from_str(s: &str) -> Result<Self, BadPermitId> {
        let b = s.as_bytes();
        if b.len() != 32 {
            return Err(BadPermitId);
        }
        let mut out = [0u8; 16];
        for (i, pair) in b.chunks(2).enumerate() {
            let hex = std::str::from_utf8(pair).map_err(|_| BadPermitId)?;
            out[i] = u8::from_str_radix(hex, 16).map_err(|_| BadPermitId)?;
        }
        Ok(Self(out))
    }
}

/// A permit-expirable semaphore in Redisson's `RPermitExpirableSemaphore`
/// layout: the key holds the available permits, `{name}:timeout` the
/// leased permits (raw id → expiry). The crash-safe semaphore: every
/// permit taken has a lease (the watchdog's, renewed while its
/// [`PermitGuard`] lives, or a fixed one), so a process that dies gives its
/// permits back within one lease. Expiries come from the server's clock.
///
/// ```no_run
/// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
/// let sem = locks.expirable_semaphore("render-slots");
/// sem.try_set_permits(4).await?;
/// let permits = sem.acquire(1, None).await?; // renewed while held
/// println!("holding {:?}", permits.ids());
/// permits.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ExpirableSemaphore {
    c: Counter,
}

impl fmt::Debug for ExpirableSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExpirableSemaphore")
            .field("name", &self.c.names.key)
            .finish_non_exhaustive()
    }
}

impl ExpirableSemaphore {
    pub(crate) fn new(inner: Arc<Inner>, name: &str) -> Self {
        Self {
            c: Counter {
                inner,
                names: SemNames::new(name),
                expirable: true,
            },
        }
    }

    /// The semaphore's name.
    ///
    /// ```no_run
    /// # fn demo(locks: keylatch_lock::Locks) {
    /// assert_eq!(locks.expirable_semaphore("render-slots").name(), "render-slots");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.c.names.key
    }

    /// Sets the available permits when the semaphore does not exist yet;
    /// `true` when set.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// locks.expirable_semaphore("render-slots").try_set_permits(4).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the name holds something that is no
    /// count (another type, a name reused); [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have set them.
    pub async fn try_set_permits(&self, permits: u64) -> LockResult<bool> {
        self.c.try_set(permits).await
    }

    /// Adds `delta` available permits (negative: removes), keeping the
    /// key's expiry; returns the available permits after.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// locks.expirable_semaphore("render-slots").add_permits(1).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the key holds something else than a
    /// count (the name reused by another type); [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have added them.
    pub async fn add_permits(&self, delta: i64) -> LockResult<i64> {
        self.c.change(delta).await
    }

    /// Permits available now, after expired ones went back to the pool.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let free = locks.expirable_semaphore("render-slots").available().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the key holds something else than a
    /// count (the name reused by another type); [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn available(&self) -> LockResult<i64> {
        self.c.drain(true).await
    }

    /// Takes every available permit (after expired ones went back); returns
    /// how many. They are not leased: they come back only by
    /// [`add_permits`](Self::add_permits).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let taken = locks.expirable_semaphore("render-slots").drain().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the key holds something else than a
    /// count (the name reused by another type); [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have drained.
    pub async fn drain(&self) -> LockResult<i64> {
        self.c.drain(false).await
    }

    /// Waits as long as it takes for `permits` leased permits; `lease:
    /// None` renews them through the watchdog while the guard lives.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let g = locks.expirable_semaphore("render-slots").acquire(2, None).await?;
    /// g.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// See [`try_acquire`](Self::try_acquire).
    ///
    /// # Cancel safety
    /// See [`try_acquire`](Self::try_acquire).
    pub async fn acquire(&self, permits: u64, lease: Option<Duration>) -> LockResult<PermitGuard> {
        loop {
            // A day per round keeps the deadline arithmetic finite.
            if let Some(g) = self
                .try_acquire(permits, Duration::from_secs(86_400), lease)
                .await?
            {
                return Ok(g);
            }
        }
    }

    /// Tries for up to `wait` to take `permits` leased permits. `lease:
    /// Some(d)`: they expire `d` after the acquire (server time) and
    /// [`PermitGuard::lost`] fires then; `None`: the watchdog renews them
    /// while the guard lives. `Ok(None)` when not in time.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let sem = locks.expirable_semaphore("render-slots");
    /// if let Some(g) = sem.try_acquire(1, Duration::from_secs(2), Some(Duration::from_secs(60))).await? {
    ///     g.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::NoSuchSemaphore`] at once when the semaphore was never
    /// set; [`LockError::WrongType`] at once when its key holds something
    /// else than a count; [`LockError::PermitCount`] for 0 permits or more than
    /// [`MAX_LEASED_PERMITS`]; [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe: permits taken by an attempt whose reply comes after the
    /// caller left are given back by id in the background (and a reply that
    /// never comes leaves them to expire with their lease).
    pub async fn try_acquire(
        &self,
        permits: u64,
        wait: Duration,
        lease: Option<Duration>,
    ) -> LockResult<Option<PermitGuard>> {
        let deadline = wait_deadline(wait);
        let inner = &self.c.inner;
        let (lease_d, renew) = match lease {
            Some(l) => (clamp_span(l), false),
            None => (clamp_span(inner.config.watchdog_timeout), true),
        };
        if permits == 0 || permits > MAX_LEASED_PERMITS {
            return Err(LockError::PermitCount {
                asked: permits,
                max: MAX_LEASED_PERMITS,
            });
        }
        let n = usize::try_from(permits).unwrap_or(usize::MAX);
        let names = &self.c.names;
        let lease_ms = millis(lease_d).to_string();
        wait_for(inner, &names.key, &names.channel, deadline, || {
            // Fresh ids per try: an id is never reused, even by a late reply.
            let ids: Vec<PermitId> = (0..n).map(|_| PermitId::random()).collect();
            let lease_ms = lease_ms.clone();
            async move {
                let hex: Vec<String> = ids.iter().map(ToString::to_string).collect();
                let n_text = n.to_string();
                let mut args: Vec<&str> = vec![
                    &n_text,
                    &lease_ms,
                    names.channel.as_str(),
                    inner.publish_command(),
                ];
                args.extend(hex.iter().map(String::as_str));
                let cmd =
                    Arc::new(PERMITS_ACQUIRE.evalsha_cmd(&[&*names.key, &*names.timeouts], &args));
                // A reply nobody waits for: its permits go back by id.
                let late: keylatch_cluster::LateReply = {
                    let c = self.c.clone();
                    let ids = ids.clone();
                    Arc::new(move |frame| {
                        if matches!(sem_reply(&frame), Ok(SemReply::Got)) {
                            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                                let (c, ids) = (c.clone(), ids.clone());
                                rt.spawn(async move {
                                    let _ = release_ids(&c, &ids).await;
                                });
                            }
                        }
                    })
                };
                let sent_at = Instant::now();
                let frame = inner
                    .client
                    .eval_shared_settled(&PERMITS_ACQUIRE, &cmd, Some(bound(inner, deadline)), late)
                    .await?;
                match sem_reply(&frame)? {
                    SemReply::Got => Ok(Try::Got(self.guard(ids, renew, lease_d, sent_at))),
                    SemReply::Missing => Err(LockError::NoSuchSemaphore {
                        name: names.key.to_string(),
                    }),
                    SemReply::WrongType => Err(wrong_type(inner, &names.key).await),
                    SemReply::Short(hint) => Ok(Try::Short(hint)),
                }
            }
        })
        .await
    }

    fn guard(
        &self,
        ids: Vec<PermitId>,
        renew: bool,
        lease: Duration,
        sent_at: Instant,
    ) -> PermitGuard {
        let inner = &self.c.inner;
        let csv: Vec<String> = ids.iter().map(ToString::to_string).collect();
        let hold = Hold::new(NewHold {
            key: HoldKey::new(Arc::clone(&self.c.names.key), Arc::from(csv.join(","))),
            counter: Arc::clone(&self.c.names.timeouts),
            token: 0,
            renewal: &PERMITS_LEASE,
            renew,
            lease,
            sent_at,
            max_hold: None,
            drift_permille: inner.config.drift_permille,
            live: Arc::clone(&inner.live_holds),
        });
        inner.engine.watch(&hold, sent_at);
        PermitGuard {
            sem: self.clone(),
            ids,
            hold,
            renew,
            lease,
            done: false,
        }
    }

    /// Gives permits back by id (e.g. ids handed over from another
    /// process); waiters are told.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks, ids: Vec<keylatch_lock::PermitId>) -> keylatch_lock::LockResult<()> {
    /// locks.expirable_semaphore("render-slots").release_ids(&ids).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Expired`] when any id's lease had run out (it still went
    /// back to the pool, as in Redisson) or it was not out any more
    /// (released before, or expired and taken back by an acquire): the
    /// holder may have run past its lease. [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have released.
    pub async fn release_ids(&self, ids: &[PermitId]) -> LockResult<()> {
        let (released, expired) = release_ids(&self.c, ids).await?;
        if expired > 0 || released < ids.len() {
            return Err(LockError::Expired {
                name: self.name().to_owned(),
            });
        }
        Ok(())
    }
}

/// `permits_release.lua` for `ids`: (released, of those expired). Retried
/// while it surely did not run (not sent, a redirect, a slot migrating),
/// for up to the attempt timeout.
async fn release_ids(c: &Counter, ids: &[PermitId]) -> LockResult<(usize, usize)> {
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

/// Leased permits of an [`ExpirableSemaphore`]. Release them with
/// [`release`](Self::release), which reports errors. Dropping the guard
/// stops renewal and gives the permits back in the background (without a
/// runtime, they expire with their lease).
///
/// ```no_run
/// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
/// let g = locks.expirable_semaphore("render-slots").acquire(1, None).await?;
/// tokio::select! {
///     why = g.lost() => eprintln!("permit lost: {why:?}; stop"),
///     () = async { /* work under the permit */ } => {}
/// }
/// g.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping a permit guard releases its permits in the background"]
pub struct PermitGuard {
    sem: ExpirableSemaphore,
    ids: Vec<PermitId>,
    hold: Arc<Hold>,
    renew: bool,
    lease: Duration,
    done: bool,
}

impl fmt::Debug for PermitGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitGuard")
            .field("semaphore", &self.sem.name())
            .field("ids", &self.ids)
            .finish_non_exhaustive()
    }
}

impl PermitGuard {
    /// The permits' ids (hand them to [`ExpirableSemaphore::release_ids`]
    /// elsewhere to release them there).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let g = locks.expirable_semaphore("render-slots").acquire(2, None).await?;
    /// assert_eq!(g.ids().len(), 2);
    /// g.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn ids(&self) -> &[PermitId] {
        &self.ids
    }

    /// The lease the permits were taken with (the watchdog timeout when
    /// renewed).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let sem = locks.expirable_semaphore("render-slots");
    /// let g = sem.acquire(1, Some(Duration::from_secs(60))).await?;
    /// assert_eq!(g.lease(), Duration::from_secs(60));
    /// g.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Resolves when the permits are known lost: one is gone or expired (a
    /// renewal or check found it so), or no renewal succeeded by the local
    /// deadline. Stays pending for permits released normally.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let sem = locks.expirable_semaphore("render-slots");
    /// let g = sem.acquire(1, Some(Duration::from_millis(200))).await?;
    /// g.lost().await; // the fixed lease runs out
    /// assert!(g.is_lost());
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub fn lost(&self) -> impl std::future::Future<Output = LossReason> + Send + 'static {
        let hold = Arc::clone(&self.hold);
        async move { hold.lost.wait().await }
    }

    /// Whether the permits are known lost (or past their local deadline).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let g = locks.expirable_semaphore("render-slots").acquire(1, None).await?;
    /// assert!(!g.is_lost());
    /// g.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.hold.is_lost()
    }

    /// How long the permits last by the local clock unless renewed; `None`
    /// once lost.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let g = locks.expirable_semaphore("render-slots").acquire(1, None).await?;
    /// assert!(g.remaining_lease().is_some());
    /// g.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self) -> Option<Duration> {
        if self.is_lost() {
            return None;
        }
        Some(
            self.hold
                .deadline()
                .saturating_duration_since(Instant::now()),
        )
    }

    /// Extends the permits: each now expires at least `lease` from the
    /// server's now (never sooner than it did), and the local deadline
    /// moves with it. For fixed-lease permits that need longer.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let sem = locks.expirable_semaphore("render-slots");
    /// let g = sem.acquire(1, Some(Duration::from_secs(10))).await?;
    /// g.extend(Duration::from_secs(60)).await?;
    /// g.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Expired`] when a permit is gone or had expired (the
    /// loss signal fires); [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have extended.
    pub async fn extend(&self, lease: Duration) -> LockResult<()> {
        let lease = clamp_span(lease);
        let c = &self.sem.c;
        let ids = &**self.hold.key.owner();
        let sent_at = Instant::now();
        let reply = c
            .inner
            .client
            .eval_script(
                &PERMITS_RENEW,
                &[&*c.names.key, &*c.names.timeouts],
                &[millis(lease).to_string().as_str(), "0", ids, "0"],
            )
            .await?;
        if renew_reply(reply)? {
            self.hold.extend(sent_at, lease);
            Ok(())
        } else {
            self.hold.fire(LossReason::Gone);
            Err(LockError::Expired {
                name: self.sem.name().to_owned(),
            })
        }
    }

    /// Gives the permits back: renewal stops first, then they return to the
    /// pool by id and waiters are told.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// locks.expirable_semaphore("render-slots").acquire(1, None).await?.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Expired`] when the permits had been lost or a lease had
    /// run out (an expired permit still goes back to the pool);
    /// [`LockError::Client`] when the release could not be delivered (they
    /// then expire with their lease).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before it finished, the release goes on in the
    /// background.
    pub async fn release(mut self) -> LockResult<()> {
        let ended = self.hold.is_lost();
        if !self.finish() {
            return Ok(());
        }
        let (c, ids) = (self.sem.c.clone(), self.ids.clone());
        let out = Detached::new(async move { release_ids(&c, &ids).await }).await;
        let (released, expired) = match out {
            Err(LockError::Client(ClientError::Timeout)) if ended => {
                return Err(LockError::Expired {
                    name: self.sem.name().to_owned(),
                })
            }
            other => other?,
        };
        if ended || expired > 0 || released < self.ids.len() {
            return Err(LockError::Expired {
                name: self.sem.name().to_owned(),
            });
        }
        Ok(())
    }

    /// Leaves the hold (renewal stops); `false` if already done.
    fn finish(&mut self) -> bool {
        if self.done {
            return false;
        }
        self.done = true;
        self.hold.leave(self.renew);
        true
    }
}

impl Drop for PermitGuard {
    fn drop(&mut self) {
        if !self.finish() {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (c, ids) = (self.sem.c.clone(), std::mem::take(&mut self.ids));
            rt.spawn(async move {
                let _ = release_ids(&c, &ids).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permit_ids_are_32_hex_digits_both_ways() {
        let id = PermitId::random();
        let text = id.to_string();
        assert_eq!(text.len(), 32);
        assert_eq!(text.parse::<PermitId>(), Ok(id));
        assert_ne!(PermitId::random(), id);
        assert_eq!("0g".repeat(16).parse::<PermitId>(), Err(BadPermitId));
        assert_eq!("ab".parse::<PermitId>(), Err(BadPermitId));
        assert_eq!("é".repeat(16).parse::<PermitId>(), Err(BadPermitId));
    }

    #[test]
    fn semaphore_names_are_redissons() {
        let n = SemNames::new("jobs");
        assert_eq!(n.channel, "redisson_sc:{jobs}");
        assert_eq!(&*n.timeouts, "{jobs}:timeout");
        let t = SemNames::new("{t}jobs");
        assert_eq!(&*t.timeouts, "{t}jobs:timeout");
    }
}
