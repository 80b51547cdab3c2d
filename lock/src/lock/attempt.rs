//! One acquire attempt of a [`Lock`] (and the finisher that settles an
//! attempt nobody waits for any more), the guard it builds, and the
//! replica-sync check.
//!
//! Attempts never touch the lease engine's table. A successful reply builds
//! (or joins) its [`Hold`] and hands a new one to the engine. An attempt
//! whose reply comes after it gave up (past its bound) or after it was
//! dropped hands that reply to a finisher (`settle_late`) that releases the
//! hold *by its token* if the reply says it was taken, so it can never end
//! anybody else's hold; a reply that never arrives leaves a possible hold to
//! end with its lease. The connection does this itself (the finisher is the
//! request's late handler, and an attempt dropped before it was written is
//! never sent); in a cluster each routed attempt is sent the same way, and
//! redirects and refusals (`TRYAGAIN` while the slot migrates, a failover)
//! are retried until the caller's wait is over.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::{Error, LateReply, ServerErrorKind};
use keylatch_resp::{Cmd, Frame};

use crate::error::{LockError, LockResult};
use crate::lease::hold::{clamp_span, millis, Hold, NewHold};
use crate::reply::{acquire_reply, waiter_held, AcquireReply};
use crate::shape::{key_shape, KeyShape};

use super::base::{Lock, ReplicaSync};
use super::depart::leave_late;
use super::guard::LockGuard;
use super::handle::{Handle, Unsettled};
use super::release::{release, spawn_queued, Retry};
use super::unanswered::Unanswered;

/// First pause before an acquire that surely did not run (see [`not_run`])
/// is tried again within its wait; doubles up to [`MAX_NOT_RUN_PAUSE`].
const NOT_RUN_PAUSE: Duration = Duration::from_millis(20);
const MAX_NOT_RUN_PAUSE: Duration = Duration::from_millis(500);

/// Whether an acquire surely did not run and may be sent again: not sent,
/// refused by a server still loading its data, busy with a long script
/// (`BUSY`: it refuses every command until the script ends or is killed),
/// or by a master demoted to replica (`READONLY`: the connection finds the
/// new master, through the sentinels when it has them), or by a server out
/// of memory (`OOM`: a script is refused only at its first write, so
/// nothing of it ran; memory may come back within the wait).
fn not_run(e: &Error) -> bool {
    matches!(e, Error::Disconnected)
        || matches!(
            e.server_kind(),
            Some(
                ServerErrorKind::Loading
                    | ServerErrorKind::Busy
                    | ServerErrorKind::ReadOnly
                    | ServerErrorKind::Oom
            )
        )
}

// Returned once per attempt and unpacked at once: boxing the guard would
// cost an allocation per acquire for nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Attempt {
    Acquired(LockGuard),
    /// Held by another owner; the PTTL in milliseconds, and the fencing
    /// counter's value a waiter's try saw (0 for any other try).
    Held(i64, i64),
}

/// Whether a reply to a call sent at `sent_at` came after the `lease` it
/// took had passed by the local clock (a stalled server). The lease
/// itself, not the drift-trimmed deadline: a lease of a few milliseconds
/// still answers (a guard that may be lost soon); only a reply that
/// outlived the whole lease is given back.
pub(crate) fn outlived(sent_at: Instant, lease: Duration) -> bool {
    sent_at
        .checked_add(lease)
        .is_some_and(|end| Instant::now() >= end)
}

/// An acquire's reply nobody waits for any more: if it took the lock, that
/// hold is released by its token (a re-entry: that one count), within the
/// lease. Never by owner: it can end no other hold.
pub(crate) fn settle_late(lock: Lock, lease: Duration, frame: &Frame) {
    if let Some((_, _, tag)) = waiter_held(frame) {
        // A waiter's try that registered after its wait gave up (a cluster
        // retry that ran after the wait's leave): that registration goes
        // too, so no release grants the lock to a wait that is over.
        if let Ok(tag @ 1..) = u16::try_from(tag) {
            leave_late(lock, tag);
        }
        return;
    }
    // Any first hold or re-entry, `{1, token, 1}` (the call made the
    // counter) included: a reply read as anything else took nothing.
    let Ok(AcquireReply::Taken { value: token, .. }) = acquire_reply(frame) else {
        return;
    };
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        lock.handle.doubt();
        return;
    };
    let until = Instant::now() + lease;
    // A hold not named by its token (a fenced lock's: its token is the
    // acquire's INCR, which a later re-entry moves past) is released by owner.
    let token = lock
        .handle
        .kind
        .tokens
        .release_token(token.max(0).unsigned_abs());
    // Until this release is sent and answered, the owner's next acquire
    // waits: it would re-enter the hold (a dropped wait's try that took
    // its grant, then the wait's leave found nothing to give back).
    let ticket = lock.inner.leaves.ticket(&lock.handle.owner());
    // And counted for `Locks::settle`, as every background release is.
    let running = lock.inner.background.ticket();
    rt.spawn(async move {
        let _ticket = ticket;
        let _running = running;
        if release(&lock, token, Some(until), Retry::Here)
            .await
            .is_ok()
        {
            // Our own write to the key raised no invalidation: a hold of
            // this owner that the undone acquire re-entered is read again.
            lock.inner.engine.touched(&lock.handle.names.key);
        }
    });
}

