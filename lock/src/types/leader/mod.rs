//! Leader election ([`Locks::leader`](crate::Locks::leader)): a lock kind of
//! its own through the seam (the non-reentrant RLock hash, so the lease
//! engine renews the leader and `lost()` tells it when it stops leading),
//! plus a proclamation beside it: `keylatch_leader:{name}`, a string
//! `"<token>\n<owner>\n<value>"` the leader writes once it holds the lock
//! (`leader_proclaim.lua`), published on its own name, and takes back when
//! it resigns (`leader_clear.lua`). A reader trusts a proclamation only
//! while its owner holds the lock, so one left by a leader that died is
//! never shown.
//!
//! LeaderObservers read the hash, its TTL and the proclamation, then wait for a
//! message on the proclamation's channel or the lock's unlock channel, or
//! for the holder's lease to run out (a leader that died publishes
//! nothing), and report each change.

use std::time::Duration;

use keylatch_cluster::{Pipeline, Subscription};
use keylatch_resp::{Cmd, Frame};

use crate::error::{LockError, LockResult};
use crate::lease::LossReason;
use crate::lock::{Lock, LockGuard, LockKind};
use crate::names::companion;
use crate::scripts::{LEADER_CLEAR, LEADER_PROCLAIM};
use crate::shape::{wrong_type, KeyShape};
use crate::types::reentrant::NON_REENTRANT;

mod shown;

pub use shown::LeaderInfo;
use shown::{has_mode, is_wrong_type, leader_of, pttl_of};

/// The leadership lock: the non-reentrant hash (a leader does not campaign
/// twice), labelled as an election.
pub(crate) static LEADER: LockKind = LockKind {
    label: "leader",
    ..NON_REENTRANT
};

/// The pause before campaigning again after a leadership lost before it
/// proclaimed (someone deleting the key over and over is not met by a
/// tight loop).
const AGAIN_AFTER_LOST: Duration = Duration::from_millis(10);

/// One election: campaign for it, or watch who leads.
///
/// ```no_run
/// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
/// let election = locks.leader("scheduler");
/// let lead = election.campaign("10.0.0.7:8080").await?;
/// tokio::select! {
///     reason = lead.lost() => eprintln!("no longer leader: {reason:?}"),
///     () = async { /* lead */ } => {}
/// }
/// lead.resign().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Leader {
    lock: Lock,
    /// `keylatch_leader:{name}`: the proclamation, and its channel.
    proclamation: String,
}

impl Leader {
    pub(crate) fn new(lock: Lock) -> Self {
        let proclamation = companion("keylatch_leader", lock.name());
        Self { lock, proclamation }
    }

    /// The election's name.
    ///
    /// ```no_run
    /// # fn demo(locks: keylatch_lock::Locks) {
    /// assert_eq!(locks.leader("scheduler").name(), "scheduler");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// This campaigner's owner id (what observers see as the leader).
    ///
    /// ```no_run
    /// # fn demo(locks: keylatch_lock::Locks) {
    /// println!("{}", locks.leader("scheduler").owner());
    /// # }
    /// ```
    pub fn owner(&self) -> &str {
        self.lock.owner()
    }

    /// Waits as long as it takes to lead, then proclaims `value`. The
    /// leadership is renewed by the watchdog while the guard lives.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let lead = locks.leader("scheduler").campaign("10.0.0.7:8080").await?;
    /// assert!(lead.is_leader());
    /// lead.resign().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// A leadership lost before its proclamation could be written (the
    /// key deleted or expired in between) is campaigned for again: this
    /// answers with a leadership that proclaimed.
    ///
    /// # Errors
    /// As [`Lock::acquire`].
    ///
    /// # Cancel safety
    /// As [`Lock::acquire`] while waiting; dropped after it was elected,
    /// the leadership is released in the background.
    pub async fn campaign(&self, value: &str) -> LockResult<LeaderGuard> {
        loop {
            let guard = self.lock.acquire().await?;
            match self.lead(guard, value).await {
                Err(LockError::Lost { .. }) => tokio::time::sleep(AGAIN_AFTER_LOST).await,
                other => return other,
            }
        }
    }

