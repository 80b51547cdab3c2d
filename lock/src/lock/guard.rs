//! `LockGuard`: one hold, its fencing token, and the signal that it was lost.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::Error as ClientError;

use crate::error::{LockError, LockResult};
use crate::lease::hold::{clamp_span, instant, nanos, Hold};
use crate::lease::{extend_one, LossReason};

use super::base::Lock;
use super::kind::Tokens;
use super::release::{release, spawn_queued, Detached, Retry};

/// One hold of a lock. Release it with [`unlock`](Self::unlock), which
/// reports errors.
///
/// Dropping a guard without unlocking never blocks: it stops renewal at once
/// and spawns a best-effort release on the current tokio runtime. Without a
/// runtime (e.g. dropped after the runtime shut down) no release is sent and
/// the lock ends with its lease.
///
/// ```no_run
/// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
/// let guard = lock.acquire().await?;
/// let token = guard.fencing_token();
/// tokio::select! {
///     reason = guard.lost() => eprintln!("lost the lock: {reason:?}; stop writing"),
///     () = async { /* critical section, writes tagged with `token` */ } => {}
/// }
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping a guard releases the lock in the background"]
pub struct LockGuard {
    lock: Lock,
    /// The hold this guard is one of (shared with its re-entries).
    hold: Arc<Hold>,
    /// The fencing token as shown, when `shows_token` (not with fencing
    /// off): two fields pack beside the flags, where an `Option<u64>`
    /// took 16 bytes.
    token: u64,
    /// The lease in nanoseconds (saturating: 584 years), and the acquire's
    /// instant as nanoseconds past the lease engine's base: 8 bytes each
    /// where a `Duration` and an `Instant` took 16 (a client may keep a
    /// million guards).
    lease_ns: u64,
    acquired_at: u64,
    /// Holds of this owner counted on the server (saturating).
    holds: u32,
    /// Taken under the watchdog (no fixed lease).
    renew: bool,
    shows_token: bool,
    done: bool,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.lock.name())
            // As `Lock::owner` (see `Lock`'s Debug).
            .field("owner", &self.lock.owner())
            .field("holds", &self.holds)
            .field("token", &self.fencing_token())
            .finish_non_exhaustive()
    }
}

/// A cloneable view of a hold's loss signal, for code that does not own the
/// guard (e.g. a worker that must stop writing).
///
/// ```no_run
/// # async fn demo(guard: &keylatch_lock::LockGuard) {
/// let token = guard.lost_token();
/// tokio::spawn(async move {
///     let reason = token.lost().await;
///     eprintln!("lost: {reason:?}");
/// });
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct LostToken {
    hold: Arc<Hold>,
}

impl LostToken {
    /// Resolves when the hold is known lost; stays pending for a hold that
    /// was released normally. Re-entries share their hold's signal: a guard
    /// unlocked while a re-entry of the same hold lives on sees that hold's
    /// later loss too.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use keylatch_lock::LossReason;
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// // A fixed 100 ms lease is never renewed: it is lost when it runs out.
    /// if let Some(guard) = lock.try_acquire_now(Some(Duration::from_millis(100))).await? {
    ///     let token = guard.lost_token();
    ///     assert_eq!(token.lost().await, LossReason::Expired);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lost(self) -> LossReason {
        self.hold.lost.wait(&self.hold.loss).await
    }

    /// Whether the hold has been lost already.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// if let Some(guard) = lock.try_acquire_now(Some(Duration::from_millis(100))).await? {
    ///     let token = guard.lost_token();
    ///     assert!(!token.is_lost());
    ///     token.clone().lost().await; // the 100 ms lease runs out
    ///     assert!(token.is_lost());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.hold.is_lost()
    }
}

impl LockGuard {
    /// Why the hold was lost, once it was (`None` while it stands).
    pub(crate) fn loss_reason(&self) -> Option<LossReason> {
        self.hold.loss.get()
    }

    /// A call of this hold's type found its key gone: the loss signal fires
    /// now rather than at the next renewal.
    pub(crate) fn found_gone(&self, why: &'static str) {
        self.hold.fire_because(LossReason::Gone, why);
    }
}