impl Lock {
    /// How long one attempt may take: the caller's remaining wait, but at
    /// least [`LocksConfig::attempt_timeout`]. The client waits at most its
    /// request timeout for any one reply; in a cluster it retries redirects
    /// and refusals within this bound.
    ///
    /// [`LocksConfig::attempt_timeout`]: crate::LocksConfig::attempt_timeout
    pub(crate) fn reply_bound(&self, deadline: Option<Instant>) -> Duration {
        let floor = self.inner.config.attempt_timeout;
        deadline.map_or(floor, |d| {
            d.saturating_duration_since(Instant::now()).max(floor)
        })
    }

    /// The handle's acquire finisher. It holds the lock layer strongly
    /// (a late reply is settled even after every `Locks` and `Lock` of it
    /// is dropped: a cancelled `timeout(d, locks.lock(n).acquire())` drops
    /// its handle at once) and the handle weakly (the handle keeps its
    /// finisher: a strong reference would never be freed); with the handle
    /// gone, the finisher makes an equal one from its name, owner and kind
    /// (a hold is named by those alone). The watchdog lease bounds its
    /// release retries (a fixed lease's hold past that has ended, or its
    /// release finds nothing).
    fn finisher(&self) -> LateReply {
        let inner = Arc::clone(&self.inner);
        let handle = Arc::downgrade(&self.handle);
        let (name, owner, kind) = (
            Arc::clone(&self.handle.names.key),
            self.handle.owner_id().clone(),
            self.handle.kind,
        );
        let lease = self.inner.config.watchdog_timeout;
        Arc::new(move |frame| {
            let handle = handle
                .upgrade()
                .unwrap_or_else(|| Arc::new(Handle::new(&name, owner.clone(), kind)));
            settle_late(Lock::from_parts(Arc::clone(&inner), handle), lease, &frame);
        })
    }

    /// An acquire the server answered with an error: when the name's key
    /// holds no lock (the script met another type: a list, a semaphore's
    /// string), [`LockError::WrongType`] naming it, so the caller fails at
    /// once with what is there; else the client's error as it was.
    async fn refused(&self, e: Error) -> LockError {
        if e.server_kind() == Some(ServerErrorKind::Other) {
            if let Ok(found) = key_shape(&self.inner, self.name()).await {
                if !found.is_lock() && found != KeyShape::None {
                    return LockError::WrongType {
                        name: self.name().to_owned(),
                        found,
                    };
                }
            }
        }
        e.into()
    }

    /// One acquire script call; when it cannot take the lock and `join`
    /// is set, it takes (or keeps) the waiter's place: a fair lock's in
    /// the queue, a writer's marker, an RLock waiter's registration (`tag`:
    /// the wait's, when a release may grant it the lock; else 0).
    pub(crate) async fn attempt(
        &self,
        lease: Option<Duration>,
        deadline: Option<Instant>,
        join: bool,
        tag: u16,
    ) -> LockResult<Attempt> {
        let cfg = &self.inner.config;
        let (lease_d, renew) = match lease {
            Some(l) => (clamp_span(l), false),
            None => (clamp_span(cfg.watchdog_timeout), true),
        };
        let args = &self.inner.script_args;
        // A waiter's try (`join`) differs: it registers, or queues.
        let prepared = renew && !join;
        let cmd = match prepared
            .then(|| self.handle.acquire_watchdog(args))
            .flatten()
        {
            // A handle in repeated use: the prepared command, shared.
            Some(cmd) => Arc::clone(cmd),
            None => {
                let ms;
                let lease_ms = if renew {
                    &args.watchdog_ms
                } else {
                    ms = millis(lease_d).to_string();
                    &ms
                };
                Arc::new(self.handle.acquire_cmd(args, lease_ms, join, tag))
            }
        };
        let (frame, sent_at) = self.send(&cmd, deadline).await?;
        // A reply of another shape leaves the outcome unknown, as a lost one
        // does: the lease ends whatever it may have taken.
        let reply = acquire_reply(&frame).inspect_err(|_| self.handle.doubt());
        let (holds, value, made) = match reply? {
            AcquireReply::UpgradeRefused => {
                return Err(LockError::UpgradeRefused {
                    name: self.name().to_owned(),
                })
            }
            AcquireReply::NotReentrant => {
                return Err(LockError::NotReentrant {
                    name: self.name().to_owned(),
                })
            }
            // A lock always has an expiry: a key without one may be no
            // lock at all (an application's hash), which nobody will ever
            // release. Asked only then, off the fast path.
            AcquireReply::Held(-1, seen) => match key_shape(&self.inner, self.name()).await? {
                found if found.is_lock() || found == KeyShape::None => {
                    return Ok(Attempt::Held(-1, seen))
                }
                found => {
                    return Err(LockError::WrongType {
                        name: self.name().to_owned(),
                        found,
                    })
                }
            },
            AcquireReply::Held(pttl, seen) => return Ok(Attempt::Held(pttl, seen)),
            AcquireReply::Taken { holds, value, made } => (holds, value, made),
        };
        if holds == 1 && outlived(sent_at, lease_d) {
            return self.give_back_late(value).await;
        }
        let guard = self.guard_for(holds, value, renew, lease_d, sent_at, made);
        if matches!(self.replica_sync(), ReplicaSync::None) {
            return Ok(Attempt::Acquired(guard));
        }
        // Boxed: WAIT is opt-in, and inline it would enlarge every acquire.
        Box::pin(self.check_replicas(guard))
            .await
            .map(Attempt::Acquired)
    }

