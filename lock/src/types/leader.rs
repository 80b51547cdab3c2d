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

/// The leadership lock: the non-reentrant hash (a leader does not campaign
/// twice), labelled as an election.
pub(crate) static LEADER: LockKind = LockKind {
    label: "leader",
    ..NON_REENTRANT
};

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

/// Who leads an election, as its proclamation says.
///
/// ```
/// let who = keylatch_lock::LeaderInfo::default();
/// assert!(who.owner.is_empty() && who.value.is_none());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaderInfo {
    /// The leader's owner id (the lock hash's holder).
    pub owner: String,
    /// Its fencing token, once proclaimed.
    pub token: Option<u64>,
    /// What it proclaimed (its address, say); `None` in the moment between
    /// its election and its proclamation.
    pub value: Option<String>,
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
    /// # Errors
    /// As [`Lock::acquire`]; [`LockError::Lost`] when the leadership was
    /// lost before the proclamation could be written (it is given up).
    ///
    /// # Cancel safety
    /// As [`Lock::acquire`] while waiting; dropped after it was elected,
    /// the leadership is released in the background.
    pub async fn campaign(&self, value: &str) -> LockResult<LeaderGuard> {
        let guard = self.lock.acquire().await?;
        self.lead(guard, value).await
    }

    /// [`campaign`](Self::campaign) for at most `wait`: `None` when another
    /// leads all along.
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
        match self.lock.try_acquire(wait, None).await? {
            Some(guard) => self.lead(guard, value).await.map(Some),
            None => Ok(None),
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
        let replies = self.lock.inner.client.pipeline(p).await?;
        let mut it = replies.into_iter();
        let (hash, pttl, text) = match (it.next(), it.next(), it.next()) {
            (Some(h), Some(t), Some(p)) => (h, t?, p),
            _ => return Err(LockError::Protocol("a short pipeline".into())),
        };
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
        Ok((leader_of(&hash, &text), pttl_of(&pttl)))
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

/// Whether a read failed because its key holds another type (only
/// WRONGTYPE: a refused command or a dropped connection is no reused name).
fn is_wrong_type(e: &keylatch_cluster::Error) -> bool {
    e.as_server_error().is_some_and(|s| s.code() == "WRONGTYPE")
}

/// Whether an election's hash is a read-write lock's (a `mode` field).
fn has_mode(hash: &Frame) -> bool {
    match hash.value() {
        Frame::Array(items) => items.chunks(2).any(|kv| {
            kv.first()
                .and_then(Frame::as_bytes)
                .is_some_and(|k| k[..] == b"mode"[..])
        }),
        Frame::Map(pairs) => pairs
            .iter()
            .any(|(k, _)| k.as_bytes().is_some_and(|k| k[..] == b"mode"[..])),
        _ => false,
    }
}

/// The leader an election's hash and proclamation show: the hash's one
/// owner (no leader when it has none, or holds some other lock), with the
/// proclamation's token and value when the proclamation is that owner's.
fn leader_of(hash: &Frame, text: &Frame) -> Option<LeaderInfo> {
    let fields: Vec<Vec<u8>> = match hash.value() {
        Frame::Array(items) => items
            .iter()
            .filter_map(|f| f.as_bytes().map(|b| b.to_vec()))
            .collect(),
        Frame::Map(pairs) => pairs
            .iter()
            .flat_map(|(k, v)| [k, v])
            .filter_map(|f| f.as_bytes().map(|b| b.to_vec()))
            .collect(),
        _ => return None,
    };
    let owner = fields
        .chunks(2)
        .filter(|kv| {
            kv.len() == 2 && std::str::from_utf8(&kv[1]).is_ok_and(|v| v.parse::<u64>().is_ok())
        })
        .map(|kv| String::from_utf8_lossy(&kv[0]).into_owned())
        .find(|f| !f.starts_with("keylatch_"))?;
    let mut info = LeaderInfo {
        owner,
        token: None,
        value: None,
    };
    if let Some(text) = text
        .as_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
    {
        let mut parts = text.splitn(3, '\n');
        if let (Some(token), Some(by), Some(value)) = (parts.next(), parts.next(), parts.next()) {
            if by == info.owner {
                info.token = token.parse().ok();
                info.value = Some(value.to_owned());
            }
        }
    }
    Some(info)
}

fn pttl_of(f: &Frame) -> Option<u64> {
    match f.value() {
        Frame::Integer(n) if *n > 0 => Some(n.unsigned_abs()),
        _ => None,
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
            other => Err(LockError::Protocol(other.to_string())),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(pairs: &[(&str, &str)]) -> Frame {
        Frame::Array(
            pairs
                .iter()
                .flat_map(|(k, v)| {
                    [
                        Frame::Bulk(k.to_string().into()),
                        Frame::Bulk(v.to_string().into()),
                    ]
                })
                .collect(),
        )
    }

    #[test]
    fn a_proclamation_counts_only_while_its_owner_holds_the_lock() {
        let text = Frame::Bulk("17\nu:1\n10.0.0.7:80".into());
        assert_eq!(
            leader_of(&hash(&[("u:1", "1")]), &text),
            Some(LeaderInfo {
                owner: "u:1".into(),
                token: Some(17),
                value: Some("10.0.0.7:80".into()),
            })
        );
        // Another holds it now: the old proclamation is not shown.
        assert_eq!(
            leader_of(&hash(&[("u:2", "1"), ("keylatch_waiters", "1")]), &text),
            Some(LeaderInfo {
                owner: "u:2".into(),
                token: None,
                value: None,
            })
        );
        // Nobody holds it; a read-write lock's hash is no leader either.
        assert_eq!(leader_of(&hash(&[]), &text), None);
        assert_eq!(leader_of(&hash(&[("mode", "write")]), &Frame::Null), None);
        // A value with newlines of its own stays whole.
        let multi = Frame::Bulk("3\nu:1\na\nb".into());
        assert_eq!(
            leader_of(&hash(&[("u:1", "1")]), &multi).and_then(|l| l.value),
            Some("a\nb".into())
        );
    }
}
