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
//!
//! Here: `--help`, the run from connect to exit, and the messages' words.
//! [`options`]: the command line. [`acquire`]: taking each kind of hold
//! within `--wait` (and undoing an acquire of unknown outcome).
//! [`command`]: the command's life while held, and what ends it.

use std::time::Duration;

use keylatch::{Locks, LocksConfig};

use super::args::{self, show, Argv};
use super::held::Held;
use super::signals::{Signals, Stop};
use super::{runtime, Failure};

mod acquire;
mod command;
mod options;

use acquire::{acquire_leader, acquire_lock, acquire_multi, acquire_permits, acquire_redlock};
use command::run_held;
use options::parse;
pub(crate) use options::{ExecArgs, Kind};

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
               once fewer than a majority do. A master down at start
               counts as failed (named on stderr) and is tried again while
               waiting; fewer than a majority answering: exit 69. No
               fencing token; --url is not used.
  --wait D     how long to wait for the lock (default 10s; 0 = one try);
               connecting spends from it too (at least 1s to connect)
  --lease D    fixed lease: the lock expires after D; CMD gets SIGKILL
               shortly before that (D/10, at most 250ms) and SIGTERM a
               --grace earlier (half of D if --grace is longer), exit 76;
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
unset for a --read hold, permits and a RedLock, which have none, and for
several names, whose locks each have their own; KEYLATCH_LOCK_NAME is then
the first name), and KEYLATCH_FENCING_TOKENS: every name's token in the
order the names were given, comma-separated (an empty entry for a --read
hold); with
--semaphore, KEYLATCH_PERMIT_IDS (comma-separated) instead of the owner.

Exit codes:
  N     CMD's own exit code (128+N when CMD died of signal N)
  64    usage error, or NAME holds no lock of the kind asked (EX_USAGE)
  69    no server reachable, the connection/AUTH refused, no answer in
        time, or a peer that is not Redis/Valkey (EX_UNAVAILABLE)
  70    the server answered with an error; internal failure (EX_SOFTWARE)
  75    the lock was not acquired within --wait (EX_TEMPFAIL)
  76    the lock was lost while CMD ran: its group got SIGTERM, then
        SIGKILL after --grace
  126   CMD could not be started; 127: CMD not found
  129   SIGHUP   } to keylatch, while it waited or while CMD ran: the same
  130   SIGINT   } signal went to CMD's group, SIGKILL after --grace, then
  131   SIGQUIT  } the lock was released (a second signal sends SIGKILL at
  143   SIGTERM  } once)";

/// Entry point: parses, runs, and returns the exit code to use.
pub(crate) fn run(argv: Argv) -> Result<u8, Failure> {
    run_args(parse(argv)?)
}

/// Runs what `a` asks (`exec`'s flow; `elect` builds its own `a`).
pub(crate) fn run_args(a: ExecArgs) -> Result<u8, Failure> {
    runtime()?.block_on(exec(a))
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
        Signals::install().map_err(|e| Failure::software(format!("cannot handle signals: {e}")))?;

    // The client the hold came from, to wait for its background releases
    // before exiting (RedLock's clients release in the foreground).
    let mut client: Option<Locks> = None;
    let held = if a.kind == Kind::RedLock {
        // Its own masters: --url's server is not needed.
        acquire_redlock(&a, &mut signals).await?
    } else {
        let mut cfg = args::client_config(&a.urls)?;
        let config = LocksConfig::default().watchdog_timeout(EXEC_WATCHDOG);
        // --wait bounds the whole command: connecting spends from it.
        let connect = args::connect_within(&a.urls, &mut cfg, a.wait, |cfg| {
            Locks::connect_with(cfg, config)
        });
        let locks = tokio::select! {
            r = connect => r?,
            stop = signals.recv() => return Err(interrupted("connecting", stop)),
        };
        let held = match a.kind {
            Kind::Semaphore { n, create } => {
                acquire_permits(&locks, &a, n, create, &mut signals).await
            }
            Kind::Leader => acquire_leader(&locks, &a, &mut signals).await,
            _ if a.names.len() > 1 => acquire_multi(&locks, &a, &mut signals).await,
            _ => acquire_lock(&locks, &a, &mut signals).await,
        };
        let held = match held {
            Ok(h) => h,
            Err(f) => {
                // Interrupted: what the dropped wait left to send (its
                // place's leave, an undone try) goes out now, but a signal
                // must not keep the process for a minute on a dead server.
                let limit = if f.code >= 128 {
                    SETTLE_AFTER_SIGNAL
                } else {
                    SETTLE_LIMIT
                };
                settle(&locks, &a.name, limit).await;
                return Err(f);
            }
        };
        client = Some(locks);
        held
    };
    let out = run_held(&a, held, &mut signals).await;
    if let Some(locks) = client {
        settle(&locks, &a.name, SETTLE_LIMIT).await;
    }
    out
}

/// Waits for releases the client retries in the background (a reconnect, a
/// slot moving) before the process exits: exiting would drop them and leave
/// the lock held by nobody until its lease ends.
async fn settle(locks: &Locks, name: &str, limit: Duration) {
    if !locks.settle(limit).await {
        errln!(
            "keylatch: the release of lock {name:?} is still retrying; it expires with its lease"
        );
    }
}

/// The longest `exec` waits at exit for a release retried in the
/// background (those stop by themselves when their hold's lease ends).
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

/// The longest `exec` waits at exit after a signal ended its wait for the
/// lock: the wait's leave (a fair queue's place, a registration a release
/// could grant the lock to) is one round trip on a live server; on a dead
/// one, a grant it could not give back ends with the releaser's lease.
const SETTLE_AFTER_SIGNAL: Duration = Duration::from_secs(3);

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
    if a.kind == Kind::Leader {
        return format!("the leadership of {:?}", a.name);
    }
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