    /// [`campaign`](Self::campaign) for at most `wait`: `None` when another
    /// leads all along (or each leadership had was lost before it
    /// proclaimed).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// if let Some(lead) = locks.leader("scheduler").try_campaign(Duration::from_secs(1), "me").await? {
    ///     lead.resign().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`campaign`](Self::campaign).
    ///
    /// # Cancel safety
    /// As [`campaign`](Self::campaign).
    pub async fn try_campaign(
        &self,
        wait: Duration,
        value: &str,
    ) -> LockResult<Option<LeaderGuard>> {
        let until = tokio::time::Instant::now().checked_add(wait);
        loop {
            let left = until.map_or(wait, |u| {
                u.saturating_duration_since(tokio::time::Instant::now())
            });
            let Some(guard) = self.lock.try_acquire(left, None).await? else {
                return Ok(None);
            };
            match self.lead(guard, value).await {
                // Lost before it proclaimed: campaign again while the
                // wait lasts (not elected in time after that).
                Err(LockError::Lost { .. }) => {
                    if left.is_zero() || until.is_some_and(|u| u <= tokio::time::Instant::now()) {
                        return Ok(None);
                    }
                    tokio::time::sleep(AGAIN_AFTER_LOST).await;
                }
                other => return other.map(Some),
            }
        }
    }

    async fn lead(&self, guard: LockGuard, value: &str) -> LockResult<LeaderGuard> {
        let lead = LeaderGuard {
            guard,
            leader: self.clone(),
        };
        lead.proclaim(value).await?;
        Ok(lead)
    }

    /// Gives up whatever leadership this campaigner holds without its
    /// guard: for a campaign whose outcome is unknown (the connection
    /// failed with it in flight), which may have elected this owner with
    /// nobody to renew or resign it. Releases the election's lock if this
    /// owner holds it, and takes back this owner's proclamation. `true`
    /// when it held the lock.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let held = locks.leader("scheduler").step_down().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Client`] when the server cannot be reached (call it
    /// again: both steps are safe to repeat).
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may have done either step.
    pub async fn step_down(&self) -> LockResult<bool> {
        let held = match self.lock.release_one().await {
            Ok(_) => true,
            Err(LockError::NotOwner { .. }) => false,
            Err(e) => return Err(e),
        };
        self.clear(None).await?;
        Ok(held)
    }

    /// Takes this owner's proclamation back (nothing when another's
    /// stands); with `term`, only a proclamation of that term (its fencing
    /// token): an older, lost term of this owner leaves a newer one's alone.
    async fn clear(&self, term: Option<u64>) -> LockResult<()> {
        let owner = self.lock.owner();
        let publish = self.lock.inner.script_args.publish;
        let key = [self.proclamation.as_str()];
        let token = term.unwrap_or(0).to_string();
        self.lock
            .inner
            .client
            .eval_with_written(
                &LEADER_CLEAR,
                || LEADER_CLEAR.evalsha_cmd(&key, &[owner, publish, token.as_str()]),
                None,
            )
            .await?;
        Ok(())
    }

    /// Who leads now, if anyone.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// match locks.leader("scheduler").current().await? {
    ///     Some(l) => println!("{} leads at {:?}", l.owner, l.value),
    ///     None => println!("nobody leads"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the election's name holds another
    /// type (a name reused); [`LockError::Client`] when the server cannot
    /// be read.
    ///
    /// # Cancel safety
    /// Cancel safe (reads only).
    pub async fn current(&self) -> LockResult<Option<LeaderInfo>> {
        Ok(self.read().await?.0)
    }

