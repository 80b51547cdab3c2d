#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The lock core's release path against a real 6-node Redis Cluster (3
//! masters + 3 replicas, node timeout 1 s) that the harness builds, while
//! the lock's slot is being migrated:
//!
//! 1. a release that cannot be delivered now (a MOVED ping-pong between the
//!    two nodes of a migration) is not given up but retried in the
//!    background, so the lock is free soon after the slot settles, not only
//!    when its 30 s watchdog lease runs out;
//! 2. a release while the slot is migrating but none of its keys have moved
//!    is served by the source (the unlock channel is not declared as a key,
//!    which the source would count as missing and answer `TRYAGAIN`).
//!
//! Each test's doc comment says what it checks and why it failed before the
//! lock-core redesign. Tests run one at a time (a static gate): two cores
//! run every node.

mod common;

use std::future::Future;
use std::time::{Duration, Instant};

use keylatch_cluster::{Client, Commands};
use keylatch_harness::{Feature, RedisCluster};
use keylatch_lock::{LockGuard, Locks, LocksConfig};
use keylatch_resp::Cmd;

use common::{client_for, error_count, Soon};

static GATE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Any await of the test that should finish soon, bounded: `what` names it
/// in the panic.
async fn within<T>(what: &str, limit: Duration, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: not done within {limit:?}"))
}

/// A harness call (blocking: `redis-cli` processes, sleeps between polls)
/// run without stalling the runtime's other tasks (the background release).
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// The slot of the test's lock, its current master, and another master to
/// migrate it to.
fn slot_and_nodes(cluster: &RedisCluster, slot: u16) -> (String, usize, usize) {
    let name = RedisCluster::key_for_slot(slot);
    let from = cluster.master_for_slot(slot);
    let to = *cluster.masters().iter().find(|&&m| m != from).unwrap();
    (name, from, to)
}

/// Takes lock `name` at once under the watchdog (default lease, 30 s).
async fn hold(locks: &Locks, name: &str) -> LockGuard {
    within(
        "acquire",
        Duration::from_secs(5),
        locks.lock(name).try_acquire_now(None),
    )
    .await
    .unwrap()
    .expect("the lock is free")
}

/// `EXISTS name` through a fresh cluster client (follows ASK and MOVED).
async fn exists(cluster: &RedisCluster, name: &str) -> bool {
    let client = client_for(cluster).await;
    let n: i64 = within(
        "EXISTS",
        Duration::from_secs(5),
        client.cmd(Cmd::new("EXISTS").key(name)),
    )
    .await
    .unwrap();
    n == 1
}

/// What `redis-cli` printed for `args` on node `idx`, an error reply or a
/// failed run included (whether an error reply exits non-zero depends on
/// the `redis-cli` version).
fn cli_any(cluster: &RedisCluster, idx: usize, args: &[&str]) -> String {
    match cluster.node(idx).cli(args) {
        Ok(out) => out,
        Err(e) => e.to_string(),
    }
}

