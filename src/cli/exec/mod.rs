//! `keylatch exec`: run a command while holding a lock, like `flock(1)`
//! across machines (and `etcdctl lock` / `consul lock`).
//!
//! The order of events is the contract: acquire, then spawn; on the
//! command's exit, stop what it left running in its process group, release,
//! then exit with its code. A lost lock or a terminating signal to keylatch
//! (INT, TERM, HUP, QUIT) stops the command's whole process group (the
//! signal, or TERM, then KILL after `--grace`) *before* the lock is
//! released, so the command never runs unlocked longer than the grace
//! period. [`super::supervise`] owns the group, [`super::signals`] the
//! handlers.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use keylatch::{Lock, LockError, LockResult, Locks, LocksConfig, LossReason, MultiLock};
use tokio::process::Command;

use super::args::{self, Argv};
use super::held::Held;
use super::signals::{Signals, Stop, TERM};
use super::supervise::Supervised;
use super::{runtime, Failure, EXIT_LOST, EXIT_TIMEOUT, EXIT_USAGE};

/// `keylatch exec --help`.
pub(crate) const USAGE: &str = "\
usage: keylatch exec NAME [NAME...] [--fair | --read | --write | --semaphore N [--permits P] |
                          --redlock URL,URL,...] [--wait 10s] [--lease 10s|watchdog]
                          [--grace 5s] [--foreground] [--url URL]... -- CMD [ARGS...]

Runs CMD while holding the lock NAME, releases the lock when CMD exits, and
exits with CMD's exit code (128+N when CMD died of signal N). Several names:
all of those locks or none (a multi-lock, taken in one order whatever the
order given, so execs naming the same locks cannot deadlock); with --fair,
--read or --write, each of that kind.

  --fair       a fair lock: waiters get it in the order they asked, across
               processes (Redisson's RFairLock queue)
  --read       a read hold of the read-write lock NAME (Redisson's
               RReadWriteLock): shared with other readers, excluded by a
               writer; new readers wait while a writer waits
  --write      the write hold of the read-write lock NAME: exclusive of
               readers and other writers
  --semaphore N
               hold N permits of the permit-expirable semaphore NAME (a
               distributed concurrency limit; Redisson's
               RPermitExpirableSemaphore): leased, so a keylatch that dies
               gives them back within the lease
  --permits P  with --semaphore: create the semaphore with P permits when it
               does not exist (without it, a missing semaphore is an error)
  --redlock URL,URL,...
               a RedLock over these independent masters (3 or more): held
               while a majority holds it; the command is stopped (exit 76)
               once fewer than a majority do. No fencing token; --url is
               not used.
  --wait D     how long to wait for the lock (default 10s; 0 = one try)
  --lease D    fixed lease: the lock expires after D; CMD gets SIGTERM a
               --grace before that (half of D if --grace is longer) and
               SIGKILL when it ends, then exit 76;
               `watchdog` (default) renews a 10s lease every ~3s for as long
               as CMD runs, so a keylatch killed with SIGKILL (the one signal
               it cannot handle) keeps others out at most 10s
  --grace D    time between the stop signal and SIGKILL (default 5s)
  --foreground keep CMD in keylatch's process group, for a command that
               reads the terminal (in a group of its own, a read from the
               terminal stops it, and keylatch says so); then only CMD
               itself is signalled, and processes it started are neither
               stopped nor waited for
  --url URL    server (repeat for cluster seeds); default $KEYLATCH_URL
               (comma-separated), else redis://127.0.0.1:6379; rediss://
               for TLS (CA from $KEYLATCH_TLS_CA or ?ca=FILE)

CMD runs in a process group of its own, and keylatch stops the whole group
(every process CMD started) whenever it stops CMD: on a signal, on a lost
lock, and when CMD exits leaving processes behind (those get SIGTERM, then
SIGKILL after --grace). The lock is released only once the group is gone.
A process that leaves the group itself (setsid, a daemon, a job of a shell
with job control, `set -m`, which gets a group of its own) is no longer
CMD's: keylatch cannot stop it, and it runs on unlocked.

CMD sees KEYLATCH_LOCK_NAME, KEYLATCH_LOCK_OWNER and KEYLATCH_FENCING_TOKEN
(the hold's fencing token: pass it to storage that rejects stale writers;
unset for a --read hold and for permits, which have none); with
--semaphore, KEYLATCH_PERMIT_IDS (comma-separated) instead of the owner.

Exit codes:
  N     CMD's own exit code (128+N when CMD died of signal N)
  2     usage error, server unreachable, or server error
  75    the lock was not acquired within --wait (EX_TEMPFAIL)
  76    the lock was lost while CMD ran: its group got SIGTERM, then
        SIGKILL after --grace
  126   CMD could not be started; 127: CMD not found
  129   SIGHUP   } to keylatch, while it waited or while CMD ran: the same
  130   SIGINT   } signal went to CMD's group, SIGKILL after --grace, then
  131   SIGQUIT  } the lock was released (a second signal sends SIGKILL at
  143   SIGTERM  } once)";

