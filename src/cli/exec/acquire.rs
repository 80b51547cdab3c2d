//! Taking what `exec` holds, within `--wait` and interruptible by a
//! signal: a lock of one kind, several as a multi-lock, semaphore permits,
//! a RedLock, or an election's leadership (`elect`); and undoing an acquire
//! of unknown outcome.

use std::time::{Duration, Instant};

use keylatch::{Leader, Lock, LockError, LockResult, Locks, LocksConfig, MultiLock};

use super::options::{ExecArgs, Kind};
use super::{interrupted, show, EXEC_WATCHDOG, SETTLE_AFTER_SIGNAL};
use crate::cli::args;
use crate::cli::held::Held;
use crate::cli::signals::Signals;
use crate::cli::{Failure, EXIT_TIMEOUT};

/// A lock of the kind asked for, within `--wait`; the hold and its owner.
pub(super) async fn acquire_lock(
    locks: &Locks,
    a: &ExecArgs,
    signals: &mut Signals,
) -> Result<(Held, Option<String>), Failure> {
    let lock = handle(locks, a.kind, &a.name);
    let what = format!("lock {:?}", a.name);
    let undo = Undo::Locks(std::slice::from_ref(&lock));
    let acquired = wait_undoing(a, &what, undo, signals, |wait| {
        lock.try_acquire(wait, a.lease)
    })
    .await?;
    match acquired {
        Ok(Some(g)) => Ok((Held::Lock(g), Some(lock.owner().to_owned()))),
        Ok(None) => Err(Failure {
            code: EXIT_TIMEOUT,
            message: format!(
                "lock {:?} is held by another owner; not acquired within {}",
                a.name,
                show(a.wait)
            ),
        }),
        Err(e) => Err(Failure::lock(
            &e,
            format!("cannot acquire lock {:?}: {e}", a.name),
        )),
    }
}

/// The lock of `kind` named `name` (a plain one for the kinds that are no
/// lock of that name).
fn handle(locks: &Locks, kind: Kind, name: &str) -> Lock {
    match kind {
        Kind::Fair => locks.fair_lock(name),
        Kind::Read => locks.rw_lock(name).read(),
        Kind::Write => locks.rw_lock(name).write(),
        _ => locks.lock(name),
    }
}

/// Every lock of `a.names` or none, within `--wait`: a multi-lock (one
/// owner for plain members; for the other kinds, each member's own).
pub(super) async fn acquire_multi(
    locks: &Locks,
    a: &ExecArgs,
    signals: &mut Signals,
) -> Result<(Held, Option<String>), Failure> {
    let names: Vec<&str> = a.names.iter().map(String::as_str).collect();
    let multi = match a.kind {
        Kind::Reentrant => locks.multi_lock(&names),
        kind => MultiLock::new(names.iter().map(|n| handle(locks, kind, n)).collect()),
    };
    let what = format!("locks {}", a.names.join(", "));
    let acquired = wait_undoing(a, &what, Undo::Locks(multi.members()), signals, |wait| {
        multi.try_acquire(wait, a.lease)
    })
    .await?;
    let owners: Vec<&str> = multi.members().iter().map(Lock::owner).collect();
    // One owner id for the command, when the members share one.
    let owner = owners
        .iter()
        .all(|o| *o == owners[0])
        .then(|| owners[0].to_owned());
    match acquired {
        Ok(Some(g)) => Ok((Held::Multi(g), owner)),
        Ok(None) => Err(Failure {
            code: EXIT_TIMEOUT,
            message: format!(
                "{what}: not all acquired within {} (some held by another owner)",
                show(a.wait)
            ),
        }),
        Err(e) => Err(Failure::lock(&e, format!("cannot acquire {what}: {e}"))),
    }
}

/// The leadership of the election `a.name` (`elect`), within `--wait`
/// (forever by default), proclaiming `a.proclaim`.
pub(super) async fn acquire_leader(
    locks: &Locks,
    a: &ExecArgs,
    signals: &mut Signals,
) -> Result<(Held, Option<String>), Failure> {
    let election = locks.leader(&a.name);
    let what = format!("the leadership of {:?}", a.name);
    let acquired = wait_undoing(a, &what, Undo::Leader(&election), signals, |wait| {
        election.try_campaign(wait, &a.proclaim)
    })
    .await?;
    match acquired {
        Ok(Some(l)) => Ok((Held::Leader(l), Some(election.owner().to_owned()))),
        Ok(None) => Err(Failure {
            code: EXIT_TIMEOUT,
            message: format!(
                "election {:?}: another leads; not elected within {}",
                a.name,
                show(a.wait)
            ),
        }),
        Err(e) => Err(Failure::lock(
            &e,
            format!("cannot campaign in election {:?}: {e}", a.name),
        )),
    }
}

