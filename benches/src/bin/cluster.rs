//! keylatch `Client` vs redis-rs `cluster_async` on one 6-node cluster that
//! the harness starts (3 masters + 3 replicas), in one run, alternating.
//!
//! - sequential GET over many keys (every master): p50/p99;
//! - 64 tasks GET over many keys: ops/s and client CPU per op;
//! - 64 tasks EVALSHA (a small script, many keys): ops/s (each client
//!   pipelines concurrent callers per node on its own).
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin cluster -- [--rounds 3] [--seconds 3]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_benches::{arg, for_seconds, redis_benchmark, stopped, summarise};
use keylatch_cluster::{Client, ClientConfig, Commands, Script};
use redis::cluster_async::ClusterConnection;

static BUMP: Script = Script::new("bump", "return redis.call('INCRBY', KEYS[1], ARGV[1])");
const BUMP_SRC: &str = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
const KEYS: usize = 10_000;

#[derive(Clone)]
enum C {
    Kl(Client),
    Rr(ClusterConnection, redis::Script),
}

impl C {
    fn name(&self) -> &'static str {
        match self {
            C::Kl(_) => "keylatch",
            C::Rr(..) => "redis-rs",
        }
    }

    async fn get(&mut self, key: &str) {
        match self {
            C::Kl(c) => {
                c.get(key).await.expect("keylatch GET");
            }
            C::Rr(c, _) => {
                let _: Option<Vec<u8>> = redis::cmd("GET")
                    .arg(key)
                    .query_async(c)
                    .await
                    .expect("redis-rs GET");
            }
        }
    }

    async fn script(&mut self, key: &str) {
        match self {
            C::Kl(c) => {
                c.eval_script(&BUMP, &[key], &["1"])
                    .await
                    .expect("keylatch EVALSHA");
            }
            C::Rr(c, s) => {
                let _: i64 = s
                    .key(key)
                    .arg(1)
                    .invoke_async(c)
                    .await
                    .expect("redis-rs EVALSHA");
            }
        }
    }
}

fn main() {
    let rounds = arg("--rounds", 3) as usize;
    let seconds = arg("--seconds", 3);
    let seq = arg("--seq", 10_000) as usize;
    let cluster = keylatch_harness::RedisCluster::start();
    let urls = cluster.seed_urls();
    let c_port = cluster.node(cluster.masters()[0]).port();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        tokio::spawn(async move { run(urls, rounds, seconds, seq, c_port).await })
            .await
            .expect("bench task");
    });
    drop(cluster);
}

async fn run(urls: Vec<String>, rounds: usize, seconds: u64, seq: usize, c_port: u16) {
    let seeds: Vec<&str> = urls.iter().map(String::as_str).collect();
    let kl = Client::connect_with(ClientConfig::from_urls(&seeds).expect("urls"))
        .await
        .expect("keylatch connect");
    let rr = redis::cluster::ClusterClient::new(urls.clone())
        .expect("redis-rs client")
        .get_async_connection()
        .await
        .expect("redis-rs connect");
    let keys: Vec<String> = (0..KEYS).map(|i| format!("bench:{i}")).collect();
    for k in &keys {
        kl.set(k.as_str(), "0123456789abcdef").await.expect("SET");
    }
    let mut clients = [C::Kl(kl), C::Rr(rr, redis::Script::new(BUMP_SRC))];
    let mut lat: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut get_ops = [0u64; 2];
    let mut get_cpu = [Duration::ZERO; 2];
    let mut get_wall = [Duration::ZERO; 2];
    let mut eval_ops = [0u64; 2];
    let mut eval_wall = [Duration::ZERO; 2];
    let keys = Arc::new(keys);
    // Counters for the script scenario (the GET keys hold text).
    let counters: Arc<Vec<String>> = Arc::new((0..KEYS).map(|i| format!("ctr:{i}")).collect());
    for round in 0..rounds {
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for &i in &order {
            for k in keys.iter().take(500) {
                clients[i].get(k).await;
            }
        }
        for b in 0..seq.div_ceil(500) {
            for &i in &order {
                for j in 0..500 {
                    let k = &keys[(b * 500 + j * 7) % KEYS];
                    let t = Instant::now();
                    clients[i].get(k).await;
                    lat[i].push(t.elapsed());
                }
            }
        }
        for &i in &order {
            let (n, cpu, wall) = many(&clients[i], &keys, seconds, false).await;
            get_ops[i] += n;
            get_cpu[i] += cpu;
            get_wall[i] += wall;
            let (n, _, wall) = many(&clients[i], &counters, seconds, true).await;
            eval_ops[i] += n;
            eval_wall[i] += wall;
        }
        eprintln!("round {} of {rounds} done", round + 1);
    }
    let s: Vec<_> = lat.iter_mut().map(|v| summarise(v)).collect();
    let c_seq = redis_benchmark(
        c_port,
        &["--cluster", "-c", "1", "-n", "20000", "-t", "get"],
    );
    let c_par = redis_benchmark(
        c_port,
        &["--cluster", "-c", "64", "-n", "300000", "-t", "get"],
    );
    println!();
    println!(
        "cluster 3+3 | rounds {rounds} | {} sequential GETs per client | 64 tasks × {seconds} s per round",
        s[0].n
    );
    println!(
        "{:<30} {:>12} {:>12} {:>8} {:>16}",
        "scenario",
        clients[0].name(),
        clients[1].name(),
        "kl/rr",
        "redis-bench(C)"
    );
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let row = |name: &str, a: f64, b: f64, c: String| {
        println!("{name:<30} {a:>12.1} {b:>12.1} {:>8.2} {c:>16}", a / b);
    };
    row(
        "seq GET p50 (µs)",
        us(s[0].p50),
        us(s[1].p50),
        c_seq
            .as_ref()
            .map_or("-".into(), |c| format!("{:.1}", c.p50_ms * 1e3)),
    );
    row("seq GET p99 (µs)", us(s[0].p99), us(s[1].p99), "-".into());
    let rate = |o: u64, w: Duration| o as f64 / w.as_secs_f64();
    row(
        "64 tasks GET (ops/s)",
        rate(get_ops[0], get_wall[0]),
        rate(get_ops[1], get_wall[1]),
        c_par
            .as_ref()
            .map_or("-".into(), |c| format!("{:.0} (64 conns)", c.rps)),
    );
    row(
        "client CPU per GET (µs)",
        get_cpu[0].as_secs_f64() * 1e6 / get_ops[0].max(1) as f64,
        get_cpu[1].as_secs_f64() * 1e6 / get_ops[1].max(1) as f64,
        "-".into(),
    );
    row(
        "64 tasks EVALSHA (ops/s)",
        rate(eval_ops[0], eval_wall[0]),
        rate(eval_ops[1], eval_wall[1]),
        "-".into(),
    );
}

async fn many(
    client: &C,
    keys: &Arc<Vec<String>>,
    seconds: u64,
    script: bool,
) -> (u64, Duration, Duration) {
    for_seconds(64, seconds, |t, stop| {
        let mut c = client.clone();
        let keys = Arc::clone(keys);
        async move {
            let mut n = 0u64;
            let mut i = t * 131;
            while !stopped(&stop) {
                let k = &keys[i % keys.len()];
                if script {
                    c.script(k).await;
                } else {
                    c.get(k).await;
                }
                n += 1;
                i += 1;
            }
            n
        }
    })
    .await
}
