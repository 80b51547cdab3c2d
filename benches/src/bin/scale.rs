//! `scale`: one client holding many watchdog locks (issue 31's goal point),
//! and Redisson's renewal on the same number of holds, in one run.
//!
//! keylatch, as the README shows users (`Locks::connect_with` on the URL,
//! only the watchdog lease set):
//! 1. acquires `--holds N` watchdog locks, `--inflight K` acquires at a
//!    time: holds/s, acquires failed;
//! 2. idles `--rounds R` renewal rounds (a round every third of
//!    `--watchdog-ms`): renewal calls per round, server CPU per round and per
//!    renewed hold, client CPU per round, holds lost;
//! 3. releases them all: client memory per hold while held, and what is
//!    given back after the release.
//!
//! Redisson, on its own layout (a hash per lock, `owner → count`, with a
//! PEXPIRE): the same N hashes renewed once by `LockTask`'s renewal script,
//! chunks of 100 locks per EVALSHA (hexists + pexpire per lock), `K` calls
//! in flight: server CPU per renewed hold, the figure keylatch's is compared
//! with.
//!
//! Server CPU is `INFO cpu`'s used_cpu_sys + used_cpu_user read around each
//! phase (any server, local or not); client CPU is this process's, from
//! /proc/self/stat (10 ms ticks); memory is this process's resident set.
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin scale -- \
//!     [--holds 100000] [--inflight 256] [--watchdog-ms 3000] [--rounds 3] [--url redis://…]
//!     [--tracking off]
//! ```
//!
//! `--tracking off` (a diagnostic, not the users' path): `Locks::new` on a
//! plain `Client::connect`, without the client tracking `Locks::connect`
//! turns on, to show what tracking costs per renewed hold.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_benches::{process_cpu, url_or_local_server, Flags};
use keylatch_cluster::{Client, ClientConfig, Commands};
use keylatch_harness::rss_kib;
use keylatch_lock::{LockGuard, Locks, LocksConfig};
use keylatch_resp::Cmd;

/// Redisson's chunked watchdog renewal (`LockTask`): for each lock, if its
/// owner still holds it, PEXPIRE it to the lease; 1 renewed, 0 gone.
const REDISSON_RENEW: &str = "local result = {} \
for i = 1, #KEYS, 1 do \
  if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then \
    redis.call('pexpire', KEYS[i], ARGV[1]); table.insert(result, 1); \
  else table.insert(result, 0); end; \
end; return result;";

/// Locks per Redisson renewal call (its default chunk).
const REDISSON_CHUNK: usize = 100;

fn main() {
    let flags = Flags::parse(&[
        "--holds",
        "--inflight",
        "--watchdog-ms",
        "--rounds",
        "--url",
        "--tracking",
    ]);
    let tracking = flags.text("--tracking").as_deref() != Some("off");
    let holds: usize = flags.number("--holds", 100_000);
    let inflight: usize = flags.number("--inflight", 256);
    let watchdog = Duration::from_millis(flags.number("--watchdog-ms", 3000));
    let rounds: u32 = flags.number("--rounds", 3);
    let url = flags.text("--url");
    let (url, _server) = url_or_local_server(url.as_deref());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(&url, holds, inflight, watchdog, rounds, tracking));
}

async fn run(
    url: &str,
    holds: usize,
    inflight: usize,
    watchdog: Duration,
    rounds: u32,
    tracking: bool,
) {
    let admin = Client::connect(url).await.expect("admin client");
    admin.send(Cmd::new("FLUSHALL")).await.expect("flushall");
    println!(
        "scale: {holds} watchdog holds, {inflight} acquires in flight, watchdog {watchdog:?} \
         (a round every {:?}), {rounds} rounds idle",
        watchdog / 3
    );
    let config = LocksConfig::default().watchdog_timeout(watchdog);
    let locks = if tracking {
        Locks::connect_with(ClientConfig::from_url(url).expect("url"), config)
            .await
            .expect("client")
    } else {
        println!("(tracking off: Locks::new on Client::connect)");
        Locks::new(Client::connect(url).await.expect("client"), config)
    };
    let rss0 = rss_kib();

    // 1. Acquire.
    let t0 = Instant::now();
    let (guards, failed) = acquire_all(&locks, holds, inflight).await;
    let took = t0.elapsed();
    let rss1 = rss_kib();
    println!(
        "acquire: {} held, {failed} failed, in {:.2} s = {:.0} holds/s",
        guards.len(),
        took.as_secs_f64(),
        guards.len() as f64 / took.as_secs_f64()
    );
    println!(
        "client memory while held: +{} KiB = {} B per hold",
        rss1.saturating_sub(rss0),
        rss1.saturating_sub(rss0) * 1024 / guards.len().max(1) as u64
    );

    // 2. Idle rounds: start just after one, so the window holds whole rounds.
    let r = locks.renewal_rounds();
    let give_up = Instant::now() + watchdog * 4;
    while locks.renewal_rounds() == r && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (c0, r0) = (locks.renewal_calls(), locks.renewal_rounds());
    let (s0, p0) = (server_cpu(&admin).await, process_cpu());
    tokio::time::sleep(watchdog / 3 * rounds).await;
    let (s1, p1) = (server_cpu(&admin).await, process_cpu());
    let calls = locks.renewal_calls() - c0;
    let done = (locks.renewal_rounds() - r0).max(1);
    let lost = guards.iter().filter(|g| g.is_lost()).count();
    let server = s1.saturating_sub(s0);
    let renewed = guards.len() as f64 * done as f64;
    println!(
        "idle: {done} rounds, {calls} renewal calls ({:.0} per round), server CPU {:.1} ms per round \
         = {:.2} µs per renewed hold ({:.1} % of a core), client CPU {:.1} ms per round, {lost} lost",
        calls as f64 / done as f64,
        server.as_secs_f64() * 1e3 / done as f64,
        server.as_secs_f64() * 1e6 / renewed,
        server.as_secs_f64() * 100.0 / (watchdog / 3 * rounds).as_secs_f64(),
        p1.saturating_sub(p0).as_secs_f64() * 1e3 / done as f64,
    );
    let keylatch_per_hold = server.as_secs_f64() * 1e6 / renewed;

    // 3. Release.
    let n = guards.len();
    release_all(guards, inflight).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss2 = rss_kib();
    println!(
        "after release: client memory +{} KiB over the start ({} B per former hold still held)",
        rss2.saturating_sub(rss0),
        rss2.saturating_sub(rss0) * 1024 / n.max(1) as u64
    );
    drop(locks);

    // Redisson's renewal on the same number of locks.
    let redisson = redisson_round(&admin, holds, inflight, watchdog).await;
    println!(
        "Redisson LockTask renewal: {:.2} µs server CPU per renewed hold; keylatch / Redisson = {:.2}",
        redisson,
        keylatch_per_hold / redisson
    );
}

