//! `MultiLock`: all of several locks or none, under one guard.
//!
//! Members are taken in one canonical order, (cluster slot, name, owner),
//! whatever order the caller listed them in, so two callers listing the
//! same names in opposite orders cannot deadlock (Redisson #1160): each
//! waits only while holding members that come before the one it waits
//! for. Members of one client, owner and slot (a shared hash tag) that are
//! plain reentrant locks are taken together in one script call
//! (`multi_acquire.lua`), all or none. A partial acquire is rolled back before
//! the call returns; a dropped one releases what it took in the background
//! (its guards' drops, the late-reply finishers of attempts in flight).

use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_resp::{Cmd, Frame, ToArg};

use crate::error::{LockError, LockResult};
use crate::lease::LossReason;
use crate::lock::{settle_late, watched, Acquiring, Lock, LockGuard, Unsettled};
use crate::owner::OwnerText;
use crate::scripts::MULTI_ACQUIRE;
use crate::shape::{key_shape, KeyShape};
use crate::span::{clamp_span, millis};
use crate::types::losses::{JoinAll, Losses};
use crate::wake::{AtOnce, Wake};

/// All of several locks or none. Members may be locks of any kind, on any
/// clients (each member keeps its own owner and watchdog).
///
/// ```no_run
/// use std::time::Duration;
/// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
/// // Transfer between two accounts: both or neither.
/// let both = locks.multi_lock(&["account:17", "account:4"]);
/// if let Some(guard) = both.try_acquire(Duration::from_secs(5), None).await? {
///     // … both accounts are ours …
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock {
    /// In canonical order.
    members: Vec<Lock>,
}

/// The canonical order: slot, then name, then owner, then kind (a
/// read-write lock's write side before its read side: the write first is a
/// downgrade, the read first would be a refused upgrade).
fn order_key(l: &Lock) -> (u16, &str, OwnerText<'_>, u8) {
    (
        l.handle.slot(),
        l.name(),
        l.handle.owner(),
        l.handle.kind.multi_rank,
    )
}

impl MultiLock {
    /// A multi-lock over `members` (any kinds, any clients), taken in
    /// canonical order whatever the order given.
    ///
    /// ```no_run
    /// # fn demo(a: keylatch_lock::Locks, b: keylatch_lock::Locks) {
    /// use keylatch_lock::MultiLock;
    /// let m = MultiLock::new(vec![a.lock("x"), b.fair_lock("y")]);
    /// assert_eq!(m.members().len(), 2);
    /// # }
    /// ```
    pub fn new(mut members: Vec<Lock>) -> Self {
        members.sort_by(|a, b| order_key(a).cmp(&order_key(b)));
        Self { members }
    }

    /// The members, in the order they are taken.
    ///
    /// ```no_run
    /// # fn demo(locks: keylatch_lock::Locks) {
    /// let m = locks.multi_lock(&["b", "a"]);
    /// let names: Vec<&str> = m.members().iter().map(|l| l.name()).collect();
    /// assert_eq!(names.len(), 2);
    /// # }
    /// ```
    pub fn members(&self) -> &[Lock] {
        &self.members
    }

    /// Waits as long as it takes for every member, under the watchdog.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let g = locks.multi_lock(&["a", "b"]).acquire().await?;
    /// g.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// See [`try_acquire`](Self::try_acquire).
    ///
    /// # Cancel safety
    /// See [`try_acquire`](Self::try_acquire).
    pub async fn acquire(&self) -> LockResult<MultiGuard> {
        loop {
            if let Some(g) = self.try_acquire(Duration::from_secs(86_400), None).await? {
                return Ok(g);
            }
        }
    }