impl LockGuard {
    /// Runs a critical section while this hold lives: `work` gets the
    /// fencing token ([`fencing_token`](Self::fencing_token)) to tag its
    /// writes with. When the work ends the hold is released and its output
    /// returned. When the hold is lost first ([`lost`](Self::lost)) the
    /// work is dropped at once (nothing of it runs on), the hold released,
    /// and the loss returned.
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// let guard = lock.acquire().await?;
    /// let written = guard
    ///     .run(|token| async move {
    ///         // … writes tagged with `token` …
    ///         token.is_some()
    ///     })
    ///     .await?;
    /// # let _ = written;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Lost`] with the reason when the hold was lost while the
    /// work ran, or its release found it already ended (the work may have
    /// outlived it). A release that could not be delivered is retried in
    /// the background until the hold's deadline (see
    /// [`unlock`](Self::unlock)); the work's output stands.
    ///
    /// # Cancel safety
    /// Dropped before it finished, the work is dropped and the guard with
    /// it, which releases the hold in the background.
    pub async fn run<T, Fut>(self, work: impl FnOnce(Option<u64>) -> Fut) -> LockResult<T>
    where
        Fut: Future<Output = T>,
    {
        let lock = self.lock.clone();
        let lost = self.lost();
        let work = work(self.fencing_token());
        crate::section::run_section(|| lock.name().to_owned(), lost, work, || self.unlock()).await
    }

    pub(crate) fn new(
        lock: Lock,
        hold: Arc<Hold>,
        renew: bool,
        holds: u64,
        token: Option<u64>,
        lease: Duration,
    ) -> Self {
        Self {
            lock,
            hold,
            renew,
            holds: u32::try_from(holds).unwrap_or(u32::MAX),
            token: token.unwrap_or(0),
            shows_token: token.is_some(),
            lease_ns: u64::try_from(lease.as_nanos()).unwrap_or(u64::MAX),
            acquired_at: nanos(Instant::now()),
            done: false,
        }
    }

    /// Releases this hold: stops renewal first (when this is the hold's
    /// last guard), then runs the release script, which names the hold by
    /// its token, so a late or retried release can never end a newer hold
    /// (the last hold deletes the key and wakes waiters). A fenced lock's
    /// hold is released by owner instead (its tokens are the acquires'):
    /// once it is lost nothing is sent, so a late unlock cannot end the
    /// owner's newer hold. A release is never
    /// dropped: transient failures (a node reconnecting, a slot migrating)
    /// are retried with backoff until the hold's local deadline.
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// lock.acquire().await?.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Nothing changes on the server in the first two cases.
    /// [`LockError::Expired`] when the hold had already ended: its lease ran
    /// out or it was lost (by the local deadline or the loss signal), or
    /// the server found it gone but answered past the hold's local deadline
    /// (a stalled server: the lease may have run out on the way).
    /// [`LockError::NotOwner`] when it was ended otherwise (force-unlocked,
    /// deleted, the name reused by another type, or released through
    /// another handle of its owner): never a raw `WRONGTYPE`.
    /// [`LockError::Client`] when the release could not be delivered at
    /// once (a node down, a slot migrating): it goes on being tried in the
    /// background until the hold's deadline, past which the lease ends the
    /// hold anyway; or when it was written and no reply came in time (a
    /// stalled server): it runs when the server gets to it, a `NOSCRIPT`
    /// then (a script cache lost meanwhile) healed by the connection.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before it finished, the release goes on in the
    /// background (as dropping the guard would have sent it).
    pub async fn unlock(mut self) -> LockResult<()> {
        // Judged before leaving: the deadline counts only while held.
        let ended = self.is_lost();
        let Some((token, until)) = self.finish() else {
            return Err(LockError::Expired {
                name: self.lock.name().to_owned(),
            });
        };
        // A transient failure is reported at once and retried by a task of
        // its own. Cancelled, the release still goes out: its future moves
        // to the runtime (standalone, a queued release is written whoever
        // waits, across a reconnect too; a cluster's routed release needs
        // its future).
        // Counted while it runs, here or (cancelled) on the runtime: a
        // standalone release queued on the connection is written only while
        // the runtime lasts, so a process that cancels an unlock and then
        // settles must still wait for it (it ended with the lock held).
        let lock = self.lock.clone();
        let ticket = lock.inner.background.ticket();
        let outcome = Detached::new(async move {
            let out = release(&lock, token, until, Retry::Background).await;
            drop(ticket);
            out
        })
        .await;
        // A reply after the local deadline cannot tell a hold ended by
        // another from one whose lease ran out while the release was on
        // its way (a stalled server answers late): the server's expiry is
        // at or past that deadline, never before it, so only a reply that
        // came earlier proves someone else ended the hold.
        let late = until.is_some_and(|d| Instant::now() >= d);
        match outcome {
            Err(LockError::NotOwner { name }) if ended || late => Err(LockError::Expired { name }),
            other => other.map(drop),
        }
    }

