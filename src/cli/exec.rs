//! `keylatch exec`: run a command while holding a lock, like `flock(1)`
//! across machines (and `etcdctl lock` / `consul lock`).
//!
//! The order of events is the contract: acquire, then spawn; on the child's
//! exit, release, then exit with its code. A lost lock or a signal to
//! keylatch terminates the child (SIGTERM, then SIGKILL after `--grace`)
//! *before* the lock is released, so the command never runs unlocked
//! longer than the grace period.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use keylatch::{LockError, Locks, LocksConfig, LossReason};
use tokio::process::{Child, Command};
use tokio::signal::unix::{signal, Signal, SignalKind};

use super::args::{self, Argv};
use super::held::Held;
use super::{runtime, Failure, EXIT_INTERRUPTED, EXIT_LOST, EXIT_TIMEOUT, EXIT_USAGE};

/// `keylatch exec --help`.
pub(crate) const USAGE: &str = "\
usage: keylatch exec NAME [--fair | --read | --write | --semaphore N [--permits P] |
                          --redlock URL,URL,...] [--wait 10s] [--lease 30s|watchdog] [--grace 5s] [--url URL]... -- CMD [ARGS...]

Runs CMD while holding the lock NAME, releases the lock when CMD exits, and
exits with CMD's exit code (128+N when CMD died of signal N).

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
  --lease D    fixed lease: the lock expires after D and CMD is stopped then;
               `watchdog` (default) renews the lock for as long as CMD runs
  --grace D    time between SIGTERM and SIGKILL when CMD must stop (default 5s)
  --url URL    server (repeat for cluster seeds); default $KEYLATCH_URL
               (comma-separated), else redis://127.0.0.1:6379; rediss://
               for TLS (CA from $KEYLATCH_TLS_CA or ?ca=FILE)

CMD sees KEYLATCH_LOCK_NAME, KEYLATCH_LOCK_OWNER and KEYLATCH_FENCING_TOKEN
(the hold's fencing token: pass it to storage that rejects stale writers;
unset for a --read hold and for permits, which have none); with
--semaphore, KEYLATCH_PERMIT_IDS (comma-separated) instead of the owner.

Exit codes:
  N     CMD's own exit code
  2     usage error, server unreachable, or server error
  75    the lock was not acquired within --wait (EX_TEMPFAIL)
  76    the lock was lost while CMD ran; CMD got SIGTERM, then SIGKILL
        after --grace
  126   CMD could not be started; 127: CMD not found
  130   interrupted (SIGINT/Ctrl-C; 143 for SIGTERM): CMD got SIGTERM,
        then SIGKILL after --grace, and the lock was released";

/// What `exec` was asked to do.
#[derive(Debug)]
struct ExecArgs {
    name: String,
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
    let mut name = None;
    let mut wait = Duration::from_secs(10);
    let mut lease = None;
    let mut grace = Duration::from_secs(5);
    let mut urls = Vec::new();
    let mut kind = Kind::Reentrant;
    let mut create = None;
    let mut redlock = Vec::new();
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
            flag if flag.starts_with('-') => {
                return Err(Failure::usage(format!("exec: unknown option {flag:?}")))
            }
            _ if name.is_none() => name = Some(a),
            other => {
                return Err(Failure::usage(format!(
                    "exec: unexpected {other:?}; put the command after `--`"
                )))
            }
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
    let name = name.ok_or_else(|| Failure::usage("exec: missing the lock NAME"))?;
    let command = argv.remaining();
    if command.is_empty() {
        return Err(Failure::usage("exec: missing the command after `--`"));
    }
    Ok(ExecArgs {
        name,
        wait,
        lease,
        grace,
        urls: args::urls(urls),
        command,
        kind,
        redlock,
    })
}

/// Entry point: parses, runs, and returns the exit code to use.
pub(crate) fn run(argv: Argv) -> Result<u8, Failure> {
    let a = parse(argv)?;
    runtime()?.block_on(exec(a))
}

