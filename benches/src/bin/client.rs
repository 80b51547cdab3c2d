//! keylatch vs redis-rs (multiplexed async connection) vs redis-benchmark,
//! in one run against one local redis-server.
//!
//! Scenarios, each run for both clients alternately (the order flips every
//! round so neither always runs on a warmer machine):
//! - sequential GET: one caller, one request at a time: p50/p99 latency;
//! - N tasks on one connection doing GET: ops/s and client CPU per op.
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin client -- [--url redis://…]
//!     [--rounds 3] [--seq 20000] [--seconds 3] [--tasks 64] [--runtime multi|current]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_benches::{
    for_seconds, redis_benchmark, stopped, summarise, url_or_local_server, us, Flags, Summary,
};
use keylatch_cluster::{Commands, Connection};

#[derive(Clone)]
enum Client {
    Keylatch(Connection),
    RedisRs(redis::aio::MultiplexedConnection),
}

impl Client {
    fn name(&self) -> &'static str {
        match self {
            Client::Keylatch(_) => "keylatch",
            Client::RedisRs(_) => "redis-rs",
        }
    }

    async fn get(&mut self, key: &str) -> usize {
        match self {
            Client::Keylatch(c) => c
                .get(key)
                .await
                .expect("keylatch GET")
                .map_or(0, |b| b.len()),
            Client::RedisRs(c) => {
                let v: Option<Vec<u8>> = redis::cmd("GET")
                    .arg(key)
                    .query_async(c)
                    .await
                    .expect("redis-rs GET");
                v.map_or(0, |b| b.len())
            }
        }
    }
}

struct Opts {
    url: Option<String>,
    rounds: usize,
    seq: usize,
    seconds: u64,
    tasks: usize,
    runtime: String,
    only: Option<String>,
}

fn parse() -> Opts {
    let flags = Flags::parse(&[
        "--url",
        "--rounds",
        "--seq",
        "--seconds",
        "--tasks",
        "--runtime",
        "--only",
    ]);
    Opts {
        url: flags.text("--url"),
        rounds: flags.number("--rounds", 3),
        seq: flags.number("--seq", 20_000),
        seconds: flags.number("--seconds", 3),
        tasks: flags.number("--tasks", 64),
        runtime: flags
            .text("--runtime")
            .unwrap_or_else(|| "multi".to_owned()),
        only: flags.text("--only"),
    }
}

fn main() {
    let opts = parse();
    let rt = match opts.runtime.as_str() {
        "current" => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        _ => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
    }
    .expect("runtime");
    let (url, _server) = url_or_local_server(opts.url.as_deref());
    let port: u16 = url
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .expect("port in URL");
    // Run inside a spawned task, as application code does: a future driven
    // by block_on lives outside the worker pool, so every wake-up would
    // cross threads and measure the runtime rather than the client.
    let opts = Arc::new(opts);
    rt.block_on(async move {
        tokio::spawn(async move { run(&opts, &url, port).await })
            .await
            .expect("bench task");
    });
}

