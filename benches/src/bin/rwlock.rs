//! The read-write lock under 8 readers + 1 writer on one name, in one run
//! against one local redis-server:
//! - keylatch `RwLock` through `Locks::connect(url)` as the README shows;
//! - Redisson's own `RReadWriteLock` scripts (read/write acquire and
//!   unlock, 3.24+, as a Java client sends them), with Redisson's waiting:
//!   after a failed try, sleep on the lock's channel until a message or the
//!   TTL the script returned, then try again;
//! - keylatch's reentrant lock with the same 9 tasks (what the workload
//!   costs when every hold is exclusive).
//!
//! Every task loops: acquire (wait up to 30 s), hold `--hold-ms` (default
//! 1), release; the writer then thinks `--think-ms` (default 10) before it
//! asks again, readers ask again at once. Reported per row: reads/s, writes/s, the writer's wait p50
//! and p99 (from asking to holding), and CPU per operation of this process
//! (the clients) and of the redis-server, read from /proc.
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin rwlock -- [--seconds 5] [--hold-ms 1] [--think-ms 10] [--url URL]
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keylatch_benches::{arg, arg_text, pid_cpu, process_cpu, summarise, url_or_local_server};
use keylatch_cluster::{Client, Commands, PubSub};
use keylatch_lock::Locks;
use keylatch_resp::Frame;

const READERS: usize = 8;

/// `RedissonReadLock.tryLockInnerAsync` (KEYS name, timeout prefix; ARGV
/// lease ms, owner, owner:write): nil when acquired, else the PTTL.
const REDISSON_READ: &str = "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call('hset', KEYS[1], 'mode', 'read'); redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('set', KEYS[2] .. ':1', 1); redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); local key = KEYS[2] .. ':' .. ind;redis.call('set', key, 1); redis.call('pexpire', key, ARGV[1]); local remainTime = redis.call('pttl', KEYS[1]); redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); return nil; end;return redis.call('pttl', KEYS[1]);";

/// `RedissonReadLock.unlockInnerAsync` (KEYS name, channel, timeout prefix,
/// key prefix, unlock latch; ARGV "0", owner, publish command, latch ms).
const REDISSON_READ_UNLOCK: &str = "local val = redis.call('get', KEYS[5]); if val ~= false then return tonumber(val);end; local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call(ARGV[3], KEYS[2], ARGV[1]); redis.call('set', KEYS[5], 1, 'px', ARGV[4]); return 1; end; local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); if (lockExists == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); if (counter == 0) then redis.call('hdel', KEYS[1], ARGV[2]); end;redis.call('del', KEYS[3] .. ':' .. (counter+1)); if (redis.call('hlen', KEYS[1]) > 1) then local maxRemainTime = -3; local keys = redis.call('hkeys', KEYS[1]); for n, key in ipairs(keys) do counter = tonumber(redis.call('hget', KEYS[1], key)); if type(counter) == 'number' then for i=counter, 1, -1 do local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i); maxRemainTime = math.max(remainTime, maxRemainTime);end; end; end; if maxRemainTime > 0 then redis.call('pexpire', KEYS[1], maxRemainTime); redis.call('set', KEYS[5], 0, 'px', ARGV[4]); return 0; end;if mode == 'write' then redis.call('set', KEYS[5], 0, 'px', ARGV[4]); return 0;end; end; redis.call('del', KEYS[1]); redis.call(ARGV[3], KEYS[2], ARGV[1]); redis.call('set', KEYS[5], 1, 'px', ARGV[4]); return 1; ";

/// `RedissonWriteLock.tryLockInnerAsync` (KEYS name; ARGV lease ms,
/// owner:write).
const REDISSON_WRITE: &str = "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call('hset', KEYS[1], 'mode', 'write'); redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (mode == 'write') then if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); local currentExpire = redis.call('pttl', KEYS[1]); redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); return nil; end; end;return redis.call('pttl', KEYS[1]);";

/// `RedissonWriteLock.unlockInnerAsync` (KEYS name, channel, unlock latch;
/// ARGV "1", lease ms, owner:write, publish command, latch ms).
const REDISSON_WRITE_UNLOCK: &str = "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val);end; local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end;if (mode == 'write') then local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); if (lockExists == 0) then return nil;else local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; else redis.call('hdel', KEYS[1], ARGV[3]); if (redis.call('hlen', KEYS[1]) == 1) then redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); else redis.call('hset', KEYS[1], 'mode', 'read'); end; redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; end; end; return nil;";

/// One row's figures.
struct Row {
    label: &'static str,
    reads: u64,
    writes: u64,
    wall: Duration,
    /// The writer's waits, asking to holding.
    write_waits: Vec<Duration>,
    client: Duration,
    server: Option<Duration>,
}

