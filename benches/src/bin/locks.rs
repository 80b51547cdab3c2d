//! Lock benchmarks: keylatch vs redis-rs running keylatch's own two scripts
//! vs redis-rs running Redisson's RLock scripts vs rslock, with
//! redis-benchmark's EVALSHA as the floor, in one run against one local
//! redis-server (started here unless `--url` is given).
//!
//! Contenders:
//! - keylatch, built as the README shows users: `Locks::connect(url)` (its
//!   own client, RESP3 with client-side tracking, default `LocksConfig`);
//! - redis-rs (same scripts): redis-rs's multiplexed connection running
//!   `lock/lua/reentrant_acquire.lua` and `lock/lua/reentrant_release.lua`
//!   (fencing on), with the arguments their headers list ([`same_acquire`],
//!   [`same_release`]);
//! - redis-rs (Redisson scripts): the same connection running Redisson's
//!   `RLock` scripts (exists/hexists → hincrby + pexpire; hexists → hincrby -1
//!   → pexpire, or del + publish), no fencing: what a Redisson-style lock costs;
//! - rslock (SET NX PX, Lua compare-and-delete).
//!
//! Scenarios (clients alternate, order flipped every round):
//! 1. uncontended acquire+release, sequential: p50, p99, client and server
//!    CPU per pair;
//! 2. 64 tasks on distinct locks, one client: pairs/s, client and server CPU
//!    per pair;
//! 3. 8 contenders on one lock, hold 0, think 1 ms (keylatch): acquisitions/s
//!    and handoff p50 (release → another contender holds it), vs a 1 ms
//!    polling loop (SET NX PX, sleep 1 ms on failure);
//! 4. 10,000 held locks (keylatch): renewal script calls per interval, client
//!    memory.
//!
//! Server CPU is the redis-server's utime + stime from /proc/<pid>/stat, read
//! around each block a contender runs (clock ticks: 10 ms resolution, so
//! figures firm up with more rounds). The pid is that of the server started
//! here; with `--url`, pass `--server-pid N` (a local server) or the server
//! columns read n/a. Client CPU is this process's, the same way.
//!
//! With `KEYLATCH_BENCH_TRACING=info` (any level), a `tracing` formatting
//! subscriber at that level writes every event to a sink: the figures with
//! and without it show what the library's events cost when an application
//! has a subscriber on.
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin locks -- [--rounds 3] [--seconds 3]
//!     [--url redis://127.0.0.1:PORT [--server-pid N]]
//!     [--servers /usr/bin/redis-server,/path/to/valkey-server]
//! ```
//!
//! `--servers`: the whole bench against a local server of each binary in
//! turn, then one table row per server (keylatch vs redis-rs, same scripts,
//! as ratios, with the C floor and the server's capacity beside).
//!
//! With `--url`, the server must be on loopback: the floors run
//! redis-benchmark against 127.0.0.1 and the URL's port.
//! `benches/compare-commits.sh OLD NEW` runs this bench at two commits, one
//! after the other.
//!
//! Diagnostics (one client, one scenario): `--profile-seq N` and
//! `--profile-distinct N` (keylatch, or redis-rs with `--redis-rs`, or
//! redis-rs with Redisson's scripts with `--redisson`),
//! `--runtime current`, `--held-only` (the 10,000 held locks alone), `--sizes` (future sizes on the request path),
//! `--floor-check [--get [--raw]|--fixed]` (one request at a time vs
//! redis-benchmark; `--raw`: a bare tokio TcpStream, the runtime's own floor).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keylatch_benches::{
    arg, arg_text, for_seconds, pid_cpu, process_cpu, redis_benchmark, stopped, summarise,
    url_or_local_server,
};
use keylatch_cluster::{Client, ClientConfig, Commands, SetCondition, SetOptions};
use keylatch_harness::rss_kib;
use keylatch_lock::scripts::{REENTRANT_ACQUIRE, REENTRANT_RELEASE};
use keylatch_lock::{Locks, LocksConfig};

/// Redisson's `RLock.tryLockInnerAsync` script, verbatim as in
/// `tests/locks.rs`: KEYS[1] the lock name; ARGV[1] lease in milliseconds,
/// ARGV[2] owner id. Returns nil when acquired, else the lock's PTTL.
const REDISSON_LOCK: &str = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";

