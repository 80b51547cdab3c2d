//! `keylatch latch`: a count-down latch (Redisson's `RCountDownLatch`) from
//! the shell: set it, count it down, wait for it to open, read it. E.g. a
//! job waits until three loaders each counted down once.

use std::time::Duration;

use keylatch::{Locks, LocksConfig};

use super::args::{self, Argv};
use super::{runtime, Failure, EXIT_TIMEOUT};

/// `keylatch latch --help`.
pub(crate) const USAGE: &str = "\
usage: keylatch latch NAME (--set N | --count-down | --wait [--timeout D] | --count) [--url URL]...

A count-down latch shared by processes (Redisson's RCountDownLatch: the key
NAME holds the remaining count; waiters are woken on Redisson's latch
channel).

  --set N        set the count to N when the latch is not set; prints the
                 count; exit 1 when it was set already (unchanged)
  --count-down   count down by one; prints the count after (0: open)
  --wait         wait until the count is 0 (or the latch was never set);
                 woken by the message, re-checked every second as well
  --timeout D    with --wait: give up after D (exit 75); default: no limit
  --count        print the remaining count
  --url URL      server (repeat for cluster seeds); default $KEYLATCH_URL,
                 else redis://127.0.0.1:6379

Exit codes: 0 done, 1 --set found it set, 64 usage error (also a name
that holds no latch, or a count above 2^53 - 1), 69 server unreachable,
70 server error, 75 --wait timed out.";

#[derive(Debug, PartialEq, Eq)]
enum Action {
    Set(u64),
    CountDown,
    Wait(Option<Duration>),
    Count,
}

fn parse(mut argv: Argv) -> Result<(String, Action, Vec<String>), Failure> {
    let mut name = None;
    let mut action = None;
    let mut timeout = None;
    let mut urls = Vec::new();
    let mut pick = |a: Action| {
        if action.is_some() {
            return Err(Failure::usage(
                "latch: one of --set, --count-down, --wait, --count",
            ));
        }
        action = Some(a);
        Ok(())
    };
    while let Some(a) = argv.next() {
        match a.as_str() {
            "--set" => {
                let v = argv.value("--set")?;
                let n = v.parse::<u64>().map_err(|_| {
                    Failure::usage(format!("latch: --set wants a count, not {v:?}"))
                })?;
                pick(Action::Set(n))?;
            }
            "--count-down" => pick(Action::CountDown)?,
            "--wait" => pick(Action::Wait(None))?,
            "--count" => pick(Action::Count)?,
            "--timeout" => timeout = Some(args::duration("--timeout", &argv.value("--timeout")?)?),
            "--url" => urls.push(argv.value("--url")?),
            flag if flag.starts_with('-') => {
                return Err(Failure::usage(format!("latch: unknown option {flag:?}")))
            }
            _ if name.is_none() => name = Some(a),
            other => return Err(Failure::usage(format!("latch: unexpected {other:?}"))),
        }
    }
    let name = name.ok_or_else(|| Failure::usage("latch: missing the latch NAME"))?;
    let action = match (action, timeout) {
        (Some(Action::Wait(_)), t) => Action::Wait(t),
        (Some(_), Some(_)) => return Err(Failure::usage("latch: --timeout goes with --wait")),
        (Some(a), None) => a,
        (None, _) => {
            return Err(Failure::usage(
                "latch: say what to do: --set N, --count-down, --wait or --count",
            ))
        }
    };
    Ok((name, action, args::urls(urls)))
}

/// Entry point: parses, acts, prints.
pub(crate) fn run(argv: Argv) -> Result<u8, Failure> {
    let (name, action, urls) = parse(argv)?;
    let mut cfg = args::client_config(&urls)?;
    // `--wait --timeout D` bounds the whole command, connecting included.
    let bound = match action {
        Action::Wait(Some(d)) => d,
        _ => Duration::MAX,
    };
    let started = std::time::Instant::now();
    runtime()?.block_on(async {
        let locks = args::connect_within(&urls, &mut cfg, bound, |cfg| {
            Locks::connect_with(cfg, LocksConfig::default())
        })
        .await?;
        let latch = locks.latch(&name);
        // A name that holds no count, or a count no latch holds exactly,
        // is a request the name cannot serve (64), as for `exec`.
        let fail = |e: keylatch::LockError| Failure::lock(&e, format!("latch {name:?}: {e}"));
        match action {
            Action::Set(n) => {
                if latch.try_set_count(n).await.map_err(fail)? {
                    outln!("{n}");
                    Ok(0)
                } else {
                    outln!("{}", latch.count().await.map_err(fail)?);
                    Ok(1)
                }
            }
            Action::CountDown => {
                let left = latch.count_down().await.map_err(fail)?;
                outln!("{left}");
                Ok(0)
            }
            Action::Count => {
                outln!("{}", latch.count().await.map_err(fail)?);
                Ok(0)
            }
            Action::Wait(None) => {
                latch.wait_zero().await.map_err(fail)?;
                Ok(0)
            }
            Action::Wait(Some(t)) => {
                let left = t.saturating_sub(started.elapsed());
                if latch.wait_zero_for(left).await.map_err(fail)? {
                    Ok(0)
                } else {
                    Err(Failure {
                        code: EXIT_TIMEOUT,
                        message: format!("latch {name:?} not open within {t:?}"),
                    })
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<Action, String> {
        parse(Argv::new(s.split(' ').map(str::to_owned)))
            .map(|(_, a, _)| a)
            .map_err(|f| f.message)
    }

    #[test]
    fn one_action_each() {
        assert_eq!(parse_str("l --set 3"), Ok(Action::Set(3)));
        assert_eq!(parse_str("l --count-down"), Ok(Action::CountDown));
        assert_eq!(parse_str("l --count"), Ok(Action::Count));
        assert_eq!(parse_str("l --wait"), Ok(Action::Wait(None)));
        assert_eq!(
            parse_str("l --wait --timeout 2s"),
            Ok(Action::Wait(Some(Duration::from_secs(2))))
        );
        assert!(parse_str("l").is_err());
        assert!(parse_str("l --set 3 --count").is_err());
        assert!(parse_str("l --count --timeout 2s").is_err());
        assert!(parse_str("l --set x").is_err());
    }
}
