//! `keylatch bench --compare`'s other half: the scenarios of
//! `keylatch_cli::bench` (the same code the CLI runs) through keylatch, redis-rs
//! running keylatch's own two Lua scripts, and rslock, then the table, the
//! ratios and optionally the SVG.
//!
//! It is a binary of this separate workspace so the product never depends
//! on another Redis client; `keylatch bench --compare` finds and runs it
//! (`$KEYLATCH_COMPARE_BIN`, a `compare` next to `keylatch`, or cargo).
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin compare -- \
//!     [--url URL]... [--cluster URL]... [--cluster-local]
//!     [--clients 64] [--duration 10s] [--plot out.svg]
//! ```
//!
//! Targets:
//! - `--url URL` (repeatable seeds): a standalone server or a cluster, told
//!   apart by keylatch's `Client` (`cluster_enabled`); on a standalone
//!   server redis-rs and rslock use the first URL.
//! - `--cluster URL` (repeatable seeds): must be a cluster.
//! - neither: a redis-server started for the run on a free port;
//!   `--cluster-local`: a 6-node cluster (3 masters + 3 replicas) started
//!   for the run by `keylatch_harness::RedisCluster`. Both are stopped at
//!   the end.
//!
//! On a cluster keylatch runs as is (its `Client` routes by slot) and
//! redis-rs through `redis::cluster_async::ClusterConnection`, with the
//! same scripts and the same Redisson key layout (lock `name`, counter
//! `redisson_lock_token:{name}`, channel `redisson_lock__channel:{name}`:
//! one slot for a name without a hash tag), releases publishing with
//! `spublish` as keylatch's do. rslock is left out: it is RedLock over
//! independent servers, not a cluster client.
//!
//! Waiting in scenario c: keylatch waits on its unlock channel (sharded in
//! a cluster); redis-rs (no pub/sub path written here) and rslock (none of
//! its own) retry every millisecond, the loop an application without one
//! would write.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch::lock::scripts::{REENTRANT_ACQUIRE, REENTRANT_RELEASE};
use keylatch::{Client, ClientConfig, Locks, LocksConfig};
use keylatch_cli::bench::{
    comparison, parse_duration, run_suite, svg, table, BenchError, BenchResult, LockClient,
    LockHandle, Plan, Progress,
};

/// The retry interval of the clients without a way to wait for a release.
const RETRY: Duration = Duration::from_millis(1);
/// Lease of every hold, as keylatch's watchdog default.
const LEASE_MS: u64 = 30_000;
/// Idle expiry of the fencing counter (as keylatch's default).
const TOKEN_TTL_MS: u64 = 86_400_000;

/// redis-rs running keylatch's scripts, on one multiplexed connection
/// (standalone) or one `cluster_async::ClusterConnection` (a multiplexed
/// connection per node, routed by the first key's slot).
struct RedisRs<C> {
    conn: C,
    scripts: Arc<(redis::Script, redis::Script)>,
    /// ARGV[3] of the release script: `publish`, or `spublish` in a cluster.
    publish: &'static str,
    owners: AtomicU64,
}

struct RedisRsLock<C> {
    conn: C,
    scripts: Arc<(redis::Script, redis::Script)>,
    publish: &'static str,
    name: String,
    token: String,
    channel: String,
    /// ARGV[4] of the release script: the waiters woken by name.
    waiters: String,
    owner: String,
}

impl<C> RedisRs<C> {
    fn new(conn: C, publish: &'static str) -> Self {
        Self {
            conn,
            scripts: Arc::new((
                redis::Script::new(REENTRANT_ACQUIRE.source()),
                redis::Script::new(REENTRANT_RELEASE.source()),
            )),
            publish,
            owners: AtomicU64::new(1),
        }
    }
}

impl<C> LockClient for RedisRs<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    type Handle = RedisRsLock<C>;

    fn label(&self) -> &str {
        "redis-rs"
    }

    fn handle(&self, name: &str) -> RedisRsLock<C> {
        let n = self.owners.fetch_add(1, Ordering::Relaxed);
        RedisRsLock {
            conn: self.conn.clone(),
            scripts: Arc::clone(&self.scripts),
            publish: self.publish,
            name: name.to_owned(),
            token: format!("redisson_lock_token:{{{name}}}"),
            channel: format!("redisson_lock__channel:{{{name}}}"),
            waiters: format!("keylatch_lock_waiters:{{{name}}}"),
            owner: format!("redis-rs-{}:{n}", std::process::id()),
        }
    }
}

fn rr(what: &str, e: redis::RedisError) -> BenchError {
    BenchError::new(format!("redis-rs {what}: {e}"))
}

