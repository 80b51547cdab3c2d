//! `Locks`: the per-client entry point that owns the watchdog, the local
//! wait queues and the pub/sub hub the waiters listen on.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use keylatch_cluster::{Client, ClientConfig, InvalidationHandler, PubSub, PubSubConfig};

use crate::error::LockResult;
use crate::handle::ScriptArgs;
use crate::hold::{clamp_span, millis};
use crate::latch::CountDownLatch;
use crate::lease::{Engine, Invalidations, LeaseKind, INVALIDATION_QUEUE};
use crate::lock::Lock;
use crate::multilock::MultiLock;
use crate::rwlock::RwLock;
use crate::semaphore::{ExpirableSemaphore, Semaphore};
use crate::waiters::WaitQueues;

/// Settings shared by every lock of one [`Locks`].
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
const MIN_RECHECK: Duration = Duration::from_millis(1);
/// The shortest fair-waiter deadline span: a waiter calls every third of
/// it, and a call must fit in that with room to spare.
const MIN_FAIR_WAITER: Duration = Duration::from_millis(300);
/// The smallest fair wait allowance: it must stay above a waiter's own
/// calls (every third of `fair_waiter_timeout`) and a Java client's clock
/// error for its deadline to keep it in the queue.
const MIN_FAIR_ALLOWANCE: Duration = Duration::from_secs(1);

pub(crate) struct Inner {
    pub(crate) client: Client,
    pub(crate) config: LocksConfig,
    client_id: String,
    next_handle: AtomicU64,
    pub(crate) engine: Engine,
    /// Holds with a guard that are not known lost.
    pub(crate) live_holds: Arc<AtomicUsize>,
    /// Releases running on the runtime (see [`Locks::settle`]).
    pub(crate) background: Arc<crate::background::Background>,
    pub(crate) waiters: Arc<WaitQueues>,
    pubsub: tokio::sync::OnceCell<PubSub>,
    /// Script arguments fixed by the configuration and the client.
    pub(crate) script_args: ScriptArgs,
}

impl Inner {
    /// The hub waiters listen on, opened on first need. `None` when it
    /// cannot be had now: waiters then poll (bounded by the lock's PTTL and
    /// [`LocksConfig::recheck`]) instead of failing.
    pub(crate) async fn pubsub(&self) -> Option<&PubSub> {
        self.pubsub
            .get_or_try_init(|| PubSub::from_client_with(&self.client, PubSubConfig::default()))
            .await
            .ok()
    }

    /// The command the release scripts publish with: sharded pub/sub in a
    /// cluster, so a release reaches only the channel's shard instead of
    /// flooding the cluster bus. (A Redisson client that still publishes
    /// with classic PUBLISH in a cluster wakes our waiters only at their
    /// next re-check, at most [`LocksConfig::recheck`] later.)
    pub(crate) fn publish_command(&self) -> &'static str {
        self.script_args.publish
    }
}