    /// The leader and its lease left (milliseconds, when it has one).
    async fn read(&self) -> LockResult<(Option<LeaderInfo>, Option<u64>)> {
        let name = self.lock.name();
        let mut p = Pipeline::new();
        p.add(Cmd::new("HGETALL").key(name));
        p.add(Cmd::new("PTTL").key(name));
        p.add(Cmd::new("GET").key(self.proclamation.as_str()));
        // The fencing counter: the latest term's token (every election
        // INCRs it), which a proclamation must carry to be this term's.
        let counter = self.lock.handle.names.token();
        p.add(Cmd::new("GET").key(counter.as_str()));
        let replies = self.lock.inner.client.pipeline(p).await?;
        let mut it = replies.into_iter();
        let (hash, pttl, text, term) = match (it.next(), it.next(), it.next(), it.next()) {
            (Some(h), Some(t), Some(p), Some(c)) => (h, t?, p, c),
            _ => return Err(LockError::Protocol("a short pipeline".into())),
        };
        let term = term.ok().and_then(|f| {
            f.as_bytes()
                .and_then(|b| std::str::from_utf8(b).ok()?.parse().ok())
        });
        // The name reused by another type (WRONGTYPE): typed, as every
        // other call of the election answers it.
        let hash = match hash {
            Err(e) if is_wrong_type(&e) => {
                return Err(wrong_type(&self.lock.inner, name).await);
            }
            other => other?,
        };
        // A read-write lock's hash (its `mode` field) holds readers or a
        // writer, never a leader: the name is another type's.
        if has_mode(&hash) {
            return Err(LockError::WrongType {
                name: name.to_owned(),
                found: KeyShape::ReadWriteHash,
            });
        }
        // A proclamation key of another type proclaims nothing.
        let text = match text {
            Err(e) if is_wrong_type(&e) => Frame::Null,
            other => other?,
        };
        Ok((leader_of(&hash, &text, term), pttl_of(&pttl)))
    }

    /// Watches who leads: the first [`LeaderObserver::next`] answers at once,
    /// each later one when the leader changes.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let mut watch = locks.leader("scheduler").observe().await;
    /// loop {
    ///     println!("{:?}", watch.next().await?);
    /// }
    /// # }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn observe(&self) -> LeaderObserver {
        let inner = &self.lock.inner;
        let mut subs = Vec::new();
        if let Some(hub) = inner.pubsub().await {
            let sharded = inner.client.has_sharded_pubsub();
            for channel in [
                self.proclamation.as_str(),
                self.lock.handle.names.channel().as_str(),
            ] {
                let sub = if sharded {
                    hub.ssubscribe(channel).await
                } else {
                    hub.subscribe(channel).await
                };
                if let Ok(s) = sub {
                    subs.push(s);
                }
            }
        }
        LeaderObserver {
            leader: self.clone(),
            subs,
            last: None,
            recheck: inner.config.recheck,
        }
    }
}

/// This process's leadership of an election: the lock's guard, and its
/// proclamation.
#[must_use = "dropping a leader guard gives the leadership up in the background"]
#[derive(Debug)]
pub struct LeaderGuard {
    guard: LockGuard,
    leader: Leader,
}

impl LeaderGuard {
    /// Whether this process still leads (its hold not known lost).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let lead = locks.leader("scheduler").campaign("me").await?;
    /// assert!(lead.is_leader());
    /// # Ok(()) }
    /// ```
    pub fn is_leader(&self) -> bool {
        !self.guard.is_lost()
    }