/// Redisson's `RLock.unlockInnerAsync` script, verbatim as in
/// `tests/locks.rs`: KEYS[1] the lock name, KEYS[2] the unlock channel
/// `redisson_lock__channel:{name}`; ARGV[1] the unlock message (0), ARGV[2]
/// lease in milliseconds, ARGV[3] owner id. Returns nil when not the owner,
/// 0 when holds remain, 1 when released (and published).
const REDISSON_UNLOCK: &str = "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;";

/// The lease every script-running contender asks for (keylatch's watchdog
/// default, Redisson's `lockWatchdogTimeout`), in milliseconds.
const LEASE_MS: &str = "30000";

/// Idle expiry of keylatch's fencing counter (`LocksConfig::token_idle_ttl`'s
/// default, 24 h), in milliseconds.
const TOKEN_IDLE_MS: &str = "86400000";

/// KEYS of `lock/lua/reentrant_acquire.lua`, in its header's order: the lock
/// hash, the fencing counter.
fn acquire_keys<'a>(name: &'a str, token_key: &'a str) -> [&'a str; 2] {
    [name, token_key]
}

/// Whether the lock crate in this build has the first lock core's scripts
/// (release KEYS: hash, channel, counter) rather than the second's (hash,
/// counter; channel in ARGV). One bench binary then measures both commits
/// (`compare-commits.sh` with `BENCH_FROM`).
fn first_core_scripts() -> bool {
    REENTRANT_RELEASE.source().contains("-- KEYS[3]")
}

/// ARGV of `lock/lua/reentrant_acquire.lua`, in its header's order: lease
/// (ms), owner id, expiry of the fencing counter (ms); the first core's script
/// also took "1" for fencing on.
fn acquire_argv(owner: &str) -> Vec<&str> {
    if first_core_scripts() {
        vec![LEASE_MS, owner, TOKEN_IDLE_MS, "1"]
    } else {
        vec![LEASE_MS, owner, TOKEN_IDLE_MS]
    }
}

/// The redis-rs (same scripts) acquire: keylatch's acquire script with the
/// arguments its header lists. Update [`acquire_keys`] / [`acquire_argv`]
/// (also used by the floors) and [`acquired_token`] when the script changes.
fn same_acquire<'s>(script: &'s redis::Script, p: &Prepared) -> redis::ScriptInvocation<'s> {
    let mut call = script.prepare_invoke();
    for key in acquire_keys(&p.name, &p.token) {
        call.key(key);
    }
    for a in acquire_argv(&p.owner) {
        call.arg(a);
    }
    call
}

/// The fencing token from the acquire script's reply (`{holds, token}`, or
/// `{1, token, 1}` when the call made the counter: the first two read
/// alike; `{0, pttl}` when another owner holds the lock, which an
/// uncontended pair never meets).
fn acquired_token(reply: &redis::Value) -> i64 {
    match reply {
        redis::Value::Array(v) => match (v.first(), v.get(1)) {
            (Some(redis::Value::Int(holds)), Some(redis::Value::Int(token))) if *holds > 0 => {
                *token
            }
            _ => panic!("redis-rs acquire: not acquired: {reply:?}"),
        },
        _ => panic!("redis-rs acquire: unexpected reply {reply:?}"),
    }
}

/// The redis-rs (same scripts) release: keylatch's release script with the
/// arguments its header lists. KEYS: the lock hash, the fencing counter;
/// ARGV: owner id, the unlock channel, the publish command, the hold's
/// token. (The first core's: KEYS hash, channel, counter; ARGV unlock
/// message "0", lease (ms), owner id, publish command, token.)
fn same_release<'s>(
    script: &'s redis::Script,
    p: &Prepared,
    token: i64,
) -> redis::ScriptInvocation<'s> {
    let mut call = script.prepare_invoke();
    if first_core_scripts() {
        call.key(&p.name).key(&p.channel).key(&p.token);
        call.arg("0")
            .arg(LEASE_MS)
            .arg(&p.owner)
            .arg("publish")
            .arg(token);
    } else if wakes_by_name() {
        call.key(&p.name).key(&p.token);
        call.arg(&p.owner)
            .arg(&p.channel)
            .arg("publish")
            .arg(&p.waiters);
        if grants() {
            // No grant: these contenders never wait.
            call.arg("0");
        }
        call.arg(token);
    } else {
        call.key(&p.name).key(&p.token);
        call.arg(&p.owner).arg(&p.channel).arg("publish").arg(token);
    }
    call
}

