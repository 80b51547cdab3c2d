//! `RedLock`: one lock over N independent masters, held while a quorum of
//! them (N/2 + 1) holds it — the algorithm from the Redis documentation,
//! with the corrections its critics asked for.
//!
//! - Every master is asked in parallel, each attempt bounded by a per-node
//!   timeout much smaller than the lease, so a dead or paused master costs
//!   that timeout, never the lease.
//! - Validity = lease − elapsed − drift, drift = lease × [`DRIFT_PERMILLE`]
//!   ‰ + [`DRIFT_FLOOR`], on the monotonic clock only (`Instant`); an
//!   acquire whose validity is gone by the time a quorum answered is
//!   released and counted as failed.
//! - On failure the lock is released on every master, including those whose
//!   reply was lost (their late replies are settled by the member locks'
//!   finishers, and a release by owner is sent as well: the owner id is
//!   this acquire's alone), then retried after a random delay within the
//!   caller's wait.
//! - Each master's hold is Redisson's RLock hash (as Redisson's RedLock
//!   takes it), without a fencing counter: the member's owner id is unique
//!   to one acquire, so the owner names the hold. It is a keylatch hold on
//!   that master's [`Locks`]: its
//!   watchdog renews it, its loss signal fires when it is gone or its local
//!   deadline passes. The RedLock guard's [`lost`](RedLockGuard::lost) fires
//!   once fewer than a quorum of member holds stand.
//! - Fencing: none. Each master's counter is its own; a quorum of
//!   independent counters gives no total order (two holders in sequence may
//!   see token sets with no common master, and a master restarted without
//!   persistence starts its counter again), so the guard offers no fencing
//!   token. Where the protected resource needs one, use a lock on one
//!   deployment with a replica-sync policy and its fencing token.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod guard;
mod master;

use guard::{nanos_of, validity};
pub use guard::{RedLockGuard, DRIFT_FLOOR, DRIFT_PERMILLE};
use keylatch_cluster::ClientConfig;
use master::Master;

use crate::config::LocksConfig;
use crate::error::{LockError, LockResult};
use crate::lock::{
    hash_acquire, hash_release, owner_field, AcquireCall, LockGuard, LockKind, Tokens, Waiting,
    HASH_LEASE,
};
use crate::locks::Locks;
use crate::names::LockNames;
use crate::owner::Owner;
use crate::scripts::{REENTRANT_RELEASE, UNFENCED_ACQUIRE};
use crate::types::losses::JoinAll;

/// Default bound of one master's attempt (see [`RedLock::node_timeout`]).
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(200);
/// Longest random pause between two rounds of a waiting acquire.
pub const MAX_RETRY_DELAY: Duration = Duration::from_millis(200);

/// A member on one master: Redisson's RLock hash without a fencing
/// counter, as an owner id unique to one RedLock acquire, so the owner
/// alone names the hold (judged and released by owner).
static UNFENCED: LockKind = LockKind {
    label: "redlock member",
    names: LockNames::new,
    field: owner_field,
    acquire: &UNFENCED_ACQUIRE,
    acquire_cmd: |c: &AcquireCall<'_>| hash_acquire(&UNFENCED_ACQUIRE, c),
    prepared: true,
    release: &REENTRANT_RELEASE,
    release_cmd: hash_release,
    lease: &HASH_LEASE,
    tokens: Tokens::ByOwner,
    waiting: Waiting::Turn(None),
    multi_rank: 1,
    batchable: false,
};

