//! Lock benchmarks: keylatch vs redis-rs running the same two scripts vs
//! rslock, with redis-benchmark's EVALSHA as the floor, in one run against
//! one local redis-server (started here unless `--url` is given).
//!
//! Scenarios (clients alternate, order flipped every round):
//! 1. uncontended acquire+release, sequential: p50, p99;
//! 2. 64 tasks on distinct locks, one client: pairs/s and client CPU per pair;
//! 3. 8 contenders on one lock, hold 0, think 1 ms: acquisitions/s and
//!    handoff p50 (release → another contender holds it), vs a 1 ms polling
//!    loop (SET NX PX, sleep 1 ms on failure);
//! 4. 10,000 held locks: renewal script calls per interval, client memory.
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin locks -- [--rounds 3] [--seconds 3]
//! ```
//!
//! Diagnostics (one client, one scenario): `--profile-seq N` and
//! `--profile-distinct N` (keylatch, or redis-rs with `--redis-rs`),
//! `--runtime current`, `--held-only` (the 10,000 held locks alone), `--sizes` (future sizes on the request path),
//! `--floor-check [--get [--raw]|--fixed]` (one request at a time vs
//! redis-benchmark; `--raw`: a bare tokio TcpStream, the runtime's own floor).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keylatch_benches::{arg, for_seconds, process_cpu, redis_benchmark, stopped, summarise};
use keylatch_cluster::{Client, Commands, SetCondition, SetOptions};
use keylatch_harness::rss_kib;
use keylatch_lock::scripts::{REENTRANT_ACQUIRE, REENTRANT_RELEASE};
use keylatch_lock::{Locks, LocksConfig};

#[derive(Clone)]
enum Contender {
    Keylatch(Locks),
    RedisRs(
        redis::aio::MultiplexedConnection,
        Arc<(redis::Script, redis::Script)>,
    ),
    RsLock(Arc<rslock::LockManager>),
}

impl Contender {
    fn name(&self) -> &'static str {
        match self {
            Contender::Keylatch(_) => "keylatch",
            Contender::RedisRs(..) => "redis-rs (same scripts)",
            Contender::RsLock(_) => "rslock",
        }
    }

    /// Per-task state built once, as an application would keep a lock
    /// handle (or its key names) rather than rebuild them per use.
    fn prepare(&self, name: &str, owner: &str) -> Prepared {
        Prepared {
            lock: match self {
                Contender::Keylatch(locks) => Some(locks.lock_with_owner(name, owner)),
                _ => None,
            },
            name: name.to_owned(),
            owner: owner.to_owned(),
            token: format!("redisson_lock_token:{{{name}}}"),
            channel: format!("redisson_lock__channel:{{{name}}}"),
        }
    }

    /// One uncontended acquire + release.
    async fn pair(&mut self, p: &Prepared) {
        match self {
            Contender::Keylatch(_) => {
                let lock = p.lock.as_ref().expect("prepared");
                let g = lock
                    .try_acquire_now(None)
                    .await
                    .expect("keylatch acquire")
                    .expect("uncontended");
                g.unlock().await.expect("keylatch release");
            }
            Contender::RedisRs(conn, scripts) => {
                let r: redis::Value = scripts
                    .0
                    .key(&p.name)
                    .key(&p.token)
                    .arg(30_000)
                    .arg(&p.owner)
                    .arg(86_400_000)
                    .arg("1")
                    .invoke_async(conn)
                    .await
                    .expect("redis-rs acquire");
                let fence = match r {
                    redis::Value::Array(v) => match v.get(1) {
                        Some(redis::Value::Int(t)) => *t,
                        _ => 0,
                    },
                    _ => 0,
                };
                let _: Option<i64> = scripts
                    .1
                    .key(&p.name)
                    .key(&p.channel)
                    .key(&p.token)
                    .arg("0")
                    .arg(30_000)
                    .arg(&p.owner)
                    .arg("publish")
                    .arg(fence)
                    .invoke_async(conn)
                    .await
                    .expect("redis-rs release");
            }
            Contender::RsLock(lm) => {
                let lock = lm
                    .lock(p.name.as_bytes(), Duration::from_secs(30))
                    .await
                    .expect("rslock acquire");
                lm.unlock(&lock).await;
            }
        }
    }
}

