//! Tests of [`RedisCluster`] against real servers (3 masters + 3 replicas,
//! node timeout 1 s).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::parse::NodesView;
use crate::slot::SLOTS;
use crate::{FailoverMode, RedisCluster};

fn view(cluster: &RedisCluster, idx: usize) -> NodesView {
    NodesView::parse(&cluster.node(idx).cli(&["CLUSTER", "NODES"]).unwrap()).unwrap()
}

fn cli(cluster: &RedisCluster, idx: usize, args: &[&str]) -> String {
    cluster.node(idx).cli(args).unwrap().trim().to_owned()
}

/// The first slot node `idx` owns, by its own view.
fn first_slot_of(cluster: &RedisCluster, idx: usize) -> u16 {
    view(cluster, idx).myself().unwrap().slots[0].0
}

#[test]
fn starts_healthy_and_keys_land_on_the_slot_owner() {
    let cluster = RedisCluster::start();
    assert_eq!(cluster.nodes().len(), 6);
    assert_eq!(cluster.seed_urls().len(), 6);
    assert_eq!(cluster.url(), cluster.node(0).url());
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3, "{masters:?}");
    let master_ids: HashSet<String> = masters
        .iter()
        .map(|&m| cluster.node(m).node_id().to_owned())
        .collect();
    let mut replicas = Vec::new();
    for &m in &masters {
        let of_m = cluster.replicas_of(m);
        assert_eq!(of_m.len(), 1, "replicas of {m}: {of_m:?}");
        replicas.extend(of_m);
    }
    replicas.sort_unstable();
    replicas.dedup();
    assert_eq!(replicas.len() + masters.len(), 6);

    // Every node's view: each slot has exactly one master, the three masters
    // own disjoint ranges, and the views are identical.
    let reference = view(&cluster, 0).slot_map().unwrap();
    for i in 0..6 {
        let v = view(&cluster, i);
        let mut owner: Vec<Option<&str>> = vec![None; usize::from(SLOTS)];
        for line in v.lines.iter().filter(|l| l.master) {
            for &(a, b) in &line.slots {
                for s in a..=b {
                    let prev = owner[usize::from(s)].replace(&line.id);
                    assert!(prev.is_none(), "slot {s} owned twice in node {i}'s view");
                }
            }
        }
        let owners: HashSet<String> = owner
            .iter()
            .map(|o| o.expect("every slot owned").to_owned())
            .collect();
        assert_eq!(owners, master_ids, "node {i}");
        assert_eq!(v.slot_map().unwrap(), reference, "node {i}");
        assert!(cluster.node(i).server().dir().join("nodes.conf").exists());
        assert_eq!(cluster.node_index_by_port(cluster.node(i).port()), Some(i));
    }

    for slot in [0, 1, 5460, 5461, 10922, 10923, 12182, SLOTS - 1] {
        let key = RedisCluster::key_for_slot(slot);
        // Redis' own CRC16 agrees with the harness'.
        assert_eq!(
            cli(&cluster, 0, &["CLUSTER", "KEYSLOT", &key]),
            slot.to_string()
        );
        assert_eq!(cli(&cluster, 0, &["-c", "SET", &key, "v"]), "OK");
        let owner = cluster.master_for_slot(slot);
        assert!(masters.contains(&owner));
        let s = slot.to_string();
        assert_eq!(
            cli(&cluster, owner, &["CLUSTER", "COUNTKEYSINSLOT", &s]),
            "1"
        );
        assert_eq!(cli(&cluster, owner, &["GET", &key]), "v");
    }
}

#[test]
fn default_failover_then_takeover_back() {
    let cluster = RedisCluster::start();
    let m0 = cluster.masters()[0];
    let r = cluster.replicas_of(m0)[0];
    let slot = first_slot_of(&cluster, m0);
    let key = RedisCluster::key_for_slot(slot);
    assert_eq!(cli(&cluster, m0, &["SET", &key, "before"]), "OK");

    cluster.failover(r, FailoverMode::Default).unwrap();
    let masters = cluster.masters();
    assert!(masters.contains(&r), "{masters:?}");
    assert!(!masters.contains(&m0), "{masters:?}");
    assert_eq!(masters.len(), 3);
    assert_eq!(cluster.replicas_of(r), vec![m0]);
    assert_eq!(cluster.master_for_slot(slot), r);
    // The default mode waits for the replica to catch up: nothing is lost.
    assert_eq!(cli(&cluster, r, &["GET", &key]), "before");

    // A master cannot be failed over to.
    let err = cluster.failover(r, FailoverMode::Default).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");

    cluster.failover(m0, FailoverMode::Takeover).unwrap();
    assert!(cluster.masters().contains(&m0));
    assert_eq!(cluster.replicas_of(m0), vec![r]);
    assert_eq!(cluster.master_for_slot(slot), m0);
}