/// Whether the release script takes the waiters woken by name (ARGV[4],
/// the token moving to ARGV[5]).
fn wakes_by_name() -> bool {
    REENTRANT_RELEASE.source().contains("-- ARGV[5]")
}

/// Whether the release script grants the lock to a waiter (ARGV[5] the
/// grant's lease, the token moving to ARGV[6]).
fn grants() -> bool {
    REENTRANT_RELEASE.source().contains("-- ARGV[6]")
}

/// An acquire script and a release script, loaded by redis-rs on first use.
type ScriptPair = Arc<(redis::Script, redis::Script)>;

#[derive(Clone)]
enum Contender {
    Keylatch(Locks),
    /// redis-rs running keylatch's scripts.
    RedisRs(redis::aio::MultiplexedConnection, ScriptPair),
    /// redis-rs running Redisson's RLock scripts.
    Redisson(redis::aio::MultiplexedConnection, ScriptPair),
    RsLock(Arc<rslock::LockManager>),
}

impl Contender {
    fn name(&self) -> &'static str {
        match self {
            Contender::Keylatch(_) => "keylatch",
            Contender::RedisRs(..) => "redis-rs (same scripts)",
            Contender::Redisson(..) => "redis-rs (Redisson scripts)",
            Contender::RsLock(_) => "rslock",
        }
    }

    fn same_scripts(conn: redis::aio::MultiplexedConnection) -> Contender {
        Contender::RedisRs(
            conn,
            Arc::new((
                redis::Script::new(REENTRANT_ACQUIRE.source()),
                redis::Script::new(REENTRANT_RELEASE.source()),
            )),
        )
    }

    fn redisson_scripts(conn: redis::aio::MultiplexedConnection) -> Contender {
        Contender::Redisson(
            conn,
            Arc::new((
                redis::Script::new(REDISSON_LOCK),
                redis::Script::new(REDISSON_UNLOCK),
            )),
        )
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
            waiters: format!("keylatch_lock_waiters:{{{name}}}"),
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
                let r: redis::Value = same_acquire(&scripts.0, p)
                    .invoke_async(conn)
                    .await
                    .expect("redis-rs acquire");
                let released: Option<i64> = same_release(&scripts.1, p, acquired_token(&r))
                    .invoke_async(conn)
                    .await
                    .expect("redis-rs release");
                assert_eq!(released, Some(1), "redis-rs release");
            }
            Contender::Redisson(conn, scripts) => {
                let pttl: Option<i64> = scripts
                    .0
                    .key(&p.name)
                    .arg(LEASE_MS)
                    .arg(&p.owner)
                    .invoke_async(conn)
                    .await
                    .expect("Redisson acquire");
                assert_eq!(pttl, None, "Redisson acquire: held elsewhere");
                let released: Option<i64> = scripts
                    .1
                    .key(&p.name)
                    .key(&p.channel)
                    .arg("0")
                    .arg(LEASE_MS)
                    .arg(&p.owner)
                    .invoke_async(conn)
                    .await
                    .expect("Redisson release");
                assert_eq!(released, Some(1), "Redisson release");
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
    /// The release's waiters woken by name (ARGV[4] since the scripts
    /// that wake one waiter per release).
    waiters: String,
}

/// CPU used so far by this process (the clients) and by the redis-server
/// (when its pid is known and readable).
#[derive(Clone, Copy)]
struct CpuMark {
    client: Duration,
    server: Option<Duration>,
}

impl CpuMark {
    fn now(server_pid: Option<u32>) -> CpuMark {
        CpuMark {
            client: process_cpu(),
            server: server_pid.and_then(pid_cpu),
        }
    }