impl<C> LockHandle for RedisRsLock<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// The hold's fencing token, checked by the release script.
    type Held = i64;

    async fn try_acquire(&mut self, wait: Duration) -> BenchResult<Option<i64>> {
        let deadline = Instant::now() + wait;
        loop {
            let reply: Vec<i64> = self
                .scripts
                .0
                .key(&self.name)
                .key(&self.token)
                .arg(LEASE_MS)
                .arg(&self.owner)
                .arg(TOKEN_TTL_MS)
                .invoke_async(&mut self.conn)
                .await
                .map_err(|e| rr("acquire", e))?;
            match reply.as_slice() {
                // `[1, token, 1]`: a first hold whose call made the counter.
                [holds, fence] | [holds, fence, 1] if *holds > 0 => return Ok(Some(*fence)),
                [_, _] => {}
                other => {
                    return Err(BenchError::new(format!(
                        "redis-rs acquire: unexpected reply {other:?}"
                    )))
                }
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(RETRY).await;
        }
    }

    async fn release(&mut self, fence: i64) -> BenchResult<()> {
        let reply: Option<i64> = self
            .scripts
            .1
            .key(&self.name)
            .key(&self.token)
            .arg(&self.owner)
            .arg(&self.channel)
            .arg(self.publish)
            .arg(&self.waiters)
            // No grant: these contenders never wait.
            .arg("0")
            .arg(fence)
            .invoke_async(&mut self.conn)
            .await
            .map_err(|e| rr("release", e))?;
        // nil: not the holder (expired, or a newer fence). An error, not
        // ignored: the same owner's reentrant acquire would keep succeeding
        // on the unreleased lock and hide it.
        match reply {
            Some(_) => Ok(()),
            None => Err(BenchError::new(format!(
                "redis-rs release: {} is not held by {}",
                self.name, self.owner
            ))),
        }
    }
}

/// rslock's `LockManager` on one server (quorum of one), one attempt per
/// `lock` call: the retrying is ours, so a wait is bounded like the others.
struct RsLock(Arc<rslock::LockManager>);

struct RsLockHandle {
    manager: Arc<rslock::LockManager>,
    name: String,
}

impl LockClient for RsLock {
    type Handle = RsLockHandle;

    fn label(&self) -> &str {
        "rslock"
    }

    fn handle(&self, name: &str) -> RsLockHandle {
        RsLockHandle {
            manager: Arc::clone(&self.0),
            name: name.to_owned(),
        }
    }
}

impl LockHandle for RsLockHandle {
    type Held = rslock::Lock;

    async fn try_acquire(&mut self, wait: Duration) -> BenchResult<Option<rslock::Lock>> {
        let deadline = Instant::now() + wait;
        loop {
            match self
                .manager
                .lock(self.name.as_bytes(), Duration::from_millis(LEASE_MS))
                .await
            {
                Ok(lock) => return Ok(Some(lock)),
                Err(rslock::LockError::Unavailable) => {}
                Err(e) => return Err(BenchError::new(format!("rslock acquire: {e}"))),
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(RETRY).await;
        }
    }

    async fn release(&mut self, lock: rslock::Lock) -> BenchResult<()> {
        // rslock's unlock is best effort and reports nothing.
        self.manager.unlock(&lock).await;
        Ok(())
    }
}

struct Args {
    /// `--url` seeds: standalone or cluster, as the server says.
    urls: Vec<String>,
    /// `--cluster` seeds: must be a cluster.
    cluster: Vec<String>,
    /// `--cluster-local`: start a 6-node cluster for the run.
    cluster_local: bool,
    clients: usize,
    duration: Duration,
    plot: Option<String>,
}

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        urls: Vec::new(),
        cluster: Vec::new(),
        cluster_local: false,
        clients: 64,
        duration: Duration::from_secs(10),
        plot: None,
    };
    while let Some(flag) = argv.next() {
        let mut value = || argv.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--url" => a.urls.push(value()?),
            "--cluster" => a.cluster.push(value()?),
            "--cluster-local" => a.cluster_local = true,
            "--clients" => {
                let v = value()?;
                a.clients = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=100_000).contains(n))
                    .ok_or(format!(
                        "--clients takes a number from 1 to 100000, not {v:?}"
                    ))?;
            }
            "--duration" => {
                let v = value()?;
                a.duration = parse_duration(&v)
                    .filter(|d| {
                        *d >= Duration::from_millis(100) && *d <= Duration::from_secs(86_400)
                    })
                    .ok_or(format!(
                        "--duration takes a duration from 100ms to 24h, not {v:?}"
                    ))?;
            }
            "--plot" => a.plot = Some(value()?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if a.cluster_local && !(a.urls.is_empty() && a.cluster.is_empty()) {
        return Err("--cluster-local starts its own cluster; drop --url/--cluster".to_owned());
    }
    Ok(a)
}