/// Acquires `holds` locks, `inflight` at a time; (guards, failures).
async fn acquire_all(locks: &Locks, holds: usize, inflight: usize) -> (Vec<LockGuard>, usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..inflight {
        let (locks, next) = (locks.clone(), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            let (mut got, mut failed) = (Vec::new(), 0usize);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= holds {
                    break (got, failed);
                }
                match locks
                    .lock(&format!("scale:{i}"))
                    .try_acquire_now(None)
                    .await
                {
                    Ok(Some(g)) => got.push(g),
                    _ => failed += 1,
                }
            }
        }));
    }
    let (mut guards, mut failed) = (Vec::with_capacity(holds), 0);
    for t in tasks {
        let (g, f) = t.await.expect("task");
        guards.extend(g);
        failed += f;
    }
    (guards, failed)
}

/// Unlocks every guard, `inflight` at a time.
async fn release_all(guards: Vec<LockGuard>, inflight: usize) {
    let queue = Arc::new(std::sync::Mutex::new(guards));
    let mut tasks = Vec::new();
    for _ in 0..inflight {
        let queue = Arc::clone(&queue);
        tasks.push(tokio::spawn(async move {
            loop {
                let g = queue.lock().expect("queue").pop();
                match g {
                    Some(g) => {
                        let _ = g.unlock().await;
                    }
                    None => break,
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
}

/// Sets up `holds` locks on Redisson's layout, renews them all once with
/// Redisson's chunked script, and returns the server CPU per renewed hold
/// in µs.
async fn redisson_round(admin: &Client, holds: usize, inflight: usize, lease: Duration) -> f64 {
    admin.send(Cmd::new("FLUSHALL")).await.expect("flushall");
    let owner = "9c1a3f2e-0000-4000-8000-000000000000:1";
    let lease_ms = lease.as_millis().to_string();
    // The layout, in pipelines of 1,000 (not measured).
    for start in (0..holds).step_by(1000) {
        let p: keylatch_cluster::Pipeline = (start..(start + 1000).min(holds))
            .flat_map(|i| {
                let key = format!("rscale:{i}");
                [
                    Cmd::new("HSET").key(key.as_str()).arg(owner).arg(1),
                    Cmd::new("PEXPIRE").key(key.as_str()).arg(lease_ms.as_str()),
                ]
            })
            .collect();
        admin.pipeline(p).await.expect("layout");
    }
    let sha = admin.script_load(REDISSON_RENEW).await.expect("load");
    let chunks: Vec<usize> = (0..holds).step_by(REDISSON_CHUNK).collect();
    let next = Arc::new(AtomicUsize::new(0));
    let chunks = Arc::new(chunks);
    let s0 = server_cpu(admin).await;
    let mut tasks = Vec::new();
    for _ in 0..inflight.min(chunks.len()).max(1) {
        let (admin, next, chunks, sha) = (
            admin.clone(),
            Arc::clone(&next),
            Arc::clone(&chunks),
            sha.clone(),
        );
        let lease_ms = lease_ms.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let c = next.fetch_add(1, Ordering::Relaxed);
                let Some(&start) = chunks.get(c) else { break };
                let end = (start + REDISSON_CHUNK).min(holds);
                let keys: Vec<String> = (start..end).map(|i| format!("rscale:{i}")).collect();
                let mut args = vec![lease_ms.clone()];
                args.extend((start..end).map(|_| owner.to_owned()));
                admin.evalsha(&sha, keys, args).await.expect("renew");
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    let s1 = server_cpu(admin).await;
    admin.send(Cmd::new("FLUSHALL")).await.expect("flushall");
    s1.saturating_sub(s0).as_secs_f64() * 1e6 / holds as f64
}

/// The server's CPU time so far (`INFO cpu`: used_cpu_sys + used_cpu_user).
async fn server_cpu(admin: &Client) -> Duration {
    let info = admin.info(Some("cpu")).await.expect("INFO cpu");
    let field = |name: &str| -> f64 {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    Duration::from_secs_f64(field("used_cpu_sys:") + field("used_cpu_user:"))
}