/// A lock over independent masters (each a [`Locks`] on its own server):
/// held while a majority holds it.
///
/// Validity is lease − elapsed − drift ([`DRIFT_PERMILLE`] ‰ of the lease
/// plus [`DRIFT_FLOOR`]) on the monotonic clock; each master's attempt is
/// bounded by [`node_timeout`](Self::node_timeout); a round that falls
/// short is released on every master (those whose reply was lost too) and
/// retried after a random pause. Under the watchdog each master's hold is
/// renewed by that master's `Locks`, and [`RedLockGuard::lost`] fires once
/// fewer than a quorum stand.
///
/// **No fencing token.** Each master's counter is its own: a quorum of
/// independent counters gives no total order (two holders one after the
/// other may hold on quorums that share no master, and a master restarted
/// without persistence starts its counter again), so the guard offers
/// none. If the protected resource needs fencing, use one deployment's
/// lock with a replica-sync policy ([`ReplicaSync`](crate::ReplicaSync))
/// and its fencing token instead.
///
/// ```no_run
/// use std::time::Duration;
/// use keylatch_lock::RedLock;
/// # async fn demo() -> keylatch_lock::LockResult<()> {
/// let redlock = RedLock::connect(&[
///     "redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379",
/// ]).await?;
/// let payouts = redlock.lock("payouts");
/// if let Some(guard) = payouts.try_acquire(Duration::from_secs(5), None).await? {
///     // … valid for guard.validity() at most unless renewed …
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RedLock {
    nodes: Vec<Master>,
    node_timeout: Duration,
    id: Arc<str>,
    next: Arc<AtomicU64>,
}

impl RedLock {
    /// A RedLock over these masters' `Locks` (independent servers, not
    /// replicas of each other or nodes of one cluster).
    ///
    /// ```no_run
    /// # async fn demo(a: keylatch_lock::Locks, b: keylatch_lock::Locks, c: keylatch_lock::Locks) {
    /// let redlock = keylatch_lock::RedLock::new(vec![a, b, c]);
    /// assert_eq!(redlock.quorum(), 2);
    /// # }
    /// ```
    pub fn new(nodes: Vec<Locks>) -> Self {
        Self::of(nodes.into_iter().map(Master::Ready).collect())
    }

