//! Fair-lock queues shared by keylatch waiters and Java waiters running
//! Redisson's own `RFairLock` scripts (verbatim, `common/redisson_fair.rs`),
//! driven as `RedissonLock.lock()` / `tryLock(wait)` drive them: Java ahead
//! of keylatch, keylatch ahead of Java, interleaved, a Java waiter giving up
//! in the middle ("acquire failed" subtracting its wait behind it), and a
//! dead keylatch waiter in a mixed queue.
//!
//! Every test checks, from a history, that the lock went in arrival order
//! and every waiter got it; and, from snapshots of the queue taken every few
//! milliseconds, that no live waiter's entry ever left the queue before its
//! turn or came back at the tail, and that every live entry's deadline stayed
//! above the server's clock (so Redisson's purge could not take it). Each
//! waiter's wake-up must come from its own channel's message: the waiters'
//! fallbacks (a keylatch re-check, a Java ttl) are 10–30 s here, and a
//! handoff is bounded at 5 s only to catch a hang. Handoff times (from the
//! releaser's unlock reply to the next holder's acquire reply) are printed,
//! by kind.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/redisson_fair.rs"]
mod redisson_fair;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keylatch_cluster::{Client, Commands};
use keylatch_harness::RedisServer;
use keylatch_lock::{LockGuard, Locks, LocksConfig};
use keylatch_resp::Frame;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use redisson_fair::{queue_key, timeout_key, JavaOutcome, JavaWaiter};

/// Long fallbacks: a keylatch waiter re-checks every 10 s at most (a third
/// of its 30 s span), a Java waiter sleeps up to the holder's PTTL (30 s).
/// A handoff far below these came from the unlock message.
fn patient() -> LocksConfig {
    LocksConfig::default()
        .fair_waiter_timeout(Duration::from_secs(30))
        .recheck(Duration::from_secs(30))
        .watchdog_timeout(Duration::from_secs(30))
}

/// Bound of one handoff: only a hang (a missed message) exceeds it.
const HANDOFF_BOUND: Duration = Duration::from_secs(5);
/// How long each holder keeps the lock.
const HOLD: Duration = Duration::from_millis(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Java,
    Rust,
}

#[derive(Clone, Debug)]
struct Record {
    label: String,
    kind: Kind,
    acquired: Instant,
    /// When its unlock was sent, and when the reply was seen (by its
    /// task: under load the next holder's acquire reply may be seen first).
    unlock_sent: Instant,
    released: Instant,
}

/// What the holders did, and how long each holds the lock.
struct Log {
    records: Mutex<Vec<Record>>,
    hold: Duration,
}

type History = Arc<Log>;

fn history(hold: Duration) -> History {
    Arc::new(Log {
        records: Mutex::default(),
        hold,
    })
}

/// The queue as seen at one instant (one script: no write in between).
struct Snapshot {
    now: i64,
    queue: Vec<String>,
    scores: HashMap<String, f64>,
}

const SNAPSHOT: &str = "local t = redis.call('time') \
    return {t[1], t[2], redis.call('lrange', KEYS[1], 0, -1), \
    redis.call('zrange', KEYS[2], 0, -1, 'withscores')}";

fn text(f: &Frame) -> String {
    match f {
        Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("expected a bulk string, got {other:?}"),
    }
}

async fn snapshot(client: &Client, name: &str) -> Snapshot {
    let reply = client
        .eval(
            SNAPSHOT,
            &[queue_key(name), timeout_key(name)],
            &[] as &[&str],
        )
        .await
        .unwrap();
    let Frame::Array(items) = reply else {
        panic!("snapshot answered {reply:?}")
    };
    let secs: i64 = text(&items[0]).parse().unwrap();
    let micros: i64 = text(&items[1]).parse().unwrap();
    let list = |f: &Frame| match f {
        Frame::Array(v) => v.iter().map(text).collect::<Vec<_>>(),
        other => panic!("expected an array, got {other:?}"),
    };
    let queue = list(&items[2]);
    let flat = list(&items[3]);
    let scores = flat
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].parse::<f64>().unwrap()))
        .collect();
    Snapshot {
        now: secs * 1000 + micros / 1000,
        queue,
        scores,
    }
}

