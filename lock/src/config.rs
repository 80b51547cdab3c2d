//! [`LocksConfig`]: the settings every lock of one [`Locks`](crate::Locks)
//! shares, and the bounds they are held to however they were set.

use std::time::Duration;

use crate::span::clamp_span;

/// Settings shared by every lock of one [`Locks`](crate::Locks).
///
/// ```
/// use std::time::Duration;
/// use keylatch_lock::LocksConfig;
/// let cfg = LocksConfig::default().watchdog_timeout(Duration::from_secs(10));
/// assert_eq!(cfg.watchdog_timeout, Duration::from_secs(10));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LocksConfig {
    /// Lease of watchdog holds; renewed every third of it (default 30 s, as
    /// Redisson's `lockWatchdogTimeout`).
    pub watchdog_timeout: Duration,
    /// Clock drift allowance subtracted from a lease when deciding locally
    /// that a hold may be lost: 2 ms plus this many parts per thousand of
    /// the lease (default 10 ‰, the RedLock paper's factor).
    pub drift_permille: u32,
    /// Longest wait between two checks while waiting for an unlock message:
    /// a lost message costs at most this, never a whole lease (default 1 s).
    pub recheck: Duration,
    /// Issue fencing tokens on every acquire (default on).
    pub fencing: bool,
    /// Idle expiry of the fencing counter key (default 24 h; renewals keep
    /// it alive while a hold lives). Tokens keep rising after it expires, as
    /// long as the server clock does not step back. Clamped to 1 ms–10 years.
    pub token_idle_ttl: Duration,
    /// Shortest time an acquire attempt waits for its reply, even when the
    /// caller's wait is shorter (`try_acquire_now`): at most the client's
    /// request timeout (default 1 s). Past it the attempt fails with a
    /// timeout and its reply is settled in the background.
    pub attempt_timeout: Duration,
    /// How long a fair-lock waiter keeps its place in the queue without
    /// calling (default 5 s, at least 300 ms). A live waiter calls at least
    /// every third of it, so only a waiter whose process died (or cannot
    /// reach the server for that long) is purged, within this time plus
    /// the next keylatch acquire or release that looks (Redisson: up to
    /// 300 s; Redisson's own scripts do not read keylatch's liveness
    /// records, so with only Java clients left a dead keylatch waiter ahead
    /// of them blocks as a dead Java waiter would, see
    /// [`fair_wait_allowance`](Self::fair_wait_allowance)).
    /// The same span bounds a read-write lock's waiting-writer marker: a
    /// writer that died holds new readers back for at most this long.
    pub fair_waiter_timeout: Duration,
    /// The wait allowance a fair-lock waiter declares in the shared queue,
    /// as Redisson's `fairLockWaitTimeout` (default 300 s, Redisson's
    /// default; at least 1 s). A Java waiter that takes the lock or gives up
    /// subtracts its own wait (that setting, or its `tryLock` wait) from the
    /// deadlines queued behind it; keylatch keeps its waiters' deadlines
    /// this far apart, so set it at least as large as any wait a Java
    /// service uses on the same fair lock. It is not how long a dead
    /// keylatch waiter blocks the queue (that is `fair_waiter_timeout`);
    /// it bounds how long a Java waiter queued behind a dead keylatch waiter
    /// sleeps when no keylatch process is left to purge it.
    pub fair_wait_allowance: Duration,
    /// At most this many holds are tracked (default 10,000): with client
    /// tracking on (`Locks::connect`), a change to a tracked hold's key by
    /// anyone else (a delete, an overwrite, a force unlock) is pushed and
    /// its `lost()` fires within milliseconds. Holds past the limit are
    /// judged by their renewals only, so such a change is found at the next
    /// renewal, at most a third of the lease later (a fixed-lease hold:
    /// at its expiry). Tracking is paid per hold and renewal: every renewal
    /// ends the server's tracking of the key and a read starts it again
    /// (about 2.7 µs of server CPU and two commands per hold per renewal,
    /// measured on Redis 7.0), which at a million holds would be most of a
    /// server core. `0` tracks none.
    pub tracked_holds: usize,
    /// A release of a reentrant, non-reentrant or fenced lock hands the
    /// lock to the waiting keylatch process it wakes, when that waiter
    /// holds under the watchdog (default on): the release's own call makes
    /// the waiter the holder, for this client's watchdog lease, so the
    /// waiter holds it one round trip sooner and with no call of its own,
    /// and no other contender takes it in between. Off, the release only
    /// wakes that waiter, which then tries (and this client's waits are
    /// never granted). Redisson's waiters are not granted: while keylatch
    /// waiters are registered, a lock passed on by grants reaches a Java
    /// waiter only when a release finds none; turn this off in every
    /// keylatch process using the lock where Java services must compete as
    /// before. Waits of an owner id given to `lock_with_owner` are never
    /// granted. A granted hold renews with the shorter of the releaser's
    /// and its own watchdog lease. A waiter whose process died while
    /// registered (its entry lasts `fair_waiter_timeout` past its last
    /// try), or whose leave could not be sent, can be granted the lock,
    /// which then stays held for that one lease, as with a holder that
    /// dies.
    pub grant_to_waiters: bool,
}

impl Default for LocksConfig {
    fn default() -> Self {
        Self {
            watchdog_timeout: Duration::from_secs(30),
            drift_permille: 10,
            recheck: Duration::from_secs(1),
            fencing: true,
            token_idle_ttl: Duration::from_secs(24 * 3600),
            attempt_timeout: Duration::from_secs(1),
            fair_waiter_timeout: Duration::from_secs(5),
            fair_wait_allowance: Duration::from_secs(300),
            tracked_holds: 10_000,
            grant_to_waiters: true,
        }
    }
}

