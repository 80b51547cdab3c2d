//! `keylatch bench`: the lock scenarios of [`keylatch_cli::bench`] against a
//! server, as a table (and optionally an SVG of latency by percentile). With
//! `--compare` the same scenarios run through redis-rs and rslock as well,
//! in the separate comparison binary (see [`super::compare`]), so the
//! product never links another Redis client.

use std::path::PathBuf;
use std::time::Duration;

use keylatch::{Client, Locks, LocksConfig};
use keylatch_cli::bench::{
    contended_timeline, run_suite, svg, table, timeline_svg, Plan, Progress, Scenario,
};

use super::args::{self, Argv};
use super::{bench_scale, compare, local_server, runtime, Failure};

/// How long `--timeline`'s own run of scenario c lasts, and how much of it
/// the picture shows.
const TIMELINE_RUN: Duration = Duration::from_secs(1);
const TIMELINE_WINDOW: Duration = Duration::from_millis(20);

/// `keylatch bench --help`.
pub(crate) const USAGE: &str = "\
usage: keylatch bench [--url URL]... [--cluster URL]... [--clients N] [--duration 10s]
                      [--compare] [--plot out.svg] [--timeline out.svg]
       keylatch bench --holds N [--rounds 3] [--watchdog 3s] [--url URL]...

Measures keylatch's reentrant lock against a server:
  a. uncontended acquire + release, one task: latency p50/p90/p99/max
  b. N tasks (--clients, default 64) on distinct locks over one client:
     pairs/s, process CPU per pair, latency under that load
  c. 8 contenders on one lock, hold 0, think 1ms: acquisitions/s and
     handoff latency (a release → a waiting contender holds the lock)
--duration (default 10s) is split 20 % / 40 % / 40 % among a, b, c; with
--compare each scenario's share is split among the clients, run in two
halves in alternating order (A B C, then C B A).

  --url URL      server (repeat for cluster seeds); default $KEYLATCH_URL,
                 else redis://127.0.0.1:6379, else (when nothing answers
                 there and no server was named) a redis-server started on a
                 free port for the run
  --cluster URL  a cluster seed (repeatable); the server must be a cluster
  --clients N    tasks in scenario b (default 64)
  --duration D   total time of the scenarios (default 10s)
  --compare      also run redis-rs (the same Lua scripts) and rslock, and
                 print keylatch/other ratios; needs the comparison binary
                 from benches/ ($KEYLATCH_COMPARE_BIN, or `compare` next to
                 keylatch, or cargo in the source tree); on a cluster
                 redis-rs runs through its cluster client and rslock
                 (RedLock over independent servers) is left out
  --plot FILE    write an SVG of latency by percentile (1/(1-p) axis: one
                 step per nine), one curve per scenario (and client)
  --timeline FILE  after the scenarios, run c once more for 1s and write an
                 SVG of who held the lock when (a lane per contender, 20 ms
                 from the middle of the run) with each one's share of the
                 holds; not with --compare

