//! The acquire path of a [`Lock`]: one attempt (and the finisher that
//! settles an attempt nobody waits for any more), waiting for a turn, and
//! the replica-sync check.
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
use keylatch_resp::Frame;

use crate::depart::{Departure, Place};
use crate::error::{LockError, LockResult};
use crate::guard::LockGuard;
use crate::handle::acquire_cmd;
use crate::hold::{clamp_span, millis, Hold, NewHold};
use crate::lease::LeaseKind;
use crate::lock::{Lock, ReplicaSync};
use crate::release::{release, Retry};
use crate::shape::{key_shape, KeyShape};
use crate::wake::Wake;

/// First pause before an acquire that surely did not run (see [`not_run`])
/// is tried again within its wait; doubles up to [`MAX_NOT_RUN_PAUSE`].
const NOT_RUN_PAUSE: Duration = Duration::from_millis(20);
const MAX_NOT_RUN_PAUSE: Duration = Duration::from_millis(500);

/// Whether an acquire surely did not run and may be sent again: not sent,
/// or refused by a server still loading its data.
fn not_run(e: &Error) -> bool {
    matches!(e, Error::Disconnected) || e.server_kind() == Some(ServerErrorKind::Loading)
}

// Returned once per attempt and unpacked at once: boxing the guard would
// cost an allocation per acquire for nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Attempt {
    Acquired(LockGuard),
    /// Held by another owner; the PTTL in milliseconds.
    Held(i64),
}