/// Takes snapshots every 5 ms until stopped.
struct Monitor {
    stop: Arc<AtomicBool>,
    task: JoinHandle<Vec<Snapshot>>,
}

impl Monitor {
    fn start(client: &Client, name: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (client, name, flag) = (client.clone(), name.to_owned(), Arc::clone(&stop));
        let task = tokio::spawn(async move {
            let mut shots = Vec::new();
            while !flag.load(Ordering::Acquire) {
                shots.push(snapshot(&client, &name).await);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            shots
        });
        Self { stop, task }
    }

    /// Stops, then checks every snapshot against the arrival order:
    /// the live entries (all but `dead`) form a subsequence of it (nobody
    /// overtook, nobody re-joined at the tail), each live waiter's presence
    /// is one unbroken run (it left once: its turn, or giving up), and each
    /// live entry's deadline is above the server's clock.
    async fn check(self, arrival: &[String], dead: &[String]) -> usize {
        self.stop.store(true, Ordering::Release);
        let shots = self.task.await.unwrap();
        let mut runs: HashMap<&str, (usize, usize, usize)> = HashMap::new();
        for (i, s) in shots.iter().enumerate() {
            let live: Vec<&String> = s.queue.iter().filter(|o| !dead.contains(o)).collect();
            let mut at = 0;
            for o in &live {
                let pos = arrival[at..]
                    .iter()
                    .position(|a| a == *o)
                    .unwrap_or_else(|| {
                        panic!(
                            "snapshot {i}: queue {:?} out of arrival order {arrival:?}",
                            s.queue
                        )
                    });
                at += pos + 1;
                let score = s
                    .scores
                    .get(*o)
                    .copied()
                    .unwrap_or_else(|| panic!("snapshot {i}: {o} queued without a deadline"));
                assert!(
                    score > s.now as f64,
                    "snapshot {i}: live {o}'s deadline {score} is not above now {} \
                     (Redisson would purge it)",
                    s.now
                );
                let run = runs.entry(o.as_str()).or_insert((i, i, 0));
                run.1 = i;
                run.2 += 1;
            }
        }
        for (o, (first, last, seen)) in &runs {
            assert_eq!(
                last - first + 1,
                *seen,
                "{o} left the queue and came back (snapshots {first}..={last}, in {seen})"
            );
        }
        shots.len()
    }
}

/// Waits (bounded) until `owner` is in the queue.
async fn until_queued(client: &Client, name: &str, owner: &str) {
    let start = Instant::now();
    loop {
        if snapshot(client, name)
            .await
            .queue
            .iter()
            .any(|o| o == owner)
        {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{owner} never queued"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A keylatch waiter: waits (60 s at most), holds, releases.
async fn rust_waiter(
    locks: &Locks,
    name: &str,
    label: &str,
    history: &History,
) -> (String, JoinHandle<()>) {
    let lock = locks.fair_lock(name);
    let owner = lock.owner().to_owned();
    let (label, history) = (label.to_owned(), Arc::clone(history));
    let task = tokio::spawn(async move {
        let guard = lock
            .try_acquire(Duration::from_secs(60), None)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{label} did not get the lock in 60 s"));
        let acquired = Instant::now();
        tokio::time::sleep(history.hold).await;
        let unlock_sent = Instant::now();
        guard.unlock().await.unwrap();
        let released = Instant::now();
        history.records.lock().unwrap().push(Record {
            label,
            kind: Kind::Rust,
            acquired,
            unlock_sent,
            released,
        });
    });
    (owner, task)
}

/// A Java waiter (`lock()` when `wait` is `None`, else `tryLock(wait)`):
/// holds if it gets the lock, releases with Redisson's unlock.
async fn java_waiter(
    client: &Client,
    name: &str,
    thread: u32,
    label: &str,
    wait: Option<Duration>,
    history: &History,
) -> (String, JoinHandle<JavaOutcome>) {
    let mut java = JavaWaiter::new(client, name, thread).await;
    let owner = java.owner.clone();
    let (label, history) = (label.to_owned(), Arc::clone(history));
    let task = tokio::spawn(async move {
        let outcome = java.lock(wait).await;
        if let JavaOutcome::Acquired(acquired) = outcome {
            tokio::time::sleep(history.hold).await;
            let unlock_sent = Instant::now();
            assert_eq!(java.unlock().await, Frame::Integer(1), "{label}'s unlock");
            let released = Instant::now();
            history.records.lock().unwrap().push(Record {
                label,
                kind: Kind::Java,
                acquired,
                unlock_sent,
                released,
            });
        }
        outcome
    });
    (owner, task)
}

async fn join<T>(task: JoinHandle<T>, what: &str) -> T {
    tokio::time::timeout(Duration::from_secs(90), task)
        .await
        .unwrap_or_else(|_| panic!("{what} hung"))
        .unwrap()
}

/// The history in acquire order: labels, and the handoffs between
/// consecutive holders (the first from `start`, the releaser given).
fn settle(history: &History) -> Vec<Record> {
    let mut h = history.records.lock().unwrap().clone();
    h.sort_by_key(|r| r.acquired);
    h
}

fn labels(h: &[Record]) -> Vec<&str> {
    h.iter().map(|r| r.label.as_str()).collect()
}

/// One handoff: kinds, from the unlock reply (0 when the next holder's
/// acquire reply was seen first) and from the unlock request.
#[derive(Clone, Copy, Debug)]
struct Handoff {
    from: Kind,
    to: Kind,
    after_reply: Duration,
    after_request: Duration,
}

/// Handoffs between consecutive holders, asserted under the hang bound and
/// printed.
fn handoffs(test: &str, h: &[Record]) -> Vec<Handoff> {
    let mut out = Vec::new();
    for w in h.windows(2) {
        let after_reply = w[1].acquired.saturating_duration_since(w[0].released);
        let after_request = w[1].acquired.saturating_duration_since(w[0].unlock_sent);
        assert!(
            after_request < HANDOFF_BOUND,
            "{test}: {} → {} took {after_request:?}: a missed wake-up",
            w[0].label,
            w[1].label
        );
        eprintln!(
            "{test}: handoff {} → {}: {after_reply:?} after the unlock reply, \
             {after_request:?} after the unlock request",
            w[0].label, w[1].label
        );
        out.push(Handoff {
            from: w[0].kind,
            to: w[1].kind,
            after_reply,
            after_request,
        });
    }
    out
}

fn stats(v: &mut [Duration]) -> String {
    v.sort();
    let mean = v.iter().sum::<Duration>() / u32::try_from(v.len()).unwrap();
    format!(
        "min={:?} median={:?} mean={mean:?} max={:?}",
        v[0],
        v[v.len() / 2],
        v[v.len() - 1]
    )
}

fn summary(test: &str, all: &[Handoff]) {
    for (from, to) in [
        (Kind::Java, Kind::Rust),
        (Kind::Rust, Kind::Java),
        (Kind::Rust, Kind::Rust),
        (Kind::Java, Kind::Java),
    ] {
        let of: Vec<&Handoff> = all
            .iter()
            .filter(|h| (h.from, h.to) == (from, to))
            .collect();
        if of.is_empty() {
            continue;
        }
        let mut reply: Vec<Duration> = of.iter().map(|h| h.after_reply).collect();
        let mut request: Vec<Duration> = of.iter().map(|h| h.after_request).collect();
        eprintln!(
            "HANDOFF {test}: {from:?} → {to:?} n={}: after the unlock reply {}; \
             after the unlock request {}",
            of.len(),
            stats(&mut reply),
            stats(&mut request)
        );
    }
}

/// A mixed queue behind a holder: `plan` lists the waiters in arrival
/// order ('J' Java `lock()`, 'R' keylatch). Each is seen queued before the
/// next arrives; the holder (Java or keylatch) then releases. The lock
/// must go in arrival order, each handoff woken by a message, and no live
/// entry may ever be purged or fall under the clock.
async fn mixed_queue(test: &str, name: &str, holder: Kind, plan: &str) -> Vec<Handoff> {
    mixed_queue_paced(test, name, holder, plan, patient(), HOLD).await
}

/// `mixed_queue` with its keylatch clients' configuration and hold time.
async fn mixed_queue_paced(
    test: &str,
    name: &str,
    holder: Kind,
    plan: &str,
    config: LocksConfig,
    hold: Duration,
) -> Vec<Handoff> {
    let server = RedisServer::start();
    let url = server.url();
    let a = Locks::new(Client::connect(&url).await.unwrap(), config.clone());
    let b = Locks::new(Client::connect(&url).await.unwrap(), config);
    let admin = Client::connect(&url).await.unwrap();
    let java_client = Client::connect(&url).await.unwrap();
    let history = history(hold);

    // The holder.
    let mut java_holder = None;
    let mut rust_holder: Option<LockGuard> = None;
    match holder {
        Kind::Java => {
            let mut j = JavaWaiter::new(&java_client, name, 1).await;
            assert_eq!(
                j.try_once(redisson_fair::DEFAULT_WAIT_MS).await,
                None,
                "free"
            );
            java_holder = Some(j);
        }
        Kind::Rust => rust_holder = Some(a.fair_lock(name).acquire().await.unwrap()),
    }

    let monitor = Monitor::start(&admin, name);
    let mut arrival = Vec::new();
    let mut expected = Vec::new();
    let mut rust_tasks = Vec::new();
    let mut java_tasks = Vec::new();
    for (i, c) in plan.chars().enumerate() {
        let label = format!("{c}{i}");
        let owner = match c {
            'J' => {
                let (o, t) =
                    java_waiter(&java_client, name, 10 + i as u32, &label, None, &history).await;
                java_tasks.push((label.clone(), t));
                o
            }
            'R' => {
                // Two clients: waiters of one process and of another.
                let locks = if i % 2 == 0 { &a } else { &b };
                let (o, t) = rust_waiter(locks, name, &label, &history).await;
                rust_tasks.push((label.clone(), t));
                o
            }
            other => panic!("plan letter {other}"),
        };
        until_queued(&admin, name, &owner).await;
        arrival.push(owner);
        expected.push(label);
    }
    // Let every waiter settle into its sleep (and the keylatch ones renew).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let start = Instant::now();
    match (java_holder, rust_holder) {
        (Some(j), _) => assert_eq!(j.unlock().await, Frame::Integer(1)),
        (_, Some(g)) => g.unlock().await.unwrap(),
        _ => unreachable!(),
    }
    for (label, t) in rust_tasks {
        join(t, &label).await;
    }
    for (label, t) in java_tasks {
        assert!(matches!(join(t, &label).await, JavaOutcome::Acquired(_)));
    }
    let shots = monitor.check(&arrival, &[]).await;
    let h = settle(&history);
    assert_eq!(labels(&h), expected, "{test}: arrival order");
    let first = h[0].acquired.saturating_duration_since(start);
    eprintln!(
        "{test}: holder ({holder:?}) → {}: {first:?} after the unlock request \
         ({} queue snapshots, {:?} in all)",
        h[0].label,
        shots,
        start.elapsed()
    );
    assert!(
        first < HANDOFF_BOUND,
        "{test}: the first waiter was not woken"
    );
    let all = handoffs(test, &h);
    summary(test, &all);
    let end = snapshot(&admin, name).await;
    assert!(
        end.queue.is_empty() && end.scores.is_empty(),
        "{test}: queue left over"
    );
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_waiters_ahead_of_keylatch_waiters() {
    // Three Java acquires in a row each subtract 300 s from the keylatch
    // entries behind them, faster than those renew.
    mixed_queue("java-ahead", "mixed-java-ahead", Kind::Rust, "JJJRR").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keylatch_waiters_ahead_of_java_waiters() {
    mixed_queue("rust-ahead", "mixed-rust-ahead", Kind::Java, "RRJJ").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaved_java_and_keylatch_waiters() {
    let mut all = mixed_queue(
        "interleaved",
        "mixed-interleaved",
        Kind::Rust,
        "JRJRJRJRJRJRJRJR",
    )
    .await;
    all.extend(
        mixed_queue(
            "interleaved-2",
            "mixed-interleaved-2",
            Kind::Java,
            "RJRJRJRJRJRJRJRJ",
        )
        .await,
    );
    summary("interleaved (both rounds)", &all);
}

/// Holds (400 ms) longer than the keylatch waiters' renewals (every 333 ms:
/// a 1 s span): their deadlines are re-set between the Java acquires that
/// subtract 300 s from them, and must stay above the clock throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keylatch_renewals_between_java_acquires_keep_their_places() {
    mixed_queue_paced(
        "renewing",
        "mixed-renewing",
        Kind::Rust,
        "JRJRRJ",
        patient().fair_waiter_timeout(Duration::from_secs(1)),
        Duration::from_millis(400),
    )
    .await;
}

/// K1, J1 (tryLock 1.5 s), J2 (tryLock 300 s, gives up at once when told),
/// K2, J3 (lock()), K3: J1 times out and runs "acquire failed" (−1.5 s
/// behind it), J2 gives up with Redisson's default wait (−300 s behind it);
/// the others keep their places and get the lock in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_waiters_giving_up_in_the_middle() {
    let test = "gives-up";
    let name = "mixed-gives-up";
    let server = RedisServer::start();
    let url = server.url();
    let locks = Locks::new(Client::connect(&url).await.unwrap(), patient());
    let admin = Client::connect(&url).await.unwrap();
    let java_client = Client::connect(&url).await.unwrap();
    let history = history(HOLD);
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let monitor = Monitor::start(&admin, name);

    let (k1, t_k1) = rust_waiter(&locks, name, "K1", &history).await;
    until_queued(&admin, name, &k1).await;
    let (j1, t_j1) = java_waiter(
        &java_client,
        name,
        21,
        "J1",
        Some(Duration::from_millis(1500)),
        &history,
    )
    .await;
    until_queued(&admin, name, &j1).await;
    // J2 queues as tryLock(300 s) does, and gives up as one interrupted.
    let mut j2 = JavaWaiter::new(&java_client, name, 22).await;
    assert!(j2.try_once(300_000).await.is_some(), "J2 queued");
    let (k2, t_k2) = rust_waiter(&locks, name, "K2", &history).await;
    until_queued(&admin, name, &k2).await;
    let (j3, t_j3) = java_waiter(&java_client, name, 23, "J3", None, &history).await;
    until_queued(&admin, name, &j3).await;
    let (k3, t_k3) = rust_waiter(&locks, name, "K3", &history).await;
    until_queued(&admin, name, &k3).await;

    j2.acquire_failed(300_000).await;
    assert_eq!(join(t_j1, "J1").await, JavaOutcome::GaveUp, "J1 timed out");
    let q = snapshot(&admin, name).await;
    assert_eq!(
        q.queue,
        vec![k1.clone(), k2.clone(), j3.clone(), k3.clone()]
    );
    for o in &q.queue {
        assert!(
            q.scores[o] > q.now as f64,
            "{o} under the clock: {:?}",
            q.scores
        );
    }
    let released = Instant::now();
    holder.unlock().await.unwrap();
    join(t_k1, "K1").await;
    join(t_k2, "K2").await;
    assert!(matches!(join(t_j3, "J3").await, JavaOutcome::Acquired(_)));
    join(t_k3, "K3").await;
    monitor
        .check(&[k1, j1, j2.owner.clone(), k2, j3, k3], &[])
        .await;
    let h = settle(&history);
    assert_eq!(labels(&h), vec!["K1", "K2", "J3", "K3"]);
    eprintln!(
        "{test}: holder → K1: {:?} after the unlock request",
        h[0].acquired.saturating_duration_since(released)
    );
    let all = handoffs(test, &h);
    summary(test, &all);
}

/// Runs a keylatch fair waiter on a runtime of its own thread, then drops
/// that runtime (connections and tasks gone: nothing renews or leaves).
struct DeadWaiter {
    owner: String,
    die: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl DeadWaiter {
    fn spawn(url: &str, name: &str, config: LocksConfig) -> Self {
        let (url, name) = (url.to_owned(), name.to_owned());
        let (owner_tx, owner_rx) = std::sync::mpsc::channel();
        let (die, die_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let locks =
                rt.block_on(async { Locks::new(Client::connect(&url).await.unwrap(), config) });
            let lock = locks.fair_lock(&name);
            owner_tx.send(lock.owner().to_owned()).unwrap();
            rt.spawn(async move {
                let _ = lock.try_acquire(Duration::from_secs(60), None).await;
            });
            // Keep the runtime turning until told to die.
            rt.block_on(async {
                while die_rx.try_recv().is_err() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            });
            rt.shutdown_background();
        });
        let owner = owner_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        Self { owner, die, thread }
    }

    fn kill(self) {
        self.die.send(()).unwrap();
        self.thread.join().unwrap();
    }
}

/// J1, a keylatch waiter that dies, J2, K3: the dead one stops blocking
/// within its liveness span (1 s) although its Redisson deadline is 300 s
/// and more away. It dies while J1 holds; J1's Redisson unlock wakes
/// nobody (the dead head's channel, or J2's if the dead entry is gone
/// already); K3's renewals purge the dead entry and, the lock being free,
/// wake J2 on its channel. Without that J2 would sleep out J1's 30 s PTTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_keylatch_waiter_in_a_mixed_queue_stops_blocking_within_its_span() {
    let test = "dead-keylatch";
    let name = "mixed-dead";
    let span = Duration::from_secs(1);
    let cfg = patient().fair_waiter_timeout(span);
    let server = RedisServer::start();
    let url = server.url();
    let locks = Locks::new(Client::connect(&url).await.unwrap(), cfg.clone());
    let admin = Client::connect(&url).await.unwrap();
    let java_client = Client::connect(&url).await.unwrap();
    let history = history(HOLD);
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let monitor = Monitor::start(&admin, name);

    // J1 holds until told: its release is what the dead waiter delays.
    let mut j1 = JavaWaiter::new(&java_client, name, 31).await;
    let j1_owner = j1.owner.clone();
    let (go_tx, go_rx) = oneshot::channel::<()>();
    let (held_tx, held_rx) = oneshot::channel::<Instant>();
    let t_j1 = tokio::spawn(async move {
        let JavaOutcome::Acquired(at) = j1.lock(None).await else {
            panic!("J1 gave up")
        };
        held_tx.send(at).unwrap();
        go_rx.await.unwrap();
        let sent = Instant::now();
        assert_eq!(j1.unlock().await, Frame::Integer(1));
        (sent, Instant::now())
    });
    until_queued(&admin, name, &j1_owner).await;
    let dead = DeadWaiter::spawn(&url, name, cfg.clone());
    until_queued(&admin, name, &dead.owner).await;
    let (j2, t_j2) = java_waiter(&java_client, name, 32, "J2", None, &history).await;
    until_queued(&admin, name, &j2).await;
    let (k3, t_k3) = rust_waiter(&locks, name, "K3", &history).await;
    until_queued(&admin, name, &k3).await;
    let dead_owner = dead.owner.clone();
    let arrival = vec![j1_owner.clone(), dead_owner.clone(), j2.clone(), k3.clone()];

    holder.unlock().await.unwrap();
    let j1_at = tokio::time::timeout(HANDOFF_BOUND, held_rx)
        .await
        .expect("J1 woken")
        .unwrap();
    // The dead waiter is now first in line, with a Redisson deadline
    // hundreds of seconds away.
    let q = snapshot(&admin, name).await;
    assert_eq!(q.queue.first(), Some(&dead_owner), "{:?}", q.queue);
    assert!(q.scores[&dead_owner] > (q.now + 100_000) as f64);
    dead.kill();
    assert!(
        snapshot(&admin, name).await.queue.contains(&dead_owner),
        "nothing ran to take the dead waiter out"
    );
    go_tx.send(()).unwrap();
    let (j1_sent, j1_released) = join(t_j1, "J1").await;
    history.records.lock().unwrap().push(Record {
        label: "J1".into(),
        kind: Kind::Java,
        acquired: j1_at,
        unlock_sent: j1_sent,
        released: j1_released,
    });
    assert!(matches!(join(t_j2, "J2").await, JavaOutcome::Acquired(_)));
    join(t_k3, "K3").await;
    monitor
        .check(&arrival, std::slice::from_ref(&dead_owner))
        .await;
    let h = settle(&history);
    assert_eq!(labels(&h), vec!["J1", "J2", "K3"]);
    let blocked = h[1].acquired.saturating_duration_since(h[0].unlock_sent);
    eprintln!(
        "{test}: J1 → J2 past the dead waiter: {blocked:?} (span {span:?}; its Redisson \
         deadline was 300 s+ away, J2's own fallback J1's 30 s PTTL)"
    );
    // Its span, one renewal of K3 (a third of it) and room for a loaded
    // machine; the Redisson deadline would be 300 s, J2's fallback 30 s.
    assert!(
        blocked < span + Duration::from_secs(4),
        "the dead keylatch waiter blocked J2 for {blocked:?}"
    );
    let k3_took = h[2].acquired.saturating_duration_since(h[1].unlock_sent);
    eprintln!("{test}: handoff J2 → K3: {k3_took:?} after the unlock request");
    assert!(k3_took < HANDOFF_BOUND);
    let end = snapshot(&admin, name).await;
    assert!(end.queue.is_empty(), "{:?}", end.queue);
    // Its liveness record went with it.
    let alive = admin
        .send(keylatch_resp::Cmd::new("ZCARD").arg(format!("keylatch_fair_alive:{{{name}}}")))
        .await
        .unwrap();
    assert_eq!(alive, Frame::Integer(0));
}

/// `tryLock()` without a wait (Redisson's EVAL_NULL_BOOLEAN script) on a
/// free lock must not jump a live keylatch waiter at the head, and the
/// numbers Redisson reads stay what its arithmetic expects: a Java waiter
/// behind a keylatch one chains its deadline from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_try_lock_does_not_jump_a_keylatch_head() {
    let name = "mixed-try-once";
    let server = RedisServer::start();
    let url = server.url();
    // A re-check every 30 s: the keylatch head sleeps through a free lock
    // unless messaged, which gives the Java tryLock() its chance to jump.
    let locks = Locks::new(Client::connect(&url).await.unwrap(), patient());
    let admin = Client::connect(&url).await.unwrap();
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let history = history(HOLD);
    let (k1, t_k1) = rust_waiter(&locks, name, "K1", &history).await;
    until_queued(&admin, name, &k1).await;
    // Past K1's second try (right after it subscribes): asleep now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut java = JavaWaiter::new(&admin, name, 41).await;
    // Free the lock behind everybody's back: nobody is messaged.
    let del = admin
        .send(keylatch_resp::Cmd::new("DEL").arg(name))
        .await
        .unwrap();
    assert_eq!(del, Frame::Integer(1));
    assert!(
        !java.try_lock_now().await,
        "tryLock() jumped the keylatch head"
    );
    // The waiting variant queues behind it, 300 s after its deadline.
    let ttl = java.try_once(300_000).await.expect("queued, not acquired");
    let q = snapshot(&admin, name).await;
    assert_eq!(q.queue, vec![k1.clone(), java.owner.clone()]);
    let (k1_score, j_score) = (q.scores[&k1], q.scores[&java.owner]);
    // Chained: 300 s after the keylatch deadline (which its renewal, every
    // 10 s here, may have moved up since).
    let gap = j_score - k1_score;
    assert!(
        (289_000.0..=300_000.0).contains(&gap),
        "Java's deadline {gap} ms after the keylatch one"
    );
    assert!(ttl >= 300_000 - 1000, "Java was told to wait {ttl} ms");
    assert!(k1_score >= (q.now + 300_000 - 1000) as f64);
    drop(holder);
    // K1 gets the lock (its re-check or the dropped holder's release).
    join(t_k1, "K1").await;
}
