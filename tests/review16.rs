//! Review of "the cluster client under faults" (routed retries until a
//! deadline, connection health check, READONLY drain, settled acquires in a
//! cluster). Each test reproduces one defect against real servers:
//!
//! 1. an acquire sent to a migration's target after `-ASK` goes out as an
//!    `ASKING` pipeline without the late handler: when it times out (or is
//!    dropped) and then runs, the hold it took is never released by the
//!    finisher, unlike every other acquire (`routed.rs`, `run`);
//! 2. a cluster client whose request timeout is a huge duration panics on
//!    every request (`Instant + Duration` overflow in
//!    `Router::default_deadline`), where a single connection with the same
//!    setting works (its `deadline()` uses `checked_add`);
//! 3. a huge health interval panics the connection task (`Health::new`);
//! 4. after a `READONLY` reply the connection stops taking requests until
//!    its pending replies are in; requests queued meanwhile have no timer, so
//!    behind a reply that never comes (a documented untimed blocking read)
//!    they wait forever instead of timing out after the request timeout.
//!
//! Cluster tests run one at a time (a static gate): two cores run every node.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use keylatch_cluster::{Client, ClientConfig, Commands, Connection, ConnectionConfig, Pipeline};
use keylatch_harness::{RedisCluster, RedisServer};
use keylatch_lock::{Locks, LocksConfig};
use keylatch_resp::Cmd;

mod common;
use common::Soon;

static GATE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs blocking harness calls (redis-cli, waits) without stalling the
/// runtime's other worker.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// Resumes a paused cluster node when dropped, also when the test fails.
struct ResumeNode<'a> {
    cluster: &'a RedisCluster,
    idx: usize,
}

impl Drop for ResumeNode<'_> {
    fn drop(&mut self) {
        let _ = self.cluster.node(self.idx).resume();
    }
}

/// A cluster client whose every request times out after `timeout`.
async fn client_with_timeout(cluster: &RedisCluster, timeout: Option<Duration>) -> Client {
    let urls = cluster.seed_urls();
    let seeds: Vec<&str> = urls.iter().map(String::as_str).take(2).collect();
    let mut cfg = ClientConfig::from_urls(&seeds).unwrap();
    for seed in &mut cfg.seeds {
        seed.request_timeout = timeout;
    }
    let client = Client::connect_with(cfg).await.unwrap();
    assert!(client.is_cluster());
    client
}

/// A slot served by master `idx`.
fn slot_of_master(cluster: &RedisCluster, idx: usize) -> u16 {
    (0..16384u16)
        .step_by(97)
        .find(|&s| cluster.master_for_slot(s) == idx)
        .unwrap()
}

// ---------------------------------------------------------------------------
// 1. A timed-out acquire that went out after -ASK is never settled

/// `Lock::try_acquire` promises: "An acquire dropped (or given up, past its
/// bound) while its reply is on its way hands the reply to a background
/// finisher: if it says acquired, that hold is released by its token (a
/// re-entry: that one count)". In a cluster the attempt is routed with
/// `Wait::Settled(late)`, but `routed::run` sends an `ASK`-redirected
/// attempt as an `ASKING` + command pipeline with `pipeline_timeout`, and
/// the late handler is left out: its late reply is read and dropped.
///
/// Here the lock's keys have moved to the target of an open migration (the
/// source answers `ASK`), the target is stopped for a moment, and the owner
/// re-enters with a short bound: the re-entry is written, times out, and
/// runs once the target continues. The finisher should undo that count, so
/// the owner's one unlock frees the lock. On this HEAD the count stays, and
/// the lock stays held (for the whole 60 s lease) after its owner let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_acquire_redirected_by_ask_is_still_settled() {
    let _gate = GATE.lock().await;
    let cluster = RedisCluster::start();
    // Each attempt waits at most 300 ms for its reply.
    let client = client_with_timeout(&cluster, Some(Duration::from_millis(300))).await;
    let mut lcfg = LocksConfig::default();
    lcfg.attempt_timeout = Duration::from_millis(300);
    let locks = Locks::new(client.clone(), lcfg);
    let slot = 4242u16;
    let name = RedisCluster::key_for_slot(slot);
    let from = cluster.master_for_slot(slot);
    let to = *cluster.masters().iter().find(|&&m| m != from).unwrap();

    // The target has the acquire/release scripts cached and an open
    // connection from this client (a lock on one of its own slots).
    let warm = locks.lock(&RedisCluster::key_for_slot(slot_of_master(&cluster, to)));
    warm.try_acquire_now(None)
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();

    let lock = locks.lock(&name);
    let lease = Some(Duration::from_secs(60));
    let first = lock.try_acquire_now(lease).await.unwrap().unwrap();
    assert_eq!(first.hold_count(), 1);

    // Open the migration and move the lock's keys: the source answers ASK,
    // the target (with ASKING) runs the script, both keys being there.
    blocking(|| {
        cluster.begin_migration(slot, from, to).unwrap();
        cluster.migrate_keys(slot, from, to).unwrap();
    });
    let at_source = blocking(|| cluster.node(from).cli(&["EXISTS", &name]).unwrap());
    assert!(
        at_source.trim().starts_with("ASK "),
        "source answered {at_source:?}"
    );

    // The target stops for a moment: the re-entry (ASKING + EVALSHA) is
    // written, then given up after 300 ms.
    cluster.node(to).pause().unwrap();
    let resume = ResumeNode {
        cluster: &cluster,
        idx: to,
    };
    let r = tokio::time::timeout(Duration::from_secs(5), lock.try_acquire_now(lease))
        .await
        .expect("re-entry hung");
    drop(resume);
    assert!(
        r.is_err(),
        "re-entry against a stopped target did not time out: {:?}",
        r.map(|g| g.map(|g| g.hold_count()))
    );
    eprintln!("re-entry gave up with {:?}", r.err());

    // The target runs the re-entry now; its reply comes late and the
    // finisher has time to undo that count.
    tokio::time::sleep(Duration::from_secs(2)).await;
    blocking(|| cluster.finish_migration(slot, to)).unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The owner's one guard lets go: nobody holds the lock any more.
    tokio::time::timeout(Duration::from_secs(5), first.unlock())
        .await
        .expect("unlock hung")
        .expect("unlock");
    let left = blocking(|| {
        cluster
            .node(to)
            .cli(&["HGETALL", &name])
            .unwrap()
            .trim()
            .to_owned()
    });
    let still = tokio::time::timeout(Duration::from_secs(5), lock.is_locked())
        .await
        .unwrap()
        .unwrap();
    assert!(
        !still,
        "the lock is still held after its owner's only unlock: the timed-out \
         re-entry sent after ASK ran on the target and was never settled \
         (lock hash on the target: {left:?})"
    );
}