    /// Tries for up to `wait` to take every member (`lease: None`: each
    /// under its watchdog; `Some(d)`: each for `d`). `Ok(None)` when not
    /// all could be had in time: whatever was taken is released first.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let m = locks.multi_lock(&["a", "b", "c"]);
    /// match m.try_acquire(Duration::from_secs(1), None).await? {
    ///     Some(g) => g.unlock().await?,
    ///     None => println!("one of them is busy"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::SelfDeadlock`] at once when one name is listed under two
    /// owners (the second would wait for the first for ever).
    /// [`LockError::WrongType`] at once when a member's key holds no lock.
    /// Otherwise the first member's error ([`LockError::Client`], …); the
    /// members taken before it are released first.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped at any point, what it took is released in the
    /// background (a reply still on its way is settled when it comes, as
    /// for a single lock), and nothing stays held past a lease.
    pub async fn try_acquire(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> LockResult<Option<MultiGuard>> {
        for pair in self.members.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if a.name() == b.name() && a.owner_id() != b.owner_id() {
                return Err(LockError::SelfDeadlock {
                    name: a.name().to_owned(),
                });
            }
        }
        let deadline = Instant::now().checked_add(wait);
        loop {
            match self.round(wait, deadline, lease).await? {
                Some(held) if !held.iter().any(LockGuard::is_lost) => {
                    return Ok(Some(MultiGuard { guards: held }));
                }
                Some(held) => {
                    // A member taken early ran out its lease while a later
                    // one was waited for: all of them or none, so start
                    // again while the wait lasts.
                    rollback(held).await;
                    let left =
                        deadline.map_or(wait, |d| d.saturating_duration_since(Instant::now()));
                    if left.is_zero() {
                        return Ok(None);
                    }
                }
                None => return Ok(None),
            }
        }
    }

    /// Every member once, in order; `None` (after a rollback) when one
    /// could not be had in the wait.
    async fn round(
        &self,
        wait: Duration,
        deadline: Option<Instant>,
        lease: Option<Duration>,
    ) -> LockResult<Option<Vec<LockGuard>>> {
        let mut held: Vec<LockGuard> = Vec::with_capacity(self.members.len());
        let mut i = 0;
        while i < self.members.len() {
            let group = self.group_at(i);
            let left = deadline.map_or(wait, |d| d.saturating_duration_since(Instant::now()));
            let got = if group.len() == 1 {
                group[0]
                    .try_acquire(left, lease)
                    .await
                    .map(|g| g.map(|g| vec![g]))
            } else {
                Box::pin(take_group(group, deadline, lease)).await
            };
            match got {
                Ok(Some(gs)) => held.extend(gs),
                Ok(None) => {
                    rollback(held).await;
                    return Ok(None);
                }
                Err(e) => {
                    rollback(held).await;
                    return Err(e);
                }
            }
            i += group.len();
        }
        Ok(Some(held))
    }

    /// The members from `i` that one script call can take together: plain
    /// reentrant locks of one client, owner and slot, without a
    /// replica-sync policy or a spin wait.
    fn group_at(&self, i: usize) -> &[Lock] {
        let first = &self.members[i];
        let batchable = |l: &Lock| {
            l.handle.kind.batchable && matches!(l.replica_sync(), crate::ReplicaSync::None)
        };
        if !batchable(first) {
            return &self.members[i..=i];
        }
        let mut end = i + 1;
        while end < self.members.len() {
            let l = &self.members[end];
            let same = Arc::ptr_eq(&l.inner, &first.inner)
                && l.handle.slot() == first.handle.slot()
                && l.owner_id() == first.owner_id()
                && l.name() != self.members[end - 1].name()
                && batchable(l);
            if !same {
                break;
            }
            end += 1;
        }
        &self.members[i..end]
    }
}