impl Row {
    fn print(&mut self, base: Option<f64>) {
        let secs = self.wall.as_secs_f64();
        let ops = (self.reads + self.writes).max(1);
        let rate = ops as f64 / secs;
        let w = summarise(&mut self.write_waits);
        let per_op = |d: Duration| d.as_secs_f64() * 1e6 / ops as f64;
        let server = self
            .server
            .map_or("n/a".to_owned(), |d| format!("{:.1}", per_op(d)));
        let ratio = base.map_or(String::new(), |b| {
            format!("  ({:.2}× keylatch rw ops/s)", rate / b)
        });
        println!(
            "{:<34} {:>9.0} {:>9.0} {:>9.1} {:>10.1} {:>10.1} {:>8.1} {:>8}{ratio}",
            self.label,
            self.reads as f64 / secs,
            self.writes as f64 / secs,
            rate,
            w.p50.as_secs_f64() * 1e3,
            w.p99.as_secs_f64() * 1e3,
            per_op(self.client),
            server,
        );
    }
}

/// What one task of a row does per operation: acquire (wait ≤ 30 s),
/// hold, release. Returns `false` when the acquire timed out.
trait Side: Send + Sync + 'static {
    fn once(
        &self,
        write: bool,
        hold: Duration,
        task: usize,
    ) -> impl std::future::Future<Output = bool> + Send;
}

async fn run_row<S: Side>(
    label: &'static str,
    side: Arc<S>,
    seconds: u64,
    hold: Duration,
    think: Duration,
    server_pid: Option<u32>,
) -> Row {
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let writes = Arc::new(AtomicU64::new(0));
    let waits = Arc::new(Mutex::new(Vec::new()));
    let (cpu0, srv0, t0) = (process_cpu(), server_pid.and_then(pid_cpu), Instant::now());
    let mut tasks = Vec::new();
    for t in 0..=READERS {
        let write = t == READERS;
        let (side, stop, reads, writes, waits) = (
            Arc::clone(&side),
            Arc::clone(&stop),
            Arc::clone(&reads),
            Arc::clone(&writes),
            Arc::clone(&waits),
        );
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let asked = Instant::now();
                if !side.once(write, hold, t).await {
                    continue;
                }
                if write {
                    waits.lock().expect("waits").push(asked.elapsed());
                    writes.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(think).await;
                } else {
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    // Everything is read at the stop: a starved waiter still asking (up to
    // its 30 s) must not stretch the row.
    stop.store(true, Ordering::Relaxed);
    let wall = t0.elapsed();
    let server = srv0
        .zip(server_pid.and_then(pid_cpu))
        .map(|(a, b)| b.saturating_sub(a));
    let client = process_cpu().saturating_sub(cpu0);
    let (reads, writes) = (
        reads.load(Ordering::Relaxed),
        writes.load(Ordering::Relaxed),
    );
    let write_waits = waits.lock().expect("waits").clone();
    for t in tasks {
        t.await.expect("task");
    }
    Row {
        label,
        reads,
        writes,
        wall,
        write_waits,
        client,
        server,
    }
}

/// keylatch: the read or write side of one `RwLock` per task.
struct KeylatchRw {
    locks: Vec<keylatch_lock::RwLock>,
}

impl Side for KeylatchRw {
    async fn once(&self, write: bool, hold: Duration, task: usize) -> bool {
        let rw = &self.locks[task];
        let lock = if write { rw.write() } else { rw.read() };
        let Some(g) = lock
            .try_acquire(Duration::from_secs(30), None)
            .await
            .expect("acquire")
        else {
            return false;
        };
        tokio::time::sleep(hold).await;
        g.unlock().await.expect("release");
        true
    }
}

/// keylatch's reentrant lock: every hold exclusive.
struct KeylatchExclusive {
    locks: Vec<keylatch_lock::Lock>,
}

impl Side for KeylatchExclusive {
    async fn once(&self, _write: bool, hold: Duration, task: usize) -> bool {
        let Some(g) = self.locks[task]
            .try_acquire(Duration::from_secs(30), None)
            .await
            .expect("acquire")
        else {
            return false;
        };
        tokio::time::sleep(hold).await;
        g.unlock().await.expect("release");
        true
    }
}

/// Redisson's scripts through one client, waiting as Redisson does.
struct Redisson {
    client: Client,
    hub: PubSub,
    name: String,
    requests: AtomicU64,
}

impl Redisson {
    fn owner(task: usize) -> String {
        format!("9c0ffee0-0000-4000-8000-000000000000:{task}")
    }

    async fn try_once(&self, write: bool, owner: &str) -> Frame {
        let n = &self.name;
        if write {
            self.client
                .eval(
                    REDISSON_WRITE,
                    &[n.as_str()],
                    &["30000", &format!("{owner}:write")],
                )
                .await
                .expect("redisson write")
        } else {
            let prefix = format!("{{{n}}}:{owner}:rwlock_timeout");
            self.client
                .eval(
                    REDISSON_READ,
                    &[n.as_str(), &prefix],
                    &["30000", owner, &format!("{owner}:write")],
                )
                .await
                .expect("redisson read")
        }
    }

    async fn unlock(&self, write: bool, owner: &str) {
        let n = &self.name;
        let channel = format!("redisson_rwlock:{{{n}}}");
        let id = self.requests.fetch_add(1, Ordering::Relaxed);
        let latch = format!("redisson_unlock_latch:{{{n}}}:{id:032x}");
        let reply = if write {
            self.client
                .eval(
                    REDISSON_WRITE_UNLOCK,
                    &[n.as_str(), &channel, &latch],
                    &["1", "30000", &format!("{owner}:write"), "publish", "3000"],
                )
                .await
        } else {
            let prefix = format!("{{{n}}}:{owner}:rwlock_timeout");
            let key_prefix = format!("{{{n}}}");
            self.client
                .eval(
                    REDISSON_READ_UNLOCK,
                    &[n.as_str(), &channel, &prefix, &key_prefix, &latch],
                    &["0", owner, "publish", "3000"],
                )
                .await
        };
        reply.expect("redisson unlock");
    }
}

impl Side for Redisson {
    async fn once(&self, write: bool, hold: Duration, task: usize) -> bool {
        let owner = Self::owner(task);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut ttl = match self.try_once(write, &owner).await {
            Frame::Null => 0,
            Frame::Integer(ms) => ms,
            other => panic!("unexpected reply {other:?}"),
        };
        if ttl != 0 {
            let mut sub = self
                .hub
                .subscribe(&format!("redisson_rwlock:{{{}}}", self.name))
                .await
                .expect("subscribe");
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return false;
                }
                let nap = Duration::from_millis(ttl.max(1).unsigned_abs()).min(left);
                let _ = tokio::time::timeout(nap, sub.recv()).await;
                match self.try_once(write, &owner).await {
                    Frame::Null => break,
                    Frame::Integer(ms) => ttl = ms,
                    other => panic!("unexpected reply {other:?}"),
                }
            }
        }
        tokio::time::sleep(hold).await;
        self.unlock(write, &owner).await;
        true
    }
}