    fn of(nodes: Vec<Master>) -> Self {
        Self {
            nodes,
            node_timeout: DEFAULT_NODE_TIMEOUT,
            id: Arc::from(uuid::Uuid::new_v4().to_string()),
            next: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Connects to every master (`Locks::connect` each). A master that
    /// cannot be reached now is an error: a RedLock is configured with the
    /// masters it will count.
    ///
    /// ```no_run
    /// # async fn demo() -> keylatch_lock::LockResult<()> {
    /// let r = keylatch_lock::RedLock::connect(&["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"]).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The first connection error.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn connect(urls: &[&str]) -> LockResult<Self> {
        let mut nodes = Vec::with_capacity(urls.len());
        for u in urls {
            nodes.push(Locks::connect(u).await?);
        }
        Ok(Self::new(nodes))
    }

    /// A RedLock over these masters that connects each one when it is
    /// first asked (on a task of its own), so a master that is down now
    /// counts as a failed master, as one that goes down later does: with a
    /// quorum of the others the lock is had, and the master joins once it
    /// answers. Only a URL that cannot be parsed is an error. Redisson's
    /// `RedissonRedLock`, `rslock` and `node-redlock` treat a master that
    /// is down at start the same way.
    ///
    /// ```no_run
    /// # async fn demo() -> keylatch_lock::LockResult<()> {
    /// let r = keylatch_lock::RedLock::connect_lazily(&["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"])?;
    /// // Two of three suffice, even if one is down for good.
    /// if let Some(g) = r.lock("payouts").try_acquire(std::time::Duration::from_secs(2), None).await? {
    ///     g.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Client`] for a URL that cannot be parsed.
    pub fn connect_lazily(urls: &[&str]) -> LockResult<Self> {
        let mut masters = Vec::with_capacity(urls.len());
        for u in urls {
            masters.push((ClientConfig::from_url(u)?, LocksConfig::default()));
        }
        Ok(Self::connecting(masters))
    }

    /// As [`connect_lazily`](Self::connect_lazily), with each master's
    /// client and lock settings given (a master's watchdog lease bounds the
    /// validity of a hold under the watchdog).
    ///
    /// ```no_run
    /// use keylatch_lock::{LocksConfig, RedLock};
    /// # fn demo() -> keylatch_lock::LockResult<()> {
    /// let mut masters = Vec::new();
    /// for url in ["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"] {
    ///     let client = keylatch_cluster::ClientConfig::from_url(url)?;
    ///     masters.push((client, LocksConfig::default().watchdog_timeout(std::time::Duration::from_secs(10))));
    /// }
    /// let r = RedLock::connecting(masters);
    /// assert_eq!(r.quorum(), 2);
    /// # Ok(()) }
    /// ```
    pub fn connecting(masters: Vec<(ClientConfig, LocksConfig)>) -> Self {
        Self::of(
            masters
                .into_iter()
                .map(|(client, config)| Master::later(client, config))
                .collect(),
        )
    }

    /// Connects every master not connected yet (those of
    /// [`connect_lazily`](Self::connect_lazily) and
    /// [`connecting`](Self::connecting)), all at once, waiting up to
    /// `within`: per master, in the order given, `Ok` when it is connected
    /// and the error of its attempt when not. Not needed before an acquire
    /// (a round connects what it asks); it says early which masters do not
    /// answer. A master not connected within `within` goes on connecting in
    /// the background.
    ///
    /// ```no_run
    /// # async fn demo(r: keylatch_lock::RedLock) {
    /// for (i, m) in r.connect_masters(std::time::Duration::from_secs(2)).await.iter().enumerate() {
    ///     if let Err(e) = m {
    ///         eprintln!("master {i}: {e}");
    ///     }
    /// }
    /// # }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: the attempts go on in the background.
    ///
    /// # Panics
    /// Outside a tokio runtime (the attempts are spawned).
    pub async fn connect_masters(&self, within: Duration) -> Vec<LockResult<()>> {
        let waits = self.nodes.iter().map(|m| async move {
            match tokio::time::timeout(within, m.ready()).await {
                Ok(r) => r.map(drop),
                Err(_) => Err(LockError::Client(keylatch_cluster::Error::Timeout)),
            }
        });
        JoinAll::new(waits).await
    }

    /// Waits until every release the masters' clients handed to the
    /// runtime has finished, at most `within` in all; `true` if none is
    /// left (see [`Locks::settle`]). An acquire dropped mid-round (a
    /// program interrupted while it waits) leaves the members it took to
    /// background releases: a program about to exit calls this first.
    ///
    /// ```no_run
    /// # async fn demo(r: keylatch_lock::RedLock) {
    /// use std::time::Duration;
    /// let payouts = r.lock("payouts");
    /// let wait = payouts.try_acquire(Duration::from_secs(5), None);
    /// let _ = tokio::time::timeout(Duration::from_millis(50), wait).await;
    /// r.settle(Duration::from_secs(5)).await;
    /// # }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub async fn settle(&self, within: Duration) -> bool {
        let until = Instant::now() + within;
        let mut all = true;
        for locks in self.nodes.iter().filter_map(Master::connected) {
            all &= locks
                .settle(until.saturating_duration_since(Instant::now()))
                .await;
        }
        all
    }

    /// Sets the bound of one master's attempt (default 200 ms): keep it far
    /// below the lease; a master slower than this counts as failed.
    ///
    /// ```no_run
    /// # fn demo(r: keylatch_lock::RedLock) {
    /// let r = r.node_timeout(std::time::Duration::from_millis(50));
    /// # }
    /// ```
    pub fn node_timeout(mut self, d: Duration) -> Self {
        self.node_timeout = d.max(Duration::from_millis(1));
        self
    }

    /// Masters that must hold the lock: N/2 + 1.
    ///
    /// ```no_run
    /// # fn demo(r: keylatch_lock::RedLock) {
    /// assert!(r.quorum() > r.masters() / 2);
    /// # }
    /// ```
    pub fn quorum(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    /// How many masters there are.
    ///
    /// ```no_run
    /// # fn demo(r: keylatch_lock::RedLock) {
    /// println!("{} masters", r.masters());
    /// # }
    /// ```
    pub fn masters(&self) -> usize {
        self.nodes.len()
    }

    /// The RedLock's handle on one lock name, as [`Locks::lock`] is a
    /// deployment's: [`acquire`](RedLockHandle::acquire) and
    /// [`try_acquire`](RedLockHandle::try_acquire) on it. Cheap: nothing is
    /// sent until an acquire.
    ///
    /// ```no_run
    /// # async fn demo(r: keylatch_lock::RedLock) -> keylatch_lock::LockResult<()> {
    /// let payouts = r.lock("payouts");
    /// assert_eq!(payouts.name(), "payouts");
    /// payouts.acquire().await?.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn lock(&self, name: &str) -> RedLockHandle {
        RedLockHandle {
            redlock: self.clone(),
            name: Arc::from(name),
        }
    }