/// Members of one slot, one client and one owner, all or none in one call;
/// waits on the busy member's channel and tries again until `deadline`.
///
/// A server error (a member's key of another type fails the script) is
/// reported as [`LockError::WrongType`] for the first member that holds no
/// lock, so the caller learns what is there at once.
async fn take_group(
    group: &[Lock],
    deadline: Option<Instant>,
    lease: Option<Duration>,
) -> LockResult<Option<Vec<LockGuard>>> {
    let first = &group[0];
    let inner = &first.inner;
    let cfg = &inner.config;
    let (lease_d, renew) = match lease {
        Some(l) => (clamp_span(l), false),
        None => (clamp_span(cfg.watchdog_timeout), true),
    };
    let cmd = Arc::new(group_cmd(group, lease_d));
    let late = settle_group(group, cfg.watchdog_timeout);
    // Each member's acquire is under way until this returns (`fold_orphans`).
    let _acquiring: Vec<_> = group.iter().map(|l| Acquiring::new(&l.handle)).collect();
    let mut wake: Option<Wake> = None;
    let mut at_once = AtOnce::default();
    loop {
        let bound = first.reply_bound(deadline);
        let sent_at = Instant::now();
        // Ended unread, each member's holds are judged by token (`Unsettled`).
        let unsettled: Vec<_> = group.iter().map(|l| Unsettled::new(&l.handle)).collect();
        // And a process that settles waits for a late reply (`watched`).
        let sent =
            inner
                .client
                .eval_shared_settled(&MULTI_ACQUIRE, &cmd, Some(bound), Arc::clone(&late));
        let frame = match watched(inner, first.name(), cfg.watchdog_timeout, sent).await {
            Ok(f) => f,
            Err(e) => return Err(refused(group, e).await),
        };
        let reply = multi_reply(&frame, group.len())?;
        unsettled.into_iter().for_each(Unsettled::settled);
        let (busy, pttl) = match reply {
            MultiReply::Taken(pairs) => {
                let mut guards = Vec::with_capacity(group.len());
                for (m, (holds, token)) in group.iter().zip(pairs) {
                    guards.push(m.guard_for(holds, token, renew, lease_d, sent_at, false));
                }
                return Ok(Some(guards));
            }
            MultiReply::Busy { member, pttl } => (member, pttl),
        };
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
            return Ok(None);
        }
        let Some(b) = group.get(busy) else {
            return Err(LockError::Protocol(frame.shown()));
        };
        if pttl == -1 {
            // Held with no expiry: maybe no lock at all (every lock has one).
            no_lock(b).await?;
        }
        let w = match wake.as_mut() {
            Some(w) => w,
            None => {
                // Subscribed, try again at once (a release in between).
                wake = Some(
                    Wake::subscribe(
                        inner,
                        &b.handle.names.key,
                        &b.handle.names.channel(),
                        deadline,
                    )
                    .await,
                );
                continue;
            }
        };
        // The busy member's PTTL, at most the re-check and what is left.
        let nap = at_once.nap(pttl, cfg.recheck).min(cfg.recheck);
        w.pause(left.map_or(nap, |l| nap.min(l))).await;
    }
}

/// The `multi_acquire.lua` call taking every member of `group` for `lease`.
fn group_cmd(group: &[Lock], lease: Duration) -> Cmd {
    let first = &group[0];
    let lease_ms = millis(lease).to_string();
    let mut pairs = Vec::with_capacity(group.len());
    pairs.extend(group.iter().map(|l| l.handle.names.key_and_token()));
    let mut keys: Vec<&dyn ToArg> = Vec::with_capacity(group.len() * 2);
    for (key, token) in &pairs {
        keys.push(key);
        keys.push(token);
    }
    MULTI_ACQUIRE.evalsha_cmd(
        &keys,
        &[
            lease_ms.as_str(),
            &first.handle.owner(),
            first.inner.script_args.token_ttl_ms.as_str(),
        ],
    )
}

/// The group's late handler: a reply nobody waits for has each member it
/// took released by token.
fn settle_group(group: &[Lock], watchdog: Duration) -> keylatch_cluster::LateReply {
    let members: Vec<Lock> = group.to_vec();
    Arc::new(move |frame| {
        if let Frame::Array(items) = frame.value() {
            if items.first().map(Frame::value) == Some(&Frame::Integer(1)) {
                for (m, pair) in members.iter().zip(items[1..].chunks(2)) {
                    settle_late(m.clone(), watchdog, &Frame::Array(pair.to_vec()));
                }
            }
        }
    })
}

/// [`LockError::WrongType`] when the member's key holds no lock.
async fn no_lock(member: &Lock) -> LockResult<()> {
    let found = key_shape(&member.inner, member.name()).await?;
    if !found.is_lock() && found != KeyShape::None {
        return Err(LockError::WrongType {
            name: member.name().to_owned(),
            found,
        });
    }
    Ok(())
}