struct Prepared {
    lock: Option<keylatch_lock::Lock>,
    name: String,
    owner: String,
    token: String,
    channel: String,
}

fn main() {
    let rounds = arg("--rounds", 3) as usize;
    let seconds = arg("--seconds", 3);
    let server = keylatch_harness::RedisServer::start();
    let url = server.url();
    let port = server.port();
    // `--runtime current`: one thread, so client CPU is the clients' own
    // work rather than the multi-thread scheduler's wake-ups between workers.
    let current = std::env::args()
        .collect::<Vec<_>>()
        .windows(2)
        .any(|w| w[0] == "--runtime" && w[1] == "current");
    let rt = if current {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    }
    .expect("runtime");
    rt.block_on(async move {
        tokio::spawn(async move { run(url, port, rounds, seconds).await })
            .await
            .expect("bench task");
    });
    drop(server);
}

async fn run(url: String, port: u16, rounds: usize, seconds: u64) {
    let locks = Locks::new(
        Client::connect(&url).await.expect("keylatch"),
        LocksConfig::default(),
    );
    let rr = redis::Client::open(url.as_str())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("redis-rs");
    let scripts = Arc::new((
        redis::Script::new(REENTRANT_ACQUIRE.source()),
        redis::Script::new(REENTRANT_RELEASE.source()),
    ));
    let rs = Arc::new(rslock::LockManager::new(vec![url.clone()]));
    if std::env::args().any(|a| a == "--sizes") {
        // Future sizes on the request path: each is memcpy'd when moved.
        let lock = locks.lock_with_owner("size", "size:1");
        let conn = locks
            .client()
            .connection_for_key("size")
            .await
            .expect("conn");
        println!(
            "try_acquire {} B, acquire {} B, eval_script {} B, conn.send {} B",
            std::mem::size_of_val(&lock.try_acquire(Duration::ZERO, None)),
            std::mem::size_of_val(&lock.acquire()),
            std::mem::size_of_val(
                &locks
                    .client()
                    .eval_script(&REENTRANT_ACQUIRE, &["a"], &["b"])
            ),
            std::mem::size_of_val(&conn.send(keylatch_resp::Cmd::new("PING"))),
        );
        return;
    }
    // Profiling modes: one client, one scenario (`--redis-rs` picks redis-rs).
    let solo = if std::env::args().any(|a| a == "--redis-rs") {
        Contender::RedisRs(
            rr.clone(),
            Arc::new((
                redis::Script::new(REENTRANT_ACQUIRE.source()),
                redis::Script::new(REENTRANT_RELEASE.source()),
            )),
        )
    } else {
        Contender::Keylatch(locks.clone())
    };
    if std::env::args().any(|a| a == "--floor-check") {
        // One request at a time, keylatch vs redis-benchmark -c 1 back to
        // back (`--get`: GET; `--fixed`: the acquire script on one key, as
        // redis-benchmark without -r sends it): p50, mean and full cycle
        // (1 / rate). redis-benchmark's percentiles come in ~8 µs steps and
        // time only write→reply, so the cycle is the fairer comparison.
        let client = locks.client().clone();
        let mut lat = Vec::new();
        let get = std::env::args().any(|a| a == "--get");
        // `--raw`: the same GETs over a bare tokio TcpStream (write, read,
        // no connection task, no channels): tokio's own floor.
        let mut raw = if std::env::args().any(|a| a == "--raw") {
            Some(
                tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .expect("raw connect"),
            )
        } else {
            None
        };
        let started = Instant::now();
        for i in 0..20_000u32 {
            if let Some(sock) = raw.as_mut() {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = [0u8; 64];
                let t = Instant::now();
                sock.write_all(b"*2\r\n$3\r\nGET\r\n$7\r\nfloor:k\r\n")
                    .await
                    .expect("raw write");
                let _ = sock.read(&mut buf).await.expect("raw read");
                lat.push(t.elapsed());
                continue;
            }
            if get {
                let t = Instant::now();
                let _ = client.get("floor:k").await;
                lat.push(t.elapsed());
                continue;
            }
            let key = if std::env::args().any(|a| a == "--fixed") {
                "floor:__rand_int__".to_owned()
            } else {
                format!("floor:{}", i % 100_000)
            };
            let t = Instant::now();
            let _ = client
                .eval_script(
                    &REENTRANT_ACQUIRE,
                    &[key.as_str(), "floor:t"],
                    &["30000", "o:1", "60000", "1"],
                )
                .await;
            lat.push(t.elapsed());
        }
        let loop_time = started.elapsed();
        let mean = lat.iter().sum::<Duration>() / lat.len().max(1) as u32;
        let s = summarise(&mut lat);
        let c = if get {
            redis_benchmark(port, &["-c", "1", "-n", "20000", "GET", "floor:k"])
        } else {
            acquire_floor(port, &["-c", "1", "-n", "20000"])
        };
        println!(
            "{}: p50 keylatch {:.1} µs, redis-benchmark -c 1 {:.1} µs; mean keylatch {:.1} µs, redis-benchmark {:.1} µs; cycle (1/rate) keylatch {:.1} µs, redis-benchmark {:.1} µs",
            if get { "GET" } else { "acquire EVALSHA" },
            s.p50.as_secs_f64() * 1e6,
            c.as_ref().map_or(f64::NAN, |c| c.p50_ms * 1000.0),
            mean.as_secs_f64() * 1e6,
            c.as_ref().map_or(f64::NAN, |c| c.avg_ms * 1000.0),
            loop_time.as_secs_f64() * 1e6 / 20_000.0,
            c.as_ref().map_or(f64::NAN, |c| 1e6 / c.rps)
        );
        return;
    }
    if std::env::args().any(|a| a == "--held-only") {
        // Just the 10,000 held locks: renewal calls and client memory alone,
        // without the heap the other scenarios leave behind.
        let (calls, per_round, mem_kib) = many_held(&url).await;
        println!(
            "10,000 held locks: {calls} renewal calls ({per_round:.1} per round); client RSS +{mem_kib} KiB ({} B per hold)",
            mem_kib * 1024 / 10_000
        );
        return;
    }
    let profile_seq = arg("--profile-seq", 0);
    if profile_seq > 0 {
        let mut c = solo;
        let p = c.prepare("seq-lock", "bench:1");
        let start = Instant::now();
        let mut lat = Vec::new();
        let cpu0 = process_cpu();
        while start.elapsed() < Duration::from_secs(profile_seq) {
            let t = Instant::now();
            c.pair(&p).await;
            lat.push(t.elapsed());
        }
        let cpu = process_cpu() - cpu0;
        let n = lat.len();
        let s = summarise(&mut lat);
        println!(
            "{} sequential: {n} pairs, p50 {:.1} µs, {:.2} µs CPU per pair",
            c.name(),
            s.p50.as_secs_f64() * 1e6,
            cpu.as_secs_f64() * 1e6 / n.max(1) as f64
        );
        return;
    }
    let profile = arg("--profile-distinct", 0);
    if profile > 0 {
        let (p, c, w) = distinct(&solo, profile).await;
        println!(
            "{} 64 tasks: {:.0} pairs/s, {:.2} µs CPU per pair",
            solo.name(),
            p as f64 / w.as_secs_f64(),
            c.as_secs_f64() * 1e6 / p.max(1) as f64
        );
        return;
    }
    let mut cs = [
        Contender::Keylatch(locks.clone()),
        Contender::RedisRs(rr, scripts),
        Contender::RsLock(rs),
    ];
    let n = cs.len();

    // 1. Uncontended sequential pairs, in blocks of 250 per client.
    let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); n];
    let mut pairs = vec![0u64; n];
    let mut cpu = vec![Duration::ZERO; n];
    let mut wall = vec![Duration::ZERO; n];
    // Floors from redis-benchmark (C): one EVALSHA of the acquire script,
    // measured in every round right after the sequential pairs (the
    // machine's speed drifts; a floor from another minute is no floor).
    let _ = locks
        .client()
        .eval_script(
            &REENTRANT_ACQUIRE,
            &["floor", "floor:t"],
            &["30000", "o:1", "60000", "1"],
        )
        .await;
    let evalsha = |extra: &[&str]| acquire_floor(port, extra);
    let mut floors: Vec<f64> = Vec::new();
    // redis-benchmark's exact means too: its p50 moves in ~8 µs steps here.
    let mut floor_means: Vec<f64> = Vec::new();
    for round in 0..rounds {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..n).collect()
        } else {
            (0..n).rev().collect()
        };
        let warm: Vec<Prepared> = cs.iter().map(|c| c.prepare("warm", "warm:1")).collect();
        let seq: Vec<Prepared> = cs
            .iter()
            .map(|c| c.prepare("seq-lock", "bench:1"))
            .collect();
        for &i in &order {
            for _ in 0..200 {
                cs[i].pair(&warm[i]).await;
            }
        }
        for _block in 0..8 {
            for &i in &order {
                for _ in 0..250 {
                    let t = Instant::now();
                    cs[i].pair(&seq[i]).await;
                    lat[i].push(t.elapsed());
                }
            }
        }
        // `-r`: a fresh lock name per call, so the floor runs the script's
        // first-acquire path as an uncontended pair does (without it every
        // call re-enters one hold: a cheaper path, no new keys, no token).
        if let Some(f) = evalsha(&["-c", "1", "-n", "5000", "-r", "10000000"]) {
            floors.push(2.0 * f.p50_ms * 1000.0);
            floor_means.push(2.0 * f.avg_ms * 1000.0);
        }
        // 2. 64 tasks, distinct locks, one client.
        for &i in &order {
            let (p, c, w) = distinct(&cs[i], seconds).await;
            pairs[i] += p;
            cpu[i] += c;
            wall[i] += w;
        }
        eprintln!("round {} of {rounds} done", round + 1);
    }

    // 3. Contention: 8 contenders, one lock, think 1 ms.
    let (k_rate, k_handoff) = contended_keylatch(&locks, seconds * 2).await;
    let poll_rate = contended_polling(locks.client(), seconds * 2).await;

    // 4. 10,000 held locks.
    let (calls, per_round, mem_kib) = many_held(&url).await;

    let cap = evalsha(&["-c", "4", "-P", "16", "-n", "400000", "-r", "100000"]);

    let means: Vec<f64> = lat
        .iter()
        .map(|v| v.iter().sum::<Duration>().as_secs_f64() * 1e6 / v.len().max(1) as f64)
        .collect();
    let s: Vec<_> = lat.iter_mut().map(|v| summarise(v)).collect();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!();
    println!(
        "rounds {rounds}, {} sequential pairs per client, 64 tasks × {seconds} s per round",
        s[0].n
    );
    println!(
        "{:<44} {:>12} {:>24} {:>12}",
        "scenario",
        cs[0].name(),
        cs[1].name(),
        cs[2].name()
    );
    println!(
        "{:<44} {:>12.1} {:>24.1} {:>12.1}",
        "uncontended pair p50 (µs)",
        us(s[0].p50),
        us(s[1].p50),
        us(s[2].p50)
    );
    println!(
        "{:<44} {:>12.1} {:>24.1} {:>12.1}",
        "uncontended pair p99 (µs)",
        us(s[0].p99),
        us(s[1].p99),
        us(s[2].p99)
    );
    let rate = |i: usize| pairs[i] as f64 / wall[i].as_secs_f64();
    let cpp = |i: usize| cpu[i].as_secs_f64() * 1e6 / pairs[i].max(1) as f64;
    println!(
        "{:<44} {:>12.0} {:>24.0} {:>12.0}",
        "64 tasks distinct locks (pairs/s)",
        rate(0),
        rate(1),
        rate(2)
    );
    println!(
        "{:<44} {:>12.2} {:>24.2} {:>12.2}",
        "client CPU per pair (µs)",
        cpp(0),
        cpp(1),
        cpp(2)
    );
    println!();
    println!("ratios: keylatch/redis-rs p50 {:.2}, pairs/s {:.2}, CPU/pair {:.2}; keylatch/rslock p50 {:.2}, pairs/s {:.2}",
        us(s[0].p50) / us(s[1].p50), rate(0) / rate(1), cpp(0) / cpp(1), us(s[0].p50) / us(s[2].p50), rate(0) / rate(2));
    if !floors.is_empty() {
        floors.sort_by(f64::total_cmp);
        let floor = floors[floors.len() / 2];
        println!(
            "floor: 2 × redis-benchmark -c 1 EVALSHA p50 = {floor:.1} µs (median of {} rounds: {:?}); keylatch p50 / floor = {:.2}",
            floors.len(),
            floors,
            us(s[0].p50) / floor
        );
        floor_means.sort_by(f64::total_cmp);
        let mean_floor = floor_means[floor_means.len() / 2];
        println!(
            "  by means: keylatch {:.1} µs, redis-rs {:.1} µs, 2 × redis-benchmark mean {mean_floor:.1} µs; keylatch / floor = {:.2}",
            means[0],
            means[1],
            means[0] / mean_floor
        );
    }
    if let Some(cap) = cap {
        println!(
            "server capacity: redis-benchmark -P 16 EVALSHA {:.0}/s ÷ 2 = {:.0} pairs/s; keylatch reaches {:.2} of it",
            cap.rps,
            cap.rps / 2.0,
            rate(0) / (cap.rps / 2.0)
        );
    }
    println!(
        "8 contenders, 1 lock, think 1 ms: keylatch {k_rate:.0} acq/s, handoff p50 {:.1} µs; 1 ms polling loop {poll_rate:.0} acq/s (ratio {:.1})",
        us(k_handoff),
        k_rate / poll_rate.max(1.0)
    );
    println!(
        "10,000 held locks: {calls} renewal calls over 3 intervals ({per_round:.1} per round, one round per interval); client RSS +{mem_kib} KiB ({} B per hold)",
        mem_kib * 1024 / 10_000
    );
}

