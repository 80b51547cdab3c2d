//! Handoff across processes: `--processes P` processes (default 8), each
//! with `--contenders C` contenders (default 1; each its own task and lock
//! handle) on the same reentrant lock through `Locks::connect(url)`, hold 0,
//! think `--think-ms` (default 1), for `--seconds` (default 5).
//! `--processes 1 --contenders 8` is the one-process case; `--threads N`
//! runs each process on N runtime workers (0, the default: one thread; the
//! CLI's bench runs on 2).
//!
//! Reports the handoff latency (a release to the next acquisition by
//! another contender that was already waiting when the release began) as
//! p50/p99 and in C round trips (redis-benchmark's sequential `GET` mean on
//! the same server), the share of handoffs under 1.5 round trips, and the
//! server's command counts per acquisition from `INFO commandstats`
//! (EVALSHA, PUBLISH, and every command): what a herd costs the server.
//! Server CPU per acquisition is `INFO cpu` (sys + user) read at the
//! common start and at the run's end; client CPU per acquisition is the
//! contender processes' own (`/proc/self/stat`) over the same window,
//! summed. Both have a clock tick's resolution (10 ms) over seconds.
//!
//! Each process logs its events with the wall clock (`SystemTime`, one
//! clock for every process of the machine); the parent merges the logs.
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin handoff -- [--processes 8]
//!     [--contenders 1] [--threads 0] [--seconds 5] [--think-ms 1] [--rounds 1] [--url redis://127.0.0.1:PORT]
//! ```

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use keylatch_benches::{handoffs, process_cpu, redis_benchmark, url_or_local_server, Flags};
use keylatch_cluster::{Client, Commands};
use keylatch_lock::Locks;

/// Microseconds since the epoch: one clock for every process here.
fn wall_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

fn main() {
    let flags = Flags::parse(&[
        "--processes",
        "--contenders",
        "--threads",
        "--seconds",
        "--think-ms",
        "--url",
        "--rounds",
        "--child",
        "--name",
        "--start-us",
    ]);
    if let Some(id) = flags.text("--child") {
        child(&flags, &id);
        return;
    }
    let processes: usize = flags.number("--processes", 8);
    let contenders: usize = flags.number("--contenders", 1);
    let threads: usize = flags.number("--threads", 0);
    assert!(processes * contenders <= 64, "at most 64 contenders in all");
    let seconds: u64 = flags.number("--seconds", 5);
    let think: u64 = flags.number("--think-ms", 1);
    let rounds: u32 = flags.number("--rounds", 1);
    let (url, _server) = url_or_local_server(flags.text("--url").as_deref());
    let port: u16 = url
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .expect("a port in the URL");
    let floor = redis_benchmark(port, &["-c", "1", "-n", "20000", "GET", "floor:k"])
        .expect("redis-benchmark");
    let rtt_us = floor.avg_ms * 1e3;
    println!(
        "{processes} processes x {contenders} contenders ({}), hold 0, think {think} ms, {seconds} s; C round trip (redis-benchmark GET, mean) {rtt_us:.1} us",
        if threads == 0 {
            "one-thread runtime".to_owned()
        } else {
            format!("{threads}-worker runtime")
        }
    );
    println!("round | acquisitions/s | handoffs | p50 us (RTT) | p99 us (RTT) | < 1.5 RTT | EVALSHA/acq | PUBLISH/acq | commands/acq | server CPU us/acq | client CPU us/acq");
    for round in 0..rounds {
        let name = format!("keylatch-bench-handoff:{}:{round}", wall_us());
        let before = commandstats(&url);
        let start = wall_us() + 1_500_000;
        let exe = std::env::current_exe().expect("own path");
        let children: Vec<_> = (0..processes)
            .map(|i| {
                Command::new(&exe)
                    .args(["--child", &i.to_string(), "--url", &url, "--name", &name])
                    .args(["--seconds", &seconds.to_string()])
                    .args(["--think-ms", &think.to_string()])
                    .args(["--contenders", &contenders.to_string()])
                    .args(["--threads", &threads.to_string()])
                    .args(["--start-us", &start.to_string()])
                    .stdout(Stdio::piped())
                    .spawn()
                    .expect("spawn a contender")
            })
            .collect();
        // The server's CPU over the contenders' window (they print only
        // when done, so their pipes do not fill meanwhile).
        let sleep_to =
            |t: u64| std::thread::sleep(Duration::from_micros(t.saturating_sub(wall_us())));
        sleep_to(start);
        let s0 = server_cpu(&url);
        sleep_to(start + seconds * 1_000_000);
        let server = server_cpu(&url).saturating_sub(s0);
        let mut client = Duration::ZERO;
        let mut events = Vec::new();
        let base = Instant::now();
        for (i, mut c) in children.into_iter().enumerate() {
            let out = c.stdout.take().expect("piped");
            for line in BufReader::new(out).lines() {
                let line = line.expect("a line");
                let mut it = line.split(' ');
                let (Some(kind), Some(t), Some(k)) = (it.next(), it.next(), it.next()) else {
                    continue;
                };
                let t: u64 = t.parse().expect("a time");
                if kind == "C" {
                    client += Duration::from_micros(t);
                    continue;
                }
                let k: usize = k.parse().expect("a contender");
                let kind = match kind {
                    "W" => 0,
                    "A" => 1,
                    _ => 2,
                };
                events.push((t, i * contenders + k, kind));
            }
            let status = c.wait().expect("wait for a contender");
            assert!(status.success(), "contender {i} failed");
        }
        let after = commandstats(&url);
        let t0 = events.iter().map(|e| e.0).min().unwrap_or(0);
        let events: Vec<_> = events
            .into_iter()
            .map(|(t, c, k)| (base + Duration::from_micros(t - t0), c, k))
            .collect();
        let (acquisitions, mut lat) = handoffs(events);
        lat.sort();
        let pct = |p: f64| {
            lat.get(((lat.len() as f64 - 1.0) * p).round() as usize)
                .map_or(f64::NAN, |d| d.as_secs_f64() * 1e6)
        };
        let delta =
            |k: &str| after.get(k).copied().unwrap_or(0) - before.get(k).copied().unwrap_or(0);
        let all: u64 = after.values().sum::<u64>() - before.values().sum::<u64>();
        let acq = acquisitions.max(1) as f64;
        let (p50, p99) = (pct(0.5), pct(0.99));
        let quick = lat
            .iter()
            .filter(|d| d.as_secs_f64() * 1e6 < 1.5 * rtt_us)
            .count();
        println!(
            "{round} | {:.0} | {} | {p50:.1} ({:.2}) | {p99:.1} ({:.2}) | {:.0} % | {:.2} | {:.2} | {:.2} | {:.1} | {:.1}",
            acquisitions as f64 / seconds as f64,
            lat.len(),
            p50 / rtt_us,
            p99 / rtt_us,
            100.0 * quick as f64 / lat.len().max(1) as f64,
            delta("evalsha") as f64 / acq,
            (delta("publish") + delta("spublish")) as f64 / acq,
            all as f64 / acq,
            server.as_secs_f64() * 1e6 / acq,
            client.as_secs_f64() * 1e6 / acq,
        );
        let mut per: Vec<_> = after
            .iter()
            .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
            .filter(|(_, v)| *v > 0)
            .collect();
        per.sort_by_key(|e| std::cmp::Reverse(e.1));
        let per: Vec<_> = per
            .iter()
            .map(|(k, v)| format!("{k} {:.2}", *v as f64 / acq))
            .collect();
        println!("  per acquisition: {}", per.join(", "));
    }
}