// ---------------------------------------------------------------------------
// 2. A huge request timeout panics every routed request

/// `request_timeout(Some(Duration::MAX))` is accepted, and a single
/// connection copes with it (`connection.rs` `deadline()` uses
/// `checked_add`: no deadline). The router now computes a default deadline
/// with `Instant::now() + request_timeout` (`routed.rs`,
/// `default_deadline`), which overflows and panics in the caller's task on
/// every request (same for `retry_window` without a request timeout, and
/// `eval_shared_settled`'s `now + timeout` in `client_requests.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_request_timeout_does_not_panic_cluster_requests() {
    let _gate = GATE.lock().await;
    let cluster = RedisCluster::start();

    // The same setting on one connection to a node: fine.
    let mut cfg = ConnectionConfig::from_url(&cluster.node(0).url()).unwrap();
    cfg.request_timeout = Some(Duration::MAX);
    let conn = Connection::connect_with(cfg).await.unwrap();
    assert_eq!(conn.send(Cmd::new("PING")).await.unwrap(), "PONG");

    let client = client_with_timeout(&cluster, Some(Duration::MAX)).await;
    let task = tokio::spawn(async move {
        client.set("review16:k", "v").await?;
        client.get("review16:k").await
    });
    let joined = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("request hung");
    match joined {
        Ok(r) => assert_eq!(r.unwrap().as_deref(), Some(&b"v"[..])),
        Err(e) => panic!("a cluster request with request_timeout = Duration::MAX panicked: {e}"),
    }
}

// ---------------------------------------------------------------------------
// 3. A huge health interval panics the connection task

/// `health_interval(Some(d))` takes any duration; `Health::new` computes
/// `now + interval` (and `tick` `now + self.interval`) unchecked, so a
/// large one (say, "practically never") panics the connection's task at
/// connect: the connection is dead from the start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_health_interval_does_not_kill_the_connection() {
    let server = RedisServer::start();
    let cfg = ConnectionConfig::from_url(&server.url())
        .unwrap()
        .health_interval(Some(Duration::MAX));
    let conn = Connection::connect_with(cfg).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(5), conn.set("k", "v"))
        .await
        .expect("SET hung");
    assert!(
        r.is_ok(),
        "SET on a connection with health_interval = Duration::MAX: {r:?}"
    );
}

// ---------------------------------------------------------------------------
// 4. Requests queued behind a READONLY drain have no timeout

/// After a `READONLY` reply the task takes no more requests until every
/// pending reply is in (`driver.rs`: `take_requests` stops on `demoted`).
/// Requests left in the queue meanwhile are not bounded by anything: their
/// deadline is armed only when taken, and the "blocked" bound covers only
/// the in-flight cap and the write buffer. A pending reply that never comes
/// (here an untimed `XREAD BLOCK 0`, the kind of request `send_timeout(…,
/// None)` documents, pipelined behind the refused write) keeps every later
/// caller of the connection waiting forever, past its request timeout.
/// Before this change such a caller got `Timeout` after its request timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_queued_behind_a_readonly_drain_still_time_out() {
    let primary = RedisServer::start();
    let other = RedisServer::start();
    let mut cfg = ConnectionConfig::from_url(&primary.url()).unwrap();
    cfg.request_timeout = Some(Duration::from_millis(500));
    let conn = Connection::connect_with(cfg).await.unwrap();
    conn.set("k", "v").await.unwrap();
    // Demoted: writes are refused with READONLY, reads (XREAD) still served.
    let port = other.port().to_string();
    primary.cli(&["REPLICAOF", "127.0.0.1", &port]).unwrap();
    Soon::new(Duration::from_secs(10), Duration::from_millis(20)).until_blocking(|| {
        let role = primary.cli(&["ROLE"]).unwrap();
        if role.starts_with("slave") {
            Ok(())
        } else {
            Err(format!("not a replica yet: {role}"))
        }
    });

    // A refused write and a blocking read in one write: READONLY arrives
    // while the read is pending.
    let pipe = Pipeline::new().cmd(Cmd::new("SET").key("k").arg("w")).cmd(
        Cmd::new("XREAD")
            .arg("BLOCK")
            .arg("0")
            .arg("STREAMS")
            .key("s")
            .arg("$"),
    );
    let reader = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.pipeline(pipe).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;

    // A plain read after that: its caller waits at most the request timeout
    // (a reply, a Timeout, or Disconnected: anything but waiting forever).
    let started = std::time::Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(5), conn.get("k")).await;
    let waited = started.elapsed();
    reader.abort();
    assert!(
        r.is_ok(),
        "GET with a 500 ms request timeout still waiting after {waited:?}: \
         queued behind the READONLY drain, never taken, never timed out"
    );
}
