#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Leader election under faults (issue 32), judged from a history: three
//! client processes (this test binary run again as workers) campaign in
//! one election over and over, while the leader's process is killed with
//! SIGKILL, paused with SIGSTOP for longer than its lease, or its server
//! fails over to a replica. An observer in the coordinator records every
//! change it sees.
//!
//! Each worker writes, on the machine's one `CLOCK_MONOTONIC`:
//! `elected TOKEN T` once a campaign returns, `act TOKEN T` each time it
//! acts as leader (T read *before* it checks that its lease still runs, so
//! the act is inside the leadership), and `end TOKEN T resigned|lost`.
//!
//! The checks:
//! - one leader at a time: no act of a term comes after the moment a later
//!   term was elected (that moment is read after the server granted it, so
//!   a correct election never shows one; a leader that kept acting through
//!   a pause would);
//! - tokens rise with each term;
//! - the observer saw every term, in the order they led (each term lasts
//!   longer than the observer's re-check, so none can slip between reads).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keylatch_cluster::ClientConfig;
use keylatch_harness::{
    check_monotonic_clock, monotonic_ns, FailoverMode, RedisCluster, RedisServer,
};
use keylatch_lock::{Locks, LocksConfig};

const ELECTION: &str = "lf:election";
/// The workers' watchdog lease: a leader that stops renewing is gone
/// this long after its last renewal.
const LEASE: Duration = Duration::from_secs(1);
/// How long the observer waits at most between reads.
const RECHECK: Duration = Duration::from_millis(100);

/// The fault tests run one at a time: each runs three client processes
/// and a server or cluster on two cores.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The workers' entry: the coordinator runs this test binary again with
/// `KL_LF_SEEDS` set. In a normal test run it returns at once.
#[test]
fn worker() {
    if let Ok(seeds) = std::env::var("KL_LF_SEEDS") {
        let id: u64 = std::env::var("KL_LF_ID").unwrap().parse().unwrap();
        let ms: u64 = std::env::var("KL_LF_RUN_MS").unwrap().parse().unwrap();
        let careless = std::env::var_os("KL_LF_CARELESS").is_some();
        campaign_until(&seeds, id, Duration::from_millis(ms), careless);
    }
}

fn say(line: String) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// A client of the election's server (or cluster: comma-separated seeds).
async fn connect(seeds: &str, config: LocksConfig) -> Locks {
    let urls: Vec<&str> = seeds.split(',').collect();
    Locks::connect_with(ClientConfig::from_urls(&urls).unwrap(), config)
        .await
        .unwrap()
}

