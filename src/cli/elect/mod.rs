//! `keylatch elect`: run a command only while this process leads an
//! election (as `etcdctl elect` and `consul lock` do), or print who leads
//! as it changes (`--observe`, [`observe`]).
//!
//! A leader's command runs through `exec`'s flow ([`super::exec`]): the
//! leadership is one more kind of hold ([`super::held::Held::Leader`]),
//! so a loss stops the command's whole process group before anything
//! else, signals are handled alike, and the command's exit resigns.

use std::time::Duration;

use super::args::{self, Argv};
use super::exec::{self, ExecArgs, Kind};
use super::Failure;

mod observe;

/// `keylatch elect --help`.
pub(crate) const USAGE: &str = "\
usage: keylatch elect NAME [--proclaim VALUE] [--wait D] [--grace 5s] [--foreground]
                      [--url URL]... -- CMD [ARGS...]
       keylatch elect --observe NAME [--json] [--url URL]...

Campaigns in the election NAME, waits until elected, proclaims VALUE (what
observers see: this process's address, say), then runs CMD as the leader.
When CMD exits, keylatch resigns (the next campaigner is elected) and exits
with CMD's code. The leadership is a lock renewed every ~3s on a 10s lease:
when it is lost (the server lost it, or renewals failed for 10s), CMD's whole
process group gets SIGTERM, SIGKILL after --grace, and keylatch exits 76.

  --proclaim V  what the leader publishes (default empty)
  --wait D      how long to campaign before giving up (exit 75); default:
                until elected
  --grace D     time between the stop signal and SIGKILL (default 5s)
  --foreground  keep CMD in keylatch's process group (see exec --help)
  --url URL     server (repeat for cluster seeds); default $KEYLATCH_URL,
                else redis://127.0.0.1:6379

CMD sees KEYLATCH_LOCK_NAME (the election), KEYLATCH_LOCK_OWNER (this
leader's id, as observers see it) and KEYLATCH_FENCING_TOKEN (the term's
token: it rises with every new term; pass it to storage that rejects
writes from an older leader).

--observe prints who leads now, then a line each time that changes, until
Ctrl-C (exit 0):
  2026-11-27T10:31:02.117Z leader token=17 owner=ID value=\"10.0.0.7:8080\"
  2026-11-27T10:31:09.503Z none
--json prints {\"at_ms\":UNIX_MS,\"leader\":null} or
{\"at_ms\":…,\"leader\":{\"owner\":…,\"token\":…,\"value\":…}} instead. A
leader that dies is seen gone when its lease ends; a server that cannot be
read is reported on stderr and read again until it answers; a name that
holds something else than an election exits 64.

Exit codes are exec's (see keylatch exec --help): CMD's own code, 64 usage,
69 no server, 70 server error, 75 not elected within --wait, 76 leadership
lost while CMD ran, 128+N on signal N.";

/// Entry point: observes, or campaigns and runs the command as leader.
pub(crate) fn run(argv: Argv) -> Result<u8, Failure> {
    match parse(argv)? {
        Elect::Observe(o) => observe::run(o),
        Elect::Lead(a) => exec::run_args(a),
    }
}

/// What `elect` was asked to do.
#[derive(Debug)]
enum Elect {
    /// Campaign, then run the command as leader.
    Lead(ExecArgs),
    /// Print each change of leader.
    Observe(observe::ObserveArgs),
}

fn parse(mut argv: Argv) -> Result<Elect, Failure> {
    let mut a = ExecArgs::defaults();
    a.kind = Kind::Leader;
    // Campaigning waits until elected unless --wait bounds it.
    a.wait = Duration::MAX;
    let (mut observe, mut json, mut urls) = (false, false, Vec::new());
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--" => break,
            "--observe" => observe = true,
            "--json" => json = true,
            "--proclaim" => a.proclaim = argv.value("--proclaim")?,
            "--wait" => a.wait = args::duration("--wait", &argv.value("--wait")?)?,
            "--grace" => a.grace = args::duration("--grace", &argv.value("--grace")?)?,
            "--url" => urls.push(argv.value("--url")?),
            "--foreground" => a.foreground = true,
            flag if flag.starts_with('-') => {
                return Err(Failure::usage(format!("elect: unknown option {flag:?}")))
            }
            _ if !a.name.is_empty() => return Err(Failure::usage("elect: one election NAME")),
            _ => a.name = arg,
        }
    }
    if a.name.is_empty() {
        return Err(Failure::usage("elect: missing the election NAME"));
    }
    a.names = vec![a.name.clone()];
    a.urls = args::urls(urls);
    a.command = argv.remaining();
    if observe {
        if !a.command.is_empty() {
            return Err(Failure::usage("elect: --observe runs no command"));
        }
        return Ok(Elect::Observe(observe::ObserveArgs {
            name: a.name,
            json,
            urls: a.urls,
        }));
    }
    if json {
        return Err(Failure::usage("elect: --json goes with --observe"));
    }
    if a.command.is_empty() {
        return Err(Failure::usage("elect: missing the command after `--`"));
    }
    Ok(Elect::Lead(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<Elect, String> {
        parse(Argv::new(s.split(' ').map(str::to_owned))).map_err(|f| f.message)
    }

    #[test]
    fn a_campaign_waits_until_elected_unless_told() {
        let Ok(Elect::Lead(a)) = parse_str("sched --proclaim 10.0.0.7:80 -- sh -c true") else {
            panic!("a campaign");
        };
        assert_eq!((a.name.as_str(), a.kind), ("sched", Kind::Leader));
        assert_eq!(a.proclaim, "10.0.0.7:80");
        assert_eq!(a.wait, Duration::MAX);
        assert_eq!(a.command, ["sh", "-c", "true"]);
        let Ok(Elect::Lead(a)) = parse_str("sched --wait 2s --grace 1s -- true") else {
            panic!("a campaign");
        };
        assert_eq!(
            (a.wait, a.grace),
            (Duration::from_secs(2), Duration::from_secs(1))
        );
    }

    #[test]
    fn observing_takes_a_name_and_no_command() {
        let Ok(Elect::Observe(o)) = parse_str("--observe sched --json") else {
            panic!("an observer");
        };
        assert!(o.json && o.name == "sched");
        assert!(parse_str("--observe sched -- true")
            .unwrap_err()
            .contains("no command"));
        assert!(parse_str("sched --json -- true")
            .unwrap_err()
            .contains("--observe"));
        assert!(parse_str("sched").unwrap_err().contains("command"));
        assert!(parse_str("--observe").unwrap_err().contains("NAME"));
        assert!(parse_str("a b -- true").unwrap_err().contains("one"));
        assert!(parse_str("a --lease 3s -- true")
            .unwrap_err()
            .contains("--lease"));
    }
}