/// Why the wait on the child ended.
enum Outcome {
    Exited(std::io::Result<ExitStatus>),
    Lost(LossReason),
    Signalled(u8),
}

async fn exec(a: ExecArgs) -> Result<u8, Failure> {
    // Registered before connecting: from here on SIGINT/SIGTERM are ours to
    // handle, so an interrupt can never leave the child running unlocked.
    let signal_failure = |e| Failure::usage(format!("cannot handle signals: {e}"));
    let mut sigint = signal(SignalKind::interrupt()).map_err(signal_failure)?;
    let mut sigterm = signal(SignalKind::terminate()).map_err(signal_failure)?;

    // The client the hold came from, to wait for its background releases
    // before exiting (RedLock's clients release in the foreground).
    let mut client: Option<Locks> = None;
    let held = if a.kind == Kind::RedLock {
        // Its own masters: --url's server is not needed.
        acquire_redlock(&a, &mut sigint, &mut sigterm).await?
    } else {
        let cfg = args::client_config(&a.urls)?;
        let locks = tokio::select! {
            r = Locks::connect_with(cfg, LocksConfig::default()) => {
                r.map_err(|e| args::connect_failure(&a.urls, e))?
            }
            _ = sigint.recv() => return Err(interrupted("connecting")),
            _ = sigterm.recv() => return Err(interrupted("connecting")),
        };
        let held = match a.kind {
            Kind::Semaphore { n, create } => {
                acquire_permits(&locks, &a, n, create, &mut sigint, &mut sigterm).await?
            }
            _ => acquire_lock(&locks, &a, &mut sigint, &mut sigterm).await?,
        };
        client = Some(locks);
        held
    };
    let out = run_held(&a, held, &mut sigint, &mut sigterm).await;
    if let Some(locks) = client {
        // A release that met a transient failure (a reconnect, a slot
        // moving) goes on in the background, until its hold's lease ends at
        // the latest: exiting now would drop it and leave the lock held by
        // nobody until then.
        if !locks.settle(SETTLE_LIMIT).await {
            eprintln!(
                "keylatch: the release of lock {:?} is still retrying; it expires with its lease",
                a.name
            );
        }
    }
    out
}

/// The longest `exec` waits at exit for a release retried in the
/// background (those stop by themselves when their hold's lease ends).
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

/// Runs the command while `held`, and releases.
async fn run_held(
    a: &ExecArgs,
    held: (Held, Option<String>),
    sigint: &mut Signal,
    sigterm: &mut Signal,
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
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            release(guard, &a.name).await;
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
    let outcome = tokio::select! {
        status = child.wait() => Outcome::Exited(status),
        reason = &mut lost => Outcome::Lost(reason),
        _ = sigint.recv() => Outcome::Signalled(EXIT_INTERRUPTED),
        _ = sigterm.recv() => Outcome::Signalled(128 + 15),
    };
    match outcome {
        Outcome::Exited(Ok(status)) => {
            let code = exit_code(status);
            match guard.unlock().await {
                Ok(()) => Ok(code),
                // The hold ended before the command did (expired or deleted
                // behind us) and the loss signal had not fired yet: the
                // command may have overlapped another holder, which the
                // caller must hear about more than the command's own code.
                Err(LockError::NotOwner { .. } | LockError::Expired { .. }) => Err(Failure {
                    code: EXIT_LOST,
                    message: format!(
                        "lock {:?} was lost before the command finished (it exited {code})",
                        a.name
                    ),
                }),
                Err(e) => {
                    eprintln!(
                        "keylatch: releasing lock {:?} failed ({e}); retrying until its lease ends",
                        a.name
                    );
                    Ok(code)
                }
            }
        }
        Outcome::Exited(Err(e)) => {
            release(guard, &a.name).await;
            Err(Failure::usage(format!(
                "waiting for the command failed: {e}"
            )))
        }
        Outcome::Lost(reason) => {
            eprintln!(
                "keylatch: lock {:?} lost while the command ran ({}); sending SIGTERM, SIGKILL after {:?}",
                a.name,
                describe(reason),
                a.grace
            );
            terminate(&mut child, a.grace).await;
            // After an Expired loss the key may still be ours (the server
            // was unreachable, not the hold taken): release it if so.
            let _ = guard.unlock().await;
            Err(Failure {
                code: EXIT_LOST,
                message: String::new(),
            })
        }
        Outcome::Signalled(code) => {
            eprintln!(
                "keylatch: interrupted; sending SIGTERM to the command, SIGKILL after {:?}",
                a.grace
            );
            terminate(&mut child, a.grace).await;
            release(guard, &a.name).await;
            Err(Failure {
                code,
                message: String::new(),
            })
        }
    }
}