/// The server's CPU time so far: `INFO cpu`'s used_cpu_sys + used_cpu_user.
fn server_cpu(url: &str) -> Duration {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let text = rt.block_on(async {
        let client = Client::connect(url).await.expect("connect");
        client.info(Some("cpu")).await.expect("INFO cpu")
    });
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Duration::from_secs_f64(field("used_cpu_sys:") + field("used_cpu_user:"))
}

/// `INFO commandstats`: calls per command.
fn commandstats(url: &str) -> HashMap<String, u64> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let client = Client::connect(url).await.expect("connect");
        let text = client.info(Some("commandstats")).await.expect("INFO");
        let mut out = HashMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("cmdstat_") else {
                continue;
            };
            let Some((name, stats)) = rest.split_once(':') else {
                continue;
            };
            let calls = stats
                .split(',')
                .find_map(|f| f.strip_prefix("calls="))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            out.insert(name.to_owned(), calls);
        }
        out
    })
}

/// One process's contenders: waits for the common start, then each of
/// `--contenders` tasks (its own lock handle) acquires (wait up to 1 s),
/// releases, thinks, until the run's end; prints `W|A|R <wall µs> <task>`.
fn child(flags: &Flags, _id: &str) {
    let url = flags.text("--url").expect("--url");
    let name = flags.text("--name").expect("--name");
    let seconds: u64 = flags.number("--seconds", 5);
    let think = Duration::from_millis(flags.number("--think-ms", 1));
    let contenders: usize = flags.number("--contenders", 1);
    let threads: usize = flags.number("--threads", 0);
    let start: u64 = flags.number("--start-us", 0);
    let rt = if threads == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    }
    .expect("a runtime");
    let logs = rt.block_on(async move {
        let locks = Locks::connect(&url).await.expect("connect");
        // Warm: the scripts loaded, the connection up.
        let g = locks
            .lock(&name)
            .try_acquire(Duration::from_secs(5), None)
            .await
            .expect("warm acquire")
            .expect("warm acquire in time");
        g.unlock().await.expect("warm release");
        let now = wall_us();
        if start > now {
            tokio::time::sleep(Duration::from_micros(start - now)).await;
        }
        let end = start + seconds * 1_000_000;
        let cpu0 = process_cpu();
        let tasks: Vec<_> = (0..contenders)
            .map(|_| {
                let lock = locks.lock(&name);
                tokio::spawn(async move {
                    let mut log = Vec::with_capacity(100_000);
                    while wall_us() < end {
                        log.push(('W', wall_us()));
                        let Some(g) = lock
                            .try_acquire(Duration::from_secs(1), None)
                            .await
                            .expect("acquire")
                        else {
                            continue;
                        };
                        let t = wall_us();
                        log.push(('A', t));
                        log.push(('R', t));
                        g.unlock().await.expect("release");
                        tokio::time::sleep(think).await;
                    }
                    log
                })
            })
            .collect();
        let mut logs = Vec::new();
        for t in tasks {
            logs.push(t.await.expect("a contender"));
        }
        (logs, process_cpu().saturating_sub(cpu0))
    });
    let (logs, cpu) = logs;
    let mut out = format!("C {} 0\n", cpu.as_micros());
    for (task, log) in logs.into_iter().enumerate() {
        for (k, t) in log {
            out.push_str(&format!("{k} {t} {task}\n"));
        }
    }
    print!("{out}");
}