/// What `exec` was asked to do.
#[derive(Debug)]
struct ExecArgs {
    /// The first of `names`, for messages.
    name: String,
    /// Every lock name given (several: a multi-lock).
    names: Vec<String>,
    wait: Duration,
    /// `None`: watchdog renewal.
    lease: Option<Duration>,
    grace: Duration,
    urls: Vec<String>,
    command: Vec<String>,
    /// Which lock of that name (`--fair`, `--read`, `--write`, …).
    kind: Kind,
    /// `--redlock`: the masters' URLs.
    redlock: Vec<String>,
    /// `--foreground`: the command stays in keylatch's process group.
    foreground: bool,
}

/// The lock `exec` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Reentrant,
    Fair,
    Read,
    Write,
    /// N permits of a permit-expirable semaphore; the semaphore is created
    /// with P permits when missing (`--permits P`).
    Semaphore {
        n: u64,
        create: Option<u64>,
    },
    /// A RedLock over the masters in `ExecArgs::redlock`.
    RedLock,
}

fn parse(mut argv: Argv) -> Result<ExecArgs, Failure> {
    let mut names: Vec<String> = Vec::new();
    let mut wait = Duration::from_secs(10);
    let mut lease = None;
    let mut grace = Duration::from_secs(5);
    let mut urls = Vec::new();
    let mut kind = Kind::Reentrant;
    let mut create = None;
    let mut redlock = Vec::new();
    let mut foreground = false;
    let mut pick = |k: Kind, flag: &str| {
        if kind != Kind::Reentrant && kind != k {
            return Err(Failure::usage(format!(
                "exec: {flag} cannot go with another of --fair, --read, --write, --semaphore"
            )));
        }
        kind = k;
        Ok(())
    };
    while let Some(a) = argv.next() {
        match a.as_str() {
            "--" => break,
            "--fair" => pick(Kind::Fair, "--fair")?,
            "--read" => pick(Kind::Read, "--read")?,
            "--write" => pick(Kind::Write, "--write")?,
            "--semaphore" => {
                let v = argv.value("--semaphore")?;
                let n = v.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    Failure::usage(format!(
                        "exec: --semaphore wants a permit count > 0, not {v:?}"
                    ))
                })?;
                pick(Kind::Semaphore { n, create: None }, "--semaphore")?;
            }
            "--redlock" => {
                let v = argv.value("--redlock")?;
                redlock = v
                    .split(',')
                    .map(str::trim)
                    .filter(|u| !u.is_empty())
                    .map(str::to_owned)
                    .collect();
                if redlock.len() < 3 {
                    return Err(Failure::usage(
                        "exec: --redlock wants 3 or more master URLs, comma-separated",
                    ));
                }
                pick(Kind::RedLock, "--redlock")?;
            }
            "--permits" => {
                let v = argv.value("--permits")?;
                create = Some(v.parse::<u64>().map_err(|_| {
                    Failure::usage(format!("exec: --permits wants a count, not {v:?}"))
                })?);
            }
            "--wait" => wait = args::duration("--wait", &argv.value("--wait")?)?,
            "--lease" => {
                let v = argv.value("--lease")?;
                lease = match v.as_str() {
                    "watchdog" => None,
                    _ => Some(args::duration("--lease", &v)?),
                };
            }
            "--grace" => grace = args::duration("--grace", &argv.value("--grace")?)?,
            "--url" => urls.push(argv.value("--url")?),
            "--foreground" => foreground = true,
            flag if flag.starts_with('-') => {
                return Err(Failure::usage(format!("exec: unknown option {flag:?}")))
            }
            _ => names.push(a),
        }
    }
    match (&mut kind, create) {
        (Kind::Semaphore { create: c, .. }, Some(p)) => *c = Some(p),
        (_, Some(_)) => return Err(Failure::usage("exec: --permits goes with --semaphore")),
        _ => {}
    }
    if lease.is_some_and(|l| l.is_zero()) {
        return Err(Failure::usage("exec: --lease must be longer than 0"));
    }
    if names.iter().any(String::is_empty) {
        return Err(Failure::usage("exec: a lock NAME cannot be empty"));
    }
    let name = names
        .first()
        .cloned()
        .ok_or_else(|| Failure::usage("exec: missing the lock NAME"))?;
    if names.len() > 1 && matches!(kind, Kind::Semaphore { .. } | Kind::RedLock) {
        return Err(Failure::usage(
            "exec: several names make a multi-lock of plain, --fair, --read or --write locks, \
             not of --semaphore or --redlock",
        ));
    }
    let command = argv.remaining();
    if command.is_empty() {
        return Err(Failure::usage("exec: missing the command after `--`"));
    }
    Ok(ExecArgs {
        name,
        names,
        wait,
        lease,
        grace,
        urls: args::urls(urls),
        command,
        kind,
        redlock,
        foreground,
    })
}