async fn distinct(c: &Contender, seconds: u64) -> (u64, Duration, Duration) {
    for_seconds(64, seconds, |t, stop| {
        let mut c = c.clone();
        async move {
            let p = c.prepare(&format!("distinct:{t}"), &format!("bench:{t}"));
            let mut n = 0u64;
            while !stopped(&stop) {
                c.pair(&p).await;
                n += 1;
            }
            n
        }
    })
    .await
}

/// (acquisitions/s, handoff p50). Handoff: from a release to the next
/// acquisition by a contender that was already waiting when it happened.
async fn contended_keylatch(locks: &Locks, seconds: u64) -> (f64, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    // (event time, contender, kind: 0 = started waiting, 1 = acquired, 2 = released)
    let log: Arc<Mutex<Vec<(Instant, usize, u8)>>> = Arc::new(Mutex::new(Vec::new()));
    let t0 = Instant::now();
    let mut hs = Vec::new();
    for c in 0..8 {
        let lock = locks.lock("contended");
        let stop = Arc::clone(&stop);
        let log = Arc::clone(&log);
        hs.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                log.lock().expect("log").push((Instant::now(), c, 0));
                let Some(g) = lock
                    .try_acquire(Duration::from_secs(5), None)
                    .await
                    .expect("acquire")
                else {
                    continue;
                };
                log.lock().expect("log").push((Instant::now(), c, 1));
                log.lock().expect("log").push((Instant::now(), c, 2));
                g.unlock().await.expect("release");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.await.expect("task");
    }
    let elapsed = t0.elapsed();
    let mut events = log.lock().expect("log").clone();
    events.sort_by_key(|e| e.0);
    let acquisitions = events.iter().filter(|e| e.2 == 1).count();
    let mut waiting_since: [Option<Instant>; 8] = [None; 8];
    let mut last_release: Option<(Instant, usize)> = None;
    let mut handoffs = Vec::new();
    for (t, c, kind) in events {
        match kind {
            0 => waiting_since[c] = Some(t),
            1 => {
                if let (Some((rt, rc)), Some(ws)) = (last_release, waiting_since[c]) {
                    if rc != c && ws < rt {
                        handoffs.push(t.duration_since(rt));
                    }
                }
                waiting_since[c] = None;
            }
            _ => last_release = Some((t, c)),
        }
    }
    let s = summarise(&mut handoffs);
    (acquisitions as f64 / elapsed.as_secs_f64(), s.p50)
}

