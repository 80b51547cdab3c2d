//! `keylatch unlock --force`: delete a lock whoever holds it (an operator's
//! tool for a holder that died without its lease ending, e.g. a lock taken
//! with a long fixed lease). The holder learns of it through its loss
//! signal; waiters are woken.

use std::io::{BufRead, Write};

use keylatch::{Locks, LocksConfig};

use super::args::{self, Argv};
use super::{runtime, status, Failure};

/// `keylatch unlock --help`.
pub(crate) const USAGE: &str = "\
usage: keylatch unlock --force NAME [--yes] [--url URL]...

Deletes lock NAME whoever holds it and wakes its waiters. Shows the holders
and asks for confirmation (y/N) on stdin unless --yes is given. The holder's
loss signal fires (a `keylatch exec` holding it stops its command, exit 76).

Exit codes: 0 unlocked or already free, 1 not confirmed, 2 usage error or
server unreachable.";

/// Entry point: parses, shows, confirms, unlocks.
pub(crate) fn run(mut argv: Argv) -> Result<u8, Failure> {
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
    let urls = args::urls(urls);
    let cfg = args::client_config(&urls)?;
    let rt = runtime()?;
    let locks = rt.block_on(async {
        Locks::connect_with(cfg, LocksConfig::default())
            .await
            .map_err(|e| args::connect_failure(&urls, e))
    })?;
    let st = rt
        .block_on(status::read(locks.client(), &name))
        .map_err(|e| Failure::usage(format!("reading lock {name:?}: {e}")))?;
    if st.state() == "free" {
        println!("lock {name:?} is free; nothing to unlock");
        return Ok(0);
    }
    if !yes {
        eprintln!("{}", st.to_text());
        eprint!("force-unlock {name:?}? [y/N] ");
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        // Read outside the runtime: a blocking stdin read inside a task
        // would stall a worker for as long as the operator thinks.
        std::io::stdin()
            .lock()
            .read_line(&mut answer)
            .map_err(|e| Failure::usage(format!("reading the answer: {e}")))?;
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
            return Err(Failure {
                code: 1,
                message: "not unlocked".to_owned(),
            });
        }
    }
    // A fair lock's queue head is woken on its own channel as well; a
    // read-write lock's waiters listen on `redisson_rwlock:{NAME}`.
    let lock = match st.kind().as_str() {
        "fair" => locks.fair_lock(&name),
        "read-write" => locks.rw_lock(&name).write(),
        _ => locks.lock(&name),
    };
    let removed = rt
        .block_on(lock.force_unlock())
        .map_err(|e| Failure::usage(format!("force-unlocking {name:?}: {e}")))?;
    if removed {
        println!("lock {name:?} force-unlocked");
    } else {
        println!("lock {name:?} was already free");
    }
    Ok(0)
}