/// Entry point: parses, runs, and returns the exit code to use.
pub(crate) fn run(argv: Argv) -> Result<u8, Failure> {
    let a = parse(argv)?;
    runtime()?.block_on(exec(a))
}

/// Why the wait on the command ended.
enum Outcome {
    Exited(std::io::Result<ExitStatus>),
    Lost(LossReason),
    Signalled(Stop),
    /// A fixed `--lease` is about to end: the stop begins early enough
    /// for SIGKILL to land when it ends (this long from now).
    LeaseEnding(Duration),
}

/// The lease of `exec`'s watchdog holds: renewed every third of it while
/// the command runs. Shorter than the library's 30 s, because `exec` is
/// where a hold is most often left behind by nobody (a keylatch killed with
/// SIGKILL, a release that could not be delivered before exit): such a hold
/// keeps others out this long at most.
const EXEC_WATCHDOG: Duration = Duration::from_secs(10);

async fn exec(a: ExecArgs) -> Result<u8, Failure> {
    // Installed before connecting: from here on INT, TERM, HUP and QUIT are
    // ours to handle, so none of them can leave the command running
    // unlocked or the lock held.
    let mut signals =
        Signals::install().map_err(|e| Failure::usage(format!("cannot handle signals: {e}")))?;

    // The client the hold came from, to wait for its background releases
    // before exiting (RedLock's clients release in the foreground).
    let mut client: Option<Locks> = None;
    let held = if a.kind == Kind::RedLock {
        // Its own masters: --url's server is not needed.
        acquire_redlock(&a, &mut signals).await?
    } else {
        let cfg = args::client_config(&a.urls)?;
        let config = LocksConfig::default().watchdog_timeout(EXEC_WATCHDOG);
        let locks = tokio::select! {
            r = Locks::connect_with(cfg, config) => {
                r.map_err(|e| args::connect_failure(&a.urls, e))?
            }
            stop = signals.recv() => return Err(interrupted("connecting", stop)),
        };
        let held = match a.kind {
            Kind::Semaphore { n, create } => {
                acquire_permits(&locks, &a, n, create, &mut signals).await
            }
            _ if a.names.len() > 1 => acquire_multi(&locks, &a, &mut signals).await,
            _ => acquire_lock(&locks, &a, &mut signals).await,
        };
        let held = match held {
            Ok(h) => h,
            Err(f) => {
                settle(&locks, &a.name).await;
                return Err(f);
            }
        };
        client = Some(locks);
        held
    };
    let out = run_held(&a, held, &mut signals).await;
    if let Some(locks) = client {
        settle(&locks, &a.name).await;
    }
    out
}

/// Waits for releases the client retries in the background (a reconnect, a
/// slot moving) before the process exits: exiting would drop them and leave
/// the lock held by nobody until its lease ends.
async fn settle(locks: &Locks, name: &str) {
    if !locks.settle(SETTLE_LIMIT).await {
        errln!(
            "keylatch: the release of lock {name:?} is still retrying; it expires with its lease"
        );
    }
}