Scale mode (--holds N): one client (Locks::connect's path) holds N watchdog
locks, 256 acquires in flight, idles --rounds renewal rounds (a round every
third of --watchdog), releases them; then Redisson's LockTask renewal
script renews N locks on Redisson's layout once. It prints acquires/s,
client memory per hold, renewal calls and client CPU per round, holds lost,
and (standalone) the server's CPU per renewed hold beside Redisson's. Every
key it writes is under keylatch-bench-scale:<run>: and deleted at the end.
  --holds N      locks to hold (1 to 10000000)
  --rounds R     renewal rounds to idle through (1 to 100, default 3)
  --watchdog D   the watchdog lease (default 3s: a round every second)

Results go to stdout, progress to stderr. Exit codes: 0 done, 64 usage
error, 69 server unreachable, 70 a failed operation or server error.";

/// The longest run accepted: long enough for any soak, short enough that
/// no deadline arithmetic can overflow.
const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// What `bench` was asked to do.
#[derive(Debug)]
pub(crate) struct BenchArgs {
    pub(crate) urls: Vec<String>,
    pub(crate) cluster: Vec<String>,
    pub(crate) clients: usize,
    pub(crate) duration: Duration,
    pub(crate) compare: bool,
    pub(crate) plot: Option<PathBuf>,
    pub(crate) timeline: Option<PathBuf>,
    /// Scale mode: `--holds`, with its rounds and watchdog.
    pub(crate) holds: Option<usize>,
    pub(crate) rounds: u32,
    pub(crate) watchdog: Duration,
}

fn parse(mut argv: Argv) -> Result<BenchArgs, Failure> {
    let mut a = BenchArgs {
        urls: Vec::new(),
        cluster: Vec::new(),
        clients: 64,
        duration: Duration::from_secs(10),
        compare: false,
        plot: None,
        timeline: None,
        holds: None,
        rounds: 3,
        watchdog: Duration::from_secs(3),
    };
    while let Some(flag) = argv.next() {
        match flag.as_str() {
            "--url" => a.urls.push(argv.value("--url")?),
            "--cluster" => a.cluster.push(argv.value("--cluster")?),
            "--clients" => {
                let v = argv.value("--clients")?;
                a.clients = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=100_000).contains(n))
                    .ok_or_else(|| {
                        Failure::usage(format!(
                            "bench: --clients takes a number from 1 to 100000, not {v:?}"
                        ))
                    })?;
            }
            "--duration" => {
                a.duration = args::duration("--duration", &argv.value("--duration")?)?;
                if a.duration < Duration::from_millis(100) || a.duration > MAX_DURATION {
                    return Err(Failure::usage(
                        "bench: --duration must be between 100ms and 24h",
                    ));
                }
            }
            "--compare" => a.compare = true,
            "--plot" => a.plot = Some(PathBuf::from(argv.value("--plot")?)),
            "--timeline" => a.timeline = Some(PathBuf::from(argv.value("--timeline")?)),
            "--holds" => a.holds = Some(number(&mut argv, "--holds", 1, 10_000_000)?),
            "--rounds" => a.rounds = number(&mut argv, "--rounds", 1, 100)?,
            "--watchdog" => {
                a.watchdog = args::duration("--watchdog", &argv.value("--watchdog")?)?;
                if a.watchdog < Duration::from_millis(300) || a.watchdog > Duration::from_secs(3600)
                {
                    return Err(Failure::usage(
                        "bench: --watchdog must be between 300ms and 1h",
                    ));
                }
            }
            other => return Err(Failure::usage(format!("bench: unknown argument {other:?}"))),
        }
    }
    let scale_only = a.rounds != 3 || a.watchdog != Duration::from_secs(3);
    if a.holds.is_some() && (a.compare || a.plot.is_some() || a.timeline.is_some()) {
        return Err(Failure::usage(
            "bench: --holds (scale mode) takes no --compare, --plot or --timeline",
        ));
    }
    if a.compare && a.timeline.is_some() {
        return Err(Failure::usage(
            "bench: --timeline draws keylatch's own run; leave out --compare",
        ));
    }
    if a.holds.is_none() && scale_only {
        return Err(Failure::usage(
            "bench: --rounds and --watchdog belong to scale mode: add --holds N",
        ));
    }
    Ok(a)
}

/// The number after `flag`, within `lo..=hi`.
fn number<T>(argv: &mut Argv, flag: &str, lo: T, hi: T) -> Result<T, Failure>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    let v = argv.value(flag)?;
    v.parse()
        .ok()
        .filter(|n| *n >= lo && *n <= hi)
        .ok_or_else(|| {
            Failure::usage(format!(
                "bench: {flag} takes a number from {lo} to {hi}, not {v:?}"
            ))
        })
}

/// Entry point: parses, finds the server, runs, prints.
pub(crate) fn run(argv: Argv) -> Result<u8, Failure> {
    let a = parse(argv)?;
    let mut seeds: Vec<String> = a.urls.iter().chain(&a.cluster).cloned().collect();
    let env_named = std::env::var("KEYLATCH_URL").is_ok_and(|v| !v.trim().is_empty());
    // Kept alive for the whole run: dropping it stops the server.
    let mut _local = None;
    if seeds.is_empty() && !env_named {
        let (url, server) = local_server::find_server(None).map_err(Failure::unavailable)?;
        seeds = vec![url];
        _local = server;
    }
    let seeds = args::urls(seeds);
    if let Some(holds) = a.holds {
        let rt = runtime()?;
        return rt.block_on(async move {
            tokio::spawn(bench_scale::run(holds, a, seeds))
                .await
                .map_err(|e| Failure::software(format!("bench: the run failed: {e}")))?
        });
    }
    if a.compare {
        return compare::launch(&a, &seeds);
    }
    let rt = runtime()?;
    // Spawned, not driven by block_on: a future outside the worker pool
    // pays a cross-thread wake-up on every reply, which would be measured.
    rt.block_on(async move {
        tokio::spawn(bench(a, seeds))
            .await
            .map_err(|e| Failure::software(format!("bench: the run failed: {e}")))?
    })
}

/// URLs as they may be printed: passwords as `***`.
fn shown(urls: &[String]) -> String {
    let shown: Vec<String> = urls.iter().map(|u| keylatch::redact_url(u)).collect();
    shown.join(", ")
}

