#![allow(clippy::unwrap_used, clippy::expect_used)]
//! How fast a held lock's guard reports `lost()` after an outside DEL or
//! overwrite, through the README path `Locks::connect(url)` (client tracking
//! on, default 30 s watchdog: renewals every 10 s cannot explain a loss seen
//! within the 1 s asserted here).
//!
//! Only the generous bound is asserted (lost() within 1 s of the outside
//! command's reply); the timings (p50/max, target 5 ms) are printed, never
//! part of pass/fail. Run with `--nocapture` to see them; pick the server
//! with `KEYLATCH_REDIS_SERVER`.

mod common;

use std::time::{Duration, Instant};

use keylatch_cluster::{Commands, Connection};
use keylatch_harness::RedisServer;
use keylatch_lock::{LockGuard, Locks, LossReason};

/// Holds measured per case, each on a fresh lock name.
const REPEATS: usize = 20;
/// The asserted bound: a loss must not wait for a renewal (10 s away).
const BOUND: Duration = Duration::from_secs(1);
/// Any single step that should be quick (connect, acquire, a command).
const STEP: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug)]
enum Outside {
    Del,
    /// `SET name x`: the hash replaced by a string.
    SetString,
}

#[derive(Clone, Copy, Debug)]
struct Case {
    label: &'static str,
    /// Age of the hold when the outside command is sent.
    after: Duration,
    outside: Outside,
    /// `Some(lease)`: a fixed-lease hold (`try_acquire_now(Some(lease))`);
    /// `None`: a watchdog hold (`acquire()`).
    fixed_lease: Option<Duration>,
}