/// An acquire's reply nobody waits for any more: if it took the lock, that
/// hold is released by its token (a re-entry: that one count), within the
/// lease. Never by owner: it can end no other hold.
pub(crate) fn settle_late(lock: Lock, lease: Duration, frame: &Frame) {
    let Ok((holds, token)) = parse_pair(frame) else {
        return;
    };
    if holds <= 0 {
        return;
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let until = Instant::now() + lease;
    // A fenced hold is released by owner (its token is the acquire's INCR,
    // which a later re-entry moves past).
    let token = match lock.handle.kind {
        LeaseKind::Fenced | LeaseKind::Unfenced => 0,
        _ => token.max(0).unsigned_abs(),
    };
    rt.spawn(async move {
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
    fn reply_bound(&self, deadline: Option<Instant>) -> Duration {
        let floor = self.inner.config.attempt_timeout;
        deadline.map_or(floor, |d| {
            d.saturating_duration_since(Instant::now()).max(floor)
        })
    }

    /// The handle's acquire finisher: weak references (the handle keeps
    /// it, so strong ones would never be freed), and the watchdog lease as
    /// the bound of its release retries (a fixed lease's hold past that has
    /// ended, or its release finds nothing).
    fn finisher(&self) -> LateReply {
        let inner = Arc::downgrade(&self.inner);
        let handle = Arc::downgrade(&self.handle);
        let lease = self.inner.config.watchdog_timeout;
        Arc::new(move |frame| {
            if let (Some(inner), Some(handle)) = (inner.upgrade(), handle.upgrade()) {
                settle_late(Lock::from_parts(inner, handle), lease, &frame);
            }
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

    /// One acquire script call; a fair lock's joins (or stays in) the queue
    /// when it cannot take the lock if `join` (the caller waits).
    pub(crate) async fn attempt(
        &self,
        lease: Option<Duration>,
        deadline: Option<Instant>,
        join: bool,
    ) -> LockResult<Attempt> {
        let cfg = &self.inner.config;
        let (lease_d, renew) = match lease {
            Some(l) => (clamp_span(l), false),
            None => (clamp_span(cfg.watchdog_timeout), true),
        };
        let args = &self.inner.script_args;
        let (names, owner) = (&self.handle.names, self.handle.owner());
        let cmd = match renew.then(|| self.handle.acquire_watchdog(args)).flatten() {
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
                Arc::new(acquire_cmd(
                    self.handle.kind,
                    args,
                    names,
                    owner,
                    lease_ms,
                    join,
                ))
            }
        };
        let script = self.handle.kind.acquire_script();
        // The connection bounds the wait with its one timer and hands a
        // reply that comes too late (or after a cancel) to the finisher.
        let late = self.handle.late.get_or_init(|| self.finisher());
        let mut pause = NOT_RUN_PAUSE;
        let (frame, sent_at) = loop {
            let sent_at = Instant::now();
            let bound = self.reply_bound(deadline);
            let sent = self
                .inner
                .client
                .eval_shared_settled(script, &cmd, Some(bound), Arc::clone(late))
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
                Err(e) => return Err(self.refused(e).await),
                Ok(frame) => break (frame, sent_at),
            }
        };
        // A reply of another shape leaves the outcome unknown, as a lost one
        // does: the lease ends whatever it may have taken.
        let (holds, value) = match acquire_reply(&frame)? {
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
            AcquireReply::Held(-1) => match key_shape(&self.inner, self.name()).await? {
                found if found.is_lock() || found == KeyShape::None => {
                    return Ok(Attempt::Held(-1))
                }
                found => {
                    return Err(LockError::WrongType {
                        name: self.name().to_owned(),
                        found,
                    })
                }
            },
            AcquireReply::Held(pttl) => return Ok(Attempt::Held(pttl)),
            AcquireReply::Taken { holds, value } => (holds, value),
        };
        let guard = self.guard_for(holds, value, renew, lease_d, sent_at);
        if matches!(self.replica_sync, ReplicaSync::None) {
            return Ok(Attempt::Acquired(guard));
        }
        // Boxed: WAIT is opt-in, and inline it would enlarge every acquire.
        Box::pin(self.check_replicas(guard))
            .await
            .map(Attempt::Acquired)
    }

    /// The guard for an acquire script's answer `{holds, value}` (holds >
    /// 0): joins this handle's hold of the same token (a re-entry) or makes
    /// a new one and hands it to the engine.
    pub(crate) fn guard_for(
        &self,
        holds: i64,
        value: i64,
        renew: bool,
        lease_d: Duration,
        sent_at: Instant,
    ) -> LockGuard {
        let cfg = &self.inner.config;
        let value = value.max(0).unsigned_abs();
        // A fenced lock's token is this acquire's own; its hold is named by
        // owner (token 0), since a re-entry moves the counter on.
        let fenced = self.handle.kind == LeaseKind::Fenced;
        let token = if fenced { 0 } else { value };
        let inner = &self.inner;
        let (hold, new) = self.handle.hold_for(token, holds > 1, || {
            Hold::new(NewHold {
                key: self.handle.hold.clone(),
                counter: Arc::clone(&self.handle.counter),
                token,
                kind: self.handle.kind,
                renew,
                lease: lease_d,
                sent_at,
                max_hold: self.max_hold,
                drift_permille: cfg.drift_permille,
                live: Arc::clone(&inner.live_holds),
            })
        });
        if new || hold.join(renew, sent_at, lease_d) {
            inner.engine.watch(&hold, sent_at);
        } else {
            // A re-entry's own write untracked the key: read it again.
            inner.engine.retrack(&hold);
        }
        let shown = if fenced {
            Some(value)
        } else if self.handle.kind == LeaseKind::RwRead {
            // A read session's token names it; readers get no fencing token.
            None
        } else {
            (cfg.fencing && hold.token > 0).then_some(hold.token)
        };
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

    /// After a failed first try: queue locally, subscribe, and try again on
    /// every unlock message, PTTL expiry or re-check, until `deadline`.
    pub(crate) async fn wait_for_turn(
        &self,
        deadline: Option<Instant>,
        lease: Option<Duration>,
    ) -> LockResult<Option<LockGuard>> {
        let queued = self.inner.waiters.enter(&self.handle.names.key);
        let _turn = match deadline {
            Some(d) => match tokio::time::timeout_at(d.into(), queued).await {
                Ok(t) => t,
                Err(_) => return Ok(None),
            },
            None => queued.await,
        };
        let mut wake = Wake::subscribe(
            &self.inner,
            &self.handle.names.key,
            &self.handle.names.channel,
            deadline,
        )
        .await;
        // A waiting writer holds new readers back with a marker, which it
        // takes back however its wait ends without the lock.
        let writer = self.handle.kind == LeaseKind::RwWrite;
        let mut marker = Departure::new(self, writer.then_some(Place::WaitingWriters));
        let mut cap = self.inner.config.recheck;
        if writer {
            // A call at least every third of the marker's span keeps it.
            cap = cap.min(self.inner.config.fair_waiter_timeout / 3);
        }
        loop {
            let pttl = match self.attempt(lease, deadline, writer).await? {
                Attempt::Acquired(g) => {
                    // The acquire took this writer's marker away itself.
                    marker.keep();
                    return Ok(Some(g));
                }
                Attempt::Held(pttl) => pttl,
            };
            let now = Instant::now();
            let left = deadline.map(|d| d.saturating_duration_since(now));
            if left == Some(Duration::ZERO) {
                marker.now().await;
                return Ok(None);
            }
            // PTTL -2: gone between two commands, try at once; -1: no expiry
            // (not ours to judge), re-check at the bounded interval.
            let mut nap = match pttl {
                -2 => Duration::ZERO,
                p if p > 0 => Duration::from_millis(p.unsigned_abs()),
                _ => self.inner.config.recheck,
            }
            .min(cap);
            if let Some(left) = left {
                nap = nap.min(left);
            }
            wake.pause(nap).await;
        }
    }

    async fn check_replicas(&self, guard: LockGuard) -> LockResult<LockGuard> {
        let (wanted, timeout) = match self.replica_sync {
            ReplicaSync::None => return Ok(guard),
            ReplicaSync::AtLeast { replicas, timeout } => (i64::from(replicas), timeout),
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
                (i64::try_from(n).unwrap_or(i64::MAX), timeout)
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
        if acked >= wanted {
            return Ok(guard);
        }
        // Release what a failover could lose anyway; report the shortfall.
        let _ = guard.unlock().await;
        Err(LockError::ReplicaSync { acked, wanted })
    }
}

/// What an acquire script's `{holds, value}` reply says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// Taken or re-entered (`holds` > 0): the hold count and the token
    /// (a fenced lock's fencing value).
    Taken { holds: i64, value: i64 },
    /// Held by another owner (`holds` 0); the PTTL in milliseconds.
    Held(i64),
    /// A non-reentrant lock this owner holds already (`holds` < 0, not -2).
    NotReentrant,
    /// A read-write lock's reader asked for the write (`holds` -2).
    UpgradeRefused,
}

/// Reads an acquire script's reply; any other shape is
/// [`LockError::Protocol`].
pub(crate) fn acquire_reply(frame: &Frame) -> LockResult<AcquireReply> {
    let (holds, value) = parse_pair(frame)?;
    Ok(match holds {
        -2 => AcquireReply::UpgradeRefused,
        h if h < 0 => AcquireReply::NotReentrant,
        0 => AcquireReply::Held(value),
        _ => AcquireReply::Taken { holds, value },
    })
}

/// `[a, b]`, two integers (RESP3 attributes seen through, as everywhere a
/// reply is read).
pub(crate) fn parse_pair(frame: &Frame) -> LockResult<(i64, i64)> {
    match frame.value() {
        Frame::Array(items) => match items.as_slice() {
            [a, b] => match (a.value(), b.value()) {
                (Frame::Integer(a), Frame::Integer(b)) => Ok((*a, *b)),
                _ => Err(LockError::Protocol(frame.to_string())),
            },
            _ => Err(LockError::Protocol(frame.to_string())),
        },
        other => Err(LockError::Protocol(other.to_string())),
    }
}