#[test]
fn move_slot_moves_keys_and_all_nodes_agree() {
    let cluster = RedisCluster::start();
    let masters = cluster.masters();
    let from = masters[0];
    let to = masters[1];
    let slot = first_slot_of(&cluster, from) + 1234;
    assert_eq!(cluster.master_for_slot(slot), from);
    let s = slot.to_string();

    let keys = RedisCluster::keys_for_slot(slot, 3);
    assert_eq!(cli(&cluster, from, &["SET", &keys[0], "a"]), "OK");
    assert_eq!(cli(&cluster, from, &["SET", &keys[1], "b"]), "OK");
    assert_eq!(
        cli(&cluster, from, &["SET", &keys[2], "c", "PX", "600000"]),
        "OK"
    );

    assert_eq!(cluster.move_slot(slot, from, to).unwrap(), 3);
    assert_eq!(cli(&cluster, to, &["CLUSTER", "COUNTKEYSINSLOT", &s]), "3");
    assert_eq!(
        cli(&cluster, from, &["CLUSTER", "COUNTKEYSINSLOT", &s]),
        "0"
    );
    assert_eq!(cli(&cluster, to, &["GET", &keys[1]]), "b");
    let ttl: i64 = cli(&cluster, to, &["PTTL", &keys[2]]).parse().unwrap();
    assert!(ttl > 0, "MIGRATE keeps the TTL, got {ttl}");
    assert_eq!(cluster.master_for_slot(slot), to);
    assert_eq!(cluster.master_for_slot(slot - 1), from, "neighbours stay");
    let to_id = cluster.node(to).node_id();
    for i in 0..cluster.nodes().len() {
        assert_eq!(view(&cluster, i).owner(slot), Some(to_id), "node {i}");
    }
    // The old owner redirects.
    let moved = cli(&cluster, from, &["GET", &keys[0]]);
    assert!(moved.starts_with(&format!("MOVED {slot} ")), "{moved}");
    assert_eq!(cli(&cluster, from, &["-c", "GET", &keys[0]]), "a");
}

#[test]
fn migration_steps_produce_ask_redirections() {
    let cluster = RedisCluster::start();
    let masters = cluster.masters();
    let (from, to) = (masters[2], masters[0]);
    let slot = first_slot_of(&cluster, from) + 7;
    let s = slot.to_string();
    let keys = RedisCluster::keys_for_slot(slot, 2);
    assert_eq!(cli(&cluster, from, &["SET", &keys[0], "x"]), "OK");

    cluster.begin_migration(slot, from, to).unwrap();
    let open = view(&cluster, from).myself().unwrap().open_slots.clone();
    assert_eq!(open, vec![slot]);
    // Present on the source: served there. Absent: -ASK to the target.
    assert_eq!(cli(&cluster, from, &["GET", &keys[0]]), "x");
    let ask = cli(&cluster, from, &["GET", &keys[1]]);
    let target = format!("ASK {slot} 127.0.0.1:{}", cluster.node(to).port());
    assert_eq!(ask, target);

    assert_eq!(cluster.migrate_keys(slot, from, to).unwrap(), 1);
    assert_eq!(cli(&cluster, from, &["GET", &keys[0]]), target.as_str());
    assert_eq!(cli(&cluster, to, &["CLUSTER", "COUNTKEYSINSLOT", &s]), "1");
    // Nothing left: a second pass moves nothing.
    assert_eq!(cluster.migrate_keys(slot, from, to).unwrap(), 0);

    cluster.finish_migration(slot, to).unwrap();
    assert_eq!(cluster.master_for_slot(slot), to);
    assert!(view(&cluster, from).myself().unwrap().open_slots.is_empty());
    assert!(view(&cluster, to).myself().unwrap().open_slots.is_empty());
    assert_eq!(cli(&cluster, to, &["GET", &keys[0]]), "x");
    assert!(cluster.move_slot(SLOTS, from, to).is_err());
    assert!(cluster.begin_migration(slot, to, to).is_err());
}

