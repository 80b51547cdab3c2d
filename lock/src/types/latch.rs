//! `CountDownLatch` in Redisson's `RCountDownLatch` layout: the key named
//! after it holds the remaining count; the count reaching exactly 0
//! deletes the key and publishes `0` on
//! `redisson_countdownlatch__channel__{name}`; setting a count publishes
//! `1`. Waiting re-checks on a bounded interval, so a lost message costs at
//! most [`LocksConfig::recheck`](crate::LocksConfig::recheck) (Redisson's
//! `await()` without a timeout never re-checks and hangs on one).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::{Commands, ServerErrorKind, Slot};
use keylatch_resp::{Cmd, Frame};

use crate::context::Inner;
use crate::error::{LockError, LockResult};
use crate::scripts::{LATCH_COUNT_DOWN, SEMAPHORE_SET};
use crate::shape::wrong_type;
use crate::wake::Wake;

/// A count-down latch shared across processes: some wait until others
/// have counted it down to zero.
///
/// ```no_run
/// use std::time::Duration;
/// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
/// let latch = locks.latch("shards-loaded");
/// latch.try_set_count(3).await?;
/// // … three workers each call `latch.count_down()` when done …
/// if latch.wait_zero_for(Duration::from_secs(30)).await? {
///     println!("all loaded");
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CountDownLatch {
    inner: Arc<Inner>,
    key: Arc<str>,
    channel: String,
    /// Whether the channel is sharded (SPUBLISH/SSUBSCRIBE): where the
    /// cluster has sharded pub/sub and the channel hashes to the key's
    /// slot. Redisson names it in braces, `…__{name}`, so a name with a
    /// hash tag of its own (`{c1}x`) puts the channel in another slot,
    /// where a sharded publish from the key's script is refused.
    sharded: bool,
}

impl fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("name", &self.key)
            .finish_non_exhaustive()
    }
}

impl CountDownLatch {
    pub(crate) fn new(inner: Arc<Inner>, name: &str) -> Self {
        // Braces always, as Redisson names it.
        let channel = format!("redisson_countdownlatch__channel__{{{name}}}");
        let sharded = inner.client.has_sharded_pubsub()
            && Slot::of(channel.as_bytes()) == Slot::of(name.as_bytes());
        Self {
            inner,
            key: Arc::from(name),
            channel,
            sharded,
        }
    }

    fn publish_command(&self) -> &'static str {
        if self.sharded {
            "spublish"
        } else {
            "publish"
        }
    }

    /// The latch's name.
    ///
    /// ```no_run
    /// # fn demo(locks: keylatch_lock::Locks) {
    /// assert_eq!(locks.latch("shards-loaded").name(), "shards-loaded");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.key
    }

    /// Sets the count when the latch's key does not exist; `true` when set
    /// (and `1` published, as Redisson does). A latch counted down to zero
    /// has no key (its last `count_down` deleted it), so it can be set
    /// again; one set to 0 keeps the key `"0"`: it is open, and a later
    /// set answers `false` until the key is deleted (Redisson's
    /// `trySetCount` alike, so Java services see the same latch).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// assert!(locks.latch("batch-7").try_set_count(2).await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the name holds something that is no
    /// count (another type, a name reused);
    /// [`LockError::CountTooLarge`] above [`MAX_COUNT`](crate::MAX_COUNT),
    /// before anything is sent; [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have set it.
    pub async fn try_set_count(&self, count: u64) -> LockResult<bool> {
        let n = crate::types::semaphore::bounded(count)?.to_string();
        let reply = self
            .inner
            .client
            .eval_script(
                &SEMAPHORE_SET,
                &[&*self.key],
                &[
                    n.as_str(),
                    self.channel.as_str(),
                    self.publish_command(),
                    "1",
                ],
            )
            .await?;
        match reply.value() {
            Frame::Integer(1) => Ok(true),
            Frame::Integer(0) => Ok(false),
            // No count at the name: another type, or a name reused.
            Frame::Integer(-1) => Err(wrong_type(&self.inner, &self.key).await),
            other => Err(LockError::Protocol(other.shown())),
        }
    }

    /// Counts down by one; returns the count after: 0 once open (the key
    /// is gone; reaching 0 from 1 wakes every waiter), also when the latch
    /// was open or never set already (a count never goes below zero, as
    /// Redisson's `getCount` never shows one).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let left = locks.latch("batch-7").count_down().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the key holds no count (the name
    /// reused by another type); [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have counted down.
    pub async fn count_down(&self) -> LockResult<u64> {
        let reply = self
            .inner
            .client
            .eval_script(
                &LATCH_COUNT_DOWN,
                &[&*self.key],
                &[self.channel.as_str(), self.publish_command()],
            )
            .await?;
        match reply.into_value() {
            // Below zero: it was open already (the script deleted the key).
            Frame::Integer(n) => Ok(n.max(0).unsigned_abs()),
            // The key holds something else than a count (a name reused).
            Frame::Null => Err(wrong_type(&self.inner, &self.key).await),
            other => Err(LockError::Protocol(other.shown())),
        }
    }

    /// The remaining count (0 when open or never set).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// println!("{} to go", locks.latch("batch-7").count().await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the key holds no count (the name
    /// reused by another type); [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn count(&self) -> LockResult<u64> {
        let v: Result<Option<String>, _> =
            self.inner.client.cmd(Cmd::new("GET").key(&*self.key)).await;
        match v {
            Ok(None) => Ok(0),
            Ok(Some(t)) => match t.parse::<i64>() {
                Ok(n) => Ok(n.max(0).unsigned_abs()),
                // No count: a name reused by a string of another kind.
                Err(_) => Err(wrong_type(&self.inner, &self.key).await),
            },
            // WRONGTYPE: another type at the name; the error names it.
            Err(e) if e.server_kind() == Some(ServerErrorKind::Other) => {
                Err(wrong_type(&self.inner, &self.key).await)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Waits until the count is zero (or the latch was never set).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// locks.latch("batch-7").wait_zero().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// See [`wait_zero_for`](Self::wait_zero_for).
    ///
    /// # Cancel safety
    /// Cancel safe (it only reads and listens).
    pub async fn wait_zero(&self) -> LockResult<()> {
        self.wait(None).await.map(drop)
    }

    /// Waits up to `timeout` for the count to reach zero; `false` when it
    /// did not in time.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let open = locks.latch("batch-7").wait_zero_for(Duration::from_secs(5)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the key holds no count (the name
    /// reused by another type); [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe (it only reads and listens).
    pub async fn wait_zero_for(&self, timeout: Duration) -> LockResult<bool> {
        self.wait(Instant::now().checked_add(timeout)).await
    }

    async fn wait(&self, deadline: Option<Instant>) -> LockResult<bool> {
        if self.count().await? == 0 {
            return Ok(true);
        }
        // Subscribed, read again: a count-down in between is not missed.
        let mut wake = Wake::subscribe_on(
            &self.inner,
            &self.key,
            &self.channel,
            deadline,
            self.sharded,
        )
        .await;
        loop {
            if self.count().await? == 0 {
                return Ok(true);
            }
            let mut nap = self.inner.config.recheck;
            if let Some(d) = deadline {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(false);
                }
                nap = nap.min(left);
            }
            wake.pause(nap).await;
        }
    }
}