    /// CPU used since `self` was taken: (client, server).
    fn since(self, server_pid: Option<u32>) -> (Duration, Option<Duration>) {
        let now = CpuMark::now(server_pid);
        let server = match (self.server, now.server) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        (now.client.saturating_sub(self.client), server)
    }
}

/// One contender's totals over all rounds of scenarios 1 and 2.
#[derive(Default)]
struct Totals {
    /// Scenario 1: latency of each pair, and the CPU of all of them.
    seq_lat: Vec<Duration>,
    seq_client: Duration,
    /// `None` once any reading failed (or no server pid).
    seq_server: Option<Duration>,
    /// Scenario 2: pairs done, client and server CPU, wall time.
    pairs: u64,
    client: Duration,
    server: Option<Duration>,
    wall: Duration,
}

/// Adds a server CPU reading to a total: unknown as soon as one is.
fn add_server(total: &mut Option<Duration>, d: Option<Duration>) {
    *total = total.zip(d).map(|(a, b)| a + b);
}

/// µs per operation.
fn per_op(d: Duration, ops: u64) -> f64 {
    d.as_secs_f64() * 1e6 / ops.max(1) as f64
}

/// What `--servers` tabulates per server: keylatch (index 0) and redis-rs
/// running the same scripts (index 1), scenarios 1 and 2.
struct Summary {
    /// Uncontended pair p50 and p99, µs.
    p50: [f64; 2],
    p99: [f64; 2],
    /// 64 tasks, distinct locks: pairs/s, client and server CPU per pair (µs).
    rate: [f64; 2],
    client_cpu: [f64; 2],
    server_cpu: [Option<f64>; 2],
    /// 2 × redis-benchmark -c 1 EVALSHA p50 (µs), median over rounds.
    floor: Option<f64>,
    /// redis-benchmark -P 16 EVALSHA rate ÷ 2 (pairs/s).
    capacity: Option<f64>,
}

/// `KEYLATCH_BENCH_TRACING=<level>` (e.g. `info`): installs the formatting
/// subscriber an embedder would (tracing-subscriber's `fmt`, at that
/// level), writing to `std::io::sink`, so a run with and one without show
/// what the library's events cost with a subscriber installed. Events
/// below the level must cost only their disabled-callsite check; events at
/// or above it are formatted in full and thrown away. Said on stderr.
fn install_tracing() {
    let Ok(level) = std::env::var("KEYLATCH_BENCH_TRACING") else {
        return;
    };
    let Ok(level) = level.parse::<tracing::Level>() else {
        eprintln!("KEYLATCH_BENCH_TRACING={level}: not a level (error, warn, info, debug, trace)");
        std::process::exit(2);
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::sink)
        .init();
    eprintln!("tracing: fmt subscriber at {level}, writing to a sink");
}

fn main() {
    install_tracing();
    let rounds = arg("--rounds", 3) as usize;
    let seconds = arg("--seconds", 3);
    if let Some(binaries) = arg_text("--servers") {
        servers(&binaries, rounds, seconds);
        return;
    }
    let (url, server) = url_or_local_server(arg_text("--url").as_deref());
    let server_pid = match server.as_ref() {
        Some(s) => s.pid(),
        None => Some(arg("--server-pid", 0) as u32).filter(|&pid| pid > 0),
    };
    let port = server.as_ref().map_or_else(|| url_port(&url), |s| s.port());
    if server_pid.and_then(pid_cpu).is_none() {
        eprintln!("server CPU: no readable redis-server pid (with --url, pass --server-pid N): columns read n/a");
    }
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
        tokio::spawn(async move { run(url, port, server_pid, rounds, seconds).await })
            .await
            .expect("bench task");
    });
    drop(server);
}