/// A naive lock: SET NX PX, sleep 1 ms on failure; DEL to release.
async fn contended_polling(client: &Client, seconds: u64) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let mut hs = Vec::new();
    for c in 0..8 {
        let client = client.clone();
        let stop = Arc::clone(&stop);
        let count = Arc::clone(&count);
        hs.push(tokio::spawn(async move {
            let opts = SetOptions::default()
                .condition(SetCondition::IfAbsent)
                .expire(Duration::from_secs(30));
            while !stop.load(Ordering::Relaxed) {
                if client.set_with("polled", c, opts).await.expect("SET NX") {
                    count.fetch_add(1, Ordering::Relaxed);
                    client.del(["polled"]).await.expect("DEL");
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.await.expect("task");
    }
    count.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64()
}

/// (renewal calls over 3 intervals, per interval, RSS growth in KiB).
async fn many_held(url: &str) -> (u64, f64, u64) {
    let lease = Duration::from_millis(1500);
    let locks = Locks::new(
        Client::connect(url).await.expect("client"),
        LocksConfig::default().watchdog_timeout(lease),
    );
    let before = rss_kib();
    let mut hs = Vec::new();
    for chunk in 0..20 {
        let locks = locks.clone();
        hs.push(tokio::spawn(async move {
            let mut gs = Vec::with_capacity(500);
            for i in 0..500 {
                let l = locks.lock(&format!("held:{chunk}:{i}"));
                gs.push(
                    l.try_acquire_now(None)
                        .await
                        .expect("acquire")
                        .expect("free"),
                );
            }
            gs
        }));
    }
    let mut guards = Vec::new();
    for h in hs {
        guards.extend(h.await.expect("task"));
    }
    let mem = rss_kib().saturating_sub(before);
    // Start just after a round, so the window holds whole rounds.
    let r = locks.renewal_rounds();
    // Bounded: rounds come every interval (500 ms here).
    let give_up = Instant::now() + Duration::from_secs(10);
    while locks.renewal_rounds() == r && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (c0, r0) = (locks.renewal_calls(), locks.renewal_rounds());
    let interval = lease / 3;
    tokio::time::sleep(interval * 3).await;
    let calls = locks.renewal_calls() - c0;
    let rounds = locks.renewal_rounds() - r0;
    for g in guards {
        let _ = g.unlock().await;
    }
    (calls, calls as f64 / rounds.max(1) as f64, mem)
}

/// redis-benchmark (the C floor) running the acquire script by EVALSHA with
/// `extra` options first. The key is `floor:__rand_int__`: a fresh name per
/// call under `-r N`, one literal name (every call a re-entry) without.
fn acquire_floor(port: u16, extra: &[&str]) -> Option<keylatch_benches::CFloor> {
    let sha = REENTRANT_ACQUIRE.sha1().to_owned();
    let mut a: Vec<&str> = extra.to_vec();
    a.extend([
        "EVALSHA",
        &sha,
        "2",
        "floor:__rand_int__",
        "floor:t",
        "30000",
        "o:1",
        "60000",
        "1",
    ]);
    redis_benchmark(port, &a)
}
