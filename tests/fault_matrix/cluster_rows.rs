//! Rows against a 6-node cluster (3 masters, 1 replica each), every lock
//! name in one slot so each disturbance hits all of them: graceful
//! failovers, a master killed with and without replica sync, live
//! resharding, the script cache flushed on every node.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use keylatch_harness::{FailoverMode, RedisCluster, RedisServer};

use crate::history::Report;
use crate::row::{self, nap, Log, Workload};
use crate::{no_lock_outlives_its_lease, serial, NAMES};

/// The slot every name of a cluster row hashes to.
const SLOT: u16 = 7000;

fn cluster_row(
    label: &str,
    w: impl FnOnce(Workload) -> Workload,
    disturb: impl FnOnce(&mut RedisCluster, &AtomicBool, &Log) + Send,
) -> Report {
    let _serial = serial();
    let mut cluster = RedisCluster::start();
    let resource = RedisServer::start();
    let names = RedisCluster::keys_for_slot(SLOT, NAMES);
    let w = w(Workload::new(names));
    let url = cluster.url();
    let report = row::run(label, &url, &resource, &resource.url(), &w, |stop, log| {
        disturb(&mut cluster, stop, log);
    });
    cluster
        .wait_healthy()
        .expect("cluster healthy after the row");
    no_lock_outlives_its_lease(&url, &w.names, w.lease);
    report
}

/// The slot's master and its (first) replica, as the cluster says now.
fn pair(cluster: &RedisCluster) -> (usize, usize) {
    pair_for(cluster, SLOT)
}

/// [`pair`] for any slot (the CLI row's too).
pub(crate) fn pair_for(cluster: &RedisCluster, slot: u16) -> (usize, usize) {
    let master = cluster.master_for_slot(slot);
    let replica = *cluster
        .replicas_of(master)
        .first()
        .expect("the slot's master has a replica");
    (master, replica)
}

/// A master other than `master`, for a slot migration.
pub(crate) fn other_master(cluster: &RedisCluster, master: usize) -> usize {
    *cluster
        .masters()
        .iter()
        .find(|&&m| m != master)
        .expect("another master")
}

#[test]
fn cluster_graceful_failovers() {
    let r = cluster_row(
        "failover",
        |w| w,
        |cluster, stop, log| {
            while nap(stop, Duration::from_millis(1000)) {
                log.span(|| {
                    let (_, replica) = pair(cluster);
                    cluster
                        .failover(replica, FailoverMode::Default)
                        .expect("failover");
                });
            }
        },
    );
    assert!(r.clean(), "{r}");
}

/// Kills the slot's master after cutting its replication link, so the
/// writes of the last moments exist on the master alone: the replica is
/// stopped, the master's link to it killed, and `hold` later the master is
/// killed; the replica then resumes, is promoted, and the old master
/// rejoins as its replica.
fn kill_master(cluster: &mut RedisCluster, hold: Duration) {
    let (master, replica) = pair(cluster);
    cluster.node(replica).pause().expect("SIGSTOP replica");
    let _ = cluster
        .node(master)
        .cli(&["CLIENT", "KILL", "TYPE", "replica"]);
    std::thread::sleep(hold);
    cluster.node_mut(master).kill();
    cluster.node(replica).resume().expect("SIGCONT replica");
    let deadline = Instant::now() + Duration::from_secs(30);
    while cluster.master_for_slot(SLOT) != replica {
        assert!(
            Instant::now() < deadline,
            "replica {replica} was not promoted"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    cluster.node_mut(master).restart().expect("old master back");
    cluster.wait_healthy().expect("healthy after the kill");
}

/// With `ReplicaSync::AtLeast(1)` an acquire is acknowledged only once a
/// replica has it, so killing the master loses no acknowledged hold. The
/// lease (10 s) is longer than a failover takes, so a lost hold would
/// show as an overlap rather than end first; the long holds (12 s) renew
/// every 3.3 s, so kills meet renewed holds too.
#[test]
fn cluster_master_killed_with_replica_sync() {
    let r = cluster_row(
        "kill-sync",
        |w| Workload {
            replica_sync: true,
            lease: Duration::from_secs(10),
            long_hold: Duration::from_secs(12),
            ..w
        },
        |cluster, stop, log| {
            while nap(stop, Duration::from_millis(1500)) {
                log.span(|| kill_master(cluster, Duration::from_millis(300)));
            }
        },
    );
    assert!(r.clean(), "{r}");
    assert!(r.disturbances > 0, "{r}");
}

/// The control: the same kills without replica sync lose holds the master
/// had acknowledged (replication is asynchronous), and the checker sees it.
#[test]
fn control_cluster_master_killed_without_replica_sync() {
    let r = cluster_row(
        "kill-nosync",
        |w| Workload {
            lease: Duration::from_secs(10),
            long_hold: Duration::from_secs(12),
            ..w
        },
        |cluster, stop, log| {
            while nap(stop, Duration::from_millis(1500)) {
                log.span(|| kill_master(cluster, Duration::from_millis(300)));
            }
        },
    );
    assert!(
        r.overlaps > 0 || r.token_violations > 0,
        "the checker must see holds lost to asynchronous replication: {r}"
    );
    assert_eq!(r.hangs, 0, "{r}");
}

#[test]
fn cluster_live_resharding() {
    let r = cluster_row(
        "reshard",
        |w| w,
        |cluster, stop, log| {
            while nap(stop, Duration::from_millis(300)) {
                log.span(|| {
                    let from = cluster.master_for_slot(SLOT);
                    let to = other_master(cluster, from);
                    cluster.move_slot(SLOT, from, to).expect("slot moved");
                });
            }
        },
    );
    assert!(r.clean(), "{r}");
    // An acquire may lose every race for its wait (the lock is not fair),
    // but none fails.
    assert!(
        r.failure_kinds.iter().all(|(k, _)| k == "wait-elapsed"),
        "no redirect error surfaces: {r}"
    );
}

#[test]
fn cluster_script_cache_flushed_under_load() {
    let r = cluster_row(
        "cluster-script-flush",
        |w| w,
        |cluster, stop, log| {
            while nap(stop, Duration::from_millis(200)) {
                log.span(|| {
                    for n in cluster.nodes() {
                        n.cli(&["SCRIPT", "FLUSH"]).expect("SCRIPT FLUSH");
                    }
                });
            }
        },
    );
    assert!(r.clean(), "{r}");
    assert_eq!(r.acquire_failures, 0, "no error surfaces: {r}");
}
