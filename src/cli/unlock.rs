//! `keylatch unlock --force`: end what holds a name whoever holds it, in the
//! way its type means (an operator's tool for a holder that died without
//! its lease ending, e.g. a lock taken with a long fixed lease), and refuse
//! what is no lock. Holders learn of it through their loss signal; waiters
//! are woken.

use std::io::{BufRead, Write};

use keylatch::{ForceUnlocked, LockError, LockResult, Locks, LocksConfig};

use super::args::{self, Argv};
use super::{runtime, status, Failure};

/// `keylatch unlock --help`.
pub(crate) const USAGE: &str = "\
usage: keylatch unlock --force NAME [--yes] [--url URL]...

Ends what holds NAME whoever holds it, in the way its type means, and wakes
its waiters. Shows what the name holds and asks for confirmation (y/N) on
stdin unless --yes is given. Every holder's loss signal fires (a `keylatch
exec` holding it stops its command, exit 76).

  reentrant, non-reentrant, fair, fenced or spin lock, a multi-lock's or
  RedLock's member
               the hold ends (the key is deleted); waiters are woken, a fair
               lock's queue keeps its order, a fencing counter is kept
  read-write lock
               every read and write hold ends; readers and writers waiting
               are woken
  permit-expirable semaphore
               its leased permits go back to its count (a semaphore of 3
               stays a semaphore of 3); waiters are told
  semaphore or count-down latch count
               refused: a plain semaphore's permits belong to nobody and a
               latch has no holder (release permits, or count down)
  anything else (a list, a string, a hash with no lock's shape, ...)
               refused, untouched: the message says what the key holds

Exit codes: 0 unlocked or already free, 1 not confirmed, 64 refused (the
message names what NAME holds) or usage error, 69 server unreachable,
70 server error.";

/// Entry point: parses, shows, confirms, unlocks.
pub(crate) fn run(argv: Argv) -> Result<u8, Failure> {
    let (name, yes, urls) = parse(argv)?;
    let cfg = args::client_config(&urls)?;
    let rt = runtime()?;
    let locks = rt.block_on(async {
        Locks::connect_with(cfg, LocksConfig::default())
            .await
            .map_err(|e| args::connect_failure(&urls, e))
    })?;
    let st = rt.block_on(status::read(locks.client(), &name))?;
    if st.state() == "free" {
        outln!("lock {name:?} is free; nothing to unlock");
        return Ok(0);
    }
    if let Some(why) = st.refusal() {
        // Refused before asking: nothing a confirmation could make right.
        return Err(Failure::usage(format!("unlock: {why}")));
    }
    if !yes {
        // Read outside the runtime: a blocking stdin read inside a task
        // would stall a worker for as long as the operator thinks.
        confirm(&name, &st.to_text())?;
    }
    // The script judges the type itself (the key may have changed since
    // it was shown): what it ended, or why it refused.
    report(&name, rt.block_on(locks.force_unlock(&name)))
}

/// `NAME`, `--yes`, and the server URLs; `--force` is required.
fn parse(mut argv: Argv) -> Result<(String, bool, Vec<String>), Failure> {
    let mut name = None;
    let mut force = false;
    let mut yes = false;
    let mut urls = Vec::new();
    while let Some(a) = argv.next() {
        match a.as_str() {
            "--force" => force = true,
            "--yes" | "-y" => yes = true,
            "--url" => urls.push(argv.value("--url")?),
            flag if flag.starts_with('-') => {
                return Err(Failure::usage(format!("unlock: unknown option {flag:?}")))
            }
            _ if name.is_none() => name = Some(a),
            other => return Err(Failure::usage(format!("unlock: unexpected {other:?}"))),
        }
    }
    let name = name.ok_or_else(|| Failure::usage("unlock: missing the lock NAME"))?;
    if !force {
        // Only the owner can release a hold normally; without --force this
        // command could do nothing useful, so it must say what it would do.
        return Err(Failure::usage(
            "unlock: only --force is supported (it deletes the lock whoever holds it)",
        ));
    }
    Ok((name, yes, args::urls(urls)))
}

/// Shows what `name` holds (`shown`) and asks on stdin; `Err` (exit 1)
/// unless the answer is yes.
fn confirm(name: &str, shown: &str) -> Result<(), Failure> {
    errln!("{shown}");
    err!("force-unlock {name:?}? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::software(format!("reading the answer: {e}")))?;
    if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
        return Err(Failure {
            code: 1,
            message: "not unlocked".to_owned(),
        });
    }
    Ok(())
}

/// Says what the force unlock of `name` ended, or why it was refused.
fn report(name: &str, unlocked: LockResult<ForceUnlocked>) -> Result<u8, Failure> {
    match unlocked {
        Ok(ForceUnlocked::Free) => outln!("lock {name:?} was already free"),
        Ok(ForceUnlocked::Lock) => outln!("lock {name:?} force-unlocked"),
        Ok(ForceUnlocked::ReadWriteLock) => {
            outln!("read-write lock {name:?} force-unlocked (every read and write hold)")
        }
        Ok(ForceUnlocked::Permits(n)) => outln!(
            "permit-expirable semaphore {name:?}: {n} leased permit(s) force-released back to its count"
        ),
        Ok(other) => outln!("{name:?} force-unlocked ({other:?})"),
        Err(e @ LockError::ForceUnlockRefused { .. }) => {
            return Err(Failure::usage(format!("unlock: {e}")))
        }
        Err(e) => return Err(Failure::software(format!("force-unlocking {name:?}: {e}"))),
    }
    Ok(0)
}
