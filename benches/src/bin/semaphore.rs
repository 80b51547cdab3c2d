//! Semaphores vs the reentrant lock, in one run against one local
//! redis-server, through `Locks::connect(url)` as the README shows:
//! 1. 64 tasks, each on its own name: acquire + release pairs/s, with
//!    client and server CPU per pair — keylatch `Semaphore` (1 permit),
//!    `ExpirableSemaphore` (1 leased permit under the watchdog), the
//!    reentrant `Lock`, and redis-rs (multiplexed) running keylatch's own
//!    semaphore scripts; the C floor: redis-benchmark -P 16 EVALSHA of the
//!    semaphore acquire script (capacity, script calls/s ÷ 2).
//! 2. 8 contenders on one name (1 permit; hold 0, think 1 ms): permit
//!    handoff p50 (a release → the next acquisition by a contender already
//!    waiting when it happened), plain and expirable semaphore vs the lock.
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin semaphore -- [--seconds 4]
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keylatch_benches::{
    arg, pid_cpu, process_cpu, redis_benchmark, stopped, summarise, url_or_local_server,
};
use keylatch_lock::scripts::{SEMAPHORE_ACQUIRE, SEMAPHORE_CHANGE};
use keylatch_lock::Locks;

const TASKS: usize = 64;

#[derive(Clone, Copy)]
enum Kind {
    Semaphore,
    Expirable,
    Lock,
}

/// Server CPU so far, when readable.
fn server_cpu(pid: Option<u32>) -> Option<Duration> {
    pid.and_then(pid_cpu)
}