    async fn try_acquire_name(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> LockResult<Option<RedLockGuard>> {
        let deadline = Instant::now().checked_add(wait);
        let mut rng = RandomState::new().build_hasher().finish() | 1;
        loop {
            match self.round(name, lease).await {
                Round::Held(g) => return Ok(Some(g)),
                Round::WrongType(e) => return Err(e),
                Round::Short { answered } => {
                    let left = deadline.map_or(Duration::MAX, |d| {
                        d.saturating_duration_since(Instant::now())
                    });
                    if left.is_zero() {
                        if answered < self.quorum() {
                            return Err(LockError::Quorum {
                                answered,
                                needed: self.quorum(),
                            });
                        }
                        return Ok(None);
                    }
                    // xorshift: a random pause, so contenders do not retry
                    // in lockstep.
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let max = u64::try_from(MAX_RETRY_DELAY.as_micros())
                        .unwrap_or(1)
                        .max(1);
                    let pause = Duration::from_micros(rng % max).min(left);
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }

    /// One round: every master in parallel, each bounded by the node
    /// timeout; a quorum within validity, or everything released.
    async fn round(&self, name: &str, lease: Option<Duration>) -> Round {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let owner = Owner::given(&format!("{}:{n}", self.id));
        let started = Instant::now();
        // Every master at once, polled in this task (no spawn per master);
        // one not connected yet is connected first, within the same bound.
        let timeout = self.node_timeout;
        let replies = JoinAll::new(self.nodes.iter().map(|node| {
            let owner = owner.clone();
            tokio::time::timeout(timeout, async move {
                let lock = node.ready().await?.kind(name, owner, &UNFENCED);
                lock.try_acquire_now(lease).await
            })
        }))
        .await;
        let mut members: Vec<LockGuard> = Vec::new();
        let mut answered = 0;
        let mut unknown: Vec<usize> = Vec::new();
        let (mut wrong, mut wrong_count) = (None, 0);
        for (i, r) in replies.into_iter().enumerate() {
            match r {
                Ok(Ok(Some(g))) => {
                    answered += 1;
                    members.push(g);
                }
                Ok(Ok(None)) => answered += 1,
                // The name holds no lock there: nothing was taken.
                Ok(Err(e @ LockError::WrongType { .. })) => {
                    wrong_count += 1;
                    wrong = Some(e);
                }
                Ok(Err(_)) | Err(_) => unknown.push(i),
            }
        }
        let validity = self.validity(lease, started);
        // Masters whose reply did not come in time may take the lock when
        // their request runs at last: released by owner (queued behind the
        // acquire on that connection; the owner is this round's alone),
        // whether or not the round succeeded.
        // A master not connected now was sent nothing.
        for node in unknown.iter().filter_map(|&i| self.nodes[i].connected()) {
            let lock = node.kind(name, owner.clone(), &UNFENCED);
            // Counted for `settle`, as the master's own background releases.
            let ticket = node.context().background.ticket();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(5), lock.release_one()).await;
                drop(ticket);
            });
        }
        if members.len() >= self.quorum() {
            if let Some(validity) = validity.filter(|v| !v.is_zero()) {
                return Round::Held(RedLockGuard {
                    members,
                    quorum: self.quorum(),
                    masters: self.nodes.len(),
                    started,
                    valid_for: AtomicU64::new(nanos_of(validity)),
                    node_timeout: self.node_timeout,
                });
            }
        }
        // Short (or too late): released everywhere (the masters whose reply
        // was lost are released above).
        // (A dropped guard's release is queued at once and counted for
        // `settle`.)
        drop(members);
        // So many masters hold no lock at the name that no quorum can ever
        // form: say what is there at once instead of waiting.
        if wrong_count > 0 && wrong_count > self.nodes.len().saturating_sub(self.quorum()) {
            if let Some(e) = wrong {
                return Round::WrongType(e);
            }
        }
        Round::Short { answered }
    }

    /// How long a hold taken in a round begun at `started` is valid: its
    /// lease (the masters' shortest watchdog lease without one) less the
    /// time the round took and the clock drift allowance; `None` when
    /// nothing is left.
    fn validity(&self, lease: Option<Duration>, started: Instant) -> Option<Duration> {
        let lease_d = lease.unwrap_or_else(|| {
            self.nodes
                .iter()
                .map(|m| m.config().watchdog_timeout)
                .min()
                .unwrap_or_default()
        });
        validity(lease_d, started)
    }
}

/// A [`RedLock`]'s handle on one lock name ([`RedLock::lock`]): the same
/// calls as a [`Lock`](crate::Lock)'s, over a quorum of masters.
///
/// ```no_run
/// use std::time::Duration;
/// # async fn demo(r: keylatch_lock::RedLock) -> keylatch_lock::LockResult<()> {
/// let payouts = r.lock("payouts");
/// if let Some(g) = payouts.try_acquire(Duration::from_secs(2), Some(Duration::from_secs(10))).await? {
///     g.unlock().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RedLockHandle {
    redlock: RedLock,
    name: Arc<str>,
}