/// Releases what a failed multi-acquire took.
async fn rollback(held: Vec<LockGuard>) {
    for g in held.into_iter().rev() {
        let _ = g.unlock().await;
    }
}

/// Every member of a [`MultiLock`], held. One loss signal for all: it fires
/// when any member is lost. Dropping it releases every member in the
/// background.
///
/// ```no_run
/// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
/// let g = locks.multi_lock(&["a", "b"]).acquire().await?;
/// tokio::select! {
///     why = g.lost() => eprintln!("a member was lost: {why:?}"),
///     () = async { /* work under all members */ } => {}
/// }
/// g.unlock().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping a multi-guard releases every member in the background"]
#[derive(Debug)]
pub struct MultiGuard {
    guards: Vec<LockGuard>,
}

impl MultiGuard {
    /// [`LockGuard::run`] for every member: `work` gets the members'
    /// fencing tokens in canonical order, and stops at once when any is
    /// lost ([`lost`](Self::lost)); every member is released after.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let g = locks.multi_lock(&["a", "b"]).acquire().await?;
    /// g.run(|tokens| async move { assert_eq!(tokens.len(), 2) }).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Lost`] when a member was lost while the work ran, or
    /// the release found one already ended.
    ///
    /// # Cancel safety
    /// Dropped before it finished, the work is dropped and the guard with
    /// it, which releases every member in the background.
    pub async fn run<T, Fut>(self, work: impl FnOnce(Vec<Option<u64>>) -> Fut) -> LockResult<T>
    where
        Fut: std::future::Future<Output = T>,
    {
        let name: Vec<&str> = self.guards.iter().map(|g| g.lock().name()).collect();
        let name = name.join(",");
        let tokens = self.guards.iter().map(LockGuard::fencing_token).collect();
        let lost = self.lost();
        crate::section::run_section(|| name, lost, work(tokens), || self.unlock()).await
    }

    /// The members' guards, in canonical order.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let g = locks.multi_lock(&["a", "b"]).acquire().await?;
    /// for m in g.guards() {
    ///     println!("{} token {:?}", m.lock().name(), m.fencing_token());
    /// }
    /// g.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// Resolves when any member is known lost (stays pending while all
    /// stand, and after a normal release).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let g = locks.multi_lock(&["a", "b"]).acquire().await?;
    /// let lost = g.lost(); // hand it to the worker
    /// g.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub fn lost(&self) -> impl std::future::Future<Output = LossReason> + Send + 'static {
        let signals = self
            .guards
            .iter()
            .map(|g| Box::pin(g.lost()) as _)
            .collect();
        Losses::new(signals, 1)
    }

    /// Whether any member is known lost.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let g = locks.multi_lock(&["a", "b"]).acquire().await?;
    /// assert!(!g.is_lost());
    /// g.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.guards.iter().any(LockGuard::is_lost)
    }

    /// Extends every member taken with a fixed lease, as
    /// [`LockGuard::extend`] does (no key shortened; in parallel). All must
    /// succeed: the multi-lock is held only while every member is.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// let m = locks.multi_lock(&["a", "b"]);
    /// if let Some(g) = m.try_acquire(Duration::from_secs(1), Some(Duration::from_secs(10))).await? {
    ///     g.extend(Duration::from_secs(30)).await?;
    ///     g.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The first member's error, in canonical order:
    /// [`LockError::WatchdogLease`] for members under the watchdog (nothing
    /// sent for them), [`LockError::Expired`] for a member that had ended,
    /// [`LockError::Client`]. The other members are extended all the same.
    ///
    /// # Cancel safety
    /// Cancel safe; a cancelled call may still have extended some members.
    pub async fn extend(&self, lease: Duration) -> LockResult<()> {
        let outs = JoinAll::new(self.guards.iter().map(|g| g.extend(lease))).await;
        outs.into_iter().collect::<LockResult<Vec<()>>>().map(drop)
    }

    /// Releases every member (in reverse order). Every member is released
    /// whatever the others answer; the first error is returned.
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// locks.multi_lock(&["a", "b"]).acquire().await?.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The first member's error: [`LockError::Expired`] when it had been
    /// lost, [`LockError::NotOwner`], [`LockError::Client`].
    ///
    /// # Cancel safety
    /// Cancel safe: members not released yet are released in the
    /// background when the future is dropped.
    pub async fn unlock(self) -> LockResult<()> {
        let mut first = Ok(());
        for g in self.guards.into_iter().rev() {
            if let Err(e) = g.unlock().await {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }
}

/// What a `multi_acquire` reply says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MultiReply {
    /// Every member taken: `(holds, token)` per member, in order, each
    /// with at least one hold.
    Taken(Vec<(i64, i64)>),
    /// Nothing taken: this member (0-based) is held by another owner for
    /// about `pttl` milliseconds.
    Busy { member: usize, pttl: i64 },
}

