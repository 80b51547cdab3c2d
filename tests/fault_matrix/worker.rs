//! One client process of a row: tasks that take locks, do the protected
//! read-modify-write, and release, each operation bounded, every step
//! written to stdout as a history line ([`Op::to_line`]).
//!
//! The row's coordinator starts this test binary again with
//! `KL_FM_WORKER` set (see [`Spec::to_env`]); the `worker` test then runs
//! [`run`] instead of returning at once.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::{Client, ClientConfig, Commands, Script};
use keylatch_lock::{LockError, Locks, LocksConfig, ReplicaSync};
use keylatch_resp::{Cmd, Frame};

use crate::history::{clock_works, now_ns, Op};

/// The fenced counter's read: refused (-1) for a token below the highest
/// the resource has seen; otherwise the token becomes the highest and the
/// value is returned. Reads take part, so once a newer holder has touched
/// the resource an older one can neither read nor write (Kleppmann's
/// fencing, with the read included so a read-modify-write stays whole).
static FENCED_READ: Script = Script::new(
    "fenced_read",
    "local max = tonumber(redis.call('get', KEYS[2]) or '0') \
     if tonumber(ARGV[1]) < max then return -1 end \
     redis.call('set', KEYS[2], ARGV[1]) \
     return tonumber(redis.call('get', KEYS[1]) or '0')",
);

/// The fenced counter's write: refused (0) for a stale token.
static FENCED_WRITE: Script = Script::new(
    "fenced_write",
    "local max = tonumber(redis.call('get', KEYS[2]) or '0') \
     if tonumber(ARGV[1]) < max then return 0 end \
     redis.call('set', KEYS[1], ARGV[2]) \
     return 1",
);

/// How many of a row's names (the last ones) the long holders use.
pub(crate) const LONG_NAMES: usize = 2;

/// What one worker process does; passed in the environment.
#[derive(Clone, Debug)]
pub(crate) struct Spec {
    /// The lock server (or a cluster seed).
    pub url: String,
    /// The protected resource's server (never disturbed).
    pub resource_url: String,
    /// Lock names (one counter pair each at the resource).
    pub names: Vec<String>,
    pub tasks: usize,
    /// `false`: the control row without locks (the same workload).
    pub locking: bool,
    /// Watchdog lease.
    pub lease: Duration,
    /// Each acquire's wait.
    pub wait: Duration,
    pub request_timeout: Duration,
    /// This many replicas acknowledge each acquire (`WAIT`); 0: no check.
    pub sync_replicas: u32,
    /// Pause inside the read-modify-write.
    pub think: Duration,
    /// Task 0 holds this long instead (watchdog renewals keep it; a
    /// disturbance meets it held), on the last [`LONG_NAMES`] names; the
    /// other tasks use the rest.
    pub long_hold: Duration,
    /// Stop even if the target is not reached.
    pub max_run: Duration,
    /// Process id in the row, for the history.
    pub process: usize,
}

fn ms(d: Duration) -> String {
    d.as_millis().to_string()
}