/// A lock of the kind asked for, within `--wait`; the hold and its owner.
async fn acquire_lock(
    locks: &Locks,
    a: &ExecArgs,
    sigint: &mut Signal,
    sigterm: &mut Signal,
) -> Result<(Held, Option<String>), Failure> {
    let lock = match a.kind {
        Kind::Fair => locks.fair_lock(&a.name),
        Kind::Read => locks.rw_lock(&a.name).read(),
        Kind::Write => locks.rw_lock(&a.name).write(),
        _ => locks.lock(&a.name),
    };
    // Dropping the acquire on a signal is safe: an acquire whose reply had
    // not come back is released by owner in the background.
    // `None`: a wait too long to end (as good as forever).
    let until = Instant::now().checked_add(a.wait);
    let acquired = loop {
        let wait = until.map_or(a.wait, |u| u.saturating_duration_since(Instant::now()));
        let acquired = tokio::select! {
            r = lock.try_acquire(wait, a.lease) => Some(r),
            _ = sigint.recv() => None,
            _ = sigterm.recv() => None,
        };
        match acquired {
            // The connection failed with the acquire in flight: it may
            // have taken the lock, and nobody would release that hold
            // before its lease ran out (every other waiter kept waiting).
            // This process's owner holds nothing else, so a release by
            // owner frees exactly that; then the wait goes on.
            Some(Err(LockError::Client(e))) if e.is_unknown_outcome() && !wait.is_zero() => {
                let _ = tokio::time::timeout(Duration::from_secs(1), lock.release_one()).await;
            }
            other => break other,
        }
    };
    let Some(acquired) = acquired else {
        // The background release of a cancelled acquire would die with the
        // runtime when we return; this one is awaited. Queued behind the
        // acquire on the same connection, it frees a hold that the acquire
        // may have taken just before the signal ("not owner" otherwise).
        let _ = tokio::time::timeout(Duration::from_secs(1), lock.release_one()).await;
        return Err(interrupted(&format!("waiting for lock {:?}", a.name)));
    };
    match acquired {
        Ok(Some(g)) => Ok((Held::Lock(g), Some(lock.owner().to_owned()))),
        Ok(None) => Err(Failure {
            code: EXIT_TIMEOUT,
            message: format!(
                "lock {:?} is held by another owner; not acquired within {:?}",
                a.name, a.wait
            ),
        }),
        Err(e) => Err(Failure::usage(format!(
            "cannot acquire lock {:?}: {e}",
            a.name
        ))),
    }
}

