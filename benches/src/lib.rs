//! Shared helpers for keylatch's benchmark binaries: latency summaries,
//! process CPU time, redis-benchmark runs, ratio tables, command-line
//! options, and the server to measure.

use std::fmt::Debug;
use std::future::Future;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Latency summary of one scenario run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Summary {
    pub p50: Duration,
    pub p90: Duration,
    pub p99: Duration,
    pub max: Duration,
    pub n: usize,
}

/// Summarises raw samples through keylatch's benchmark histogram
/// ([`keylatch_cli::bench::Histogram`], the one `keylatch bench` and the
/// `compare` binary use), so every benchmark computes percentiles the same
/// way (≤ 0.8 % bucket width; exact min and max).
pub fn summarise(samples: &mut [Duration]) -> Summary {
    let mut h = keylatch_cli::bench::Histogram::new();
    for &d in samples.iter() {
        h.record(d);
    }
    Summary {
        p50: h.percentile(50.0),
        p90: h.percentile(90.0),
        p99: h.percentile(99.0),
        max: h.max(),
        n: samples.len(),
    }
}

/// CPU time (user + system) used by this process so far, from /proc/self/stat.
/// Resolution is one clock tick (10 ms); scenarios run for seconds.
pub fn process_cpu() -> Duration {
    stat_cpu("/proc/self/stat").unwrap_or_default()
}

/// CPU time (user + system, all threads) process `pid` has used so far,
/// from /proc/<pid>/stat: e.g. a local redis-server's, to put the server's
/// work per operation beside the client's. `None` when it cannot be read
/// (no such process, or not on Linux). Resolution is one clock tick.
pub fn pid_cpu(pid: u32) -> Option<Duration> {
    stat_cpu(&format!("/proc/{pid}/stat"))
}

/// utime + stime of a /proc stat file, in clock ticks converted to time.
fn stat_cpu(path: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the command name (which is in parentheses and may contain spaces).
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 overall: 12th and 13th after ')'.
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
    let total = ticks(11)? + ticks(12)?;
    Some(Duration::from_secs_f64(
        total as f64 / clock_ticks_per_second() as f64,
    ))
}

/// The kernel's USER_HZ (`getconf CLK_TCK`), read once; 100 (Linux's value
/// on every common architecture) when getconf is missing.
fn clock_ticks_per_second() -> u64 {
    static HZ: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *HZ.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .filter(|&hz| hz > 0)
            .unwrap_or(100)
    })
}

/// One row of redis-benchmark's CSV output.
#[derive(Clone, Debug, Default)]
pub struct CFloor {
    pub rps: f64,
    /// Exact mean (redis-benchmark's percentiles come in ~8 µs steps at
    /// loopback latencies, too coarse to compare two ~70 µs figures).
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// Runs `redis-benchmark --csv` with the given arguments and parses the
/// first data row (Redis 7's CSV: test, rps, avg, min, p50, p95, p99, max).
pub fn redis_benchmark(port: u16, args: &[&str]) -> Option<CFloor> {
    let out = std::process::Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p"])
        .arg(port.to_string())
        .arg("--csv")
        .args(args)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text
        .lines()
        .find(|l| !l.starts_with("\"test\"") && l.contains(','))?;
    let cols: Vec<f64> = row
        .split(',')
        .skip(1)
        .map(|c| c.trim_matches('"').parse().unwrap_or(f64::NAN))
        .collect();
    Some(CFloor {
        rps: *cols.first()?,
        avg_ms: *cols.get(1)?,
        p50_ms: *cols.get(3)?,
        p99_ms: *cols.get(5)?,
    })
}

/// Formats a duration in microseconds with one decimal.
pub fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

/// Runs `tasks` spawned tasks for `seconds`: task `t` is `body(t, stop)`,
/// loops until `stop` is set and returns how many operations it did.
/// Returns (operations, process CPU, wall time) over the run — the "N tasks
/// for S seconds" loop every throughput scenario shares.
pub async fn for_seconds<F, Fut>(
    tasks: usize,
    seconds: u64,
    mut body: F,
) -> (u64, Duration, Duration)
where
    F: FnMut(usize, Arc<AtomicBool>) -> Fut,
    Fut: Future<Output = u64> + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let cpu0 = process_cpu();
    let t0 = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|t| tokio::spawn(body(t, Arc::clone(&stop))))
        .collect();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut ops = 0;
    for h in handles {
        ops += h.await.expect("bench task");
    }
    (ops, process_cpu().saturating_sub(cpu0), t0.elapsed())
}

