//! Pub/sub: keylatch's hub vs redis-rs's async `PubSub`, in one run against
//! one local redis-server.
//!
//! Both subscribers receive from the same publisher (a keylatch
//! `Connection`), so the difference is the subscriber side alone.
//! Scenarios, each run for both clients alternately (the order flips every
//! round):
//! - sequential: publish one message, time until the subscriber has it
//!   (p50/p99), in alternating blocks of 500;
//! - burst: one pipeline of N PUBLISH, time until the last one is received;
//! - fan-out: F listeners on one channel (keylatch: F `Subscription`s on one
//!   hub connection; redis-rs: F `PubSub` connections), time until the last
//!   listener has the message.
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin pubsub -- [--url redis://…]
//!     [--rounds 3] [--seq 20000] [--burst 20000] [--fanout 100] [--fanout-msgs 2000]
//! ```

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_core::Stream;
use keylatch_benches::{summarise, url_or_local_server, us, Flags, Summary};
use keylatch_cluster::{
    Commands, Connection, ConnectionConfig, Event, Pipeline, PubSub, PubSubConfig,
};
use keylatch_resp::Cmd;

enum Sub {
    Keylatch(keylatch_cluster::Subscription),
    RedisRs(Pin<Box<redis::aio::PubSubStream>>),
}

impl Sub {
    /// Waits for the next message; returns its payload length.
    async fn next(&mut self) -> usize {
        match self {
            Sub::Keylatch(s) => match s.recv().await.expect("hub stream") {
                Event::Message { payload, .. } => payload.len(),
                other => panic!("keylatch listener got {other:?}"),
            },
            Sub::RedisRs(s) => {
                let msg = poll_fn(|cx| s.as_mut().poll_next(cx))
                    .await
                    .expect("redis-rs stream");
                msg.get_payload_bytes().len()
            }
        }
    }
}

const NAMES: [&str; 2] = ["keylatch", "redis-rs"];

struct Opts {
    url: Option<String>,
    rounds: usize,
    seq: usize,
    burst: usize,
    fanout: usize,
    fanout_msgs: usize,
}

fn parse() -> Opts {
    let flags = Flags::parse(&[
        "--url",
        "--rounds",
        "--seq",
        "--burst",
        "--fanout",
        "--fanout-msgs",
    ]);
    Opts {
        url: flags.text("--url"),
        rounds: flags.number("--rounds", 3),
        seq: flags.number("--seq", 20_000),
        burst: flags.number("--burst", 20_000),
        fanout: flags.number("--fanout", 100),
        fanout_msgs: flags.number("--fanout-msgs", 2_000),
    }
}

fn main() {
    let opts = parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (url, _server) = url_or_local_server(opts.url.as_deref());
    // Run inside a spawned task, as application code does (see client.rs).
    let opts = Arc::new(opts);
    rt.block_on(async move {
        tokio::spawn(async move { run(&opts, &url).await })
            .await
            .expect("bench task");
    });
}

/// A redis-rs subscriber on its own connection.
async fn redis_rs_sub(rr: &redis::Client, channel: &str) -> Sub {
    let mut ps = rr.get_async_pubsub().await.expect("redis-rs pubsub");
    ps.subscribe(channel).await.expect("redis-rs subscribe");
    Sub::RedisRs(Box::pin(ps.into_on_message()))
}

/// Publishes one message and returns how long until `sub` had it.
async fn one(publisher: &Connection, channel: &str, sub: &mut Sub) -> Duration {
    let t = Instant::now();
    let (published, latency) =
        tokio::join!(publisher.publish(channel, "0123456789abcdef"), async {
            sub.next().await;
            t.elapsed()
        });
    published.expect("PUBLISH");
    latency
}

async fn run(opts: &Opts, url: &str) {
    let publisher = Connection::connect(url).await.expect("publisher");
    // A burst must fit in the listener's queue, or it would be measured as
    // Lagged rather than delivered.
    let config = PubSubConfig::default().listener_capacity(opts.burst.max(1024));
    let hub = PubSub::connect_with(ConnectionConfig::from_url(url).expect("url"), config)
        .await
        .expect("hub");
    let rr = redis::Client::open(url).expect("redis-rs url");
    let channels = ["bench:kl", "bench:rr"];
    // Each client listens on its own channel, so neither sees the other's traffic.
    let mut subs = [
        Sub::Keylatch(
            hub.subscribe(channels[0])
                .await
                .expect("keylatch subscribe"),
        ),
        redis_rs_sub(&rr, channels[1]).await,
    ];

    let mut seq: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut burst_time = [Duration::ZERO; 2];
    let mut fan: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut fan_subs = fan_out(&hub, &rr, opts.fanout).await;

    for round in 0..opts.rounds {
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for &i in &order {
            for _ in 0..1000 {
                one(&publisher, channels[i], &mut subs[i]).await;
            }
        }
        let blocks = opts.seq.div_ceil(500);
        for blk in 0..blocks {
            for &i in &order {
                for _ in 0..opts.seq.min(500 * (blk + 1)) - 500 * blk {
                    seq[i].push(one(&publisher, channels[i], &mut subs[i]).await);
                }
            }
        }
        for &i in &order {
            burst_time[i] += burst(&publisher, channels[i], &mut subs[i], opts.burst).await;
        }
        for _ in 0..opts.fanout_msgs.div_ceil(100) {
            for &i in &order {
                for _ in 0..100 {
                    fan[i].push(fan_once(&publisher, FAN_CHANNELS[i], &mut fan_subs[i]).await);
                }
            }
        }
        eprintln!("round {} of {} done", round + 1, opts.rounds);
    }

    let s: Vec<Summary> = seq.iter_mut().map(|v| summarise(v)).collect();
    let f: Vec<Summary> = fan.iter_mut().map(|v| summarise(v)).collect();
    let rate = |i: usize| (opts.burst * opts.rounds) as f64 / burst_time[i].as_secs_f64();
    let clients = subscriber_connections(&publisher).await;

    println!();
    println!(
        "runtime: multi-thread, 2 workers | rounds: {} | sequential messages per client: {} | \
         burst: {} | fan-out: {} listeners × {} messages",
        opts.rounds, s[0].n, opts.burst, opts.fanout, f[0].n
    );
    println!(
        "{:<40} {:>12} {:>12} {:>8}",
        "scenario", NAMES[0], NAMES[1], "kl/rr"
    );
    let row = |name: &str, a: f64, b: f64| {
        println!("{name:<40} {a:>12.1} {b:>12.1} {:>8.2}", a / b);
    };
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    row(
        "publish→receive p50 (µs)",
        micros(s[0].p50),
        micros(s[1].p50),
    );
    row(
        "publish→receive p99 (µs)",
        micros(s[0].p99),
        micros(s[1].p99),
    );
    row("burst: messages received/s", rate(0), rate(1));
    row(
        &format!("fan-out to {} listeners p50 (µs)", opts.fanout),
        micros(f[0].p50),
        micros(f[1].p50),
    );
    row(
        &format!("fan-out to {} listeners p99 (µs)", opts.fanout),
        micros(f[0].p99),
        micros(f[1].p99),
    );
    println!(
        "subscriber connections on the server: {} (keylatch: 1 hub; redis-rs: 2 + {} fan-out)",
        clients, opts.fanout
    );
    println!(
        "(same publisher for both; keylatch p50 {} µs)",
        us(s[0].p50)
    );
}

/// Publishes `n` messages in one pipeline; time until all are received.
async fn burst(publisher: &Connection, channel: &str, sub: &mut Sub, n: usize) -> Duration {
    let pipeline: Pipeline = (0..n)
        .map(|i| Cmd::new("PUBLISH").arg(channel).arg(i))
        .collect();
    let t = Instant::now();
    let (replies, ()) = tokio::join!(publisher.pipeline(pipeline), async {
        for _ in 0..n {
            sub.next().await;
        }
    });
    let elapsed = t.elapsed();
    for r in replies.expect("pipeline") {
        r.expect("PUBLISH");
    }
    elapsed
}

const FAN_CHANNELS: [&str; 2] = ["bench:fan:kl", "bench:fan:rr"];

/// `n` listeners per client on its fan-out channel.
async fn fan_out(hub: &PubSub, rr: &redis::Client, n: usize) -> [Vec<Sub>; 2] {
    let mut kl = Vec::with_capacity(n);
    let mut rs = Vec::with_capacity(n);
    for _ in 0..n {
        kl.push(Sub::Keylatch(
            hub.subscribe(FAN_CHANNELS[0]).await.expect("subscribe"),
        ));
        rs.push(redis_rs_sub(rr, FAN_CHANNELS[1]).await);
    }
    [kl, rs]
}

/// Publishes one message; time until every listener has it.
async fn fan_once(publisher: &Connection, channel: &str, subs: &mut [Sub]) -> Duration {
    let t = Instant::now();
    let (published, latency) = tokio::join!(publisher.publish(channel, "0"), async {
        for s in subs.iter_mut() {
            s.next().await;
        }
        t.elapsed()
    });
    published.expect("PUBLISH");
    latency
}

/// Clients in pub/sub mode, from `CLIENT LIST TYPE pubsub`.
async fn subscriber_connections(conn: &Connection) -> usize {
    let list: String = conn
        .cmd(Cmd::new("CLIENT").arg("LIST").arg("TYPE").arg("pubsub"))
        .await
        .expect("CLIENT LIST");
    list.lines().filter(|l| !l.is_empty()).count()
}