/// Campaigns, leads for 25–44 acts 20 ms apart (500–900 ms), resigns;
/// again until `run_for` has passed. `careless`: 150 acts, without checking
/// that the leadership still stands (the control).
fn campaign_until(seeds: &str, id: u64, run_for: Duration, careless: bool) {
    check_monotonic_clock();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let locks = connect(seeds, LocksConfig::default().watchdog_timeout(LEASE)).await;
        let election = locks.leader(ELECTION);
        say(format!("owner {}", election.owner()));
        let until = Instant::now() + run_for;
        let mut terms = 0u64;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            let lead = match election.try_campaign(left, &format!("p{id}")).await {
                Ok(Some(l)) => l,
                Ok(None) => break,
                Err(e) => {
                    say(format!("error {e}"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let token = lead.fencing_token().unwrap_or(0);
            say(format!("elected {token} {}", monotonic_ns()));
            terms += 1;
            // The control's terms are long (3 s), so a pause always lands
            // inside one, with acts left for after it.
            let acts = if careless {
                150
            } else {
                25 + (id * 7 + terms * 13) % 20
            };
            let mut how = "resigned";
            for _ in 0..acts {
                let at = monotonic_ns();
                if careless || lead.remaining_lease().is_some_and(|l| !l.is_zero()) {
                    say(format!("act {token} {at}"));
                } else {
                    how = "lost";
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            say(format!("end {token} {} {how}", monotonic_ns()));
            let _ = lead.resign().await;
        }
        say("done".to_owned());
    });
}

/// A change the observer saw: when, the leader's owner and token.
type Seen = (u64, Option<String>, Option<u64>);

/// One worker process, its output read on a thread.
struct Worker {
    child: Child,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// The coordinator's view: the workers, their lines, the observer's.
struct Run {
    careless: bool,
    seeds: String,
    until: Instant,
    workers: Vec<Worker>,
    /// Every worker line, with the worker's slot.
    lines: Arc<Mutex<Vec<(usize, String)>>>,
    /// Owner id → worker slot.
    owners: Arc<Mutex<HashMap<String, usize>>>,
    /// (when, owner, token) for each change the observer saw.
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    observer: Option<std::thread::JoinHandle<()>>,
    pids_stopped: Vec<u32>,
}

impl Run {
    fn start(seeds: String, run_for: Duration) -> Self {
        Self::start_with(seeds, run_for, false)
    }

    fn start_with(seeds: String, run_for: Duration, careless: bool) -> Self {
        let mut run = Run {
            careless,
            seeds,
            until: Instant::now() + run_for,
            workers: Vec::new(),
            lines: Arc::default(),
            owners: Arc::default(),
            seen: Arc::default(),
            stop: Arc::default(),
            observer: None,
            pids_stopped: Vec::new(),
        };
        run.observer = Some(run.observe());
        for slot in 0..3 {
            let w = run.spawn(slot);
            run.workers.push(w);
        }
        run
    }

    fn spawn(&self, slot: usize) -> Worker {
        let left = self.until.saturating_duration_since(Instant::now());
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        if self.careless {
            cmd.env("KL_LF_CARELESS", "1");
        }
        let mut child = cmd
            .args(["worker", "--exact", "--nocapture", "--test-threads=1"])
            .env("KL_LF_SEEDS", &self.seeds)
            .env("KL_LF_ID", slot.to_string())
            .env("KL_LF_RUN_MS", left.as_millis().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (lines, owners) = (Arc::clone(&self.lines), Arc::clone(&self.owners));
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                // libtest's `test worker ... ` has no newline: the first
                // line is that, then ours.
                let line = line.rsplit("... ").next().unwrap_or_default().to_owned();
                if let Some(owner) = line.strip_prefix("owner ") {
                    owners.lock().unwrap().insert(owner.to_owned(), slot);
                }
                lines.lock().unwrap().push((slot, line));
            }
        });
        Worker {
            child,
            reader: Some(reader),
        }
    }

    /// The observer: its own client and runtime, on a thread.
    fn observe(&self) -> std::thread::JoinHandle<()> {
        let (seeds, seen, stop) = (
            self.seeds.clone(),
            Arc::clone(&self.seen),
            Arc::clone(&self.stop),
        );
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let locks = connect(&seeds, LocksConfig::default().recheck(RECHECK)).await;
                let mut watch = locks.leader(ELECTION).observe().await;
                while !stop.load(Ordering::Relaxed) {
                    // Cancel safe: a change seen by a call cut short here
                    // is seen again by the next one.
                    match tokio::time::timeout(Duration::from_millis(100), watch.next()).await {
                        Ok(Ok(now)) => seen.lock().unwrap().push((
                            monotonic_ns(),
                            now.as_ref().map(|l| l.owner.clone()),
                            now.and_then(|l| l.token),
                        )),
                        // A failover: read again.
                        Ok(Err(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
                        Err(_) => {}
                    }
                }
            });
        })
    }

    /// The slot of the worker that leads now, caught early in its term:
    /// the observer saw it elected 20–250 ms ago (terms last 500 ms or
    /// more, so a fault then lands inside the term). Waits up to 5 s.
    fn leader_slot(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let last = self.seen.lock().unwrap().last().cloned();
            if let Some((at, Some(owner), Some(_))) = last {
                let slot = self.owners.lock().unwrap().get(&owner).copied();
                let age = monotonic_ns().saturating_sub(at);
                if let Some(slot) = slot.filter(|_| (20_000_000..250_000_000).contains(&age)) {
                    return slot;
                }
            }
            assert!(Instant::now() < deadline, "no new leader seen within 5 s");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILLs the leader's process and starts another in its slot.
    fn kill_leader(&mut self) {
        let slot = self.leader_slot();
        let w = &mut self.workers[slot];
        w.child.kill().unwrap();
        w.child.wait().unwrap();
        if let Some(r) = w.reader.take() {
            r.join().unwrap();
        }
        self.workers[slot] = self.spawn(slot);
    }

    /// SIGSTOPs the leader's process for `pause` (longer than its lease),
    /// then SIGCONT.
    fn pause_leader(&mut self, pause: Duration) {
        let slot = self.leader_slot();
        let pid = self.workers[slot].child.id();
        self.pids_stopped.push(pid);
        signal("-STOP", pid);
        std::thread::sleep(pause);
        signal("-CONT", pid);
    }

    /// Waits for every worker to end, stops the observer, and judges.
    fn finish(mut self) -> History {
        for w in &mut self.workers {
            let status = wait_bounded(&mut w.child, self.until + Duration::from_secs(20));
            assert!(status.success(), "a worker failed: {status}");
            if let Some(r) = w.reader.take() {
                r.join().unwrap();
            }
        }
        // The last resignation's change, then stop.
        std::thread::sleep(Duration::from_millis(300));
        self.stop.store(true, Ordering::Relaxed);
        self.observer.take().unwrap().join().unwrap();
        let lines = self.lines.lock().unwrap().clone();
        let seen = self.seen.lock().unwrap().clone();
        History::read(&lines, &seen)
    }
}

fn signal(sig: &str, pid: u32) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// Waits for `child` until `deadline`, then kills it and fails.
fn wait_bounded(child: &mut Child, deadline: Instant) -> std::process::ExitStatus {
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a worker did not end in time");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One term of leadership, as its worker told it.
#[derive(Clone, Debug, Default)]
struct Term {
    token: u64,
    slot: usize,
    elected: u64,
    acts: Vec<u64>,
    how: Option<String>,
}

#[derive(Debug)]
struct History {
    /// By election time.
    terms: Vec<Term>,
    /// The tokens the observer saw, in the order it saw them (repeats of
    /// one term folded).
    observed: Vec<u64>,
}

impl History {
    fn read(lines: &[(usize, String)], seen: &[Seen]) -> Self {
        let mut terms: HashMap<u64, Term> = HashMap::new();
        for (slot, line) in lines {
            let f: Vec<&str> = line.split(' ').collect();
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
            match (f[0], num(1), num(2)) {
                ("elected", Some(token), Some(at)) => {
                    let t = terms.entry(token).or_default();
                    (t.token, t.slot, t.elected) = (token, *slot, at);
                }
                ("act", Some(token), Some(at)) => terms.entry(token).or_default().acts.push(at),
                ("end", Some(token), Some(_)) => {
                    terms.entry(token).or_default().how = f.get(3).map(|s| (*s).to_owned());
                }
                _ => {}
            }
        }
        let mut terms: Vec<Term> = terms.into_values().collect();
        terms.sort_by_key(|t| t.elected);
        let mut observed: Vec<u64> = Vec::new();
        for token in seen.iter().filter_map(|s| s.2) {
            if observed.last() != Some(&token) {
                observed.push(token);
            }
        }
        History { terms, observed }
    }

    /// The checks (see the file's head); `Err` names what broke.
    fn check(&self) -> Result<(), String> {
        for pair in self.terms.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if b.token <= a.token {
                return Err(format!("token {} elected after {}", b.token, a.token));
            }
            if let Some(late) = a.acts.iter().find(|t| **t > b.elected) {
                return Err(format!(
                    "two leaders: term {} (slot {}) acted {} µs after term {} (slot {}) was elected",
                    a.token,
                    a.slot,
                    (late - b.elected) / 1000,
                    b.token,
                    b.slot
                ));
            }
        }
        if self.observed.windows(2).any(|w| w[1] <= w[0]) {
            return Err(format!(
                "the observer saw terms out of order: {:?}",
                self.observed
            ));
        }
        for t in &self.terms {
            if !self.observed.contains(&t.token) {
                return Err(format!(
                    "the observer missed term {} ({} acts): saw {:?}",
                    t.token,
                    t.acts.len(),
                    self.observed
                ));
            }
        }
        Ok(())
    }

    fn count(&self, how: &str) -> usize {
        self.terms
            .iter()
            .filter(|t| t.how.as_deref() == Some(how))
            .count()
    }
}

/// The checker sees two leaders where there are two: a history in which a
/// term acts after the next was elected.
#[test]
fn the_checker_sees_an_act_after_the_next_election() {
    let line = |s: &str| (0, s.to_owned());
    let lines = [
        line("elected 5 100"),
        line("act 5 150"),
        line("elected 6 200"),
        line("act 5 250"),
        line("act 6 260"),
    ];
    let seen = [(0, None, Some(5)), (0, None, Some(6))];
    let err = History::read(&lines, &seen).check().unwrap_err();
    assert!(err.contains("two leaders"), "{err}");
    let fine = History::read(&lines[..3], &seen).check();
    assert_eq!(fine, Ok(()));
    let missed = History::read(&lines[..3], &seen[..1]).check().unwrap_err();
    assert!(missed.contains("missed term 6"), "{missed}");
}

/// The control: leaders that act without checking their leadership,
/// one of them paused past its lease, are caught acting beside the next.
#[test]
fn control_a_leader_that_ignores_its_loss_is_caught() {
    let _serial = serial();
    let server = RedisServer::start();
    let mut run = Run::start_with(server.url(), Duration::from_secs(8), true);
    std::thread::sleep(Duration::from_millis(1500));
    run.pause_leader(LEASE * 2);
    let h = run.finish();
    let err = h.check().unwrap_err();
    assert!(err.contains("two leaders"), "{err}");
}

#[test]
fn one_leader_at_a_time_through_kills_and_pauses() {
    let _serial = serial();
    let server = RedisServer::start();
    let mut run = Run::start(server.url(), Duration::from_secs(14));
    for round in 0..4 {
        std::thread::sleep(Duration::from_millis(1500));
        if round % 2 == 0 {
            run.kill_leader();
        } else {
            run.pause_leader(LEASE * 2);
        }
    }
    let h = run.finish();
    eprintln!(
        "{} terms ({} lost, {} resigned), observed {:?}",
        h.terms.len(),
        h.count("lost"),
        h.count("resigned"),
        h.observed
    );
    h.check().unwrap();
    assert!(h.terms.len() >= 8, "the election went on: {h:?}");
    // Each paused leader found its leadership gone when it resumed.
    assert!(h.count("lost") >= 2, "paused leaders saw their loss: {h:?}");
}

#[test]
fn one_leader_at_a_time_through_cluster_failovers() {
    let _serial = serial();
    let cluster = RedisCluster::start();
    let slot = RedisCluster::slot_of(ELECTION);
    let mut run = Run::start(cluster.seed_urls().join(","), Duration::from_secs(16));
    for round in 0..3 {
        std::thread::sleep(Duration::from_millis(1500));
        if round == 1 {
            run.kill_leader();
            continue;
        }
        // The election's master hands over to its replica (no write
        // lost: CLUSTER FAILOVER waits for the replica to catch up).
        let master = cluster.master_for_slot(slot);
        let replica = cluster.replicas_of(master)[0];
        cluster.failover(replica, FailoverMode::Default).unwrap();
    }
    let h = run.finish();
    eprintln!(
        "{} terms ({} lost, {} resigned), observed {:?}",
        h.terms.len(),
        h.count("lost"),
        h.count("resigned"),
        h.observed
    );
    h.check().unwrap();
    assert!(h.terms.len() >= 8, "the election went on: {h:?}");
}