async fn run(opts: &Opts, url: &str, port: u16) {
    let mut cfg = keylatch_cluster::ConnectionConfig::from_url(url).expect("url");
    if std::env::var_os("KL_NO_TIMEOUT").is_some() {
        cfg = cfg.request_timeout(None);
    }
    let kl = Connection::connect_with(cfg)
        .await
        .expect("keylatch connect");
    let rr = redis::Client::open(url)
        .expect("redis-rs url")
        .get_multiplexed_async_connection()
        .await
        .expect("redis-rs connect");
    let key = "bench:get";
    kl.set(key, "x".repeat(16)).await.expect("SET");
    let mut clients = [Client::Keylatch(kl), Client::RedisRs(rr)];

    let mut seq: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut ops = [0u64; 2];
    let mut cpu = [Duration::ZERO; 2];
    let mut wall = [Duration::ZERO; 2];
    for round in 0..opts.rounds {
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        // Warm up, then time each request alone, alternating the clients in
        // blocks of 500 so both see the same machine noise.
        for &i in &order {
            for _ in 0..1000 {
                clients[i].get(key).await;
            }
        }
        let blocks = opts.seq.div_ceil(500);
        for b in 0..blocks {
            for &i in &order {
                if opts.only.as_deref().is_some_and(|o| o != clients[i].name()) {
                    continue;
                }
                for _ in 0..opts.seq.min(500 * (b + 1)) - 500 * b {
                    let t = Instant::now();
                    clients[i].get(key).await;
                    seq[i].push(t.elapsed());
                }
            }
        }
        for &i in &order {
            if opts.only.as_deref().is_some_and(|o| o != clients[i].name()) {
                continue;
            }
            let (n, c, w) = throughput(&clients[i], key, opts.tasks, opts.seconds).await;
            ops[i] += n;
            cpu[i] += c;
            wall[i] += w;
        }
        eprintln!("round {} of {} done", round + 1, opts.rounds);
    }
    let s: Vec<Summary> = seq.iter_mut().map(|v| summarise(v)).collect();
    let rate = |i: usize| ops[i] as f64 / wall[i].as_secs_f64();
    let cpu_per_op = |i: usize| cpu[i].as_secs_f64() * 1e6 / ops[i].max(1) as f64;

    let c_seq = redis_benchmark(port, &["-c", "1", "-n", "50000", "-t", "get"]);
    let c_par = redis_benchmark(
        port,
        &["-c", &opts.tasks.to_string(), "-n", "500000", "-t", "get"],
    );
    let c_pipe = redis_benchmark(port, &["-c", "1", "-P", "64", "-n", "2000000", "-t", "get"]);

    println!();
    println!(
        "runtime: {} | rounds: {} | sequential GETs per client: {} | {} tasks × {} s per round",
        opts.runtime, opts.rounds, s[0].n, opts.tasks, opts.seconds
    );
    println!(
        "{:<34} {:>12} {:>12} {:>10} {:>14} {:>9}",
        "scenario",
        clients[0].name(),
        clients[1].name(),
        "kl/rr",
        "redis-bench(C)",
        "kl/C"
    );
    let row = |name: &str, a: f64, b: f64, c: Option<f64>| {
        let c_txt = c.map_or("-".to_owned(), |c| format!("{c:.1}"));
        let kc = c.map_or("-".to_owned(), |c| format!("{:.2}", a / c));
        println!(
            "{name:<34} {a:>12.1} {b:>12.1} {:>10.2} {c_txt:>14} {kc:>9}",
            a / b
        );
    };
    let secs = |d: Duration| d.as_secs_f64() * 1e6;
    row(
        "seq GET p50 (µs)",
        secs(s[0].p50),
        secs(s[1].p50),
        c_seq.as_ref().map(|c| c.p50_ms * 1000.0),
    );
    row(
        "seq GET p99 (µs)",
        secs(s[0].p99),
        secs(s[1].p99),
        c_seq.as_ref().map(|c| c.p99_ms * 1000.0),
    );
    row(
        &format!("{} tasks GET (ops/s)", opts.tasks),
        rate(0),
        rate(1),
        c_par.as_ref().map(|c| c.rps),
    );
    row("client CPU per op (µs)", cpu_per_op(0), cpu_per_op(1), None);
    if let Some(c) = c_pipe {
        println!(
            "server capacity, redis-benchmark -P 64: {:.0} GET/s (keylatch reaches {:.2} of it)",
            c.rps,
            rate(0) / c.rps
        );
    }
    println!(
        "(redis-bench column: -c 1 for latency rows, -c {} connections for the throughput row; p50 {} µs)",
        opts.tasks,
        us(s[0].p50)
    );
}

/// `tasks` callers on one shared connection for `seconds`: (ops, CPU, wall).
async fn throughput(
    client: &Client,
    key: &str,
    tasks: usize,
    seconds: u64,
) -> (u64, Duration, Duration) {
    for_seconds(tasks, seconds, |_, stop| {
        let mut c = client.clone();
        let key = key.to_owned();
        async move {
            let mut n = 0u64;
            while !stopped(&stop) {
                c.get(&key).await;
                n += 1;
            }
            n
        }
    })
    .await
}