    /// Resolves when the leadership is lost (renewal found it gone, or its
    /// lease ran out unrenewed).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let lead = locks.leader("scheduler").campaign("me").await?;
    /// let lost = lead.lost(); // hand it to the work that must stop
    /// # drop(lost);
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub fn lost(&self) -> impl std::future::Future<Output = LossReason> + Send + 'static {
        self.guard.lost()
    }

    /// The leadership's fencing token: tag the leader's writes with it.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let lead = locks.leader("scheduler").campaign("me").await?;
    /// println!("{:?}", lead.fencing_token());
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self) -> Option<u64> {
        self.guard.fencing_token()
    }

    /// How long this leadership lasts by the local clock unless renewed
    /// (the lease's end, measured from before the request that set it);
    /// `None` once lost. A leader about to act on its leadership checks
    /// that this exceeds the action's duration.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let lead = locks.leader("scheduler").campaign("me").await?;
    /// assert!(lead.remaining_lease().is_some());
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self) -> Option<Duration> {
        self.guard.remaining_lease()
    }

    /// Proclaims `value` anew (an address that changed, say); observers
    /// see the change.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let lead = locks.leader("scheduler").campaign("10.0.0.7:8080").await?;
    /// lead.proclaim("10.0.0.7:9090").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Lost`] when this term no longer leads (lost, or the
    /// same campaigner elected again since: nothing is written, and the
    /// guard's [`lost`](Self::lost) fires); [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have proclaimed.
    pub async fn proclaim(&self, value: &str) -> LockResult<()> {
        let l = &self.leader;
        let name = l.lock.name();
        if self.guard.is_lost() {
            // Known lost: nothing is sent (an expired lease has no reason
            // recorded until the engine's next look).
            let reason = self.guard.loss_reason().unwrap_or(LossReason::Expired);
            return Err(LockError::Lost {
                name: name.to_owned(),
                reason,
            });
        }
        let owner = l.lock.owner();
        let token = self.guard.fencing_token().unwrap_or(0).to_string();
        let text = format!("{token}\n{owner}\n{value}");
        let publish = l.lock.inner.script_args.publish;
        let counter = l.lock.handle.names.token();
        let keys = [name, l.proclamation.as_str(), counter.as_str()];
        let reply = l
            .lock
            .inner
            .client
            .eval_with_written(
                &LEADER_PROCLAIM,
                || {
                    LEADER_PROCLAIM
                        .evalsha_cmd(&keys, &[owner, text.as_str(), publish, token.as_str()])
                },
                None,
            )
            .await?;
        match reply.value() {
            Frame::Integer(1) => Ok(()),
            Frame::Integer(0) => {
                // Found gone: the guard learns it now, not at its next
                // renewal.
                self.guard
                    .found_gone("a proclaim found the leadership gone");
                Err(LockError::Lost {
                    name: name.to_owned(),
                    reason: LossReason::Gone,
                })
            }
            other => Err(LockError::Protocol(other.shown())),
        }
    }

    /// Gives the leadership up: the lock is released (the next campaigner
    /// is woken) and the proclamation taken back (observers see nobody
    /// lead until the next is elected).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// locks.leader("scheduler").campaign("me").await?.resign().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`LockGuard::unlock`]; the proclamation is taken back either way.
    ///
    /// # Cancel safety
    /// As [`LockGuard::unlock`].
    pub async fn resign(self) -> LockResult<()> {
        let Self { guard, leader } = self;
        let term = guard.fencing_token();
        let released = guard.unlock().await;
        // This term's proclamation only: a newer term of the same
        // campaigner keeps its own.
        leader.clear(term).await?;
        released
    }
}

/// Who leads an election, as it changes ([`Leader::observe`]).
pub struct LeaderObserver {
    leader: Leader,
    /// The proclamation's channel and the lock's unlock channel (none:
    /// polling every re-check).
    subs: Vec<Subscription>,
    /// What the last `next` answered.
    last: Option<Option<LeaderInfo>>,
    recheck: Duration,
}

impl std::fmt::Debug for LeaderObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderObserver")
            .field("election", &self.leader.name())
            .field("last", &self.last)
            .finish_non_exhaustive()
    }
}

impl LeaderObserver {
    /// The leader now on the first call; after that, the next leader that
    /// differs from the last answered (`None`: nobody leads). A leader that
    /// dies is seen gone when its lease runs out.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let mut watch = locks.leader("scheduler").observe().await;
    /// let now = watch.next().await?;
    /// let then = watch.next().await?; // waits for a change
    /// assert_ne!(now, then);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Client`] when the server cannot be read.
    ///
    /// # Cancel safety
    /// Cancel safe: a change seen by a cancelled call is seen again by the
    /// next one.
    pub async fn next(&mut self) -> LockResult<Option<LeaderInfo>> {
        loop {
            let (now, pttl) = self.leader.read().await?;
            if self.last.as_ref() != Some(&now) {
                self.last = Some(now.clone());
                return Ok(now);
            }
            // The lease's end (plus a millisecond) or the re-check.
            let nap = pttl.map_or(self.recheck, |ms| {
                Duration::from_millis(ms + 1).min(self.recheck)
            });
            self.wait(nap).await;
        }
    }

    /// Until a message on either channel, or `nap`.
    async fn wait(&mut self, nap: Duration) {
        let sleep = tokio::time::sleep(nap);
        tokio::pin!(sleep);
        let [a, b] = match self.subs.as_mut_slice() {
            [a, b] => [a, b],
            _ => {
                sleep.await;
                return;
            }
        };
        tokio::select! {
            e = a.recv() => if e.is_none() { self.subs.clear() },
            e = b.recv() => if e.is_none() { self.subs.clear() },
            () = &mut sleep => {}
        }
    }
}
