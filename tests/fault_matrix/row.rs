//! Running one row: worker processes against the lock server(s) while a
//! disturbance repeats, then the history checked.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keylatch_harness::RedisServer;

use crate::history::{check, now_ns, Finals, Injections, Op, Report};
use crate::worker::Spec;

/// Acquisitions per row: 10,000 with `KEYLATCH_FAULT_FULL=1` (the README's
/// figures), fewer by default so CI stays short.
pub(crate) fn target() -> usize {
    match std::env::var("KEYLATCH_FAULT_FULL").as_deref() {
        Ok("1") => 10_000,
        _ => 1_000,
    }
}

/// Client processes per row.
pub(crate) const PROCESSES: usize = 3;

/// A row's setup apart from the servers.
#[derive(Clone, Debug)]
pub(crate) struct Workload {
    pub names: Vec<String>,
    pub tasks: usize,
    pub locking: bool,
    pub lease: Duration,
    pub wait: Duration,
    pub request_timeout: Duration,
    pub replica_sync: bool,
    /// With `replica_sync`: how many replicas must acknowledge (1 for a
    /// cluster's one replica; every replica for a Sentinel group, since
    /// any of them may be promoted).
    pub sync_replicas: u32,
    pub think: Duration,
    /// Task 0 of each process holds this long (see `worker::LONG_NAMES`).
    pub long_hold: Duration,
    /// Run the workers under `ip netns exec <ns>`.
    pub netns: Option<String>,
    /// Disturbances the row waits for at least (0 for a row without).
    pub disturbances: usize,
}

impl Workload {
    pub(crate) fn new(names: Vec<String>) -> Self {
        Self {
            names,
            tasks: 3,
            locking: true,
            lease: Duration::from_millis(1500),
            wait: Duration::from_secs(10),
            request_timeout: Duration::from_millis(1000),
            replica_sync: false,
            sync_replicas: 1,
            think: Duration::from_millis(1),
            long_hold: Duration::from_millis(2000),
            netns: None,
            disturbances: MIN_DISTURBANCES,
        }
    }

    /// The longest an acquire may take: its wait, then one request's
    /// timeout and scheduling slack.
    fn wait_bound(&self) -> Duration {
        self.wait + self.request_timeout + Duration::from_secs(2)
    }
}

/// Records the disturbances of a row, on the history's clock.
#[derive(Clone, Default)]
pub(crate) struct Log(Arc<Mutex<Vec<(u64, u64)>>>);

impl Log {
    /// Runs `disturb`, recording its span.
    pub(crate) fn span<T>(&self, disturb: impl FnOnce() -> T) -> T {
        let at = now_ns();
        let out = disturb();
        self.0.lock().expect("log").push((at, now_ns()));
        out
    }
}

/// Sleeps `d` in small steps; `false` once `stop` is set.
pub(crate) fn nap(stop: &AtomicBool, d: Duration) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10).min(end - Instant::now()));
    }
    !stop.load(Ordering::Relaxed)
}

/// Disturbances per row at least, however soon the target is reached.
pub(crate) const MIN_DISTURBANCES: usize = 3;