/// `--servers BIN,BIN…`: the whole bench against a local server of each
/// binary in turn (in one sitting, so the rows compare), then one row per
/// server: keylatch beside redis-rs running the same scripts, as ratios.
fn servers(binaries: &str, rounds: usize, seconds: u64) {
    let mut rows = Vec::new();
    for binary in binaries.split(',').filter(|b| !b.is_empty()) {
        let version = std::process::Command::new(binary)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        // "Redis server v=7.0.15 sha=…" → "Redis 7.0.15".
        let mut words = version.split_whitespace();
        let label = match (words.next(), words.nth(1)) {
            (Some(product), Some(v)) => format!("{product} {}", v.trim_start_matches("v=")),
            _ => binary.to_owned(),
        };
        println!("== {label} ({binary})");
        // The harness starts the binary KEYLATCH_REDIS_SERVER names; set
        // before any runtime thread exists.
        std::env::set_var("KEYLATCH_REDIS_SERVER", binary);
        let server = keylatch_harness::RedisServer::start();
        let (url, port, pid) = (server.url(), server.port(), server.pid());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let summary = rt.block_on(async move {
            tokio::spawn(async move { run(url, port, pid, rounds, seconds).await })
                .await
                .expect("bench task")
        });
        drop(rt);
        drop(server);
        if let Some(summary) = summary {
            rows.push((label, summary));
        }
    }
    println!();
    println!("keylatch (k) vs redis-rs running the same scripts (r), per server; {rounds} rounds × {seconds} s");
    println!(
        "{:<14} {:>7} {:>7} {:>5} {:>7} {:>7} {:>5} {:>7} {:>7} {:>5} {:>6} {:>6} {:>5} {:>6} {:>5}",
        "server", "p50 k", "p50 r", "k/r", "p99 k", "p99 r", "k/r", "pairs/s k", "r", "k/r",
        "cpu k", "cpu r", "k/r", "srv k", "srv r"
    );
    let opt = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.2}"));
    for (label, m) in &rows {
        println!(
            "{:<14} {:>7.1} {:>7.1} {:>5.2} {:>7.1} {:>7.1} {:>5.2} {:>9.0} {:>7.0} {:>5.2} {:>6.2} {:>6.2} {:>5.2} {:>6} {:>5}",
            label,
            m.p50[0],
            m.p50[1],
            m.p50[0] / m.p50[1],
            m.p99[0],
            m.p99[1],
            m.p99[0] / m.p99[1],
            m.rate[0],
            m.rate[1],
            m.rate[0] / m.rate[1],
            m.client_cpu[0],
            m.client_cpu[1],
            m.client_cpu[0] / m.client_cpu[1],
            opt(m.server_cpu[0]),
            opt(m.server_cpu[1]),
        );
    }
    println!("(p50/p99: uncontended pair, µs; pairs/s, cpu (client) and srv (server CPU) per pair in µs: 64 tasks on distinct locks)");
    for (label, m) in &rows {
        println!(
            "{label}: C floor 2 × redis-benchmark -c 1 EVALSHA p50 {} µs (keylatch p50 / floor {}); server capacity {} pairs/s (keylatch reaches {})",
            m.floor.map_or("n/a".to_owned(), |f| format!("{f:.1}")),
            m.floor.map_or("n/a".to_owned(), |f| format!("{:.2}", m.p50[0] / f)),
            m.capacity.map_or("n/a".to_owned(), |c| format!("{c:.0}")),
            m.capacity.map_or("n/a".to_owned(), |c| format!("{:.2}", m.rate[0] / c)),
        );
    }
}

/// The port of a `redis://host:port[/db][?…]` URL (6379 when absent).
fn url_port(url: &str) -> u16 {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host_port = rest.split(['/', '?']).next().unwrap_or("");
    let host_port = host_port.rsplit_once('@').map_or(host_port, |(_, h)| h);
    host_port
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or(6379)
}