    /// Extends a hold taken with a fixed lease: its key now lives at least
    /// `lease` from the server's now (an expiry already longer is kept: an
    /// extend never shortens a hold), and the local deadline moves with it
    /// ([`remaining_lease`](Self::remaining_lease), [`lost`](Self::lost)).
    /// It goes through the lock type's own renewal script, which judges the
    /// hold as the watchdog does (owner present, token current), so it can
    /// never extend someone else's hold. `Duration::ZERO` only checks that
    /// the hold stands.
    ///
    /// A hold taken under the watchdog (`acquire()`, or a `None` lease) is
    /// renewed already while the guard lives; extending it is refused with
    /// [`LockError::WatchdogLease`]: the longer lease would become the
    /// watchdog's for every later renewal, so a crashed holder would keep
    /// the lock that long.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// if let Some(guard) = lock.try_acquire(Duration::from_secs(1), Some(Duration::from_secs(10))).await? {
    ///     // … the work takes longer than planned …
    ///     guard.extend(Duration::from_secs(30)).await?;
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Expired`] when the hold had ended: lost, past its local
    /// deadline, or found gone by the script (the loss signal then fires).
    /// [`LockError::WatchdogLease`] for a live hold under the watchdog
    /// (nothing sent). [`LockError::Client`] when the call failed (a server error
    /// `TRYAGAIN` when the key is served by another node mid-migration):
    /// the hold's expiry may or may not have moved; the local deadline has
    /// not.
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have extended the key (the
    /// local deadline then stays where it was, which is on the safe side).
    pub async fn extend(&self, lease: Duration) -> LockResult<()> {
        let name = || self.lock.name().to_owned();
        if self.done || self.is_lost() {
            return Err(LockError::Expired { name: name() });
        }
        if self.renew {
            return Err(LockError::WatchdogLease { name: name() });
        }
        let lease = clamp_span(lease);
        let inner = &self.lock.inner;
        let sent_at = Instant::now();
        let verdict = extend_one(
            &inner.client,
            &self.hold,
            lease,
            &inner.script_args.token_ttl_ms,
        )
        .await?;
        match verdict {
            Some(1) => {
                if !lease.is_zero() {
                    self.hold.extend(sent_at, lease);
                }
                // Fired meanwhile (its old deadline passed on the way):
                // the loss stands, as the holder may have stopped already.
                if self.hold.loss.get().is_some() {
                    return Err(LockError::Expired { name: name() });
                }
                Ok(())
            }
            Some(0) => {
                self.hold.fire(LossReason::Gone);
                Err(LockError::Expired { name: name() })
            }
            Some(_) => Err(LockError::Client(ClientError::from_server_error(
                b"TRYAGAIN the lock's key is served by another node now; extend not applied",
            ))),
            None => Err(LockError::Protocol(format!(
                "extend of {:?}: a reply that is no verdict",
                self.lock.name()
            ))),
        }
    }

    /// Leaves the hold (renewal stops with its last guard). Returns what the
    /// release needs: the token and how long a failed release may be
    /// retried. `None` if it was already done.
    ///
    /// `None` too for a lost hold released by owner (a fenced lock's, whose
    /// tokens are the acquires' and not the hold's): the owner is the
    /// handle's, so the same handle (or a clone) may hold the lock again
    /// by now, and a release by owner would end that newer hold. Nothing is
    /// sent; the lost hold has ended (or ends with its lease) anyway.
    fn finish(&mut self) -> Option<(u64, Option<Instant>)> {
        if self.done {
            return None;
        }
        // Judged while still held: the deadline counts only then.
        let lost_by_owner = self.lock.handle.kind.tokens == Tokens::PerAcquire && self.is_lost();
        self.done = true;
        let until = self.hold.deadline();
        if !self.hold.leave(self.renew) {
            // Holds remain: the release's own write untracks the key.
            self.lock.inner.engine.retrack(&self.hold);
        }
        if lost_by_owner {
            return None;
        }
        Some((self.hold.token, Some(until)))
    }

    /// This owner's hold count right after this acquire (2 for a first
    /// re-entry, …).
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// let first = lock.acquire().await?;
    /// assert_eq!(first.hold_count(), 1);
    /// let again = lock.acquire().await?; // same owner: re-entry
    /// assert_eq!(again.hold_count(), 2);
    /// again.unlock().await?;
    /// first.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn hold_count(&self) -> u64 {
        u64::from(self.holds)
    }

    /// The fencing token of this hold (`None` when fencing is off): strictly
    /// increasing across holders of one lock name. Pass it with every write
    /// the lock protects so stale holders can be refused.
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// // Fencing is on by default.
    /// let first = lock.acquire().await?;
    /// let earlier = first.fencing_token();
    /// assert!(earlier.is_some());
    /// first.unlock().await?;
    /// let next = lock.acquire().await?;
    /// assert!(next.fencing_token() > earlier);
    /// next.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self) -> Option<u64> {
        self.shows_token.then_some(self.token)
    }

    /// When this hold ends by the local clock unless renewed: the send time
    /// of the last successful acquire or renewal + lease − drift allowance.
    /// `None` once lost or released.
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// let guard = lock.acquire().await?;
    /// if let Some(left) = guard.remaining_lease() {
    ///     assert!(left <= guard.lease());
    /// }
    /// guard.unlock().await?;
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

    /// The lease this hold was taken with (the watchdog timeout for
    /// watchdog holds).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// if let Some(guard) = lock.try_acquire_now(Some(Duration::from_secs(10))).await? {
    ///     assert_eq!(guard.lease(), Duration::from_secs(10));
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lease(&self) -> Duration {
        Duration::from_nanos(self.lease_ns)
    }

    /// How long ago this hold was acquired.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// let guard = lock.acquire().await?;
    /// tokio::time::sleep(Duration::from_millis(20)).await;
    /// assert!(guard.held_for() >= Duration::from_millis(20));
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn held_for(&self) -> Duration {
        instant(self.acquired_at).elapsed()
    }

    /// Resolves when the hold is known lost: a renewal found it gone, no
    /// renewal succeeded by the local deadline, or the max hold was reached.
    /// Stays pending for a hold that ends normally (unlocked or dropped).
    /// Re-entries share their hold's signal (see [`LostToken::lost`]).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use keylatch_lock::LossReason;
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// let lock = lock.with_max_hold(Duration::from_millis(200));
    /// let guard = lock.acquire().await?;
    /// // Renewal stops at the max hold, and the loss is reported.
    /// assert_eq!(guard.lost().await, LossReason::MaxHold);
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub fn lost(&self) -> impl Future<Output = LossReason> + Send + 'static {
        let hold = Arc::clone(&self.hold);
        async move { hold.lost.wait(&hold.loss).await }
    }

    /// A cloneable token for the loss signal.
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// let guard = lock.acquire().await?;
    /// // A view of the guard's own signal, cheap to clone and hand out.
    /// let token = guard.lost_token();
    /// assert_eq!(token.clone().is_lost(), guard.is_lost());
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn lost_token(&self) -> LostToken {
        LostToken {
            hold: Arc::clone(&self.hold),
        }
    }

    /// Whether the hold is known lost.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// if let Some(guard) = lock.try_acquire_now(Some(Duration::from_millis(100))).await? {
    ///     assert!(!guard.is_lost());
    ///     guard.lost().await; // the 100 ms lease runs out
    ///     assert!(guard.is_lost());
    ///     assert_eq!(guard.remaining_lease(), None);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.hold.is_lost()
    }

    /// The lock this guard holds.
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// let guard = lock.acquire().await?;
    /// assert_eq!(guard.lock().name(), lock.name());
    /// assert!(guard.lock().is_held_by_me().await?);
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn lock(&self) -> &Lock {
        &self.lock
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some((token, until)) = self.finish() else {
            return;
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let lock = self.lock.clone();
            let ticket = lock.inner.background.ticket();
            // Queued before this task's next request (a re-acquire, say).
            spawn_queued(&rt, async move {
                let _ = release(&lock, token, until, Retry::Here).await;
                drop(ticket);
            });
        }
    }
}