/// Whether a [`for_seconds`] task should stop.
pub fn stopped(stop: &AtomicBool) -> bool {
    stop.load(Ordering::Relaxed)
}

/// The number after flag `name` on the command line, or `default`.
pub fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The text after flag `name` on the command line, if any.
pub fn arg_text(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// `usage: BIN [--flag VALUE]…` for a binary taking the flags in `known`
/// (each documented in the binary's own header).
fn usage(known: &[&str]) -> String {
    let bin = std::env::args().next().unwrap_or_default();
    let bin = bin.rsplit('/').next().unwrap_or("bench").to_owned();
    let flags: Vec<String> = known.iter().map(|f| format!("[{f} VALUE]")).collect();
    format!(
        "usage: {bin} {}\n(each flag is described at the top of benches/src/bin/{bin}.rs)",
        flags.join(" ")
    )
}

/// The command line of a binary whose every option is a `--name value`
/// pair. Unlike [`arg`], it is strict: a mistyped option or value stops the
/// run instead of silently measuring with the default.
pub struct Flags(Vec<(String, String)>);

impl Flags {
    /// Reads the command line. `--help` (or `-h`) prints the flags in
    /// `known` and exits 0; a flag without a value or one not in `known`
    /// prints what is wrong and the flags, and exits 2 (a usage error, not
    /// a panic's backtrace).
    pub fn parse(known: &[&str]) -> Flags {
        let mut pairs = Vec::new();
        let mut args = std::env::args().skip(1);
        while let Some(name) = args.next() {
            if name == "--help" || name == "-h" {
                println!("{}", usage(known));
                std::process::exit(0);
            }
            if !known.contains(&name.as_str()) {
                eprintln!("unknown argument {name}\n{}", usage(known));
                std::process::exit(2);
            }
            let Some(value) = args.next() else {
                eprintln!("{name} needs a value\n{}", usage(known));
                std::process::exit(2);
            };
            pairs.push((name, value));
        }
        Flags(pairs)
    }

    /// The value after flag `name` (its last one when given twice), if any.
    pub fn text(&self, name: &str) -> Option<String> {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    }

    /// The number after flag `name`, or `default`; panics naming the flag
    /// when its value is not a number.
    pub fn number<T>(&self, name: &str, default: T) -> T
    where
        T: FromStr,
        T::Err: Debug,
    {
        self.text(name).map_or(default, |v| v.parse().expect(name))
    }
}

/// The URL of the server to measure: `url` when given, else that of a
/// redis-server started here, which runs as long as the returned server
/// is kept.
pub fn url_or_local_server(url: Option<&str>) -> (String, Option<keylatch_harness::RedisServer>) {
    match url {
        Some(url) => (url.to_owned(), None),
        None => {
            let server = keylatch_harness::RedisServer::start();
            (server.url(), Some(server))
        }
    }
}

/// One contender's event in a contention run: (when, contender, what) with
/// what = 0 started waiting, 1 acquired, 2 released.
pub type ContentionEvent = (Instant, usize, u8);

/// From a contention run's events (any order, contenders numbered below
/// 64): how many acquisitions, and every handoff, the time from a release
/// to the next acquisition by a contender already waiting when the release
/// happened.
pub fn handoffs(mut events: Vec<ContentionEvent>) -> (usize, Vec<Duration>) {
    events.sort_by_key(|e| e.0);
    let acquisitions = events.iter().filter(|e| e.2 == 1).count();
    let mut waiting_since: [Option<Instant>; 64] = [None; 64];
    let mut last_release: Option<(Instant, usize)> = None;
    let mut out = Vec::new();
    for (t, c, kind) in events {
        let Some(slot) = waiting_since.get_mut(c) else {
            continue;
        };
        match kind {
            0 => *slot = Some(t),
            1 => {
                if let (Some((rt, rc)), Some(ws)) = (last_release, *slot) {
                    if rc != c && ws < rt {
                        out.push(t.duration_since(rt));
                    }
                }
                *slot = None;
            }
            _ => last_release = Some((t, c)),
        }
    }
    (acquisitions, out)
}