/// `n` leased permits of the permit-expirable semaphore, within `--wait`
/// (created with `create` permits first when asked).
async fn acquire_permits(
    locks: &Locks,
    a: &ExecArgs,
    n: u64,
    create: Option<u64>,
    sigint: &mut Signal,
    sigterm: &mut Signal,
) -> Result<(Held, Option<String>), Failure> {
    let sem = locks.expirable_semaphore(&a.name);
    let fail = |e: LockError| Failure::usage(format!("semaphore {:?}: {e}", a.name));
    if let Some(p) = create {
        sem.try_set_permits(p).await.map_err(fail)?;
    }
    // Dropped on a signal: permits an attempt took are given back by id
    // (the late reply's handler), or expire with their lease.
    let acquired = tokio::select! {
        r = sem.try_acquire(n, a.wait, a.lease) => Some(r),
        _ = sigint.recv() => None,
        _ = sigterm.recv() => None,
    };
    match acquired {
        None => Err(interrupted(&format!("waiting for semaphore {:?}", a.name))),
        Some(Ok(Some(p))) => Ok((Held::Permits(p), None)),
        Some(Ok(None)) => Err(Failure {
            code: EXIT_TIMEOUT,
            message: format!(
                "semaphore {:?}: {n} permit(s) not available within {:?}",
                a.name, a.wait
            ),
        }),
        Some(Err(LockError::NoSuchSemaphore { .. })) => Err(Failure::usage(format!(
            "semaphore {:?} does not exist; create it with --permits P",
            a.name
        ))),
        Some(Err(e)) => Err(fail(e)),
    }
}

/// A RedLock over `--redlock`'s masters, within `--wait`.
async fn acquire_redlock(
    a: &ExecArgs,
    sigint: &mut Signal,
    sigterm: &mut Signal,
) -> Result<(Held, Option<String>), Failure> {
    let urls: Vec<&str> = a.redlock.iter().map(String::as_str).collect();
    let redlock = keylatch::RedLock::connect(&urls)
        .await
        .map_err(|e| Failure::usage(format!("--redlock: {e}")))?;
    // Dropped on a signal: member holds taken are released in the
    // background, replies in flight settled when they come.
    let acquired = tokio::select! {
        r = redlock.try_acquire(&a.name, a.wait, a.lease) => Some(r),
        _ = sigint.recv() => None,
        _ = sigterm.recv() => None,
    };
    match acquired {
        None => Err(interrupted(&format!("waiting for RedLock {:?}", a.name))),
        Some(Ok(Some(g))) => Ok((Held::RedLock(g), None)),
        Some(Ok(None)) => Err(Failure {
            code: EXIT_TIMEOUT,
            message: format!(
                "RedLock {:?}: no majority of the {} masters within {:?}",
                a.name,
                urls.len(),
                a.wait
            ),
        }),
        Some(Err(e)) => Err(Failure::usage(format!("RedLock {:?}: {e}", a.name))),
    }
}

fn interrupted(what: &str) -> Failure {
    Failure {
        code: EXIT_INTERRUPTED,
        message: format!("interrupted while {what}"),
    }
}

/// Releases and reports a failure on stderr only: the exit code already
/// says what mattered, and the lease ends an unreleased hold anyway.
async fn release(guard: Held, name: &str) {
    if let Err(e) = guard.unlock().await {
        eprintln!("keylatch: releasing lock {name:?} failed ({e}); retrying until its lease ends");
    }
}

/// SIGTERM, up to `grace` for the child to exit, then SIGKILL.
async fn terminate(child: &mut Child, grace: Duration) {
    if let Some(pid) = child.id() {
        // std and tokio can send only SIGKILL; kill(1) spares a libc
        // dependency for one call. The pid cannot be reused yet: the child
        // is not reaped until we wait for it.
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await;
        if tokio::time::timeout(grace, child.wait()).await.is_ok() {
            return;
        }
    }
    // Sends SIGKILL (if still running) and reaps.
    let _ = child.kill().await;
}

/// The child's exit code, or 128 + signal as shells report a killed child.
fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => (c & 0xff) as u8,
        (None, Some(s)) => (128 + s).clamp(0, 255) as u8,
        (None, None) => EXIT_USAGE,
    }
}

fn describe(reason: LossReason) -> &'static str {
    match reason {
        LossReason::Gone => "deleted or taken over on the server",
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
        assert!(parse_str("jobs --wait soon -- true")
            .unwrap_err()
            .contains("--wait"));
        assert!(parse_str("jobs --lease 0 -- true")
            .unwrap_err()
            .contains("--lease"));
    }
}