/// What an acquire of unknown outcome may have taken, to give back.
enum Undo<'a> {
    /// The locks it takes (one, or a multi-lock's members).
    Locks(&'a [Lock]),
    /// An election this process campaigns in.
    Leader(&'a Leader),
}

impl Undo<'_> {
    /// Gives back what this owner may hold; `false` when the server did
    /// not answer within `bound`.
    async fn run(&self, bound: Duration) -> bool {
        match self {
            Undo::Locks(members) => {
                let mut all = true;
                for member in *members {
                    all &= release_orphan(member, bound).await;
                }
                all
            }
            Undo::Leader(election) => {
                answered(bound, election.name(), || async {
                    election.step_down().await.map(drop)
                })
                .await
            }
        }
    }
}

/// Calls `attempt` with the wait left until it answers, within `--wait`;
/// `undo` gives back what it may take. A signal ends the wait (`Err`, 128 +
/// N). An acquire of unknown outcome (the connection failed with it in
/// flight) may have taken any member: nobody would release that hold before
/// its lease ran out, and the next acquire of this owner would re-enter it
/// (count 2), so the release at the command's end would leave count 1
/// behind, held by nobody (the CLI row's 30 s waits). Each member is
/// released first, for sure, then the wait goes on.
async fn wait_undoing<G, F, Fut>(
    a: &ExecArgs,
    what: &str,
    undo: Undo<'_>,
    signals: &mut Signals,
    mut attempt: F,
) -> Result<LockResult<Option<G>>, Failure>
where
    F: FnMut(Duration) -> Fut,
    Fut: std::future::Future<Output = LockResult<Option<G>>>,
{
    // `None`: a wait too long to end (as good as forever).
    let until = a.started.checked_add(a.wait);
    loop {
        let wait = until.map_or(a.wait, |u| u.saturating_duration_since(Instant::now()));
        let acquired = tokio::select! {
            r = attempt(wait) => r,
            stop = signals.recv() => {
                // The acquire just dropped may have taken the lock before
                // the signal (its late reply is settled in the background,
                // which would die with the runtime when we return).
                undo.run(Duration::from_secs(2)).await;
                return Err(interrupted(&format!("waiting for {what}"), stop));
            }
        };
        match acquired {
            Err(LockError::Client(e)) if e.is_unknown_outcome() => {
                if !undo_within(&undo, until, what, signals).await? {
                    return Err(Failure::software(format!(
                        "cannot acquire {what}: {e}; an acquire of unknown outcome could \
                         not be undone (it expires with its {:?} lease)",
                        a.lease.unwrap_or(EXEC_WATCHDOG)
                    )));
                }
                if wait.is_zero() {
                    return Ok(Err(LockError::Client(e)));
                }
            }
            other => return Ok(other),
        }
    }
}

/// Undoes an acquire of unknown outcome: within what is left of the wait
/// (at least [`ORPHAN_BOUND`]); a wait with no end (`elect`'s, by
/// default) goes on undoing until the server answers (stalled or away for
/// longer than a bound), as its campaign would go on waiting. `false`: not
/// undone in time. A signal ends it (`Err`, 128 + N).
async fn undo_within(
    undo: &Undo<'_>,
    until: Option<Instant>,
    what: &str,
    signals: &mut Signals,
) -> Result<bool, Failure> {
    loop {
        let bound = until.map_or(ORPHAN_BOUND, |u| {
            u.saturating_duration_since(Instant::now())
                .max(ORPHAN_BOUND)
        });
        let undone = tokio::select! {
            ok = undo.run(bound) => ok,
            stop = signals.recv() => {
                undo.run(Duration::from_secs(2)).await;
                return Err(interrupted(&format!("waiting for {what}"), stop));
            }
        };
        if undone || until.is_some() {
            return Ok(undone);
        }
    }
}

/// The least time given to undo an acquire of unknown outcome.
const ORPHAN_BOUND: Duration = Duration::from_secs(5);