/// Scenario 1 for one kind: (pairs/s, client µs/pair, server µs/pair).
async fn pairs(
    locks: &Locks,
    kind: Kind,
    seconds: u64,
    pid: Option<u32>,
    tag: &str,
) -> (f64, f64, Option<f64>) {
    let stop = Arc::new(AtomicBool::new(false));
    // Set up (permits set, scripts loaded) before the clock starts.
    for t in 0..TASKS {
        let name = format!("{tag}:{t}");
        match kind {
            Kind::Semaphore => {
                locks
                    .semaphore(&name)
                    .try_set_permits(1)
                    .await
                    .expect("set");
            }
            Kind::Expirable => {
                let s = locks.expirable_semaphore(&name);
                s.try_set_permits(1).await.expect("set");
                s.acquire(1)
                    .await
                    .expect("warm")
                    .release()
                    .await
                    .expect("warm");
            }
            Kind::Lock => {}
        }
    }
    let (c0, s0, t0) = (process_cpu(), server_cpu(pid), Instant::now());
    let handles: Vec<_> = (0..TASKS)
        .map(|t| {
            let (locks, stop) = (locks.clone(), Arc::clone(&stop));
            let name = format!("{tag}:{t}");
            tokio::spawn(async move {
                let mut n = 0u64;
                let sem = locks.semaphore(&name);
                let xsem = locks.expirable_semaphore(&name);
                let lock = locks.lock(&name);
                while !stopped(&stop) {
                    match kind {
                        Kind::Semaphore => {
                            sem.acquire_raw(1).await.expect("acquire");
                            sem.release(1).await.expect("release");
                        }
                        Kind::Expirable => {
                            xsem.acquire(1)
                                .await
                                .expect("acquire")
                                .release()
                                .await
                                .expect("release");
                        }
                        Kind::Lock => {
                            lock.acquire()
                                .await
                                .expect("acquire")
                                .unlock()
                                .await
                                .expect("release");
                        }
                    }
                    n += 1;
                }
                n
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut n = 0;
    for h in handles {
        n += h.await.expect("task");
    }
    let wall = t0.elapsed().as_secs_f64();
    let per = |d: Duration| d.as_secs_f64() * 1e6 / n.max(1) as f64;
    let client = per(process_cpu().saturating_sub(c0));
    let server = s0
        .zip(server_cpu(pid))
        .map(|(a, b)| per(b.saturating_sub(a)));
    (n as f64 / wall, client, server)
}

/// Scenario 1 through redis-rs: the same two semaphore scripts.
async fn redis_rs_pairs(url: &str, seconds: u64, pid: Option<u32>) -> (f64, f64, Option<f64>) {
    let client = redis::Client::open(url).expect("redis-rs client");
    let conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis-rs connection");
    let acquire = redis::Script::new(SEMAPHORE_ACQUIRE.source());
    let change = redis::Script::new(SEMAPHORE_CHANGE.source());
    for t in 0..TASKS {
        let mut c = conn.clone();
        let name = format!("rr:{t}");
        let _: () = redis::cmd("SET")
            .arg(&name)
            .arg(1)
            .query_async(&mut c)
            .await
            .expect("set");
        let _: redis::Value = acquire
            .key(&name)
            .arg(1)
            .invoke_async(&mut c)
            .await
            .expect("load");
        let _: redis::Value = change
            .key(&name)
            .arg(1)
            .arg(format!("redisson_sc:{{{name}}}"))
            .arg("publish")
            .invoke_async(&mut c)
            .await
            .expect("load");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (c0, s0, t0) = (process_cpu(), server_cpu(pid), Instant::now());
    let handles: Vec<_> = (0..TASKS)
        .map(|t| {
            let (mut c, stop) = (conn.clone(), Arc::clone(&stop));
            let (acquire, change) = (acquire.clone(), change.clone());
            let name = format!("rr:{t}");
            let channel = format!("redisson_sc:{{{name}}}");
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stopped(&stop) {
                    let _: redis::Value = acquire
                        .key(&name)
                        .arg(1)
                        .invoke_async(&mut c)
                        .await
                        .expect("acquire");
                    let _: i64 = change
                        .key(&name)
                        .arg(1)
                        .arg(&channel)
                        .arg("publish")
                        .invoke_async(&mut c)
                        .await
                        .expect("release");
                    n += 1;
                }
                n
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut n = 0;
    for h in handles {
        n += h.await.expect("task");
    }
    let wall = t0.elapsed().as_secs_f64();
    let per = |d: Duration| d.as_secs_f64() * 1e6 / n.max(1) as f64;
    let client = per(process_cpu().saturating_sub(c0));
    let server = s0
        .zip(server_cpu(pid))
        .map(|(a, b)| per(b.saturating_sub(a)));
    (n as f64 / wall, client, server)
}

/// Scenario 2: (acquisitions/s, handoff p50 µs).
async fn handoff(locks: &Locks, kind: Kind, seconds: u64, name: &str) -> (f64, f64) {
    match kind {
        Kind::Semaphore => {
            locks.semaphore(name).try_set_permits(1).await.expect("set");
        }
        Kind::Expirable => {
            locks
                .expirable_semaphore(name)
                .try_set_permits(1)
                .await
                .expect("set");
        }
        Kind::Lock => {}
    }
    let stop = Arc::new(AtomicBool::new(false));
    // (time, contender, 0 = asks, 1 = acquired, 2 = releases)
    let log: Arc<Mutex<Vec<(Instant, usize, u8)>>> = Arc::new(Mutex::new(Vec::new()));
    let t0 = Instant::now();
    let mut hs = Vec::new();
    for c in 0..8 {
        let (locks, stop, log, name) = (
            locks.clone(),
            Arc::clone(&stop),
            Arc::clone(&log),
            name.to_owned(),
        );
        hs.push(tokio::spawn(async move {
            let sem = locks.semaphore(&name);
            let xsem = locks.expirable_semaphore(&name);
            let lock = locks.lock(&name);
            while !stopped(&stop) {
                log.lock().expect("log").push((Instant::now(), c, 0));
                let wait = Duration::from_secs(5);
                match kind {
                    Kind::Semaphore => {
                        if !sem.try_acquire_raw(1, wait).await.expect("acquire") {
                            continue;
                        }
                        log.lock().expect("log").push((Instant::now(), c, 1));
                        log.lock().expect("log").push((Instant::now(), c, 2));
                        sem.release(1).await.expect("release");
                    }
                    Kind::Expirable => {
                        let Some(g) = xsem.try_acquire(1, wait, None).await.expect("acquire")
                        else {
                            continue;
                        };
                        log.lock().expect("log").push((Instant::now(), c, 1));
                        log.lock().expect("log").push((Instant::now(), c, 2));
                        g.release().await.expect("release");
                    }
                    Kind::Lock => {
                        let Some(g) = lock.try_acquire(wait, None).await.expect("acquire") else {
                            continue;
                        };
                        log.lock().expect("log").push((Instant::now(), c, 1));
                        log.lock().expect("log").push((Instant::now(), c, 2));
                        g.unlock().await.expect("release");
                    }
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
    let elapsed = t0.elapsed();
    let events = log.lock().expect("log").clone();
    let (acquisitions, mut handoffs) = keylatch_benches::handoffs(events);
    let s = summarise(&mut handoffs);
    (
        acquisitions as f64 / elapsed.as_secs_f64(),
        s.p50.as_secs_f64() * 1e6,
    )
}

fn main() {
    let seconds = arg("--seconds", 4);
    let (url, server) = url_or_local_server(None);
    let pid = server.as_ref().and_then(|s| s.pid());
    let port = server.as_ref().map(|s| s.port());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let locks = Locks::connect(&url).await.expect("connect");
        println!("1. {TASKS} tasks, one name each: acquire + release pairs, {seconds} s per row");
        println!("{:<34} {:>10} {:>10} {:>10} {:>14}", "row", "pairs/s", "cli µs", "srv µs", "vs Lock pairs/s");
        let lock = pairs(&locks, Kind::Lock, seconds, pid, "p-lock").await;
        let rows = [
            ("keylatch Lock (reentrant)", lock),
            ("keylatch Semaphore", pairs(&locks, Kind::Semaphore, seconds, pid, "p-sem").await),
            ("keylatch ExpirableSemaphore", pairs(&locks, Kind::Expirable, seconds, pid, "p-xsem").await),
            ("redis-rs, keylatch's semaphore scripts", redis_rs_pairs(&url, seconds, pid).await),
        ];
        for (label, (rate, cli, srv)) in rows {
            println!(
                "{label:<34} {rate:>10.0} {cli:>10.1} {:>10} {:>14.2}",
                srv.map_or("n/a".to_owned(), |s| format!("{s:.1}")),
                rate / lock.0
            );
        }
        if let Some(port) = port {
            let sha = SEMAPHORE_ACQUIRE.sha1().to_owned();
            if let Some(f) = redis_benchmark(port, &["-P", "16", "-n", "200000", "EVALSHA", &sha, "1", "floor:sem", "0"]) {
                println!(
                    "C floor (redis-benchmark -P 16 EVALSHA semaphore_acquire): {:.0} calls/s = {:.0} pairs/s capacity",
                    f.rps,
                    f.rps / 2.0
                );
            }
        }
        println!();
        println!("2. 8 contenders on one name (1 permit), hold 0, think 1 ms, {seconds} s per row");
        println!("{:<34} {:>10} {:>14} {:>16}", "row", "acq/s", "handoff p50 µs", "vs Lock handoff");
        let l = handoff(&locks, Kind::Lock, seconds, "h-lock").await;
        let rows = [
            ("keylatch Lock (reentrant)", l),
            ("keylatch Semaphore", handoff(&locks, Kind::Semaphore, seconds, "h-sem").await),
            ("keylatch ExpirableSemaphore", handoff(&locks, Kind::Expirable, seconds, "h-xsem").await),
        ];
        for (label, (rate, p50)) in rows {
            println!("{label:<34} {rate:>10.0} {p50:>14.1} {:>16.2}", p50 / l.1);
        }
    });
    drop(server);
}