async fn bench(a: BenchArgs, seeds: Vec<String>) -> Result<u8, Failure> {
    let cfg = args::client_config(&seeds)?;
    let client = Client::connect_with(cfg)
        .await
        .map_err(|e| args::connect_failure(&seeds, e))?;
    if !a.cluster.is_empty() && !client.is_cluster() {
        return Err(Failure::usage(format!(
            "bench: --cluster {} is not a cluster (cluster_enabled:0); use --url for a standalone server",
            shown(&a.cluster)
        )));
    }
    // Without client tracking, as applications sharing a client usually
    // run: the measured path is the acquire and release scripts.
    let locks = Locks::new(client, LocksConfig::default());
    let plan = Plan::new(a.duration, a.clients);
    let kind = if locks.client().is_cluster() {
        "cluster"
    } else {
        "standalone"
    };
    outln!(
        "keylatch bench: {} ({kind}), {:.1}s total ({}), {} tasks in b",
        shown(&seeds),
        a.duration.as_secs_f64(),
        Scenario::ALL
            .map(|s| format!(
                "{} {:.1}s",
                s.label().split('.').next().unwrap_or_default(),
                plan.budget(s).as_secs_f64()
            ))
            .join(", "),
        plan.tasks
    );
    let progress = Progress::new(plan.duration);
    let results = run_suite(&[&locks], &plan, &progress)
        .await
        .map_err(|e| Failure::software(format!("bench: {e}")))?;
    drop(progress);
    out!("{}", table(&results));
    if let Some(path) = &a.plot {
        let title = format!("keylatch bench — latency by percentile ({kind})");
        std::fs::write(path, svg(&results, &title)).map_err(|e| {
            Failure::software(format!("bench: cannot write {}: {e}", path.display()))
        })?;
        outln!("percentile plot: {}", path.display());
    }
    if let Some(path) = &a.timeline {
        let t = contended_timeline(&locks, &plan, TIMELINE_RUN)
            .await
            .map_err(|e| Failure::software(format!("bench: timeline run: {e}")))?;
        let title = format!(
            "keylatch bench — who held the lock ({} contenders, hold 0, think {} ms; {} ms of the {:.1} s run)",
            t.lanes.len(),
            plan.think.as_millis(),
            TIMELINE_WINDOW.as_millis(),
            t.elapsed.as_secs_f64()
        );
        std::fs::write(path, timeline_svg(&t, &title, TIMELINE_WINDOW)).map_err(|e| {
            Failure::software(format!("bench: cannot write {}: {e}", path.display()))
        })?;
        outln!(
            "timeline: {} ({} holds in {:.1} s)",
            path.display(),
            t.holds(),
            t.elapsed.as_secs_f64()
        );
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(v: &[&str]) -> Result<BenchArgs, String> {
        parse(Argv::new(v.iter().map(|s| (*s).to_owned()))).map_err(|f| f.message)
    }

    #[test]
    fn defaults_and_options() {
        let a = parse_strs(&[]).unwrap();
        assert_eq!(
            (a.clients, a.duration, a.compare),
            (64, Duration::from_secs(10), false)
        );
        let a = parse_strs(&[
            "--url",
            "redis://a:1",
            "--cluster",
            "redis://b:2",
            "--clients",
            "8",
            "--duration",
            "1s",
            "--plot",
            "/tmp/x.svg",
        ])
        .unwrap();
        assert_eq!(a.urls, ["redis://a:1"]);
        assert_eq!(a.cluster, ["redis://b:2"]);
        assert_eq!((a.clients, a.duration), (8, Duration::from_secs(1)));
        assert_eq!(a.plot, Some(PathBuf::from("/tmp/x.svg")));
        // --compare takes a cluster too: the seeds go to the comparison.
        let a = parse_strs(&["--compare", "--cluster", "redis://c:1"]).unwrap();
        assert!(a.compare);
        assert_eq!(a.cluster, ["redis://c:1"]);
        let a = parse_strs(&["--holds", "100000"]).unwrap();
        assert_eq!(
            (a.holds, a.rounds, a.watchdog),
            (Some(100_000), 3, Duration::from_secs(3))
        );
        let a = parse_strs(&["--holds", "7", "--rounds", "5", "--watchdog", "30s"]).unwrap();
        assert_eq!(
            (a.holds, a.rounds, a.watchdog),
            (Some(7), 5, Duration::from_secs(30))
        );
    }

    #[test]
    fn bad_input_is_one_line_not_a_panic() {
        for bad in [
            &["--clients", "0"][..],
            &["--clients", "many"],
            &["--clients"],
            &["--duration", "soon"],
            &["--duration", "1ms"],
            &["--duration", "99999999999999999h"],
            &["--frobnicate"],
            &["--compare", "--clients"],
            &["--holds", "0"],
            &["--holds", "many"],
            &["--holds", "5", "--compare"],
            &["--holds", "5", "--plot", "x.svg"],
            &["--holds", "5", "--timeline", "x.svg"],
            &["--compare", "--timeline", "x.svg"],
            &["--rounds", "2"],
            &["--holds", "5", "--watchdog", "10ms"],
            &["--holds", "5", "--rounds", "0"],
        ] {
            let e = parse_strs(bad).unwrap_err();
            assert!(!e.is_empty() && !e.contains('\n'), "{bad:?}: {e}");
        }
    }
}