/// `valkey_version` when the server has one (Valkey also reports a
/// compatibility `redis_version`), else `redis_version`.
async fn server_version(conn: &Connection) -> String {
    let info = conn.info(Some("server")).await.unwrap();
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_owned())
    };
    match field("valkey_version:") {
        Some(v) => format!("Valkey {v}"),
        None => format!("Redis {}", field("redis_version:").unwrap_or_default()),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    // Nearest rank.
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

async fn take(locks: &Locks, name: &str, fixed_lease: Option<Duration>) -> LockGuard {
    let lock = locks.lock(name);
    let fut = async {
        match fixed_lease {
            Some(lease) => lock
                .try_acquire_now(Some(lease))
                .await
                .unwrap()
                .expect("a fresh lock name is free"),
            None => lock.acquire().await.unwrap(),
        }
    };
    tokio::time::timeout(STEP, fut)
        .await
        .expect("acquire within 5 s")
}

async fn run(case: Case) {
    let server = RedisServer::start();
    let url = server.url();
    // The README path: client tracking on, default LocksConfig (30 s watchdog).
    let locks = tokio::time::timeout(STEP, Locks::connect(&url))
        .await
        .expect("connect within 5 s")
        .unwrap();
    let outsider = Connection::connect(&url).await.unwrap();
    let version = server_version(&outsider).await;

    // From the outside command's reply to lost() resolving (0 when lost()
    // resolved before the reply was read), and from its send.
    let mut from_reply = Vec::with_capacity(REPEATS);
    let mut from_send = Vec::with_capacity(REPEATS);
    let mut before_reply = 0usize;
    let mut ages = Vec::with_capacity(REPEATS);
    let mut reasons: Vec<LossReason> = Vec::with_capacity(REPEATS);
    let mut failures: Vec<String> = Vec::new();

    for i in 0..REPEATS {
        let name = format!("loss-{}-{i}", case.label);
        let guard = take(&locks, &name, case.fixed_lease).await;
        let acquired = Instant::now();
        // Watch the signal from before the outside command, stamping the
        // instant it resolves.
        let lost = guard.lost();
        let watcher = tokio::spawn(async move {
            let reason = lost.await;
            (reason, Instant::now())
        });
        if case.after < Duration::from_millis(10) {
            // tokio's timer rounds up to whole milliseconds (a 1 ms sleep
            // is ~2 ms): yield until the age is reached instead.
            while acquired.elapsed() < case.after {
                tokio::task::yield_now().await;
            }
        } else {
            tokio::time::sleep(case.after).await;
        }
        assert!(
            !guard.is_lost(),
            "{version} {}: #{i} lost before the outside command",
            case.label
        );
        let sent = Instant::now();
        let reply = match case.outside {
            Outside::Del => outsider.del([name.as_str()]).await.map(drop),
            Outside::SetString => outsider.set(name.as_str(), "x").await,
        };
        let replied = Instant::now();
        reply.unwrap();
        ages.push(sent - acquired);
        match tokio::time::timeout(BOUND, watcher).await {
            Ok(joined) => {
                let (reason, at) = joined.unwrap();
                if at < replied {
                    before_reply += 1;
                }
                from_reply.push(at.saturating_duration_since(replied));
                from_send.push(at.saturating_duration_since(sent));
                reasons.push(reason);
            }
            Err(_) => failures.push(format!(
                "#{i} ({name}): lost() not resolved {} ms after the reply",
                BOUND.as_millis()
            )),
        }
        drop(guard);
    }

    from_reply.sort();
    from_send.sort();
    ages.sort();
    let gone = reasons.iter().filter(|r| **r == LossReason::Gone).count();
    let other: Vec<_> = reasons.iter().filter(|r| **r != LossReason::Gone).collect();
    if from_reply.is_empty() {
        eprintln!(
            "LOSS {version:<14} case={:<16} n=0 of {REPEATS} resolved within {} ms",
            case.label,
            BOUND.as_millis()
        );
    } else {
        eprintln!(
            "LOSS {version:<14} case={:<16} n={}/{REPEATS} from-reply p50={:.2}ms max={:.2}ms \
             | from-send p50={:.2}ms max={:.2}ms | before-reply={before_reply} \
             | age-at-cmd p50={:.2}ms max={:.2}ms | reasons Gone={gone} other={other:?}",
            case.label,
            from_reply.len(),
            ms(percentile(&from_reply, 0.5)),
            ms(*from_reply.last().unwrap()),
            ms(percentile(&from_send, 0.5)),
            ms(*from_send.last().unwrap()),
            ms(percentile(&ages, 0.5)),
            ms(*ages.last().unwrap()),
        );
    }
    assert!(
        failures.is_empty(),
        "{version} {}: lost() must fire within {} ms of the outside command \
         (not at the renewal 10 s later):\n{}",
        case.label,
        BOUND.as_millis(),
        failures.join("\n")
    );
}

/// Bounds a whole case well under 60 s.
async fn bounded(case: Case) {
    tokio::time::timeout(Duration::from_secs(50), run(case))
        .await
        .expect("case finished within 50 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_del_100ms_into_a_watchdog_hold_is_lost_within_1s() {
    bounded(Case {
        label: "a-del-100ms",
        after: Duration::from_millis(100),
        outside: Outside::Del,
        fixed_lease: None,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b_set_string_100ms_into_a_watchdog_hold_is_lost_within_1s() {
    bounded(Case {
        label: "b-set-100ms",
        after: Duration::from_millis(100),
        outside: Outside::SetString,
        fixed_lease: None,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_del_1ms_into_a_young_watchdog_hold_is_lost_within_1s() {
    bounded(Case {
        label: "c-del-1ms",
        after: Duration::from_millis(1),
        outside: Outside::Del,
        fixed_lease: None,
    })
    .await;
}

/// The hash replaced by a string before the hold's tracked read (2 ms):
/// that read meets WRONGTYPE, which is the loss (nobody changes the key
/// again, so no invalidation would come before the renewal 10 s later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e_set_string_1ms_into_a_young_watchdog_hold_is_lost_within_1s() {
    bounded(Case {
        label: "e-set-1ms",
        after: Duration::from_millis(1),
        outside: Outside::SetString,
        fixed_lease: None,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d_del_100ms_into_a_fixed_30s_lease_is_lost_within_1s() {
    bounded(Case {
        label: "d-fixed-del-100ms",
        after: Duration::from_millis(100),
        outside: Outside::Del,
        fixed_lease: Some(Duration::from_secs(30)),
    })
    .await;
}

/// More invalidation pushes at once than the engine's queue holds (1,024):
/// the overflow turns into "check every hold", none of the 1,500 holds is
/// reported lost (their owner fields stand), and a hold deleted afterwards
/// is still noticed within 1 s (the pushes do not pile up unbounded, and
/// tracking resumes after the checks).
#[tokio::test]
async fn an_invalidation_flood_past_the_queue_checks_every_hold_and_loses_none() {
    let server = keylatch_harness::RedisServer::start();
    let locks = keylatch_lock::Locks::connect_with(
        keylatch_cluster::ClientConfig::from_url(&server.url()).unwrap(),
        keylatch_lock::LocksConfig::default().watchdog_timeout(std::time::Duration::from_secs(30)),
    )
    .await
    .unwrap();
    let n = 1500;
    let mut guards = Vec::with_capacity(n);
    for i in 0..n {
        guards.push(locks.lock(&format!("flood:{i}")).acquire().await.unwrap());
    }
    // Old enough to be tracked, and the tracked reads done.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // One write per held key from outside, in one pipeline: 1,500 pushes.
    let outsider = keylatch_cluster::Connection::connect(&server.url())
        .await
        .unwrap();
    let mut p = keylatch_cluster::Pipeline::new();
    for i in 0..n {
        p.add(
            keylatch_resp::Cmd::new("PEXPIRE")
                .key(format!("flood:{i}"))
                .arg(60_000),
        );
    }
    outsider.pipeline(p).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let lost = guards.iter().filter(|g| g.is_lost()).count();
    assert_eq!(lost, 0, "every hold still stands after the checks");
    assert_eq!(locks.watched_holds(), n);
    // Tracking resumed: a deletion now is noticed promptly.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    outsider.del(["flood:7"]).await.unwrap();
    let reason = tokio::time::timeout(std::time::Duration::from_secs(1), guards[7].lost())
        .await
        .expect("a hold deleted after the flood is lost within 1 s");
    assert_eq!(reason, keylatch_lock::LossReason::Gone);
    for g in guards {
        let _ = g.unlock().await;
    }
}

/// A release sent while the hold stood, but answered by a stalled server
/// after the hold's local deadline (the key expired during the stall): the
/// lease ran out on the way, which is `Expired`, never `NotOwner` (no one
/// else ended the hold). The fault matrix's stall row met this as a
/// "silent loss".
#[tokio::test]
async fn a_release_answered_after_the_deadline_by_a_stalled_server_is_expired() {
    use keylatch_harness::Feature;
    use keylatch_lock::LockError;
    let server = RedisServer::builder()
        .needs(Feature::EnableDebugCommand)
        .args(["--enable-debug-command", "local"])
        .start()
        .unwrap();
    let locks = tokio::time::timeout(STEP, Locks::connect(&server.url()))
        .await
        .unwrap()
        .unwrap();
    let guard = take(&locks, "stalled-release", Some(Duration::from_millis(400))).await;
    // The server sleeps 1 s from now: the key's 400 ms end passes meanwhile.
    let port = server.port();
    let stall = std::thread::spawn(move || {
        let url = format!("redis://127.0.0.1:{port}");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let c = keylatch_cluster::Client::connect(&url).await.unwrap();
            let _ = c
                .send(keylatch_resp::Cmd::new("DEBUG").arg("SLEEP").arg("1"))
                .await;
        });
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!guard.is_lost(), "the hold stands when its release is sent");
    let out = tokio::time::timeout(STEP, guard.unlock()).await.unwrap();
    assert!(
        matches!(out, Err(LockError::Expired { .. })),
        "a late answer is the lease's end: {out:?}"
    );
    stall.join().unwrap();
}