/// Runs `workload` from [`PROCESSES`] processes against `url` while
/// `disturb` runs on a sibling thread (looping until told to stop), until
/// the row has [`target`] acquisitions and the workload's number of
/// disturbances, then checks the history. The disturbance is stopped (and
/// healed) first; the workers run on for a moment so recovery from the
/// last one is seen, then their stdin is closed and they finish.
pub(crate) fn run(
    label: &str,
    url: &str,
    resource: &RedisServer,
    resource_url: &str,
    w: &Workload,
    disturb: impl FnOnce(&AtomicBool, &Log) + Send,
) -> Report {
    // Generous: a row that cannot reach its target in this long reports
    // what it has (and fails on it), it does not hang the test.
    let max_run = Duration::from_secs(60 + target() as u64 / 50);
    let stop = AtomicBool::new(false);
    let log = Log::default();
    let sink = Sink::default();
    let Sink { ops, held, garbled } = sink.clone();
    let mut unfinished = 0;
    let mut tasks_unrecovered = 0;
    std::thread::scope(|s| {
        let injector = s.spawn(|| disturb(&stop, &log));
        let mut children: Vec<(Child, std::thread::JoinHandle<bool>)> = (0..PROCESSES)
            // The workers outlive the coordinator's own limits (the target,
            // then recovery); it closes their stdin.
            .map(|p| {
                spawn_worker(
                    w,
                    url,
                    resource_url,
                    p,
                    max_run + w.lease + Duration::from_secs(30),
                    &sink,
                )
            })
            .collect();
        let end = Instant::now() + max_run;
        while Instant::now() < end
            && (held.load(Ordering::Relaxed) < target()
                || log.0.lock().expect("log").len() < w.disturbances)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
        if let Err(p) = injector.join() {
            std::panic::resume_unwind(p);
        }
        // Every short-hold task must take a lock again after the last
        // heal; a lease left by a holder cut off at the end may have to run
        // out first. (The long holders, task 0, queue for seconds behind
        // each other on their two names even without a fault.)
        let healed = log
            .0
            .lock()
            .expect("log")
            .iter()
            .map(|s| s.1)
            .max()
            .unwrap_or(0);
        let long = usize::from(!w.long_hold.is_zero());
        let tasks = PROCESSES * (w.tasks - long);
        let until = Instant::now() + w.lease + Duration::from_secs(10);
        loop {
            let back = ops
                .lock()
                .expect("ops")
                .iter()
                .filter(|o| o.held && o.acquired > healed)
                .filter(|o| long == 0 || !o.client.ends_with("-0"))
                .map(|o| o.client.clone())
                .collect::<std::collections::HashSet<_>>()
                .len();
            if back >= tasks || Instant::now() >= until {
                tasks_unrecovered = tasks.saturating_sub(back);
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        for (child, _) in &mut children {
            drop(child.stdin.take());
        }
        let hard = Instant::now() + w.wait + w.long_hold + Duration::from_secs(30);
        for (child, _) in &mut children {
            loop {
                match child.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() < hard => {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    _ => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                }
            }
        }
        for (_, reader) in children {
            if !reader.join().unwrap_or(false) {
                unfinished += 1;
            }
        }
    });
    let ops = std::mem::take(&mut *ops.lock().expect("ops"));
    // KEYLATCH_FAULT_DUMP=dir keeps each row's history, for a closer look.
    if let Ok(dir) = std::env::var("KEYLATCH_FAULT_DUMP") {
        let lines: Vec<String> = ops.iter().map(Op::to_line).collect();
        let _ = std::fs::write(format!("{dir}/{label}.tsv"), lines.join("\n"));
    }
    let finals = read_finals(resource, &w.names);
    let injections = Injections {
        spans: log.0.lock().expect("log").clone(),
    };
    let mut report = check(&ops, &finals, &injections, w.wait_bound());
    // A worker that did not finish, or a history line that could not be
    // read, leaves the history incomplete: counted as hangs.
    report.hangs += unfinished + garbled.load(Ordering::Relaxed);
    report.tasks_unrecovered = tasks_unrecovered;
    eprintln!("[{label}] {report}");
    // The row must have tested what it claims: its acquisitions and its
    // disturbances.
    assert!(
        report.acquisitions >= target() && report.disturbances >= w.disturbances,
        "[{label}] the row fell short of {} acquisitions and {} disturbances: {report}",
        target(),
        w.disturbances
    );
    report
}

/// Where the workers' reader threads put what they read.
#[derive(Clone, Default)]
struct Sink {
    ops: Arc<Mutex<Vec<Op>>>,
    /// Held operations so far (the stop rule's count).
    held: Arc<AtomicUsize>,
    /// Lines with the history marker that did not parse.
    garbled: Arc<AtomicUsize>,
}

/// Starts one worker process; its reader thread collects the history and
/// answers whether the worker said `DONE`.
fn spawn_worker(
    w: &Workload,
    url: &str,
    resource_url: &str,
    process: usize,
    max_run: Duration,
    sink: &Sink,
) -> (Child, std::thread::JoinHandle<bool>) {
    let spec = Spec {
        url: url.to_owned(),
        resource_url: resource_url.to_owned(),
        names: w.names.clone(),
        tasks: w.tasks,
        locking: w.locking,
        lease: w.lease,
        wait: w.wait,
        request_timeout: w.request_timeout,
        sync_replicas: if w.replica_sync { w.sync_replicas } else { 0 },
        think: w.think,
        long_hold: w.long_hold,
        max_run,
        process,
    };
    let exe = std::env::current_exe().expect("test binary");
    let mut cmd = match &w.netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.args(["worker", "--exact", "--nocapture", "--test-threads=1"])
        .envs(spec.to_env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("worker process");
    let out = child.stdout.take().expect("worker stdout");
    let Sink { ops, held, garbled } = sink.clone();
    let reader = std::thread::spawn(move || {
        let mut done = false;
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(op) = Op::from_line(&line) {
                if op.held {
                    held.fetch_add(1, Ordering::Relaxed);
                }
                ops.lock().expect("ops").push(op);
            } else if line.contains("H\t") {
                garbled.fetch_add(1, Ordering::Relaxed);
            } else if line == "DONE" {
                done = true;
            }
        }
        done
    });
    (child, reader)
}

fn read_finals(resource: &RedisServer, names: &[String]) -> Finals {
    let mut f = Finals::default();
    for n in names {
        let get = |key: String| -> u64 {
            resource
                .cli(&["GET", &key])
                .expect("resource GET")
                .trim()
                .parse()
                .unwrap_or(0)
        };
        f.plain.insert(n.clone(), get(format!("plain:{n}")));
        f.fenced.insert(n.clone(), get(format!("fenced:{n}")));
    }
    f
}
