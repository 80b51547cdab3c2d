//! Rows against a Sentinel group (a master, 2 replicas, 3 sentinels),
//! reached through a `redis+sentinel://` URL: the master killed after its
//! replicas fell behind, with replica sync on every replica (no
//! acknowledged hold lost) and without (the control: holds lost to
//! asynchronous replication, which the checker sees), and `SENTINEL
//! FAILOVER` under load.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use keylatch_harness::{RedisServer, SentinelGroup};

use crate::history::Report;
use crate::row::{self, nap, Log, Workload};
use crate::{names, no_lock_outlives_its_lease, serial};

fn sentinel_row(
    label: &str,
    w: impl FnOnce(Workload) -> Workload,
    disturb: impl FnOnce(&mut SentinelGroup, &AtomicBool, &Log) + Send,
) -> Report {
    let _serial = serial();
    let mut group = SentinelGroup::start();
    let resource = RedisServer::start();
    let w = w(Workload::new(names(label)));
    let url = group.url();
    let report = row::run(label, &url, &resource, &resource.url(), &w, |stop, log| {
        disturb(&mut group, stop, log);
    });
    no_lock_outlives_its_lease(&url, &w.names, w.lease);
    report
}

/// Kills the master after cutting its replicas off, so the writes of the
/// last `hold` exist on the master alone: both replicas are stopped, the
/// master's links to them killed, and `hold` later the master is killed;
/// the replicas resume, the sentinels promote one, and the old master is
/// started again (empty) and turned into a replica by the sentinels.
fn kill_master(group: &mut SentinelGroup, hold: Duration) {
    let old = group.master();
    let replicas: Vec<usize> = (0..group.nodes().len()).filter(|i| *i != old).collect();
    for r in &replicas {
        group.nodes()[*r].pause().expect("SIGSTOP replica");
    }
    let _ = group.nodes()[old].cli(&["CLIENT", "KILL", "TYPE", "replica"]);
    std::thread::sleep(hold);
    group.node_mut(old).kill();
    for r in &replicas {
        group.nodes()[*r].resume().expect("SIGCONT replica");
    }
    group
        .wait_new_master(old, Duration::from_secs(30))
        .expect("a replica promoted");
    group.node_mut(old).restart().expect("old master back");
    group
        .wait_replicas_online(replicas.len(), Duration::from_secs(30))
        .expect("the old master rejoined as a replica");
}

/// With `ReplicaSync::AtLeast(2)` (every replica: any may be promoted) an
/// acquire is acknowledged only once both replicas have it, so killing the
/// master loses no acknowledged hold. Lease and long holds as in the
/// cluster row: a lost hold would show as an overlap rather than end first.
#[test]
fn sentinel_master_killed_with_replica_sync() {
    let r = sentinel_row(
        "sentinel-kill-sync",
        |w| Workload {
            replica_sync: true,
            sync_replicas: 2,
            lease: Duration::from_secs(10),
            long_hold: Duration::from_secs(12),
            ..w
        },
        |group, stop, log| {
            while nap(stop, Duration::from_millis(1500)) {
                log.span(|| kill_master(group, Duration::from_millis(300)));
            }
        },
    );
    eprintln!("{r}");
    assert!(r.clean(), "{r}");
    assert!(r.disturbances > 0, "{r}");
}

/// The control: the same kills without replica sync lose holds the master
/// had acknowledged, and the checker sees it.
#[test]
fn control_sentinel_master_killed_without_replica_sync() {
    let r = sentinel_row(
        "sentinel-kill-nosync",
        |w| Workload {
            lease: Duration::from_secs(10),
            long_hold: Duration::from_secs(12),
            ..w
        },
        |group, stop, log| {
            while nap(stop, Duration::from_millis(1500)) {
                log.span(|| kill_master(group, Duration::from_millis(300)));
            }
        },
    );
    eprintln!("{r}");
    assert!(
        r.overlaps > 0 || r.token_violations > 0,
        "the checker must see holds lost to asynchronous replication: {r}"
    );
    assert_eq!(r.hangs, 0, "{r}");
}