impl Spec {
    pub(crate) fn to_env(&self) -> Vec<(String, String)> {
        [
            ("KL_FM_WORKER", "1".to_owned()),
            ("KL_FM_URL", self.url.clone()),
            ("KL_FM_RESOURCE", self.resource_url.clone()),
            ("KL_FM_NAMES", self.names.join(",")),
            ("KL_FM_TASKS", self.tasks.to_string()),
            ("KL_FM_LOCKING", u8::from(self.locking).to_string()),
            ("KL_FM_LEASE_MS", ms(self.lease)),
            ("KL_FM_WAIT_MS", ms(self.wait)),
            ("KL_FM_TIMEOUT_MS", ms(self.request_timeout)),
            ("KL_FM_SYNC", self.sync_replicas.to_string()),
            ("KL_FM_THINK_MS", ms(self.think)),
            ("KL_FM_LONG_MS", ms(self.long_hold)),
            ("KL_FM_MAX_RUN_MS", ms(self.max_run)),
            ("KL_FM_PROCESS", self.process.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// The spec in this process's environment, if it is a worker.
    pub(crate) fn from_env() -> Option<Self> {
        std::env::var_os("KL_FM_WORKER")?;
        let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("worker needs {k}"));
        let num = |k: &str| -> u64 { var(k).parse().unwrap_or_else(|_| panic!("{k} is a number")) };
        let dur = |k: &str| Duration::from_millis(num(k));
        Some(Self {
            url: var("KL_FM_URL"),
            resource_url: var("KL_FM_RESOURCE"),
            names: var("KL_FM_NAMES").split(',').map(str::to_owned).collect(),
            tasks: num("KL_FM_TASKS") as usize,
            locking: num("KL_FM_LOCKING") == 1,
            lease: dur("KL_FM_LEASE_MS"),
            wait: dur("KL_FM_WAIT_MS"),
            request_timeout: dur("KL_FM_TIMEOUT_MS"),
            sync_replicas: num("KL_FM_SYNC") as u32,
            think: dur("KL_FM_THINK_MS"),
            long_hold: dur("KL_FM_LONG_MS"),
            max_run: dur("KL_FM_MAX_RUN_MS"),
            process: num("KL_FM_PROCESS") as usize,
        })
    }
}

/// A failure's kind, short and typed, for the history: the error's
/// variant (and the client error's, for `Client`), not its details.
fn kind(e: &LockError) -> String {
    let variant = |debug: String| {
        debug
            .split(['(', '{', ' '])
            .next()
            .unwrap_or("?")
            .to_owned()
    };
    match e {
        LockError::Client(c) => format!("client:{}", variant(format!("{c:?}"))),
        other => variant(format!("{other:?}")),
    }
}

/// Runs the worker: prints one history line per operation, then `DONE`.
pub(crate) fn run(spec: Spec) {
    clock_works();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let mut cfg = ClientConfig::from_url(&spec.url).expect("lock URL");
        cfg.seeds = cfg
            .seeds
            .into_iter()
            .map(|s| s.request_timeout(Some(spec.request_timeout)))
            .collect();
        let locks = Locks::connect_with(cfg, LocksConfig::default().watchdog_timeout(spec.lease))
            .await
            .expect("lock client");
        let resource = Client::connect(&spec.resource_url)
            .await
            .expect("resource client");
        let spec = Arc::new(spec);
        // The coordinator closes stdin when the row has what it needs.
        let ended = Arc::new(AtomicBool::new(false));
        let flag = ended.clone();
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            flag.store(true, Ordering::Relaxed);
        });
        let stop_at = Instant::now() + spec.max_run;
        let mut tasks = Vec::new();
        for task in 0..spec.tasks {
            let (locks, resource, spec, ended) =
                (locks.clone(), resource.clone(), spec.clone(), ended.clone());
            tasks.push(tokio::spawn(async move {
                let client = format!("{}-{task}", spec.process);
                let mut seed = (spec.process as u64 + 1) * 7919 + task as u64 * 104_729 + 1;
                let long = task == 0 && !spec.long_hold.is_zero();
                let split = spec.names.len() - LONG_NAMES;
                let (names, think) = if long {
                    (&spec.names[split..], spec.long_hold)
                } else {
                    (&spec.names[..split], spec.think)
                };
                while !ended.load(Ordering::Relaxed) && Instant::now() < stop_at {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let name = &names[(seed % names.len() as u64) as usize];
                    let op = one(&locks, &resource, &spec, &client, name, think).await;
                    println!("{}", op.to_line());
                    if !op.held {
                        // A failed acquire (server down): do not spin.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }));
        }
        for t in tasks {
            // A task that panicked lost its last line: no DONE then, and
            // the coordinator counts the worker as hung.
            t.await.expect("worker task");
        }
    });
    println!("DONE");
}

/// The longest any single step may take before it counts as a hang.
fn step_bound(spec: &Spec) -> Duration {
    spec.wait + spec.request_timeout * 3 + spec.lease + Duration::from_secs(5)
}

/// One acquire, read-modify-write and release.
async fn one(
    locks: &Locks,
    resource: &Client,
    spec: &Spec,
    client: &str,
    name: &str,
    think: Duration,
) -> Op {
    let mut op = Op {
        client: client.to_owned(),
        name: name.to_owned(),
        start: now_ns(),
        outcome: "ok".to_owned(),
        ..Op::default()
    };
    let bound = step_bound(spec);
    let mut lock = locks.lock(name);
    if spec.sync_replicas > 0 {
        lock = lock.with_replica_sync(ReplicaSync::AtLeast {
            replicas: spec.sync_replicas,
            timeout: Duration::from_millis(500),
        });
    }
    let guard = if spec.locking {
        match tokio::time::timeout(bound, lock.try_acquire(spec.wait, None)).await {
            Ok(Ok(Some(g))) => Some(g),
            Ok(Ok(None)) => {
                op.acquired = now_ns();
                op.outcome = "wait-elapsed".into();
                return op;
            }
            Ok(Err(e)) => {
                op.acquired = now_ns();
                op.outcome = kind(&e);
                return op;
            }
            Err(_) => {
                op.acquired = now_ns();
                op.outcome = "hang".into();
                return op;
            }
        }
    } else {
        None
    };
    op.acquired = now_ns();
    op.held = true;
    op.token = guard.as_ref().and_then(|g| g.fencing_token()).unwrap_or(0);
    // When lost() fires, on the shared clock.
    let lost_at = Arc::new(AtomicU64::new(0));
    let watcher = guard.as_ref().map(|g| {
        let lost = g.lost();
        let at = lost_at.clone();
        tokio::spawn(async move {
            lost.await;
            at.store(now_ns(), Ordering::SeqCst);
        })
    });
    let told = || guard.as_ref().is_some_and(|g| g.is_lost());

    let plain = format!("plain:{name}");
    let (fenced, fence) = (format!("fenced:{name}"), format!("fence:{name}"));
    let read = tokio::time::timeout(bound, get_u64(resource, &plain)).await;
    let fenced_read = if op.token != 0 {
        tokio::time::timeout(
            bound,
            resource.eval_with(&FENCED_READ, || {
                FENCED_READ.evalsha_cmd(&[&fenced, &fence], &[op.token])
            }),
        )
        .await
    } else {
        Ok(Ok(Frame::Integer(-1)))
    };
    tokio::time::sleep(think).await;
    // The resource is never disturbed: any failure there leaves this hold
    // unjudged, and is recorded as such (the row then fails).
    let resource_error = |what: &str, op: &mut Op| {
        if op.outcome == "ok" {
            op.outcome = format!("resource:{what}");
        }
    };
    match read {
        Ok(Some(v)) if !told() => {
            let set = Cmd::new("SET").key(plain.as_str()).arg(v + 1);
            match tokio::time::timeout(bound, resource.send(set)).await {
                Ok(Ok(_)) => op.plain_write = true,
                Ok(Err(_)) => resource_error("write", &mut op),
                Err(_) => op.outcome = "hang".into(),
            }
        }
        Ok(Some(_)) => {}
        Ok(None) => resource_error("read", &mut op),
        Err(_) => op.outcome = "hang".into(),
    }
    match fenced_read {
        Ok(Ok(Frame::Integer(v))) if v >= 0 && !told() => {
            let w = tokio::time::timeout(
                bound,
                resource.eval_with(&FENCED_WRITE, || {
                    FENCED_WRITE.evalsha_cmd(&[&fenced, &fence], &[op.token, v as u64 + 1])
                }),
            )
            .await;
            match w {
                Ok(Ok(Frame::Integer(1))) => op.fenced_write = true,
                Ok(Ok(Frame::Integer(0))) => op.fenced_refused = true,
                Err(_) => op.outcome = "hang".into(),
                _ => resource_error("fenced-write", &mut op),
            }
        }
        Ok(Ok(Frame::Integer(v))) if v >= 0 => {}
        Ok(Ok(Frame::Integer(-1))) if op.token != 0 => op.fenced_refused = true,
        Ok(Ok(Frame::Integer(-1))) => {}
        Err(_) => op.outcome = "hang".into(),
        _ => resource_error("fenced-read", &mut op),
    }

    op.release_start = now_ns();
    if let Some(g) = guard {
        match tokio::time::timeout(bound, g.unlock()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) if op.outcome == "ok" => op.outcome = kind(&e),
            Ok(Err(_)) => {}
            Err(_) => op.outcome = "hang".into(),
        }
    }
    op.released = now_ns();
    if let Some(w) = watcher {
        // Fired before the release started counts; a loss noticed later
        // (the release's own answer) does not shorten the interval.
        w.abort();
    }
    let at = lost_at.load(Ordering::SeqCst);
    if at != 0 && at <= op.release_start {
        op.lost_at = at;
    }
    op
}

async fn get_u64(c: &Client, key: &str) -> Option<u64> {
    match c.send(Cmd::new("GET").key(key)).await {
        Ok(Frame::Null) => Some(0),
        Ok(f) => f
            .as_bytes()
            .and_then(|b| std::str::from_utf8(b).ok()?.parse().ok()),
        Err(_) => None,
    }
}