impl RedLockHandle {
    /// The lock's name.
    ///
    /// ```no_run
    /// # fn demo(r: keylatch_lock::RedLock) {
    /// assert_eq!(r.lock("payouts").name(), "payouts");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The RedLock this handle asks.
    ///
    /// ```no_run
    /// # fn demo(r: keylatch_lock::RedLock) {
    /// assert_eq!(r.lock("payouts").redlock().quorum(), r.quorum());
    /// # }
    /// ```
    pub fn redlock(&self) -> &RedLock {
        &self.redlock
    }

    /// Waits as long as it takes (in rounds), under each master's watchdog.
    ///
    /// ```no_run
    /// # async fn demo(r: keylatch_lock::RedLock) -> keylatch_lock::LockResult<()> {
    /// r.lock("payouts").acquire().await?.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// See [`try_acquire`](Self::try_acquire).
    ///
    /// # Cancel safety
    /// See [`try_acquire`](Self::try_acquire).
    pub async fn acquire(&self) -> LockResult<RedLockGuard> {
        loop {
            if let Some(g) = self
                .redlock
                .try_acquire_name(&self.name, Duration::from_secs(86_400), None)
                .await?
            {
                return Ok(g);
            }
        }
    }

    /// Tries for up to `wait`: rounds of asking every master in parallel,
    /// each round released everywhere when it falls short, a random pause
    /// between rounds. `lease: None` keeps each master's hold under its
    /// watchdog; `Some(d)` holds for `d`. `Ok(None)` when no round reached
    /// a quorum in time.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(r: keylatch_lock::RedLock) -> keylatch_lock::LockResult<()> {
    /// let payouts = r.lock("payouts");
    /// if let Some(g) = payouts.try_acquire(Duration::from_secs(2), Some(Duration::from_secs(10))).await? {
    ///     g.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Quorum`] when fewer than a quorum of masters answered at
    /// all in the last round (errors or timeouts, not a held lock): the
    /// lock cannot be had until they are back. Nothing is left held.
    /// [`LockError::WrongType`] at once when so many masters hold something
    /// else than a lock at the name (a list, a string) that no quorum can
    /// form.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped mid-round, member holds taken are released in
    /// the background (guards dropped; replies in flight settled by their
    /// finishers).
    pub async fn try_acquire(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> LockResult<Option<RedLockGuard>> {
        self.redlock.try_acquire_name(&self.name, wait, lease).await
    }
}

enum Round {
    Held(RedLockGuard),
    /// Too many masters hold something else than a lock at the name.
    WrongType(LockError),
    Short {
        answered: usize,
    },
}
