//! `keylatch bench --compare`'s other half: the scenarios of
//! `keylatch::bench` (the same code the CLI runs) through keylatch, redis-rs
//! running keylatch's own two Lua scripts, and rslock, against one
//! standalone server, then the table, the ratios and optionally the SVG.
//!
//! It is a binary of this separate workspace so the product never depends
//! on another Redis client; `keylatch bench --compare` finds and runs it
//! (`$KEYLATCH_COMPARE_BIN`, a `compare` next to `keylatch`, or cargo).
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin compare -- \
//!     [--url redis://127.0.0.1:6379] [--clients 64] [--duration 10s] [--plot out.svg]
//! ```
//!
//! Waiting in scenario c: keylatch waits on its unlock channel; redis-rs
//! (no pub/sub path written here) and rslock (none of its own) retry every
//! millisecond, the loop an application without one would write.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch::bench::{
    comparison, parse_duration, run_suite, svg, table, BenchError, BenchResult, LockClient,
    LockHandle, Plan, Progress,
};
use keylatch::lock::scripts::{REENTRANT_ACQUIRE, REENTRANT_RELEASE};
use keylatch::{Client, Locks, LocksConfig};

/// The retry interval of the clients without a way to wait for a release.
const RETRY: Duration = Duration::from_millis(1);
/// Lease of every hold, as keylatch's watchdog default.
const LEASE_MS: u64 = 30_000;
/// Idle expiry of the fencing counter (as keylatch's default).
const TOKEN_TTL_MS: u64 = 86_400_000;

/// redis-rs on one multiplexed connection, running keylatch's scripts.
struct RedisRs {
    conn: redis::aio::MultiplexedConnection,
    scripts: Arc<(redis::Script, redis::Script)>,
    owners: AtomicU64,
}

struct RedisRsLock {
    conn: redis::aio::MultiplexedConnection,
    scripts: Arc<(redis::Script, redis::Script)>,
    name: String,
    token: String,
    channel: String,
    owner: String,
}

impl LockClient for RedisRs {
    type Handle = RedisRsLock;

    fn label(&self) -> &str {
        "redis-rs"
    }

    fn handle(&self, name: &str) -> RedisRsLock {
        let n = self.owners.fetch_add(1, Ordering::Relaxed);
        RedisRsLock {
            conn: self.conn.clone(),
            scripts: Arc::clone(&self.scripts),
            name: name.to_owned(),
            token: format!("redisson_lock_token:{{{name}}}"),
            channel: format!("redisson_lock__channel:{{{name}}}"),
            owner: format!("redis-rs-{}:{n}", std::process::id()),
        }
    }
}

fn rr(what: &str, e: redis::RedisError) -> BenchError {
    BenchError::new(format!("redis-rs {what}: {e}"))
}

impl LockHandle for RedisRsLock {
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
                .arg("1")
                .invoke_async(&mut self.conn)
                .await
                .map_err(|e| rr("acquire", e))?;
            match reply.as_slice() {
                [holds, fence] if *holds > 0 => return Ok(Some(*fence)),
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
        let _: Option<i64> = self
            .scripts
            .1
            .key(&self.name)
            .key(&self.channel)
            .key(&self.token)
            .arg("0")
            .arg(LEASE_MS)
            .arg(&self.owner)
            .arg("publish")
            .arg(fence)
            .invoke_async(&mut self.conn)
            .await
            .map_err(|e| rr("release", e))?;
        Ok(())
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
    url: Option<String>,
    clients: usize,
    duration: Duration,
    plot: Option<String>,
}

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        url: None,
        clients: 64,
        duration: Duration::from_secs(10),
        plot: None,
    };
    while let Some(flag) = argv.next() {
        let mut value = || argv.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--url" => a.url = Some(value()?),
            "--clients" => {
                let v = value()?;
                a.clients = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=100_000).contains(n))
                    .ok_or(format!("--clients takes a number from 1 to 100000, not {v:?}"))?;
            }
            "--duration" => {
                let v = value()?;
                a.duration = parse_duration(&v)
                    .filter(|d| *d >= Duration::from_millis(100) && *d <= Duration::from_secs(86_400))
                    .ok_or(format!("--duration takes a duration from 100ms to 24h, not {v:?}"))?;
            }
            "--plot" => a.plot = Some(value()?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    let result = parse(std::env::args().skip(1)).and_then(|a| {
        // No server named: start one for the run (dropped, so stopped, at the end).
        let server = match a.url {
            Some(_) => None,
            None => Some(
                keylatch_harness::RedisServer::builder()
                    .start()
                    .map_err(|e| format!("cannot start redis-server: {e}"))?,
            ),
        };
        let url = a
            .url
            .clone()
            .or_else(|| server.as_ref().map(|s| s.url()))
            .ok_or("no server")?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the runtime: {e}"))?;
        rt.block_on(async move {
            tokio::spawn(compare(a, url))
                .await
                .map_err(|e| format!("the run failed: {e}"))?
        })
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keylatch compare: {e}");
            ExitCode::from(2)
        }
    }
}

async fn compare(a: Args, url: String) -> Result<(), String> {
    let client = Client::connect(&url)
        .await
        .map_err(|e| format!("cannot connect to {url}: {e}"))?;
    if client.is_cluster() {
        return Err(format!(
            "{url} is a cluster; the comparison runs against one standalone server"
        ));
    }
    let keylatch = Locks::new(client, LocksConfig::default());
    let conn = redis::Client::open(url.as_str())
        .map_err(|e| format!("redis-rs: {e}"))?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| format!("redis-rs cannot connect to {url}: {e}"))?;
    let redis_rs = RedisRs {
        conn,
        scripts: Arc::new((
            redis::Script::new(REENTRANT_ACQUIRE.source()),
            redis::Script::new(REENTRANT_RELEASE.source()),
        )),
        owners: AtomicU64::new(1),
    };
    let rslock_client = redis::Client::open(url.as_str()).map_err(|e| format!("rslock: {e}"))?;
    let mut manager = rslock::LockManager::from_clients(vec![rslock_client]);
    manager.set_retry(1, RETRY);
    let rslock = RsLock(Arc::new(manager));

    let plan = Plan::new(a.duration, a.clients);
    println!(
        "keylatch bench --compare: {url} (standalone), {:.1}s total, {} tasks in b; \
         each scenario's time split among 3 clients, two halves in alternating order",
        a.duration.as_secs_f64(),
        plan.tasks
    );
    println!("c: keylatch waits on its unlock channel; redis-rs and rslock retry every 1ms");
    let progress = Progress::new(plan.duration);
    let results = run_suite(&[&keylatch, &redis_rs, &rslock], &plan, &progress)
        .await
        .map_err(|e| e.to_string())?;
    drop(progress);
    print!("{}", table(&results));
    println!();
    print!("{}", comparison(&results));
    if let Some(path) = &a.plot {
        std::fs::write(path, svg(&results, "keylatch vs redis-rs vs rslock — latency CDF"))
            .map_err(|e| format!("cannot write {path}: {e}"))?;
        println!("CDF plot: {path}");
    }
    Ok(())
}