fn main() {
    let seconds = arg("--seconds", 5);
    let hold = Duration::from_millis(arg("--hold-ms", 1));
    let think = Duration::from_millis(arg("--think-ms", 10));
    let (url, server) = url_or_local_server(arg_text("--url").as_deref());
    let pid = server.as_ref().and_then(|s| s.pid());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let locks = Locks::connect(&url).await.expect("connect");
        println!(
            "{READERS} readers + 1 writer on one lock, hold {hold:?}, writer think {think:?}, {seconds} s per row; server pid {pid:?}"
        );
        println!(
            "{:<34} {:>9} {:>9} {:>9} {:>10} {:>10} {:>8} {:>8}",
            "row", "reads/s", "writes/s", "ops/s", "w-wait p50", "w-wait p99", "cli µs", "srv µs"
        );
        println!("{:<34} {:>9} {:>9} {:>9} {:>10} {:>10} {:>8} {:>8}", "", "", "", "", "ms", "ms", "/op", "/op");
        let rw = KeylatchRw {
            locks: (0..=READERS).map(|_| locks.rw_lock("bench-rw")).collect(),
        };
        let mut ours = run_row("keylatch RwLock", Arc::new(rw), seconds, hold, think, pid).await;
        let base = (ours.reads + ours.writes) as f64 / ours.wall.as_secs_f64();
        ours.print(None);
        let client = locks.client().clone();
        let hub = PubSub::from_client_with(&client, Default::default())
            .await
            .expect("hub");
        let redisson = Redisson {
            client,
            hub,
            name: "bench-rw-redisson".to_owned(),
            requests: AtomicU64::new(0),
        };
        run_row("Redisson RReadWriteLock scripts", Arc::new(redisson), seconds, hold, think, pid)
            .await
            .print(Some(base));
        let ex = KeylatchExclusive {
            locks: (0..=READERS).map(|_| locks.lock("bench-rw-exclusive")).collect(),
        };
        run_row("keylatch Lock (all exclusive)", Arc::new(ex), seconds, hold, think, pid)
            .await
            .print(Some(base));
    });
    drop(server);
}