/// The longest `exec` waits at exit for a release retried in the
/// background (those stop by themselves when their hold's lease ends).
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

/// Runs the command while `held`, and releases.
async fn run_held(
    a: &ExecArgs,
    held: (Held, Option<String>),
    signals: &mut Signals,
) -> Result<u8, Failure> {
    let (held, owner) = held;

    let mut cmd = Command::new(&a.command[0]);
    cmd.args(&a.command[1..]).env("KEYLATCH_LOCK_NAME", &a.name);
    match &owner {
        Some(o) => cmd
            .env("KEYLATCH_LOCK_OWNER", o)
            .env_remove("KEYLATCH_PERMIT_IDS"),
        None => cmd.env_remove("KEYLATCH_LOCK_OWNER"),
    };
    if let Some(ids) = held.permit_ids() {
        cmd.env("KEYLATCH_PERMIT_IDS", ids);
    }
    match held.fencing_token() {
        Some(t) => cmd.env("KEYLATCH_FENCING_TOKEN", t.to_string()),
        // An inherited token would belong to some other hold.
        None => cmd.env_remove("KEYLATCH_FENCING_TOKEN"),
    };
    let guard = held;
    let mut child = match Supervised::spawn(&mut cmd, a.foreground) {
        Ok(c) => c,
        Err(e) => {
            release(guard, &subject(a)).await;
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            return Err(Failure {
                code,
                message: format!("cannot run {:?}: {e}", a.command[0]),
            });
        }
    };

    let lost = guard.lost();
    tokio::pin!(lost);
    let mut look = tokio::time::interval(STOPPED_CHECK);
    let mut told = a.foreground;
    // A fixed lease ends for sure (nothing renews it): SIGTERM goes out a
    // grace before its local end (half the lease when the grace is
    // longer), so that SIGKILL lands by the time the lock can pass to
    // someone else, instead of a grace after. (A watchdog hold's end is
    // not known ahead: a late renewal may still come, so its stop waits
    // for the loss, and the command may overlap the next holder by at
    // most the grace.)
    let ending = match (a.lease, guard.remaining_lease()) {
        (Some(lease), Some(left)) => {
            let lead = a.grace.min(lease / 2);
            Some((Instant::now() + left.saturating_sub(lead), lead.min(left)))
        }
        _ => None,
    };
    let lease_end = async {
        match ending {
            Some((at, _)) => tokio::time::sleep_until(at.into()).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(lease_end);
    let outcome = loop {
        tokio::select! {
            status = child.wait() => break Outcome::Exited(status),
            reason = &mut lost => break Outcome::Lost(reason),
            stop = signals.recv() => break Outcome::Signalled(stop),
            () = &mut lease_end => {
                break Outcome::LeaseEnding(ending.map_or(a.grace, |(_, lead)| lead));
            }
            _ = look.tick(), if !told => {
                if child.main_stopped() {
                    told = true;
                    errln!(
                        "keylatch: the command is stopped (did it read the terminal? it runs in a \
                         process group of its own: use --foreground for interactive commands); \
                         the lock stays held"
                    );
                }
            }
        }
    };
    match outcome {
        Outcome::Exited(Ok(status)) => {
            let code = exit_code(status);
            // What the command left running in its group would run on
            // unlocked once we release: it is stopped first.
            let left = child.members();
            if left > 0 {
                errln!(
                    "keylatch: the command exited {code} leaving {left} process(es) in its group; \
                     sending SIGTERM, SIGKILL after {}",
                    show(a.grace)
                );
                let report = child.stop(TERM, a.grace, signals).await;
                warn_left(report.left);
            }
            match guard.unlock().await {
                Ok(()) => Ok(code),
                // The hold ended before the command did (expired or deleted
                // behind us) and the loss signal had not fired yet: the
                // command may have overlapped another holder, which the
                // caller must hear about more than the command's own code.
                Err(LockError::NotOwner { .. } | LockError::Expired { .. }) => Err(Failure {
                    code: EXIT_LOST,
                    message: format!(
                        "{} was lost before the command finished (it exited {code})",
                        subject(a)
                    ),
                }),
                Err(e) => {
                    errln!(
                        "keylatch: releasing {} failed ({e}); retrying until its lease ends",
                        subject(a)
                    );
                    Ok(code)
                }
            }
        }
        Outcome::Exited(Err(e)) => {
            let report = child.stop(TERM, a.grace, signals).await;
            warn_left(report.left);
            release(guard, &subject(a)).await;
            Err(Failure::usage(format!(
                "waiting for the command failed: {e}"
            )))
        }
        Outcome::Lost(reason) => {
            errln!(
                "keylatch: {} lost while the command ran ({}); sending SIGTERM to {}, \
                 SIGKILL after {}",
                subject(a),
                describe(reason, a.lease.is_some()),
                target(a),
                show(a.grace)
            );
            let report = child.stop(TERM, a.grace, signals).await;
            warn_left(report.left);
            // After an Expired loss the key may still be ours (the server
            // was unreachable, not the hold taken): release it if so.
            let _ = guard.unlock().await;
            Err(Failure {
                code: EXIT_LOST,
                message: String::new(),
            })
        }
        Outcome::LeaseEnding(kill_in) => {
            errln!(
                "keylatch: the fixed --lease of {} ends in {}; sending SIGTERM to {}, SIGKILL \
                 when it ends",
                subject(a),
                show(kill_in),
                target(a)
            );
            let report = child.stop(TERM, kill_in, signals).await;
            warn_left(report.left);
            // Most often still ours for a moment: released rather than left
            // to run out.
            let _ = guard.unlock().await;
            Err(Failure {
                code: EXIT_LOST,
                message: String::new(),
            })
        }
        Outcome::Signalled(stop) => {
            errln!(
                "keylatch: got SIG{}; sending it to {}, SIGKILL after {}",
                stop.name,
                target(a),
                show(a.grace)
            );
            let report = child.stop(stop, a.grace, signals).await;
            warn_left(report.left);
            release(guard, &subject(a)).await;
            Err(Failure {
                code: stop.exit_code(),
                message: String::new(),
            })
        }
    }
}

/// How often `exec` looks whether the command was stopped by the terminal.
const STOPPED_CHECK: Duration = Duration::from_secs(1);

/// Says so when SIGKILL could not end the whole group in time (a process in
/// uninterruptible sleep): the lock is released all the same, since keeping
/// it would not stop that process either.
fn warn_left(left: usize) {
    if left > 0 {
        errln!("keylatch: {left} process(es) of the command's group survived SIGKILL so far");
    }
}

/// A lock of the kind asked for, within `--wait`; the hold and its owner.
async fn acquire_lock(
    locks: &Locks,
    a: &ExecArgs,
    signals: &mut Signals,
) -> Result<(Held, Option<String>), Failure> {
    let lock = handle(locks, a.kind, &a.name);
    let what = format!("lock {:?}", a.name);
    let acquired = wait_undoing(a, &what, std::slice::from_ref(&lock), signals, |wait| {
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
        Err(e) => Err(Failure::usage(format!(
            "cannot acquire lock {:?}: {e}",
            a.name
        ))),
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
async fn acquire_multi(
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
    let acquired = wait_undoing(a, &what, multi.members(), signals, |wait| {
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
        Err(e) => Err(Failure::usage(format!("cannot acquire {what}: {e}"))),
    }
}

/// Calls `attempt` with the wait left until it answers, within `--wait`;
/// `members` are the locks it takes. A signal ends the wait (`Err`, 128 +
/// N). An acquire of unknown outcome (the connection failed with it in
/// flight) may have taken any member: nobody would release that hold before
/// its lease ran out, and the next acquire of this owner would re-enter it
/// (count 2), so the release at the command's end would leave count 1
/// behind, held by nobody (the CLI row's 30 s waits). Each member is
/// released first, for sure, then the wait goes on.
async fn wait_undoing<G, F, Fut>(
    a: &ExecArgs,
    what: &str,
    members: &[Lock],
    signals: &mut Signals,
    mut attempt: F,
) -> Result<LockResult<Option<G>>, Failure>
where
    F: FnMut(Duration) -> Fut,
    Fut: std::future::Future<Output = LockResult<Option<G>>>,
{
    // `None`: a wait too long to end (as good as forever).
    let until = Instant::now().checked_add(a.wait);
    loop {
        let wait = until.map_or(a.wait, |u| u.saturating_duration_since(Instant::now()));
        let acquired = tokio::select! {
            r = attempt(wait) => r,
            stop = signals.recv() => {
                // The acquire just dropped may have taken the lock before
                // the signal (its late reply is settled in the background,
                // which would die with the runtime when we return).
                for member in members {
                    release_orphan(member, Duration::from_secs(2)).await;
                }
                return Err(interrupted(&format!("waiting for {what}"), stop));
            }
        };
        match acquired {
            Err(LockError::Client(e)) if e.is_unknown_outcome() => {
                let bound = until.map_or(ORPHAN_BOUND, |u| {
                    u.saturating_duration_since(Instant::now())
                        .max(ORPHAN_BOUND)
                });
                for member in members {
                    if !release_orphan(member, bound).await {
                        return Err(Failure::usage(format!(
                            "cannot acquire {what}: {e}; an acquire of unknown outcome could \
                             not be undone (it expires with its {:?} lease)",
                            a.lease.unwrap_or(EXEC_WATCHDOG)
                        )));
                    }
                }
                if wait.is_zero() {
                    return Ok(Err(LockError::Client(e)));
                }
            }
            other => return Ok(other),
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
    let until = Instant::now() + bound;
    let mut pause = Duration::from_millis(20);
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, lock.release_one()).await {
            Ok(Ok(_) | Err(LockError::NotOwner { .. })) => return true,
            Ok(Err(e)) => {
                tracing::debug!(lock = %lock.name(), error = %e, "undoing an acquire of unknown outcome; trying again");
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
async fn acquire_permits(
    locks: &Locks,
    a: &ExecArgs,
    n: u64,
    create: Option<u64>,
    signals: &mut Signals,
) -> Result<(Held, Option<String>), Failure> {
    let sem = locks.expirable_semaphore(&a.name);
    let fail = |e: LockError| Failure::usage(format!("semaphore {:?}: {e}", a.name));
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
        r = sem.try_acquire(n, a.wait, a.lease) => Ok(r),
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

/// A RedLock over `--redlock`'s masters, within `--wait`.
async fn acquire_redlock(
    a: &ExecArgs,
    signals: &mut Signals,
) -> Result<(Held, Option<String>), Failure> {
    let urls: Vec<&str> = a.redlock.iter().map(String::as_str).collect();
    // Each master's client with exec's watchdog lease (10 s), as for the
    // other modes (`RedLock::connect` would take the library's 30 s).
    let connect = async {
        let mut nodes = Vec::with_capacity(a.redlock.len());
        for url in &a.redlock {
            let cfg = args::client_config(std::slice::from_ref(url))?;
            let config = LocksConfig::default().watchdog_timeout(EXEC_WATCHDOG);
            let node = Locks::connect_with(cfg, config)
                .await
                .map_err(|e| Failure::usage(format!("--redlock: {e}")))?;
            nodes.push(node);
        }
        Ok::<_, Failure>(keylatch::RedLock::new(nodes))
    };
    let redlock = tokio::select! {
        r = connect => r?,
        stop = signals.recv() => return Err(interrupted("connecting", stop)),
    };
    // Dropped on a signal: member holds taken are released in the
    // background, replies in flight settled when they come.
    let acquired = tokio::select! {
        r = redlock.try_acquire(&a.name, a.wait, a.lease) => Ok(r),
        stop = signals.recv() => Err(stop),
    };
    match acquired {
        Err(stop) => Err(interrupted(
            &format!("waiting for RedLock {:?}", a.name),
            stop,
        )),
        Ok(Ok(Some(g))) => Ok((Held::RedLock(g), None)),
        Ok(Ok(None)) => Err(Failure {
            code: EXIT_TIMEOUT,
            message: format!(
                "RedLock {:?}: no majority of the {} masters within {:?}",
                a.name,
                urls.len(),
                a.wait
            ),
        }),
        Ok(Err(e)) => Err(Failure::usage(format!("RedLock {:?}: {e}", a.name))),
    }
}

/// The failure for a signal that came before the command ran: 128 + its
/// number, as for one that comes while it runs.
fn interrupted(what: &str, stop: Stop) -> Failure {
    Failure {
        code: stop.exit_code(),
        message: format!("interrupted by SIG{} while {what}", stop.name),
    }
}

/// Releases and reports a failure on stderr only: the exit code already
/// says what mattered, and the lease ends an unreleased hold anyway.
async fn release(guard: Held, what: &str) {
    if let Err(e) = guard.unlock().await {
        errln!("keylatch: releasing {what} failed ({e}); retrying until its lease ends");
    }
}

/// What `exec` holds, for messages: `lock "a"`, or `locks "a", "b"` for a
/// multi-lock (whose loss signal does not say which member went).
fn subject(a: &ExecArgs) -> String {
    match a.names.as_slice() {
        [one] => format!("lock {one:?}"),
        many => {
            let quoted: Vec<String> = many.iter().map(|n| format!("{n:?}")).collect();
            format!("locks {}", quoted.join(", "))
        }
    }
}

/// Whom a stop reaches, for messages.
fn target(a: &ExecArgs) -> &'static str {
    if a.foreground {
        "the command (--foreground: not its group)"
    } else {
        "the command's group"
    }
}

/// A duration as people write it: `0s`, not `0ns`.
fn show(d: Duration) -> String {
    if d.is_zero() {
        "0s".to_owned()
    } else {
        format!("{d:?}")
    }
}

/// The child's exit code, or 128 + signal as shells report a killed child.
fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => (c & 0xff) as u8,
        (None, Some(s)) => (128 + s).clamp(0, 255) as u8,
        (None, None) => EXIT_USAGE,
    }
}

fn describe(reason: LossReason, fixed_lease: bool) -> &'static str {
    match reason {
        LossReason::Gone => "deleted or taken over on the server",
        LossReason::Expired if fixed_lease => "its fixed --lease ran out",
        LossReason::Expired => "lease ran out without a successful renewal",
        LossReason::MaxHold => "maximum hold time reached",
        _ => "lost",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<ExecArgs, String> {
        parse(Argv::new(s.split(' ').map(str::to_owned))).map_err(|f| f.message)
    }

    #[test]
    fn defaults_and_the_command_after_the_separator() {
        let a = parse_str("jobs --url redis://h:1 -- sh -c true").unwrap();
        assert_eq!(a.name, "jobs");
        assert_eq!(a.names, ["jobs"]);
        let m = parse_str("a b c --write -- true").unwrap();
        assert_eq!((m.names.len(), m.kind), (3, Kind::Write));
        assert_eq!(a.wait, Duration::from_secs(10));
        assert_eq!(a.lease, None);
        assert_eq!(a.grace, Duration::from_secs(5));
        assert_eq!(a.urls, ["redis://h:1"]);
        assert_eq!(a.command, ["sh", "-c", "true"]);
        let a = parse_str("jobs --wait 200ms --lease 3s --grace 1s -- true").unwrap();
        assert_eq!(a.kind, Kind::Reentrant);
        assert_eq!(parse_str("jobs --fair -- true").unwrap().kind, Kind::Fair);
        assert_eq!(parse_str("jobs --read -- true").unwrap().kind, Kind::Read);
        assert_eq!(parse_str("jobs --write -- true").unwrap().kind, Kind::Write);
        assert!(parse_str("jobs --read --write -- true").is_err());
        assert!(parse_str("jobs --fair --read -- true").is_err());
        assert_eq!(
            parse_str("jobs --semaphore 2 --permits 4 -- true")
                .unwrap()
                .kind,
            Kind::Semaphore {
                n: 2,
                create: Some(4)
            }
        );
        assert!(parse_str("jobs --semaphore 0 -- true").is_err());
        assert!(parse_str("jobs --permits 4 -- true").is_err());
        assert!(parse_str("jobs --semaphore 1 --write -- true").is_err());
        assert_eq!(
            (a.wait, a.lease, a.grace),
            (
                Duration::from_millis(200),
                Some(Duration::from_secs(3)),
                Duration::from_secs(1)
            )
        );
    }

    #[test]
    fn usage_errors_say_what_is_wrong() {
        assert!(parse_str("jobs").unwrap_err().contains("command"));
        assert!(parse_str("-- true").unwrap_err().contains("NAME"));
        assert!(parse_str("jobs true").unwrap_err().contains("--"));
        assert!(parse_str("a b --semaphore 1 -- true")
            .unwrap_err()
            .contains("multi-lock"));
        assert!(parse_str("jobs --wait soon -- true")
            .unwrap_err()
            .contains("--wait"));
        assert!(parse_str("jobs --lease 0 -- true")
            .unwrap_err()
            .contains("--lease"));
    }
}