async fn run(
    url: String,
    port: u16,
    server_pid: Option<u32>,
    rounds: usize,
    seconds: u64,
) -> Option<Summary> {
    // As the README shows users: standalone or cluster, client tracking on.
    let locks = Locks::connect(&url).await.expect("keylatch");
    let rr = redis::Client::open(url.as_str())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("redis-rs");
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
        return None;
    }
    // Profiling modes: one client, one scenario (`--redis-rs` picks redis-rs
    // running keylatch's scripts, `--redisson` redis-rs running Redisson's).
    let solo = if std::env::args().any(|a| a == "--redis-rs") {
        Contender::same_scripts(rr.clone())
    } else if std::env::args().any(|a| a == "--redisson") {
        Contender::redisson_scripts(rr.clone())
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
                    &acquire_keys(&key, "floor:t"),
                    &acquire_argv("o:1"),
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
        return None;
    }
    if std::env::args().any(|a| a == "--held-only") {
        // Just the 10,000 held locks: renewal calls and client memory alone,
        // without the heap the other scenarios leave behind.
        let (calls, per_round, mem_kib) = many_held(&url).await;
        println!(
            "10,000 held locks: {calls} renewal calls ({per_round:.1} per round); client RSS +{mem_kib} KiB ({} B per hold)",
            mem_kib * 1024 / 10_000
        );
        return None;
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
        return None;
    }
    let profile = arg("--profile-distinct", 0);
    if profile > 0 {
        let (p, c, w) = distinct(&solo, profile).await;
        println!(
            "{} 64 tasks: {p} pairs, {:.0} pairs/s, {:.2} µs CPU per pair",
            solo.name(),
            p as f64 / w.as_secs_f64(),
            c.as_secs_f64() * 1e6 / p.max(1) as f64
        );
        return None;
    }
    let mut cs = [
        Contender::Keylatch(locks.clone()),
        Contender::same_scripts(rr.clone()),
        Contender::redisson_scripts(rr),
        Contender::RsLock(rs),
    ];
    let n = cs.len();
    let mut totals: Vec<Totals> = (0..n)
        .map(|_| Totals {
            seq_server: Some(Duration::ZERO),
            server: Some(Duration::ZERO),
            ..Totals::default()
        })
        .collect();

    // 1. Uncontended sequential pairs, in blocks of 250 per client.
    // Floors from redis-benchmark (C): one EVALSHA of the acquire script,
    // measured in every round right after the sequential pairs (the
    // machine's speed drifts; a floor from another minute is no floor).
    let _ = locks
        .client()
        .eval_script(
            &REENTRANT_ACQUIRE,
            &acquire_keys("floor", "floor:t"),
            &acquire_argv("o:1"),
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
                let mark = CpuMark::now(server_pid);
                for _ in 0..250 {
                    let t = Instant::now();
                    cs[i].pair(&seq[i]).await;
                    totals[i].seq_lat.push(t.elapsed());
                }
                let (client, server) = mark.since(server_pid);
                totals[i].seq_client += client;
                add_server(&mut totals[i].seq_server, server);
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
            let server0 = server_pid.and_then(pid_cpu);
            let (p, c, w) = distinct(&cs[i], seconds).await;
            let server = server0
                .zip(server_pid.and_then(pid_cpu))
                .map(|(a, b)| b.saturating_sub(a));
            let t = &mut totals[i];
            t.pairs += p;
            t.client += c;
            t.wall += w;
            add_server(&mut t.server, server);
        }
        eprintln!("round {} of {rounds} done", round + 1);
    }

    // 3. Contention: 8 contenders, one lock, think 1 ms.
    let (k_rate, k_handoff) = contended_keylatch(&locks, seconds * 2, false).await;
    let (f_rate, f_handoff) = contended_keylatch(&locks, seconds * 2, true).await;
    let poll_rate = contended_polling(locks.client(), seconds * 2).await;

    // 4. 10,000 held locks.
    let (calls, per_round, mem_kib) = many_held(&url).await;

    let cap = evalsha(&["-c", "4", "-P", "16", "-n", "400000", "-r", "100000"]);

    let means: Vec<f64> = totals
        .iter()
        .map(|t| {
            t.seq_lat.iter().sum::<Duration>().as_secs_f64() * 1e6 / t.seq_lat.len().max(1) as f64
        })
        .collect();
    let s: Vec<_> = totals
        .iter_mut()
        .map(|t| summarise(&mut t.seq_lat))
        .collect();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let seq_pairs = |i: usize| s[i].n as u64;
    let rate = |i: usize| totals[i].pairs as f64 / totals[i].wall.as_secs_f64();
    // Per pair, µs: uncontended client and server CPU, 64-task client and server CPU.
    let seq_cpp = |i: usize| per_op(totals[i].seq_client, seq_pairs(i));
    let seq_spp = |i: usize| totals[i].seq_server.map(|d| per_op(d, seq_pairs(i)));
    let cpp = |i: usize| per_op(totals[i].client, totals[i].pairs);
    let spp = |i: usize| totals[i].server.map(|d| per_op(d, totals[i].pairs));

    println!();
    println!(
        "rounds {rounds}, {} sequential pairs per client, 64 tasks × {seconds} s per round; server CPU from /proc/<redis-server pid>/stat ({})",
        s[0].n,
        server_pid.map_or("no pid: n/a".to_owned(), |p| format!("pid {p}"))
    );
    let names: Vec<&str> = cs.iter().map(Contender::name).collect();
    let widths: Vec<usize> = names.iter().map(|n| n.chars().count().max(10)).collect();
    let row = |label: &str, cells: Vec<String>| {
        let mut line = format!("{label:<44}");
        for (cell, w) in cells.iter().zip(&widths) {
            line.push_str(&format!("  {cell:>w$}"));
        }
        println!("{line}");
    };
    let fmt =
        |v: Option<f64>, decimals: usize| v.map_or("n/a".to_owned(), |v| format!("{v:.decimals$}"));
    let col = |f: &dyn Fn(usize) -> Option<f64>, decimals: usize| -> Vec<String> {
        (0..n).map(|i| fmt(f(i), decimals)).collect()
    };
    row("scenario", names.iter().map(|n| n.to_string()).collect());
    row("uncontended pair p50 (µs)", col(&|i| Some(us(s[i].p50)), 1));
    row("uncontended pair p99 (µs)", col(&|i| Some(us(s[i].p99)), 1));
    row(
        "uncontended client CPU per pair (µs)",
        col(&|i| Some(seq_cpp(i)), 2),
    );
    row("uncontended server CPU per pair (µs)", col(&seq_spp, 2));
    row(
        "64 tasks distinct locks (pairs/s)",
        col(&|i| Some(rate(i)), 0),
    );
    row(
        "64 tasks client CPU per pair (µs)",
        col(&|i| Some(cpp(i)), 2),
    );
    row("64 tasks server CPU per pair (µs)", col(&spp, 2));
    println!();
    let ratio = |a: Option<f64>, b: Option<f64>| fmt(a.zip(b).map(|(a, b)| a / b), 2);
    // keylatch against each redis-rs contender: the same work through
    // another client, and the work a Redisson-style lock needs.
    for j in [1, 2] {
        println!(
            "ratios keylatch / {}: p50 {}, p99 {}, pairs/s {}; client CPU/pair {} uncontended, {} 64 tasks; server CPU/pair {} uncontended, {} 64 tasks",
            names[j],
            ratio(Some(us(s[0].p50)), Some(us(s[j].p50))),
            ratio(Some(us(s[0].p99)), Some(us(s[j].p99))),
            ratio(Some(rate(0)), Some(rate(j))),
            ratio(Some(seq_cpp(0)), Some(seq_cpp(j))),
            ratio(Some(cpp(0)), Some(cpp(j))),
            ratio(seq_spp(0), seq_spp(j)),
            ratio(spp(0), spp(j)),
        );
    }
    println!(
        "ratios keylatch / {}: p50 {}, pairs/s {}",
        names[3],
        ratio(Some(us(s[0].p50)), Some(us(s[3].p50))),
        ratio(Some(rate(0)), Some(rate(3))),
    );
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
            "  by means: keylatch {:.1} µs, redis-rs (same scripts) {:.1} µs, redis-rs (Redisson scripts) {:.1} µs, 2 × redis-benchmark mean {mean_floor:.1} µs; keylatch / floor = {:.2}",
            means[0],
            means[1],
            means[2],
            means[0] / mean_floor
        );
    }
    if let Some(cap) = &cap {
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
        "8 contenders, fair lock: {f_rate:.0} acq/s, handoff p50 {:.1} µs (fair / reentrant: handoff {:.2}, acq/s {:.2})",
        us(f_handoff),
        us(f_handoff) / us(k_handoff).max(f64::MIN_POSITIVE),
        f_rate / k_rate.max(1.0)
    );
    println!(
        "10,000 held locks: {calls} renewal calls over 3 intervals ({per_round:.1} per round, one round per interval); client RSS +{mem_kib} KiB ({} B per hold)",
        mem_kib * 1024 / 10_000
    );
    Some(Summary {
        p50: [us(s[0].p50), us(s[1].p50)],
        p99: [us(s[0].p99), us(s[1].p99)],
        rate: [rate(0), rate(1)],
        client_cpu: [cpp(0), cpp(1)],
        server_cpu: [spp(0), spp(1)],
        floor: floors.get(floors.len() / 2).copied(),
        capacity: cap.as_ref().map(|c| c.rps / 2.0),
    })
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
/// Scenario 3 with the reentrant lock, or with the fair lock (`fair`:
/// every release wakes the queue's head only, on its own channel).
async fn contended_keylatch(locks: &Locks, seconds: u64, fair: bool) -> (f64, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    // (event time, contender, kind: 0 = started waiting, 1 = acquired, 2 = released)
    let log: Arc<Mutex<Vec<(Instant, usize, u8)>>> = Arc::new(Mutex::new(Vec::new()));
    let t0 = Instant::now();
    let mut hs = Vec::new();
    for c in 0..8 {
        let lock = if fair {
            locks.fair_lock("contended-fair")
        } else {
            locks.lock("contended")
        };
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
    let events = log.lock().expect("log").clone();
    let (acquisitions, mut handoffs) = keylatch_benches::handoffs(events);
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
    // As a user sets a lease: `connect_with`, client tracking on.
    let locks = Locks::connect_with(
        ClientConfig::from_url(url).expect("url"),
        LocksConfig::default().watchdog_timeout(lease),
    )
    .await
    .expect("client");
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
    let keys = acquire_keys("floor:__rand_int__", "floor:t");
    let numkeys = keys.len().to_string();
    let mut a: Vec<&str> = extra.to_vec();
    a.extend(["EVALSHA", &sha, &numkeys]);
    a.extend(keys);
    a.extend(acquire_argv("o:1"));
    redis_benchmark(port, &a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_port_reads_the_port_or_defaults() {
        assert_eq!(url_port("redis://127.0.0.1:7001"), 7001);
        assert_eq!(
            url_port("redis://u:p@127.0.0.1:7002/0?protocol=resp3"),
            7002
        );
        assert_eq!(url_port("redis://localhost"), 6379);
    }

    #[test]
    fn acquired_token_reads_holds_and_token() {
        let reply = redis::Value::Array(vec![redis::Value::Int(1), redis::Value::Int(42)]);
        assert_eq!(acquired_token(&reply), 42);
        let made = redis::Value::Array(vec![
            redis::Value::Int(1),
            redis::Value::Int(43),
            redis::Value::Int(1),
        ]);
        assert_eq!(acquired_token(&made), 43, "the call made the counter");
    }

    #[test]
    fn floor_and_same_scripts_pass_what_the_acquire_header_lists() {
        let header = REENTRANT_ACQUIRE.source();
        for i in 1..=acquire_keys("a", "b").len() {
            assert!(header.contains(&format!("-- KEYS[{i}]")), "KEYS[{i}]");
        }
        let argv = acquire_argv("o");
        for i in 1..=argv.len() {
            assert!(header.contains(&format!("-- ARGV[{i}]")), "ARGV[{i}]");
        }
        // Arguments past those (a waiter's registration, ARGV[4] on) are
        // optional: without them the call is a try without a wait, as the
        // floors' and same-script calls are.
        let next = format!("-- ARGV[{}]", argv.len() + 1);
        assert!(
            !header.contains(&next) || header.contains("absent or"),
            "{next} must be optional"
        );
    }

    #[test]
    fn same_release_passes_what_the_release_header_lists() {
        // `same_release`: 3 keys and 5 arguments (first core), 2 and 4, or
        // (waking one waiter by name) 2 and 5.
        let header = REENTRANT_RELEASE.source();
        let (keys, args) = if first_core_scripts() {
            (3, 5)
        } else if grants() {
            (2, 6)
        } else if wakes_by_name() {
            (2, 5)
        } else {
            (2, 4)
        };
        assert!(header.contains(&format!("-- KEYS[{keys}]")));
        assert!(!header.contains(&format!("-- KEYS[{}]", keys + 1)));
        assert!(header.contains(&format!("-- ARGV[{args}]")));
        assert!(!header.contains(&format!("-- ARGV[{}]", args + 1)));
    }
}