impl LocksConfig {
    /// Sets the watchdog lease.
    ///
    /// ```
    /// use std::time::Duration;
    /// use keylatch_lock::LocksConfig;
    /// assert_eq!(LocksConfig::default().watchdog_timeout, Duration::from_secs(30));
    /// let cfg = LocksConfig::default().watchdog_timeout(Duration::from_secs(6));
    /// assert_eq!(cfg.watchdog_timeout, Duration::from_secs(6)); // renewed every 2 s
    /// ```
    pub fn watchdog_timeout(mut self, d: Duration) -> Self {
        self.watchdog_timeout = clamp_span(d);
        self
    }

    /// Sets whether releases hand the lock to the waiter they wake (see
    /// [`grant_to_waiters`](Self::grant_to_waiters)).
    ///
    /// ```
    /// use keylatch_lock::LocksConfig;
    /// assert!(LocksConfig::default().grant_to_waiters);
    /// let cfg = LocksConfig::default().grant_to_waiters(false);
    /// assert!(!cfg.grant_to_waiters);
    /// ```
    pub fn grant_to_waiters(mut self, on: bool) -> Self {
        self.grant_to_waiters = on;
        self
    }

    /// Sets how many holds are tracked at most (see
    /// [`tracked_holds`](Self::tracked_holds)).
    ///
    /// ```
    /// use keylatch_lock::LocksConfig;
    /// assert_eq!(LocksConfig::default().tracked_holds, 10_000);
    /// let cfg = LocksConfig::default().tracked_holds(1_000_000);
    /// assert_eq!(cfg.tracked_holds, 1_000_000);
    /// ```
    pub fn tracked_holds(mut self, n: usize) -> Self {
        self.tracked_holds = n;
        self
    }

    /// Sets the longest wait between re-checks (at least 1 ms: zero would
    /// make waiters retry without a pause).
    ///
    /// ```
    /// use std::time::Duration;
    /// use keylatch_lock::LocksConfig;
    /// let cfg = LocksConfig::default().recheck(Duration::from_millis(250));
    /// assert_eq!(cfg.recheck, Duration::from_millis(250));
    /// ```
    pub fn recheck(mut self, d: Duration) -> Self {
        self.recheck = clamp_span(d.max(MIN_RECHECK));
        self
    }

    /// Sets how long a fair-lock waiter keeps its place without calling
    /// (see [`fair_waiter_timeout`](Self::fair_waiter_timeout); at least 300 ms).
    ///
    /// ```
    /// use std::time::Duration;
    /// use keylatch_lock::LocksConfig;
    /// let cfg = LocksConfig::default().fair_waiter_timeout(Duration::from_secs(2));
    /// assert_eq!(cfg.fair_waiter_timeout, Duration::from_secs(2));
    /// ```
    pub fn fair_waiter_timeout(mut self, d: Duration) -> Self {
        self.fair_waiter_timeout = clamp_span(d.max(MIN_FAIR_WAITER));
        self
    }

    /// Sets the wait allowance of fair-lock waiters (see
    /// [`fair_wait_allowance`](Self::fair_wait_allowance); at least 1 s).
    ///
    /// ```
    /// use std::time::Duration;
    /// use keylatch_lock::LocksConfig;
    /// assert_eq!(LocksConfig::default().fair_wait_allowance, Duration::from_secs(300));
    /// // Java services on this lock call tryLock with waits up to 10 min.
    /// let cfg = LocksConfig::default().fair_wait_allowance(Duration::from_secs(600));
    /// assert_eq!(cfg.fair_wait_allowance, Duration::from_secs(600));
    /// ```
    pub fn fair_wait_allowance(mut self, d: Duration) -> Self {
        self.fair_wait_allowance = clamp_span(d.max(MIN_FAIR_ALLOWANCE));
        self
    }

    /// Turns fencing tokens on or off.
    ///
    /// ```
    /// use keylatch_lock::LocksConfig;
    /// assert!(LocksConfig::default().fencing); // on by default
    /// let cfg = LocksConfig::default().fencing(false);
    /// assert!(!cfg.fencing);
    /// ```
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = on;
        self
    }
}

/// The shortest re-check interval a waiter uses.
pub(crate) const MIN_RECHECK: Duration = Duration::from_millis(1);
/// The shortest fair-waiter deadline span: a waiter calls every third of
/// it, and a call must fit in that with room to spare.
pub(crate) const MIN_FAIR_WAITER: Duration = Duration::from_millis(300);
/// The smallest fair wait allowance: it must stay above a waiter's own
/// calls (every third of `fair_waiter_timeout`) and a Java client's clock
/// error for its deadline to keep it in the queue.
pub(crate) const MIN_FAIR_ALLOWANCE: Duration = Duration::from_secs(1);

impl LocksConfig {
    /// The settings with every bound applied (the fields are public too:
    /// the bounds hold however they were set).
    pub(crate) fn bounded(mut self) -> Self {
        self.recheck = clamp_span(self.recheck.max(MIN_RECHECK));
        self.watchdog_timeout = clamp_span(self.watchdog_timeout);
        self.token_idle_ttl = clamp_span(self.token_idle_ttl);
        self.attempt_timeout = clamp_span(self.attempt_timeout);
        self.fair_waiter_timeout = clamp_span(self.fair_waiter_timeout.max(MIN_FAIR_WAITER));
        self.fair_wait_allowance = clamp_span(self.fair_wait_allowance.max(MIN_FAIR_ALLOWANCE));
        self
    }
}
