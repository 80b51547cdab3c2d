//! `Locks`: the per-client entry point. It owns the shared context
//! (`context.rs`) and hands out a handle of every lock type, each built from
//! that type's kind in one line.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use keylatch_cluster::{Client, ClientConfig, InvalidationHandler};

use crate::config::LocksConfig;
use crate::context::Inner;
use crate::error::LockResult;
use crate::lease::{Invalidations, INVALIDATION_QUEUE};
use crate::lock::{Lock, LockKind};
use crate::owner::Owner;
use crate::types::fair::FAIR;
use crate::types::fenced::FENCED;
use crate::types::latch::CountDownLatch;
use crate::types::multilock::MultiLock;
use crate::types::reentrant::{NON_REENTRANT, REENTRANT};
use crate::types::rwlock::RwLock;
use crate::types::semaphore::{ExpirableSemaphore, Semaphore};
use crate::types::spin::SPIN;

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
            .field("client_id", &self.inner.client_id())
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
        Self {
            inner: Arc::new(Inner::new(client, config, invalidations)),
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
        self.kind(name, self.inner.new_owner(), &REENTRANT)
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
        self.kind(name, self.inner.new_owner(), &NON_REENTRANT)
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
        self.kind(name, self.inner.new_owner(), &FAIR)
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
        self.kind(name, self.inner.new_owner(), &SPIN)
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
        self.kind(name, self.inner.new_owner(), &FENCED)
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
    /// let permit = sem.acquire(1).await?; // given back if dropped
    /// permit.release().await?;
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
    /// let permit = sem.acquire(1).await?;
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

    /// A leader election on `name` with a fresh owner id: campaign for it
    /// (the leader proclaims a value, such as its address, and is renewed
    /// by the watchdog until it resigns or is lost), or observe who leads
    /// from any process. The leadership is a lock of its own kind on
    /// `name`; the proclamation is `keylatch_leader:{name}`.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let lead = locks.leader("scheduler").campaign("10.0.0.7:8080").await?;
    /// lead.resign().await?;
    /// # Ok(()) }
    /// ```
    pub fn leader(&self, name: &str) -> crate::Leader {
        crate::Leader::new(self.kind(name, self.inner.new_owner(), &crate::types::leader::LEADER))
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
        RwLock::new(&self.inner, name, self.inner.new_owner())
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
        self.kind(name, Owner::given(owner), &REENTRANT)
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
        let owner = self.inner.new_owner();
        MultiLock::new(
            names
                .iter()
                .map(|n| self.kind(n, owner.clone(), &REENTRANT))
                .collect(),
        )
    }

    /// A handle on lock `name` of `kind`, acting as `owner`: every
    /// constructor's one line.
    pub(crate) fn kind(&self, name: &str, owner: Owner, kind: &'static LockKind) -> Lock {
        Lock::new(Arc::clone(&self.inner), name, owner, kind)
    }

    /// Waits until every release this `Locks` handed to the runtime has
    /// finished (delivered, refused, or given up at its hold's lease), at
    /// most `within`; `true` if none is left. A release that meets a transient
    /// failure (a reconnect, a slot moving) is retried in the background,
    /// and a dropped guard's release is sent there too, as is the leave of
    /// a dropped wait (its fair queue place, or its registration, which a
    /// release could otherwise grant the lock to after this process is
    /// gone): a program about to exit calls this so those are not cut off
    /// with the runtime.
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
    /// ([`Locks::connect`]), else at their next renewal or check (a third
    /// of the lease at most). Read holds of a read-write lock and leased
    /// permits are never tracked (every other holder writes their keys, so
    /// tracking would turn each acquire and release into a check of every
    /// hold): their holders in other processes learn at their next renewal.
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
        self.force_unlock_name(name).await
    }

    /// The context every handle of this `Locks` shares.
    pub(crate) fn context(&self) -> &Inner {
        &self.inner
    }

    /// What lock `name` holds right now, whatever its type: the key's type,
    /// holders and counts, TTL, a fair queue's waiters, a read-write lock's
    /// readers (each read hold's TTL), writer and waiting writers, a
    /// permit-expirable semaphore's leased permits, the last fencing token
    /// (what `keylatch status` prints). Read-only.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let seen = locks.inspect("print-queue").await?;
    /// for w in &seen.waiters {
    ///     println!("{} waits, purged in {:?} ms unless it calls", w.owner, w.deadline_in_ms);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Client`](crate::LockError::Client) when a read fails;
    /// [`LockError::Protocol`](crate::LockError::Protocol) for a reply of
    /// an unexpected shape.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn inspect(&self, name: &str) -> LockResult<crate::Inspection> {
        crate::Inspection::read(&self.inner.client, name).await
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

    /// What this `Locks` has done since it was made: holds alive now,
    /// guards handed out by lock kind, waits (how they ended, their time,
    /// a bucketed spread), losses by reason, renewal calls and failures,
    /// waits that fell back to polling, and release retries. Each count is
    /// a relaxed atomic; the snapshot is not one instant across them.
    ///
    /// With the `metrics` feature the same counts also go to the
    /// [`metrics`](https://docs.rs/metrics) facade as they happen:
    /// `keylatch_holds` (gauge), `keylatch_acquisitions_total{kind}`,
    /// `keylatch_waits_total{outcome}`, `keylatch_wait_seconds`
    /// (histogram), `keylatch_losses_total{reason}`,
    /// `keylatch_subscription_fallbacks_total` and
    /// `keylatch_release_retries_total`, for the application's own
    /// exporter. (Renewal calls are read from here.)
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// locks.lock("batch").acquire().await?.unlock().await?;
    /// let s = locks.stats();
    /// assert_eq!(s.acquired, [("reentrant", 1)]);
    /// println!("{} held, mean wait {:?}", s.held, s.waits.mean());
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> crate::LockStats {
        self.inner.counters.snapshot(self.inner.engine.renewals())
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
        self.inner.counters.live_holds.load(Ordering::Relaxed)
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