/// A release is never dropped under a live slot migration.
///
/// The lock's keys are moved to the target, then the source alone is told
/// the target owns the slot (`CLUSTER SETSLOT <slot> NODE <target>`), while
/// the target is still `IMPORTING` and believes the source owns it: the
/// source answers `MOVED` to the target, the target (no `ASKING`) `MOVED`
/// back, so `unlock()` cannot be delivered. About 1 s later the migration is
/// finished properly; the lock must then be free within 3 s, far before the
/// 30 s watchdog lease would have ended it.
///
/// Before the redesign, a release that met the ping-pong was given up
/// ("releasing lock … failed …; it expires with its lease"): `unlock()`
/// returned the routing error and nothing retried it, so the key stayed for
/// the rest of its 30 s lease and this test failed on "still held".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_is_never_dropped_under_a_moved_ping_pong() {
    let _gate = GATE.lock().await;
    let cluster = RedisCluster::builder()
        .needs(Feature::MovedPingPong)
        .start()
        .unwrap();
    let slot = 4321u16;
    let (name, from, to) = slot_and_nodes(&cluster, slot);
    let locks = Locks::new(
        Client::connect(&cluster.url()).await.unwrap(),
        LocksConfig::default(),
    );
    let guard = hold(&locks, &name).await;
    assert!(exists(&cluster, &name).await, "held before the migration");

    // The ping-pong: keys on the target, the source says "the target's",
    // the target (importing) says "the source's".
    let s = slot.to_string();
    let to_id = cluster.node(to).node_id().to_owned();
    blocking(|| {
        cluster.begin_migration(slot, from, to).unwrap();
        let moved = cluster.migrate_keys(slot, from, to).unwrap();
        assert!(
            moved >= 1,
            "the lock key moved to the target ({moved} keys)"
        );
        let out = cluster
            .node(from)
            .cli(&["CLUSTER", "SETSLOT", &s, "NODE", &to_id])
            .unwrap();
        assert_eq!(out.trim(), "OK", "SETSLOT NODE on the source");
    });
    let (to_port, from_port) = (
        cluster.node(to).port().to_string(),
        cluster.node(from).port().to_string(),
    );
    let on_source = cli_any(&cluster, from, &["EXISTS", &name]);
    let on_target = cli_any(&cluster, to, &["EXISTS", &name]);
    assert!(
        on_source.contains("MOVED") && on_source.contains(&to_port),
        "the source redirects to the target: {on_source:?}"
    );
    assert!(
        on_target.contains("MOVED") && on_target.contains(&from_port),
        "the target redirects back to the source: {on_target:?}"
    );
    let moved_before = (
        error_count(&cluster, from, "MOVED"),
        error_count(&cluster, to, "MOVED"),
    );

    let unlocked = tokio::time::timeout(Duration::from_secs(5), guard.unlock()).await;
    eprintln!("unlock under the MOVED ping-pong: {unlocked:?}");
    assert!(
        !matches!(unlocked, Ok(Ok(()))),
        "unlock was delivered although the slot bounces every request"
    );
    assert!(
        error_count(&cluster, from, "MOVED") > moved_before.0
            && error_count(&cluster, to, "MOVED") > moved_before.1,
        "the release met MOVED from both nodes"
    );
    // Asked without a redirect: the key is still on the target.
    let keys = cluster
        .node(to)
        .cli(&["CLUSTER", "GETKEYSINSLOT", &s, "10"])
        .unwrap();
    assert!(
        keys.lines().any(|k| k.trim() == name),
        "nothing can delete the key while the slot bounces: {keys:?}"
    );

    tokio::time::sleep(Duration::from_secs(1)).await;
    blocking(|| cluster.finish_migration(slot, to).unwrap());
    let settled = Instant::now();
    Soon::new(Duration::from_secs(3), Duration::from_millis(100))
        .until(|| {
            let (cluster, name) = (&cluster, name.as_str());
            async move {
                if exists(cluster, name).await {
                    Err(format!(
                        "lock {name:?} still held {:?} after the migration finished \
                         (the release was dropped; the 30 s lease would end it)",
                        settled.elapsed()
                    ))
                } else {
                    Ok(())
                }
            }
        })
        .await;
    eprintln!(
        "lock free {:?} after the migration finished",
        settled.elapsed()
    );
}

/// Unlock is not refused while the lock's slot is migrating though its keys
/// never moved.
///
/// The slot is put into migration (source `MIGRATING`, target `IMPORTING`)
/// and no key is moved: the source has the lock hash and the fencing
/// counter, so it must serve the release at once; `unlock()` must return
/// `Ok` within 3 s and the lock key be gone.
///
/// Before the redesign the release script declared the unlock channel as
/// `KEYS[2]`: a channel never exists as a key, so the migrating source saw
/// a missing key among present ones and answered `TRYAGAIN` to every try
/// until the router gave up, and `unlock()` failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_is_served_while_the_slot_migrates_with_its_keys_unmoved() {
    let _gate = GATE.lock().await;
    let cluster = RedisCluster::start();
    let slot = 9876u16;
    let (name, from, to) = slot_and_nodes(&cluster, slot);
    let locks = Locks::new(
        Client::connect(&cluster.url()).await.unwrap(),
        LocksConfig::default(),
    );
    let guard = hold(&locks, &name).await;
    blocking(|| cluster.begin_migration(slot, from, to).unwrap());

    let started = Instant::now();
    let unlocked = within("unlock", Duration::from_secs(10), guard.unlock()).await;
    let took = started.elapsed();
    assert!(
        unlocked.is_ok(),
        "unlock refused while slot {slot} migrates with its keys on the source: {unlocked:?} \
         (after {took:?})"
    );
    assert!(
        took < Duration::from_secs(3),
        "unlock took {took:?}, not within 3 s"
    );
    assert!(
        !exists(&cluster, &name).await,
        "lock {name:?} still held after a successful unlock"
    );
}