/// The lock layer of one [`Client`]: hands out [`Lock`]s, and owns the
/// watchdog task, the local wait queues and the waiters' pub/sub hub.
/// Cheap to clone.
///
/// ```no_run
/// use std::time::Duration;
/// use keylatch_lock::Locks;
/// # async fn demo() -> keylatch_lock::LockResult<()> {
/// let locks = Locks::connect("redis://127.0.0.1:6379").await?;
/// let lock = locks.lock("orders:42");
/// if let Some(guard) = lock.try_acquire(Duration::from_secs(5), None).await? {
///     // … critical section; guard.fencing_token() orders writes elsewhere …
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Locks {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Locks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locks")
            .field("client_id", &self.inner.client_id)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Locks {
    /// Connects a [`Client`] to `url` (standalone or cluster) and builds the
    /// lock layer on it with default settings.
    ///
    /// ```no_run
    /// # async fn demo() -> keylatch_lock::LockResult<()> {
    /// let locks = keylatch_lock::Locks::connect("redis://127.0.0.1:6379").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The client could not connect.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Panics
    /// Outside a tokio runtime (the watchdog task is spawned).
    pub async fn connect(url: &str) -> LockResult<Self> {
        Self::connect_with(ClientConfig::from_url(url)?, LocksConfig::default()).await
    }

    /// Connects a client of its own (standalone or cluster) with
    /// client-side tracking on (RESP3, opt-in: only the held keys the lease
    /// engine reads on purpose are tracked, not every key the lock scripts
    /// touch), so a lock deleted or overwritten behind its holder is noticed
    /// as soon as the server's invalidation arrives, not at the next renewal
    /// (fixed-lease holds too: they are checked then). Holds younger than
    /// 2 ms are not tracked yet (a tracked read costs the server a command),
    /// and each tracked read is itself a check, so a hold deleted earlier is
    /// noticed at that read.
    ///
    /// ```no_run
    /// use keylatch_lock::{Locks, LocksConfig};
    /// # async fn demo() -> keylatch_lock::LockResult<()> {
    /// let cfg = keylatch_cluster::ClientConfig::from_url("redis://127.0.0.1:6379")?;
    /// let locks = Locks::connect_with(cfg, LocksConfig::default()).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The client could not connect.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Panics
    /// Outside a tokio runtime (the watchdog task is spawned).
    pub async fn connect_with(mut client: ClientConfig, config: LocksConfig) -> LockResult<Self> {
        let (tx, rx) = tokio::sync::mpsc::channel(INVALIDATION_QUEUE);
        let overflow = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&overflow);
        // Never blocks the connection's reader: a push that does not fit
        // the queue turns into "check every hold".
        let handler = InvalidationHandler::new(move |inv| {
            if tx.try_send(inv).is_err() {
                flag.store(true, Ordering::Release);
            }
        });
        for seed in &mut client.seeds {
            seed.tracking = Some(handler.clone());
            // Only the keys the engine reads on purpose are tracked, not
            // every key the lock scripts touch.
            seed.tracking_optin = true;
        }
        let client = Client::connect_with(client).await?;
        Ok(Self::build(
            client,
            config,
            Some(Invalidations { rx, overflow }),
        ))
    }

    /// The lock layer on an existing client. Without client tracking on
    /// that client, a lock deleted behind its holder is noticed at the next
    /// renewal (a third of the lease) rather than at once; see
    /// [`connect_with`](Self::connect_with).
    ///
    /// ```no_run
    /// use keylatch_lock::{Locks, LocksConfig};
    /// # async fn demo() -> keylatch_lock::LockResult<()> {
    /// let client = keylatch_cluster::Client::connect("redis://127.0.0.1:6379").await?;
    /// let locks = Locks::new(client, LocksConfig::default());
    /// # Ok(()) }
    /// ```
    ///
    /// # Panics
    /// Outside a tokio runtime (the watchdog task is spawned).
    pub fn new(client: Client, config: LocksConfig) -> Self {
        Self::build(client, config, None)
    }

    fn build(client: Client, config: LocksConfig, invalidations: Option<Invalidations>) -> Self {
        // The fields are public too: the bounds hold however they were set.
        let mut config = config;
        config.recheck = clamp_span(config.recheck.max(MIN_RECHECK));
        config.watchdog_timeout = clamp_span(config.watchdog_timeout);
        config.token_idle_ttl = clamp_span(config.token_idle_ttl);
        config.attempt_timeout = clamp_span(config.attempt_timeout);
        config.fair_waiter_timeout = clamp_span(config.fair_waiter_timeout.max(MIN_FAIR_WAITER));
        config.fair_wait_allowance = clamp_span(config.fair_wait_allowance.max(MIN_FAIR_ALLOWANCE));
        let token_ttl_ms = millis(config.token_idle_ttl).to_string();
        let engine = Engine::spawn(client.clone(), token_ttl_ms.clone(), invalidations);
        let script_args = ScriptArgs {
            watchdog_ms: millis(config.watchdog_timeout).to_string(),
            token_ttl_ms,
            // Sharded where the cluster has it (Redis 7+, Valkey), so the
            // message stays in the lock's shard; plain PUBLISH otherwise
            // (standalone, Redis 6.2 clusters), as Redisson does.
            publish: if client.has_sharded_pubsub() {
                "spublish"
            } else {
                "publish"
            },
            fair_waiter_ms: millis(config.fair_waiter_timeout).to_string(),
            fair_allowance_ms: millis(config.fair_wait_allowance).to_string(),
        };
        Self {
            inner: Arc::new(Inner {
                client,
                client_id: uuid::Uuid::new_v4().to_string(),
                next_handle: AtomicU64::new(1),
                engine,
                live_holds: Arc::new(AtomicUsize::new(0)),
                background: Arc::default(),
                waiters: Arc::new(WaitQueues::default()),
                pubsub: tokio::sync::OnceCell::new(),
                script_args,
                config,
            }),
        }
    }

    /// A lock handle with a fresh owner id (`<client uuid>:<n>`). Clones of
    /// the handle share the owner and re-enter; another handle is another
    /// owner, even in the same task.
    ///
    /// ```no_run
    /// # fn demo(locks: keylatch_lock::Locks) {
    /// let lock = locks.lock("reports");
    /// println!("owner {}", lock.owner());
    /// # }
    /// ```
    pub fn lock(&self, name: &str) -> Lock {
        Lock::new(
            Arc::clone(&self.inner),
            name,
            self.new_owner(),
            LeaseKind::Reentrant,
        )
    }

    /// A non-reentrant lock handle with a fresh owner id: Redisson's RLock
    /// layout (so it excludes, and is excluded by, reentrant holders of the
    /// same name), but a second acquire by the holder, through this handle
    /// or a clone, fails with [`LockError::NotReentrant`](crate::LockError::NotReentrant)
    /// instead of counting. Renewed by the watchdog like any lock.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let lock = locks.non_reentrant_lock("nightly-report");
    /// let guard = lock.acquire().await?;
    /// assert!(lock.try_acquire_now(None).await.is_err()); // not reentrant
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn non_reentrant_lock(&self, name: &str) -> Lock {
        Lock::new(
            Arc::clone(&self.inner),
            name,
            self.new_owner(),
            LeaseKind::NonReentrant,
        )
    }

    /// A fair lock handle with a fresh owner id: waiters get the lock in
    /// the order they asked, across processes (Redisson's `RFairLock`
    /// layout: the queue `redisson_lock_queue:{name}` and deadlines
    /// `redisson_lock_timeout:{name}` beside the reentrant hash, so Java
    /// services share the queue). Only the queue's head is woken, on its own
    /// channel. Deadlines come from server time; a live waiter keeps its
    /// place however long it waits, a dead one is purged within
    /// [`LocksConfig::fair_waiter_timeout`]. Holds are the reentrant lock's:
    /// re-entry, watchdog, `lost()`, fencing token.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let lock = locks.fair_lock("print-queue");
    /// let guard = lock.acquire().await?; // in arrival order
    /// guard.unlock().await?; // wakes the next in line only
    /// # Ok(()) }
    /// ```
    pub fn fair_lock(&self, name: &str) -> Lock {
        Lock::new(
            Arc::clone(&self.inner),
            name,
            self.new_owner(),
            LeaseKind::Fair,
        )
    }

    /// A spin lock with a fresh owner id: the reentrant lock's data (so it
    /// excludes, and is excluded by, reentrant holders of the name), but a
    /// waiter neither subscribes nor queues locally: it tries again after
    /// an exponential backoff with jitter (1 ms doubling to 128 ms, as
    /// Redisson's `RSpinLock`). For very many locks with little contention,
    /// where PUBLISH per release and a subscription per waiter cost more
    /// than an occasional extra try.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let guard = locks.spin_lock("row:7").acquire().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn spin_lock(&self, name: &str) -> Lock {
        let mut lock = self.lock(name);
        lock.spin = true;
        lock
    }

    /// A fenced lock with a fresh owner id, in Redisson's `RFencedLock`
    /// layout: the RLock hash, and a fencing token from INCR of
    /// `redisson_lock_token:{name}` on every acquire, re-entries included,
    /// so a Java `RFencedLock` and this lock hand out tokens from one
    /// counter (the counter never expires, as Redisson's).
    ///
    /// Which to use: every keylatch lock already fences each hold (its
    /// token names the hold: renewals and releases check it, so a late
    /// release can never end a newer hold; the counter may expire when idle
    /// and restarts at server time). Use `fenced_lock` to share tokens with
    /// Java `RFencedLock` users, or when each re-entry needs a token of its
    /// own; its holds are judged and released by owner, as Redisson's.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let lock = locks.fenced_lock("ledger");
    /// let first = lock.acquire().await?;
    /// let again = lock.acquire().await?; // a re-entry: a token of its own
    /// assert!(again.fencing_token() > first.fencing_token());
    /// again.unlock().await?;
    /// first.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn fenced_lock(&self, name: &str) -> Lock {
        Lock::new(
            Arc::clone(&self.inner),
            name,
            self.new_owner(),
            LeaseKind::Fenced,
        )
    }

    /// A semaphore in Redisson's `RSemaphore` layout (the key holds the
    /// available permits; releases publish the new count on
    /// `redisson_sc:{name}`). Its permits have no owner: see
    /// [`expirable_semaphore`](Self::expirable_semaphore) for permits that
    /// come back when their holder dies.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let sem = locks.semaphore("api-quota");
    /// sem.try_set_permits(10).await?;
    /// sem.acquire(1).await?;
    /// sem.release(1).await?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: &str) -> Semaphore {
        Semaphore::new(Arc::clone(&self.inner), name)
    }

    /// A permit-expirable semaphore in Redisson's
    /// `RPermitExpirableSemaphore` layout: each permit taken has an id and a
    /// lease (renewed by the watchdog while its guard lives), so the permits
    /// of a process that died come back within one lease.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let sem = locks.expirable_semaphore("gpu");
    /// sem.try_set_permits(2).await?;
    /// let permit = sem.acquire(1, None).await?;
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn expirable_semaphore(&self, name: &str) -> ExpirableSemaphore {
        ExpirableSemaphore::new(Arc::clone(&self.inner), name)
    }

    /// A count-down latch in Redisson's `RCountDownLatch` layout.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let latch = locks.latch("warm-up");
    /// latch.try_set_count(1).await?;
    /// latch.count_down().await?;
    /// latch.wait_zero().await?;
    /// # Ok(()) }
    /// ```
    pub fn latch(&self, name: &str) -> CountDownLatch {
        CountDownLatch::new(Arc::clone(&self.inner), name)
    }

    /// A read-write lock with a fresh owner id: many readers or one writer,
    /// in Redisson's `RReadWriteLock` layout (see [`RwLock`]). Its
    /// [`read`](RwLock::read) and [`write`](RwLock::write) sides are
    /// [`Lock`] handles of that one owner, so the writer can downgrade; an
    /// upgrade is refused with [`LockError::UpgradeRefused`](crate::LockError::UpgradeRefused).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let rw = locks.rw_lock("prices");
    /// let guard = rw.read().acquire().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn rw_lock(&self, name: &str) -> RwLock {
        RwLock::new(&self.inner, name, self.new_owner())
    }

    /// `<client uuid>:<n>`, n unique within this `Locks`.
    fn new_owner(&self) -> Arc<str> {
        let n = self.inner.next_handle.fetch_add(1, Ordering::Relaxed);
        format!("{}:{n}", self.inner.client_id).into()
    }

    /// A lock handle acting as an explicit owner: a task or process that was
    /// handed the id (e.g. from [`Lock::owner`]) can release or extend that
    /// hold.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks, owner_from_elsewhere: String) -> keylatch_lock::LockResult<()> {
    /// let lock = locks.lock_with_owner("reports", &owner_from_elsewhere);
    /// lock.release_one().await?;
    /// # Ok(()) }
    /// ```
    pub fn lock_with_owner(&self, name: &str, owner: &str) -> Lock {
        Lock::new(
            Arc::clone(&self.inner),
            name,
            owner.into(),
            LeaseKind::Reentrant,
        )
    }

    /// The settings every lock of this `Locks` uses.
    ///
    /// ```no_run
    /// # fn demo(locks: keylatch_lock::Locks) {
    /// println!("watchdog lease {:?}", locks.config().watchdog_timeout);
    /// # }
    /// ```
    pub fn config(&self) -> &LocksConfig {
        &self.inner.config
    }

    /// A multi-lock over these names: every one or none, under one guard
    /// (one owner id for all members). Taken in one canonical order, so
    /// callers listing the same names in other orders cannot deadlock; names
    /// that share a hash tag are taken in one script call. For members of
    /// other kinds or clients, use [`MultiLock::new`].
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let g = locks.multi_lock(&["{acct}:17", "{acct}:4"]).acquire().await?; // one call
    /// g.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn multi_lock(&self, names: &[&str]) -> MultiLock {
        let owner = self.new_owner();
        MultiLock::new(
            names
                .iter()
                .map(|n| {
                    Lock::new(
                        Arc::clone(&self.inner),
                        n,
                        Arc::clone(&owner),
                        LeaseKind::Reentrant,
                    )
                })
                .collect(),
        )
    }

    /// A RedLock member on this master: the RLock hash without a fencing
    /// counter, as `owner` (unique to one RedLock acquire).
    pub(crate) fn unfenced_with_owner(&self, name: &str, owner: &str) -> Lock {
        Lock::new(
            Arc::clone(&self.inner),
            name,
            owner.into(),
            LeaseKind::Unfenced,
        )
    }

    /// Waits until every release this `Locks` handed to the runtime has
    /// finished (delivered, refused, or given up at its hold's lease), at
    /// most `within`; `true` if none is left. A release that meets a transient
    /// failure (a reconnect, a slot moving) is retried in the background,
    /// and a dropped guard's release is sent there too: a program about to
    /// exit calls this so those are not cut off with the runtime.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// use std::time::Duration;
    /// let guard = locks.lock("jobs").acquire().await?;
    /// // An error here may still be retried in the background…
    /// let _ = guard.unlock().await;
    /// // …so wait for it before the process ends.
    /// locks.settle(Duration::from_secs(30)).await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub async fn settle(&self, within: Duration) -> bool {
        tokio::time::timeout(within, self.inner.background.idle())
            .await
            .is_ok()
    }

    /// Ends whatever holds `name`, whoever holds it, in the way its type
    /// means (an operator's tool for a holder that died with a long lease):
    ///
    /// | what the name holds | what happens |
    /// |---|---|
    /// | a lock (reentrant, non-reentrant, fair, fenced, spin; a multi-lock's or RedLock's member) | the hash is deleted and waiters woken (a fair queue's head on its own channel; the queue and the fencing counter are kept) |
    /// | a read-write lock | the hash and every read and write hold key are deleted, waiters of both kinds woken |
    /// | a permit-expirable semaphore | its leased permits go back to its count (the semaphore keeps its size), the leases are deleted, waiters told |
    /// | a plain semaphore's or a latch's count | refused: nobody holds its permits, a latch has no holder |
    /// | anything else (a list, a string, a hash with no lock's shape, …) | refused, untouched |
    ///
    /// Every holder learns of it through its `lost()`
    /// ([`LossReason::Gone`](crate::LossReason::Gone)): at once in this
    /// process, and in others when their [`Locks`] tracks keys
    /// ([`Locks::connect`]), else at their next renewal or check.
    ///
    /// ```no_run
    /// use keylatch_lock::ForceUnlocked;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// match locks.force_unlock("render-slots").await? {
    ///     ForceUnlocked::Permits(n) => println!("{n} leased permits given back"),
    ///     ForceUnlocked::Free => println!("nothing was held"),
    ///     other => println!("ended: {other:?}"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::ForceUnlockRefused`](crate::LockError::ForceUnlockRefused)
    /// naming what the key holds, when it is no lock or a count with no
    /// holder (nothing changes); [`LockError::Client`](crate::LockError::Client).
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have run.
    pub async fn force_unlock(&self, name: &str) -> LockResult<crate::ForceUnlocked> {
        crate::shape::force_unlock(&self.inner, name).await
    }

    /// The client underneath.
    ///
    /// ```no_run
    /// use keylatch_cluster::Commands;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// // Plain commands over the connections the locks use.
    /// let client = locks.client();
    /// client.set("orders:42:state", "paid").await?;
    /// assert_eq!(client.get("orders:42:state").await?.as_deref(), Some(&b"paid"[..]));
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// Renewal script calls the watchdog has made (for monitoring and tests).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use keylatch_lock::{Locks, LocksConfig};
    /// # async fn demo(client: keylatch_cluster::Client) -> keylatch_lock::LockResult<()> {
    /// let cfg = LocksConfig::default().watchdog_timeout(Duration::from_secs(3));
    /// let locks = Locks::new(client, cfg);
    /// let guard = locks.lock("batch").acquire().await?;
    /// // Renewed every third of the 3 s lease: at least once within 2 s.
    /// tokio::time::sleep(Duration::from_secs(2)).await;
    /// assert!(locks.renewal_calls() >= 1);
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn renewal_calls(&self) -> u64 {
        self.inner.engine.renew_calls()
    }

    /// Renewal rounds the watchdog has run (wake-ups that renewed anything):
    /// `renewal_calls` per round is the batching actually achieved.
    ///
    /// ```no_run
    /// # fn demo(locks: keylatch_lock::Locks) {
    /// let per_round = locks.renewal_calls() as f64 / locks.renewal_rounds().max(1) as f64;
    /// # }
    /// ```
    pub fn renewal_rounds(&self) -> u64 {
        self.inner.engine.renew_rounds()
    }

    /// Holds the watchdog currently watches.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// // With no other holds on this `Locks`:
    /// let guard = locks.lock("batch").acquire().await?;
    /// assert_eq!(locks.watched_holds(), 1);
    /// guard.unlock().await?;
    /// assert_eq!(locks.watched_holds(), 0);
    /// # Ok(()) }
    /// ```
    pub fn watched_holds(&self) -> usize {
        self.inner.live_holds.load(Ordering::Relaxed)
    }

    /// Lock names with local waiters queued right now.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let guard = locks.lock("jobs").acquire().await?;
    /// let other = locks.lock("jobs"); // another owner
    /// let check = async {
    ///     tokio::time::sleep(Duration::from_millis(50)).await;
    ///     assert_eq!(locks.queued_names(), 1); // `other` waits for "jobs"
    /// };
    /// let (waited, ()) = tokio::join!(other.try_acquire(Duration::from_millis(200), None), check);
    /// assert!(waited?.is_none());
    /// assert_eq!(locks.queued_names(), 0); // the queue left with its last waiter
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn queued_names(&self) -> usize {
        self.inner.waiters.len()
    }
}