#[test]
fn killed_or_paused_replica_rejoins() {
    let mut cluster = RedisCluster::start();
    let m = cluster.masters()[0];
    let r = cluster.replicas_of(m)[0];
    let r_id = cluster.node(r).node_id().to_owned();

    cluster.node_mut(r).kill();
    assert!(!cluster.node(r).is_live());
    assert!(cluster.node(r).pid().is_none());
    // A dead replica does not count against health.
    cluster.wait_healthy().unwrap();
    // The master notices within a few node timeouts.
    let deadline = Instant::now() + Duration::from_secs(15);
    while !view(&cluster, m).node(&r_id).unwrap().troubled {
        assert!(Instant::now() < deadline, "{}", cluster.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    // Written while the replica is down: it must get it by resync.
    let key = RedisCluster::key_for_slot(first_slot_of(&cluster, m));
    assert_eq!(cli(&cluster, m, &["SET", &key, "v"]), "OK");

    cluster.node_mut(r).restart().unwrap();
    cluster.wait_healthy().unwrap();
    assert_eq!(cluster.node(r).node_id(), r_id);
    assert_eq!(
        cli(&cluster, r, &["CLUSTER", "MYID"]),
        r_id,
        "same id via nodes.conf"
    );
    assert_eq!(cluster.replicas_of(m), vec![r]);
    assert_eq!(cli(&cluster, r, &["DBSIZE"]), "1");

    cluster.node(r).pause().unwrap();
    assert!(!cluster.node(r).is_live());
    cluster.wait_healthy().unwrap();
    cluster.node(r).resume().unwrap();
    assert!(cluster.node(r).is_live());
    cluster.wait_healthy().unwrap();
    assert_eq!(cluster.replicas_of(m), vec![r]);
}

#[test]
fn killed_master_is_replaced_and_rejoins_as_replica() {
    let mut cluster = RedisCluster::start();
    let m = cluster.masters()[1];
    let r = cluster.replicas_of(m)[0];
    let slot = first_slot_of(&cluster, m);

    // With a 1 s node timeout the replica promotes itself in a few seconds.
    cluster.node_mut(m).kill();
    cluster.wait_healthy().unwrap();
    assert_eq!(cluster.master_for_slot(slot), r);

    cluster.node_mut(m).restart().unwrap();
    cluster.wait_healthy().unwrap();
    assert_eq!(cluster.replicas_of(r), vec![m]);
    assert!(!cluster.masters().contains(&m));
}

#[test]
fn waits_time_out_with_the_node_logs() {
    // No replicas: a dead master leaves its slots uncovered for good.
    let mut cluster = RedisCluster::builder().replicas(0).start().unwrap();
    cluster.set_wait_timeout(Duration::from_secs(2));
    let masters = cluster.masters();
    let (dead, witness) = (masters[2], masters[0]);
    cluster.node_mut(dead).kill();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !cli(&cluster, witness, &["CLUSTER", "INFO"]).contains("cluster_state:fail") {
        assert!(Instant::now() < deadline, "{}", cluster.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    let started = Instant::now();
    let err = cluster.wait_healthy().unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    let message = err.to_string();
    assert!(message.contains("cluster_state"), "{message}");
    assert!(message.contains(&format!("--- node {dead} ")), "{message}");
    assert!(message.contains("(killed)"), "{message}");
    assert!(message.contains("Ready to accept connections"), "{message}");
}

#[test]
fn fewer_than_three_masters_is_refused() {
    let err = RedisCluster::builder().masters(2).start().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn drop_kills_every_node_and_removes_dirs() {
    let cluster = RedisCluster::builder().replicas(0).start().unwrap();
    assert_eq!(cluster.masters().len(), 3);
    let pids: Vec<u32> = cluster.nodes().iter().filter_map(|n| n.pid()).collect();
    let dirs: Vec<_> = cluster
        .nodes()
        .iter()
        .map(|n| n.server().dir().to_owned())
        .collect();
    assert_eq!(pids.len(), 3);
    drop(cluster);
    for pid in pids {
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    }
    for dir in dirs {
        assert!(!dir.exists(), "{}", dir.display());
    }
}

#[test]
fn tls_cluster_is_healthy_over_tls_only() {
    let cluster = RedisCluster::builder().tls().start().unwrap();
    assert!(cluster.url().starts_with("rediss://127.0.0.1:"));
    assert_eq!(cluster.masters().len(), 3);
    for idx in 0..cluster.nodes().len() {
        // No plaintext port: the inline PING gets no RESP answer.
        assert!(crate::ping(cluster.node(idx).port()).is_err());
    }
    // Replicas synced over TLS, and the cluster reports TLS ports.
    let shards = cli(&cluster, 0, &["CLUSTER", "SHARDS"]);
    assert!(shards.contains("tls-port"), "{shards}");
    assert_eq!(cli(&cluster, 0, &["-c", "SET", "foo", "bar"]), "OK");
}
