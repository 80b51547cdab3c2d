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
//! The run itself is the CLI's kit (`keylatch_cli::bench::run_scale`, also
//! `keylatch bench --holds N`); this binary adds `--inflight` and the
//! `--tracking off` diagnostic.
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin scale -- \
//!     [--holds 100000] [--inflight 256] [--watchdog-ms 3000] [--rounds 3] [--url redis://…]
//!     [--tracking off] [--cluster local [--node-timeout-ms 15000]]
//! ```
//!
//! `--cluster local` starts a 6-node harness cluster (3 masters, 3
//! replicas) and holds the locks there, spread over the masters by slot;
//! the server CPU is then not measured (one `INFO` answers for one node).
//! Its nodes fail over after `--node-timeout-ms` (Redis's default, 15 s);
//! the masters are printed at the start and the end.
//!
//! `--tracking off` (a diagnostic, not the users' path): `Locks::new` on a
//! plain `Client::connect`, without the client tracking `Locks::connect`
//! turns on, to show what tracking costs per renewed hold.

use std::time::Duration;

use keylatch_benches::{url_or_local_server, Flags};
use keylatch_cli::bench::{run_scale, ScaleOptions};
use keylatch_cluster::{Client, ClientConfig};
use keylatch_lock::{Locks, LocksConfig};

fn main() {
    let flags = Flags::parse(&[
        "--holds",
        "--inflight",
        "--watchdog-ms",
        "--rounds",
        "--url",
        "--tracking",
        "--cluster",
        "--node-timeout-ms",
    ]);
    let tracking = flags.text("--tracking").as_deref() != Some("off");
    let opts = ScaleOptions {
        holds: flags.number("--holds", 100_000),
        inflight: flags.number("--inflight", 256),
        watchdog: Duration::from_millis(flags.number("--watchdog-ms", 3000)),
        rounds: flags.number("--rounds", 3),
    };
    let mut _cluster = None;
    let (url, _server) = if flags.text("--cluster").as_deref() == Some("local") {
        // Redis's own node timeout (15 s) by default, not the harness's
        // 1 s (made for tests that fail over on purpose): the nodes share
        // 2 cores with a client renewing a million holds, and a node
        // starved past the timeout would be failed over mid-run.
        let node_timeout = flags.number("--node-timeout-ms", 15_000);
        let cluster = keylatch_harness::RedisCluster::builder()
            .node_timeout(Duration::from_millis(node_timeout))
            .start()
            .expect("a local cluster");
        println!("cluster: masters at the start {:?}", cluster.masters());
        let seed = cluster.seed_urls().into_iter().next().expect("a seed");
        _cluster = Some(cluster);
        (seed, None)
    } else {
        url_or_local_server(flags.text("--url").as_deref())
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(&url, opts, tracking));
    if let Some(cluster) = &_cluster {
        // A failover during the run is named, so its losses are not
        // mistaken for the client's.
        println!("cluster: masters at the end {:?}", cluster.masters());
    }
}

async fn run(url: &str, opts: ScaleOptions, tracking: bool) {
    println!(
        "scale: {} watchdog holds, {} acquires in flight, watchdog {:?} (a round every {:?}), {} rounds idle",
        opts.holds,
        opts.inflight,
        opts.watchdog,
        opts.watchdog / 3,
        opts.rounds
    );
    let config = LocksConfig::default().watchdog_timeout(opts.watchdog);
    let locks = if tracking {
        Locks::connect_with(ClientConfig::from_url(url).expect("url"), config)
            .await
            .expect("client")
    } else {
        println!("(tracking off: Locks::new on Client::connect)");
        Locks::new(Client::connect(url).await.expect("client"), config)
    };
    let admin = Client::connect(url).await.expect("admin client");
    let report = run_scale(&locks, &admin, &opts).await.expect("scale run");
    print!("{report}");
}