fn main() -> ExitCode {
    let result = parse(std::env::args().skip(1)).and_then(|mut a| {
        // No server named: start one (or a cluster) for the run; dropping
        // these at the end stops them.
        let mut local_server = None;
        let mut local_cluster = None;
        if a.cluster_local {
            let cluster = keylatch_harness::RedisCluster::builder()
                .start()
                .map_err(|e| format!("cannot start a redis cluster: {e}"))?;
            a.cluster = cluster.seed_urls();
            local_cluster = Some(cluster);
        } else if a.urls.is_empty() && a.cluster.is_empty() {
            let server = keylatch_harness::RedisServer::builder()
                .start()
                .map_err(|e| format!("cannot start redis-server: {e}"))?;
            a.urls = vec![server.url()];
            local_server = Some(server);
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the runtime: {e}"))?;
        let run = rt.block_on(async move {
            tokio::spawn(compare(a))
                .await
                .map_err(|e| format!("the run failed: {e}"))?
        });
        // Stopped only now: the clients are gone with the runtime's tasks.
        drop(rt);
        drop((local_server, local_cluster));
        run
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keylatch compare: {e}");
            ExitCode::from(2)
        }
    }
}

async fn compare(a: Args) -> Result<(), String> {
    let seeds: Vec<String> = a.urls.iter().chain(&a.cluster).cloned().collect();
    // Every URL printed goes through the library's redaction: a password
    // in a seed never reaches the report or an error line.
    let shown: String = seeds
        .iter()
        .map(|u| keylatch::redact_url(u))
        .collect::<Vec<_>>()
        .join(", ");
    let refs: Vec<&str> = seeds.iter().map(String::as_str).collect();
    let cfg = ClientConfig::from_urls(&refs).map_err(|e| e.to_string())?;
    let client = Client::connect_with(cfg)
        .await
        .map_err(|e| format!("cannot connect to {shown}: {e}"))?;
    let is_cluster = client.is_cluster();
    if !a.cluster.is_empty() && !is_cluster {
        return Err(format!(
            "--cluster {shown} is not a cluster (cluster_enabled:0); use --url for a standalone server"
        ));
    }
    let keylatch = Locks::new(client, LocksConfig::default());
    let plan = Plan::new(a.duration, a.clients);
    let progress;
    let results = if is_cluster {
        let conn = redis::cluster::ClusterClient::new(seeds.clone())
            .map_err(|e| format!("redis-rs: {e}"))?
            .get_async_connection()
            .await
            .map_err(|e| format!("redis-rs cannot connect to the cluster at {shown}: {e}"))?;
        let redis_rs = RedisRs::new(conn, "spublish");
        header(&shown, "cluster", &a, &plan, 2);
        println!(
            "c: keylatch waits on its sharded unlock channel (SSUBSCRIBE); redis-rs retries every 1ms; \
             rslock left out: it is RedLock over independent servers, not a cluster client"
        );
        progress = Progress::new(plan.duration);
        run_suite(&[&keylatch, &redis_rs], &plan, &progress).await
    } else {
        // Several --url seeds of one standalone server are unusual; the
        // other clients take the first (ClientConfig refused an empty list).
        let url = seeds.first().ok_or("no server")?;
        let url_shown = keylatch::redact_url(url);
        let conn = redis::Client::open(url.as_str())
            .map_err(|e| format!("redis-rs: {e}"))?
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| format!("redis-rs cannot connect to {url_shown}: {e}"))?;
        let redis_rs = RedisRs::new(conn, "publish");
        let rslock_client =
            redis::Client::open(url.as_str()).map_err(|e| format!("rslock: {e}"))?;
        let mut manager = rslock::LockManager::from_clients(vec![rslock_client]);
        manager.set_retry(1, RETRY);
        let rslock = RsLock(Arc::new(manager));
        header(&url_shown, "standalone", &a, &plan, 3);
        println!("c: keylatch waits on its unlock channel; redis-rs and rslock retry every 1ms");
        progress = Progress::new(plan.duration);
        run_suite(&[&keylatch, &redis_rs, &rslock], &plan, &progress).await
    }
    .map_err(|e| e.to_string())?;
    drop(progress);
    print!("{}", table(&results));
    println!();
    print!("{}", comparison(&results));
    if let Some(path) = &a.plot {
        let title = if is_cluster {
            "keylatch vs redis-rs (cluster_async) — latency CDF, cluster"
        } else {
            "keylatch vs redis-rs vs rslock — latency CDF"
        };
        std::fs::write(path, svg(&results, title))
            .map_err(|e| format!("cannot write {path}: {e}"))?;
        println!("CDF plot: {path}");
    }
    Ok(())
}

/// The first line: target, kind, time, width.
fn header(target: &str, kind: &str, a: &Args, plan: &Plan, clients: usize) {
    println!(
        "keylatch bench --compare: {target} ({kind}), {:.1}s total, {} tasks in b; \
         each scenario's time split among {clients} clients, two halves in alternating order",
        a.duration.as_secs_f64(),
        plan.tasks
    );
}
