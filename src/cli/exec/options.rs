//! `exec`'s command line: what it was asked to hold, how long to wait,
//! and the command after `--`.

use std::time::{Duration, Instant};

use crate::cli::args::{self, Argv};
use crate::cli::Failure;

/// What `exec` was asked to do.
#[derive(Debug)]
pub(crate) struct ExecArgs {
    /// The first of `names`, for messages.
    pub(crate) name: String,
    /// Every lock name given (several: a multi-lock).
    pub(crate) names: Vec<String>,
    pub(crate) wait: Duration,
    /// When the wait began (as the arguments were read): connecting and
    /// acquiring both spend from `wait`.
    pub(crate) started: Instant,
    /// `None`: watchdog renewal.
    pub(crate) lease: Option<Duration>,
    pub(crate) grace: Duration,
    pub(crate) urls: Vec<String>,
    /// As given: any bytes (a Latin-1 file name passes through).
    pub(crate) command: Vec<std::ffi::OsString>,
    /// Which lock of that name (`--fair`, `--read`, `--write`, …).
    pub(crate) kind: Kind,
    /// `--redlock`: the masters' URLs.
    pub(crate) redlock: Vec<String>,
    /// `--foreground`: the command stays in keylatch's process group.
    pub(crate) foreground: bool,
    /// `elect --proclaim`: what the leader publishes (its address, say).
    pub(crate) proclaim: String,
}

/// The lock `exec` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
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
    /// The leadership of an election (`keylatch elect`), proclaiming
    /// `ExecArgs::proclaim`.
    Leader,
}

impl Kind {
    /// Takes `k` (from `flag`) as the kind: at most one of `--fair`,
    /// `--read`, `--write`, `--semaphore`, `--redlock`, given once.
    fn pick(&mut self, k: Kind, flag: &str) -> Result<(), Failure> {
        if *self != Kind::Reentrant && *self != k {
            return Err(Failure::usage(format!(
                "exec: {flag} cannot go with another of --fair, --read, --write, --semaphore"
            )));
        }
        *self = k;
        Ok(())
    }
}

impl ExecArgs {
    /// `exec`'s defaults, with no name and no command yet.
    pub(crate) fn defaults() -> Self {
        Self {
            name: String::new(),
            names: Vec::new(),
            wait: Duration::from_secs(10),
            started: Instant::now(),
            lease: None,
            grace: Duration::from_secs(5),
            urls: Vec::new(),
            command: Vec::new(),
            kind: Kind::Reentrant,
            redlock: Vec::new(),
            foreground: false,
            proclaim: String::new(),
        }
    }

    /// What is left of `--wait`.
    pub(crate) fn remaining(&self) -> Duration {
        self.wait.saturating_sub(self.started.elapsed())
    }
}

/// Reads `exec`'s arguments (`argv` after the subcommand's name).
pub(super) fn parse(mut argv: Argv) -> Result<ExecArgs, Failure> {
    let mut a = ExecArgs::defaults();
    let mut urls = Vec::new();
    let mut create = None;
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--" => break,
            "--fair" => a.kind.pick(Kind::Fair, "--fair")?,
            "--read" => a.kind.pick(Kind::Read, "--read")?,
            "--write" => a.kind.pick(Kind::Write, "--write")?,
            "--semaphore" => {
                let n = semaphore_count(&argv.value("--semaphore")?)?;
                a.kind
                    .pick(Kind::Semaphore { n, create: None }, "--semaphore")?;
            }
            "--redlock" => {
                a.redlock = redlock_urls(&argv.value("--redlock")?)?;
                a.kind.pick(Kind::RedLock, "--redlock")?;
            }
            "--permits" => create = Some(permit_count(&argv.value("--permits")?)?),
            "--wait" => a.wait = args::duration("--wait", &argv.value("--wait")?)?,
            "--lease" => a.lease = lease(&argv.value("--lease")?)?,
            "--grace" => a.grace = args::duration("--grace", &argv.value("--grace")?)?,
            "--url" => urls.push(argv.value("--url")?),
            "--foreground" => a.foreground = true,
            flag if flag.starts_with('-') => {
                return Err(Failure::usage(format!("exec: unknown option {flag:?}")))
            }
            _ => a.names.push(arg),
        }
    }
    a.check(create)?;
    a.command = argv.remaining();
    if a.command.is_empty() {
        return Err(Failure::usage("exec: missing the command after `--`"));
    }
    a.urls = args::urls(urls);
    Ok(a)
}

impl ExecArgs {
    /// The rules across options, once all are read: `--permits` only with
    /// `--semaphore` (whose creation count it becomes), a lease longer
    /// than 0, at least one NAME and none empty (`name` is the first), and
    /// several names only for the lock kinds a multi-lock takes.
    fn check(&mut self, create: Option<u64>) -> Result<(), Failure> {
        match (&mut self.kind, create) {
            (Kind::Semaphore { create: c, .. }, Some(p)) => *c = Some(p),
            (_, Some(_)) => return Err(Failure::usage("exec: --permits goes with --semaphore")),
            _ => {}
        }
        if self.lease.is_some_and(|l| l.is_zero()) {
            return Err(Failure::usage("exec: --lease must be longer than 0"));
        }
        if self.names.iter().any(String::is_empty) {
            return Err(Failure::usage("exec: a lock NAME cannot be empty"));
        }
        self.name = self
            .names
            .first()
            .cloned()
            .ok_or_else(|| Failure::usage("exec: missing the lock NAME"))?;
        if self.names.len() > 1 && matches!(self.kind, Kind::Semaphore { .. } | Kind::RedLock) {
            return Err(Failure::usage(
                "exec: several names make a multi-lock of plain, --fair, --read or --write locks, \
                 not of --semaphore or --redlock",
            ));
        }
        Ok(())
    }
}

/// `--semaphore N`: a permit count above 0.
fn semaphore_count(v: &str) -> Result<u64, Failure> {
    v.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
        Failure::usage(format!(
            "exec: --semaphore wants a permit count > 0, not {v:?}"
        ))
    })
}

/// `--redlock URL,URL,...`: 3 or more masters (blanks between commas
/// skipped).
fn redlock_urls(v: &str) -> Result<Vec<String>, Failure> {
    let urls: Vec<String> = v
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .collect();
    if urls.len() < 3 {
        return Err(Failure::usage(
            "exec: --redlock wants 3 or more master URLs, comma-separated",
        ));
    }
    Ok(urls)
}

/// `--permits P`: the count a missing semaphore is created with.
fn permit_count(v: &str) -> Result<u64, Failure> {
    v.parse::<u64>()
        .map_err(|_| Failure::usage(format!("exec: --permits wants a count, not {v:?}")))
}

/// `--lease D|watchdog`: a fixed lease, or `None` for watchdog renewal.
fn lease(v: &str) -> Result<Option<Duration>, Failure> {
    match v {
        "watchdog" => Ok(None),
        _ => Ok(Some(args::duration("--lease", v)?)),
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