/// Releases what an acquire of unknown outcome may have taken: this
/// process's owner holds nothing else, so one release by owner frees
/// exactly that hold if it exists. Tried again (with backoff, within
/// `bound`) until the server has answered one, since a release not
/// delivered (the client reconnecting, a slot moving) would leave the hold
/// to be re-entered. Repeating a release of unknown outcome is safe here:
/// the hold's count is at most 1, and a second release answers "not
/// owner". `true` once answered.
async fn release_orphan(lock: &Lock, bound: Duration) -> bool {
    answered(bound, lock.name(), || async {
        match lock.release_one().await {
            Ok(_) | Err(LockError::NotOwner { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    })
    .await
}

/// Calls `step` (with backoff) until the server has answered it, within
/// `bound`; `true` once it has.
async fn answered<F, Fut>(bound: Duration, name: &str, mut step: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = LockResult<()>>,
{
    let until = Instant::now() + bound;
    let mut pause = Duration::from_millis(20);
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, step()).await {
            Ok(Ok(())) => return true,
            Ok(Err(e)) => {
                tracing::debug!(lock = %name, error = %e, "undoing an acquire of unknown outcome; trying again");
            }
            Err(_) => {}
        }
        if Instant::now() + pause >= until {
            return false;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

/// `n` leased permits of the permit-expirable semaphore, within `--wait`
/// (created with `create` permits first when asked).
pub(super) async fn acquire_permits(
    locks: &Locks,
    a: &ExecArgs,
    n: u64,
    create: Option<u64>,
    signals: &mut Signals,
) -> Result<(Held, Option<String>), Failure> {
    let sem = locks.expirable_semaphore(&a.name);
    let fail = |e: LockError| Failure::lock(&e, format!("semaphore {:?}: {e}", a.name));
    if let Some(p) = create {
        tokio::select! {
            r = sem.try_set_permits(p) => { r.map_err(fail)?; }
            stop = signals.recv() => {
                return Err(interrupted(&format!("creating semaphore {:?}", a.name), stop));
            }
        }
    }
    // Dropped on a signal: permits an attempt took are given back by id
    // (the late reply's handler, which `settle` waits for), or expire with
    // their lease.
    let acquired = tokio::select! {
        r = sem.try_acquire(n, a.remaining(), a.lease) => Ok(r),
        stop = signals.recv() => Err(stop),
    };
    match acquired {
        Err(stop) => Err(interrupted(
            &format!("waiting for semaphore {:?}", a.name),
            stop,
        )),
        Ok(Ok(Some(p))) => Ok((Held::Permits(p), None)),
        Ok(Ok(None)) => Err(Failure {
            code: EXIT_TIMEOUT,
            message: format!(
                "semaphore {:?}: {n} permit(s) not available within {}",
                a.name,
                show(a.wait)
            ),
        }),
        Ok(Err(LockError::NoSuchSemaphore { .. })) => Err(Failure::usage(format!(
            "semaphore {:?} does not exist; create it with --permits P",
            a.name
        ))),
        Ok(Err(e)) => Err(fail(e)),
    }
}

/// A RedLock over `--redlock`'s masters, within `--wait`. A master that
/// does not answer at start counts as a failed master, as one that fails
/// later does: a majority of the others suffices (that is what a RedLock
/// is for), and it is connected again in the background while the wait
/// lasts. Each one that does not answer is named on stderr.
pub(super) async fn acquire_redlock(
    a: &ExecArgs,
    signals: &mut Signals,
) -> Result<(Held, Option<String>), Failure> {
    // Each master's client with exec's watchdog lease (10 s), as for the
    // other modes (the library's default is 30 s), and a connect timeout
    // cut to the wait, as `connect_within` cuts it.
    let per_seed = args::seed_connect_timeout(a.remaining());
    let mut masters = Vec::with_capacity(a.redlock.len());
    for url in &a.redlock {
        let mut cfg = args::client_config(std::slice::from_ref(url))?;
        for seed in &mut cfg.seeds {
            seed.connect_timeout = seed.connect_timeout.min(per_seed);
        }
        masters.push((cfg, LocksConfig::default().watchdog_timeout(EXEC_WATCHDOG)));
    }
    let redlock = keylatch::RedLock::connecting(masters);
    let first = tokio::select! {
        r = redlock.connect_masters(per_seed) => r,
        stop = signals.recv() => return Err(interrupted("connecting", stop)),
    };
    let mut down = Vec::new();
    for (r, url) in first.iter().zip(&a.redlock) {
        if let Err(e) = r {
            let url = keylatch::redact_url(url);
            errln!(
                "keylatch: RedLock master {url} does not answer ({e}): counted as failed, tried again while waiting"
            );
            down.push(url);
        }
    }
    // Dropped on a signal: member holds taken are released in the
    // background, replies in flight settled when they come.
    let handle = redlock.lock(&a.name);
    let acquired = tokio::select! {
        r = handle.try_acquire(a.remaining(), a.lease) => Ok(r),
        stop = signals.recv() => Err(stop),
    };
    match acquired {
        Err(stop) => {
            // The dropped round's member holds are released in the
            // background: sent before the process exits.
            redlock.settle(SETTLE_AFTER_SIGNAL).await;
            Err(interrupted(
                &format!("waiting for RedLock {:?}", a.name),
                stop,
            ))
        }
        Ok(Ok(Some(g))) => Ok((Held::RedLock(g), None)),
        Ok(Ok(None)) => Err(Failure {
            code: EXIT_TIMEOUT,
            message: format!(
                "RedLock {:?}: no majority of the {} masters within {}",
                a.name,
                a.redlock.len(),
                show(a.wait)
            ),
        }),
        Ok(Err(e)) => {
            let mut message = format!("RedLock {:?}: {e}", a.name);
            if !down.is_empty() {
                message.push_str(&format!("; not answering at start: {}", down.join(", ")));
            }
            Err(Failure::lock(&e, message))
        }
    }
}