/// Reads a `multi_acquire` reply for `members` locks: `{1, holds1, token1,
/// …}` or `{0, i, pttl}` (RESP3 attributes seen through). Anything else is
/// [`LockError::Protocol`], checked whole before any guard is made: a
/// taken reply must have exactly one pair per member, each with at least
/// one hold, and a busy one must name a member.
pub(crate) fn multi_reply(frame: &Frame, members: usize) -> LockResult<MultiReply> {
    let bad = || LockError::Protocol(frame.shown());
    let Frame::Array(items) = frame.value() else {
        return Err(bad());
    };
    let int = |i: usize| match items.get(i).map(Frame::value) {
        Some(Frame::Integer(n)) => Ok(*n),
        _ => Err(bad()),
    };
    if int(0)? == 1 {
        if items.len() != 1 + 2 * members {
            return Err(bad());
        }
        let pairs = (0..members)
            .map(|k| {
                let holds = int(1 + 2 * k)?;
                if holds < 1 {
                    return Err(bad());
                }
                Ok((holds, int(2 + 2 * k)?))
            })
            .collect::<LockResult<Vec<_>>>()?;
        return Ok(MultiReply::Taken(pairs));
    }
    let member = usize::try_from(int(1)?.max(1) - 1).unwrap_or(0);
    let pttl = int(2)?;
    if member >= members {
        return Err(bad());
    }
    Ok(MultiReply::Busy { member, pttl })
}

/// A group acquire the server answered with an error: the first member
/// whose key holds no lock, as [`LockError::WrongType`]; else the error.
async fn refused(group: &[Lock], e: keylatch_cluster::Error) -> LockError {
    if e.server_kind() == Some(keylatch_cluster::ServerErrorKind::Other) {
        for m in group {
            if let Ok(found) = key_shape(&m.inner, m.name()).await {
                if !found.is_lock() && found != KeyShape::None {
                    return LockError::WrongType {
                        name: m.name().to_owned(),
                        found,
                    };
                }
            }
        }
    }
    e.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(v: &[i64]) -> Frame {
        Frame::Array(v.iter().map(|&i| Frame::Integer(i)).collect())
    }

    #[test]
    fn multi_replies_are_read_whole_before_any_guard() {
        assert_eq!(
            multi_reply(&ints(&[1, 1, 7, 2, 8]), 2).ok(),
            Some(MultiReply::Taken(vec![(1, 7), (2, 8)]))
        );
        assert_eq!(
            multi_reply(&ints(&[0, 2, 150]), 2).ok(),
            Some(MultiReply::Busy {
                member: 1,
                pttl: 150
            })
        );
        // A pair short or one too many, a member with no hold, a busy
        // member that is not one: never guards.
        for (bad, members) in [
            (ints(&[1, 1, 7]), 2),
            (ints(&[1, 1, 7, 1, 8, 1]), 2),
            (ints(&[1, 1, 7, 0, 8]), 2),
            (ints(&[1, -1, 7]), 1),
            (ints(&[0, 3, 10]), 2),
            (ints(&[0, 1]), 2),
            (Frame::Integer(1), 1),
        ] {
            assert!(
                matches!(multi_reply(&bad, members), Err(LockError::Protocol(_))),
                "{bad}"
            );
        }
    }
}