    /// A first hold whose reply came after its whole lease had passed by
    /// the local clock (the server stalled, or this process did, between the send
    /// and the reply): the key may live on, but nothing here can vouch for
    /// it, and a guard made of it would be lost at birth. It is given back
    /// by its token and the attempt counts as finding the lock held for no
    /// time at all, so a wait tries again at once (and a try with no wait
    /// answers not acquired).
    async fn give_back_late(&self, value: i64) -> LockResult<Attempt> {
        tracing::warn!(lock = %self.name(),
            "an acquire answered after its lease ended by the local clock: given back");
        let token = self
            .handle
            .kind
            .tokens
            .release_token(value.max(0).unsigned_abs());
        if release(self, token, None, Retry::Here).await.is_ok() {
            self.inner.engine.touched(&self.handle.names.key);
        }
        Ok(Attempt::Held(0, 0))
    }

    /// Sends one attempt, again while it surely did not run and the
    /// caller's wait allows; its reply and when it was sent.
    async fn send(
        &self,
        cmd: &Arc<Cmd>,
        deadline: Option<Instant>,
    ) -> LockResult<(Frame, Instant)> {
        let script = self.handle.kind.acquire;
        // The connection bounds the wait with its one timer and hands a
        // reply that comes too late (or after a cancel) to the finisher.
        let late = self.handle.late_reply(|| self.finisher());
        // Until a reply is read (or the attempt surely did not run), the
        // outcome is unknown: cancelled or failed here, the handle's holds
        // are judged by token from then on.
        let unsettled = Unsettled::new(&self.handle);
        // And until then, a process that settles waits for the late reply.
        let unanswered = Unanswered::new(
            &self.inner,
            &self.handle.names.key,
            self.inner.config.watchdog_timeout,
        );
        let mut pause = NOT_RUN_PAUSE;
        loop {
            let sent_at = Instant::now();
            let bound = self.reply_bound(deadline);
            let sent = self
                .inner
                .client
                .eval_shared_settled(script, cmd, Some(bound), Arc::clone(&late))
                .await;
            match sent {
                // Not run (a standalone connection reconnecting, a server
                // loading its data after a restart; a cluster's router
                // retries these itself): try again within the caller's
                // wait, as a waiter would after a wake.
                Err(e) if not_run(&e) && deadline.is_some_and(|d| Instant::now() + pause < d) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_NOT_RUN_PAUSE);
                }
                Err(e) => {
                    if not_run(&e) {
                        unsettled.settled();
                        unanswered.answered();
                    } else {
                        drop(unsettled);
                        unanswered.failed(&e);
                    }
                    return Err(self.refused(e).await);
                }
                Ok(frame) => {
                    unsettled.settled();
                    unanswered.answered();
                    return Ok((frame, sent_at));
                }
            }
        }
    }

    /// The guard for an acquire script's answer `{holds, value}` (holds >
    /// 0): joins this handle's hold of the same token (a re-entry) or makes
    /// a new one and hands it to the engine. `counter_made`: the call made
    /// the fencing counter (see `NewHold`).
    pub(crate) fn guard_for(
        &self,
        holds: i64,
        value: i64,
        renew: bool,
        lease_d: Duration,
        sent_at: Instant,
        counter_made: bool,
    ) -> LockGuard {
        let cfg = &self.inner.config;
        let value = value.max(0).unsigned_abs();
        // A fenced lock's token is this acquire's own; its hold is named by
        // owner (token 0), since a re-entry moves the counter on.
        let tokens = self.handle.kind.tokens;
        let token = tokens.hold_token(value);
        let inner = &self.inner;
        let mut orphans = false;
        let (hold, new) = self.handle.hold_for(token, holds > 1, || {
            // Judged here, while the new hold is being made: until it is
            // published no clone can join it, so a clone whose reply is
            // still to be handled is still counted as under way. Judged
            // after, the clones could have joined, returned and stopped
            // counting, and their counts been released as orphans.
            orphans = holds > 1 && self.orphans_possible();
            Hold::new(NewHold {
                key: self.handle.hold_key(),
                token,
                renew,
                lease: lease_d,
                sent_at,
                max_hold: self.max_hold(),
                drift_permille: cfg.drift_permille,
                counters: Arc::clone(&inner.counters),
                counter_made,
            })
        });
        let holds = if new && orphans {
            self.fold_orphans(hold.token, holds)
        } else {
            holds
        };
        if new || hold.join(renew, sent_at, lease_d) {
            inner.engine.watch(&hold, sent_at);
        } else {
            // A re-entry's own write untracked the key: read it again.
            inner.engine.retrack(&hold);
        }
        inner.counters.acquired(self.handle.kind.label);
        // A read session's token names it; readers get no fencing token.
        let shown = tokens.shown(value, hold.token, cfg.fencing);
        LockGuard::new(
            self.clone(),
            hold,
            renew,
            holds.unsigned_abs(),
            // The hold's token (a re-entry of unknown token shows its hold's).
            shown,
            lease_d,
        )
    }

    /// A reply that counts `holds` for a hold this handle did not know of
    /// (no live hold of its token here): the counts beyond one are this
    /// owner's, taken by requests whose outcome was never learned (an
    /// acquire whose reply was lost with its connection, a grant whose
    /// leave never went through), called only when nothing else can
    /// explain them (`orphans_possible`, judged as the hold was made).
    /// They are released at once, queued before anything else this task
    /// sends, so the guard is a first hold (returned: 1). Left counted, the
    /// guard's unlock took one count off and left the lock held by nobody
    /// for a whole lease, and the next acquire re-entered it again: held
    /// for as long as the owner kept working. Outside a runtime `holds` is
    /// returned as it is.
    fn fold_orphans(&self, token: u64, holds: i64) -> i64 {
        let inner = &self.inner;
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return holds;
        };
        tracing::warn!(lock = %self.name(), orphans = holds - 1,
            "counts of this owner that no hold knows of (an earlier request's outcome was never learned): released");
        let lock = self.clone();
        let ticket = inner.background.ticket();
        spawn_queued(&rt, async move {
            for _ in 1..holds {
                if !matches!(release(&lock, token, None, Retry::Here).await, Ok(false)) {
                    break;
                }
            }
            drop(ticket);
        });
        1
    }

    /// Whether counts of this owner no hold here knows of can only be
    /// orphans: [`Handle::may_have_orphans`], and no release or leave of
    /// this client on its way (one of those may be what still counts).
    fn orphans_possible(&self) -> bool {
        self.handle.may_have_orphans()
            && self.inner.background.running() == 0
            && !self.inner.leaves.any()
    }

    async fn check_replicas(&self, guard: LockGuard) -> LockResult<LockGuard> {
        let (wanted, timeout) = match self.replica_sync() {
            ReplicaSync::None => return Ok(guard),
            ReplicaSync::AtLeast { replicas, timeout } => (u64::from(replicas), timeout),
            ReplicaSync::AllReplicas { timeout } => {
                let conn = self
                    .inner
                    .client
                    .connection_for_key(&*self.handle.names.key)
                    .await?;
                let addr = conn.config().addr();
                let n = self
                    .inner
                    .client
                    .shards()
                    .into_iter()
                    .find(|s| s.master == addr)
                    .map_or(0, |s| s.replicas.len());
                (u64::try_from(n).unwrap_or(u64::MAX), timeout)
            }
        };
        if wanted == 0 {
            return Ok(guard);
        }
        // WAIT counts this connection's writes: the same multiplexed
        // connection that ran the acquire script.
        let conn = self
            .inner
            .client
            .connection_for_key(&*self.handle.names.key)
            .await?;
        let acked = conn
            .wait(u32::try_from(wanted).unwrap_or(u32::MAX), timeout)
            .await?;
        // A count of replicas: never below zero.
        let acked = u64::try_from(acked).unwrap_or(0);
        if acked >= wanted {
            return Ok(guard);
        }
        // Release what a failover could lose anyway; report the shortfall.
        let _ = guard.unlock().await;
        Err(LockError::ReplicaSync { acked, wanted })
    }
}
