//! The router against a real 6-node Redis Cluster (3 masters + 3 replicas)
//! that the harness builds: routing, hash tags, cross-slot refusal, pipelines,
//! a live slot migration (ASK then MOVED), a failover and SCRIPT FLUSH under
//! load, and a killed master.
//!
//! Cluster tests run one at a time (a static gate): two cores run every node,
//! and failover timing (node timeout 1 s) must not starve.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::{Client, ClientConfig, Commands, Error, Pipeline, Script};
use keylatch_harness::{FailoverMode, RedisCluster};
use keylatch_lock::scripts::{REENTRANT_ACQUIRE, REENTRANT_RELEASE};
use keylatch_resp::{Cmd, Frame};

mod common;
use common::{client_for, error_count};

static GATE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn dbsize(cluster: &RedisCluster, idx: usize) -> u64 {
    cluster
        .node(idx)
        .cli(&["DBSIZE"])
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_keys_tags_pipelines_and_scripts_across_all_masters() {
    let _gate = GATE.lock().await;
    let cluster = RedisCluster::start();
    let client = client_for(&cluster).await;
    assert_eq!(client.shards().len(), 3);
    for shard in client.shards() {
        assert_eq!(shard.replicas.len(), 1, "{shard:?}");
    }

    for i in 0..2000 {
        client.set(format!("key:{i}"), i).await.unwrap();
    }
    for i in (0..2000).step_by(7) {
        let v = client.get(format!("key:{i}")).await.unwrap().unwrap();
        assert_eq!(v, i.to_string().as_bytes());
    }
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3);
    let total: u64 = masters.iter().map(|&m| dbsize(&cluster, m)).sum();
    assert_eq!(total, 2000);
    for &m in &masters {
        assert!(dbsize(&cluster, m) > 400, "master {m} got too few keys");
    }

    // Hash tags keep related keys in one slot, so multi-key commands work.
    client.set("{user1000}.following", "a").await.unwrap();
    client.set("{user1000}.followers", "b").await.unwrap();
    assert_eq!(
        client
            .del(["{user1000}.following", "{user1000}.followers"])
            .await
            .unwrap(),
        2
    );
    // Different slots: refused before sending.
    let err = client.del(["key:1", "key:2"]).await.unwrap_err();
    assert!(matches!(err, Error::CrossSlot { .. }), "{err}");
    let untouched: Option<i64> = client.cmd(Cmd::new("GET").key("key:1")).await.unwrap();
    assert_eq!(untouched, Some(1));

    // A pipeline across every master comes back in the caller's order.
    let p: Pipeline = (0..600)
        .map(|i| Cmd::new("INCRBY").key(format!("ctr:{}", i % 50)).arg(1))
        .collect();
    let replies = client.pipeline(p).await.unwrap();
    for (i, r) in replies.into_iter().enumerate() {
        assert_eq!(r.unwrap(), Frame::Integer(i as i64 / 50 + 1), "entry {i}");
    }
    // A cross-slot entry fails alone.
    let mut p = Pipeline::new();
    p.add(Cmd::new("SET").key("x1").arg(1))
        .add(Cmd::new("MSET").key("a").arg(1).key("b").arg(2))
        .add(Cmd::new("GET").key("x1"));
    let replies = client.pipeline(p).await.unwrap();
    assert!(replies[0].is_ok());
    assert!(matches!(replies[1], Err(Error::CrossSlot { .. })));
    assert_eq!(replies[2].as_ref().unwrap(), &"1");

    // The lock scripts route by their keys; untagged and tagged names alike.
    // Sharded publish where the cluster has it (not Redis 6.2).
    let publish = if client.has_sharded_pubsub() {
        "spublish"
    } else {
        "publish"
    };
    for name in ["orders-lock", "{tenant-9}:lock"] {
        let (channel, token, waiters) = if name.contains('{') {
            (
                format!("redisson_lock__channel:{name}"),
                format!("redisson_lock_token:{name}"),
                format!("keylatch_lock_waiters:{name}"),
            )
        } else {
            (
                format!("redisson_lock__channel:{{{name}}}"),
                format!("redisson_lock_token:{{{name}}}"),
                format!("keylatch_lock_waiters:{{{name}}}"),
            )
        };
        let keys = [name, token.as_str()];
        let got = client
            .eval_script(&REENTRANT_ACQUIRE, &keys, &["10000", "me:1", "60000"])
            .await
            .unwrap();
        let Frame::Array(parts) = got else {
            panic!("{name}: acquire answered {got}")
        };
        assert_eq!(parts[0], Frame::Integer(1), "{name}: acquired");
        let Frame::Integer(fence) = parts[1] else {
            panic!("{name}: no token")
        };
        let other = client
            .eval_script(&REENTRANT_ACQUIRE, &keys, &["10000", "you:1", "60000"])
            .await
            .unwrap();
        let Frame::Array(parts) = other else {
            panic!("{name}: {other}")
        };
        assert_eq!(parts[0], Frame::Integer(0), "{name}: excluded");
        let fence = fence.to_string();
        let released = client
            .eval_script(
                &REENTRANT_RELEASE,
                &[name, token.as_str()],
                &[
                    "me:1",
                    channel.as_str(),
                    publish,
                    waiters.as_str(),
                    "0",
                    fence.as_str(),
                ],
            )
            .await
            .unwrap();
        assert_eq!(released, Frame::Integer(1), "{name}");
    }

    // WAIT on the connection that wrote: the replica acknowledges.
    client.set("{w}k", "v").await.unwrap();
    let conn = client.connection_for_key("{w}k").await.unwrap();
    conn.set("{w}k", "v2").await.unwrap();
    assert_eq!(conn.wait(1, Duration::from_secs(2)).await.unwrap(), 1);

    // A node that stops answering does not stall topology refreshes, even
    // with no request timeout: each node's answer is bounded by the connect
    // timeout and the next node is asked.
    let urls = cluster.seed_urls();
    let mut cfg = ClientConfig::from_urls(&[urls[0].as_str()]).unwrap();
    for seed in &mut cfg.seeds {
        seed.request_timeout = None;
        seed.connect_timeout = Duration::from_millis(500);
    }
    let patient = Client::connect_with(cfg).await.unwrap();
    patient.ping().await.unwrap();
    // Every master paused: each candidate is asked in turn and given up on.
    let masters = cluster.masters();
    for &m in &masters {
        cluster.node(m).pause().unwrap();
    }
    let started = std::time::Instant::now();
    let refreshed = tokio::time::timeout(Duration::from_secs(20), patient.refresh_topology()).await;
    let took = started.elapsed();
    for &m in &masters {
        cluster.node(m).resume().unwrap();
    }
    assert!(refreshed.is_ok(), "refresh stalled behind paused nodes");
    // Three masters at ≥ 2 s each (the floor of a node's answer time).
    assert!(took < Duration::from_secs(15), "refresh took {took:?}");
    // Answering again: the next refresh succeeds.
    patient.refresh_topology().await.unwrap();
}

/// Commands from several tasks at once until stopped, each task running
/// its operation over and over and counting what succeeded and what failed.
#[derive(Default)]
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<Vec<String>>>,
}

impl Load {
    /// A task that runs `op(0)`, `op(1)`, … until [`finish`](Self::finish).
    fn spawn<F, Fut>(&mut self, mut op: F)
    where
        F: FnMut(u64) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), Error>> + Send,
    {
        let (stop, ok, errors) = (
            Arc::clone(&self.stop),
            Arc::clone(&self.ok),
            Arc::clone(&self.errors),
        );
        self.tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match op(i).await {
                    Ok(()) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        if seen.len() < 5 {
                            seen.push(e.to_string());
                        }
                    }
                }
                i += 1;
            }
            seen
        }));
    }

    /// Operations that succeeded so far.
    fn ok(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    /// Stops every task and checks that no operation failed; returns the
    /// number that succeeded.
    async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let mut seen = Vec::new();
        for t in self.tasks {
            seen.extend(t.await.unwrap());
        }
        assert_eq!(
            self.errors.load(Ordering::Relaxed),
            0,
            "errors surfaced: {seen:?}"
        );
        self.ok.load(Ordering::Relaxed)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_slot_migration_is_invisible_to_callers() {
    let _gate = GATE.lock().await;
    let cluster = RedisCluster::start();
    let client = client_for(&cluster).await;
    let slot = 777u16;
    let keys = RedisCluster::keys_for_slot(slot, 20);
    let from = cluster.master_for_slot(slot);
    let to = *cluster.masters().iter().find(|&&m| m != from).unwrap();
    for k in &keys {
        client.set(k.as_str(), 0).await.unwrap();
    }
    let ask_before = error_count(&cluster, from, "ASK");
    let moved_before = error_count(&cluster, from, "MOVED");

    let mut load = Load::default();
    for _ in 0..4 {
        let (client, keys) = (client.clone(), keys.clone());
        load.spawn(move |i| {
            let (client, key) = (client.clone(), keys[i as usize % keys.len()].clone());
            async move {
                let r: Result<i64, Error> = client.cmd(Cmd::new("INCR").key(key.as_str())).await;
                r.map(drop)
            }
        });
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    cluster.begin_migration(slot, from, to).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Move the keys while commands run: absent keys on the source answer ASK.
    let moved = cluster.migrate_keys(slot, from, to).unwrap();
    assert_eq!(moved, keys.len());
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.finish_migration(slot, to).unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let ops = load.finish().await;
    assert!(
        error_count(&cluster, from, "ASK") > ask_before,
        "no ASK happened"
    );
    assert!(
        error_count(&cluster, from, "MOVED") > moved_before,
        "no MOVED happened"
    );
    // Every successful INCR landed exactly once.
    let mut total = 0i64;
    for k in &keys {
        let v: i64 = client.cmd(Cmd::new("GET").key(k.as_str())).await.unwrap();
        total += v;
    }
    assert_eq!(total as u64, ops);
    assert_eq!(cluster.master_for_slot(slot), to);
}

static COUNT: Script = Script::new("count", "return redis.call('INCRBY', KEYS[1], ARGV[1])");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_and_script_flush_under_load_surface_no_errors() {
    let _gate = GATE.lock().await;
    let cluster = RedisCluster::start();
    let client = client_for(&cluster).await;
    let mut load = Load::default();
    for t in 0..8 {
        let client = client.clone();
        load.spawn(move |i| {
            let (client, key) = (client.clone(), format!("load:{t}:{}", i % 97));
            async move {
                client
                    .eval_script(&COUNT, &[key.as_str()], &["1"])
                    .await
                    .map(drop)
            }
        });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for _ in 0..3 {
        for idx in 0..cluster.nodes().len() {
            cluster.node(idx).cli(&["SCRIPT", "FLUSH"]).unwrap();
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let old_master = cluster.masters()[0];
    let replica = cluster.replicas_of(old_master)[0];
    cluster.failover(replica, FailoverMode::Default).unwrap();
    // The promoted replica has never loaded the script.
    cluster.node(replica).cli(&["SCRIPT", "FLUSH"]).unwrap();
    let before = load.ok();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let done = load.finish().await;
    assert!(done > before, "no progress after failover");
    assert!(cluster.masters().contains(&replica));
    // The client now routes the old master's slots to the new one.
    client.refresh_topology().await.unwrap();
    let port = cluster.node(replica).port();
    assert!(client
        .shards()
        .iter()
        .any(|s| s.master.ends_with(&format!(":{port}"))));
}

/// A read written to a master that dies before it answers has an unknown
/// outcome, like any command; but having run or not changes nothing, so it
/// is sent again (to the promoted replica, within its deadline) instead of
/// failing with `ConnectionClosed`. The master is paused first so the GET
/// is surely written and pending when it is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_pending_on_a_killed_master_is_sent_again_to_its_successor() {
    let _gate = GATE.lock().await;
    let mut cluster = RedisCluster::start();
    let client = client_for(&cluster).await;
    let slot = 200u16;
    let key = RedisCluster::key_for_slot(slot);
    client.set(key.as_str(), "kept").await.unwrap();
    let victim = cluster.master_for_slot(slot);
    let conn = client.connection_for_key(key.as_str()).await.unwrap();
    assert_eq!(conn.wait(1, Duration::from_secs(2)).await.unwrap(), 1);
    cluster
        .node(victim)
        .cli(&["CLIENT", "PAUSE", "10000", "ALL"])
        .unwrap();
    let read = {
        let (client, key) = (client.clone(), key.clone());
        tokio::spawn(async move { client.get(key.as_str()).await })
    };
    // Written and waiting on the paused node, then the node dies under it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!read.is_finished(), "the paused master answered");
    cluster.node_mut(victim).kill();
    let got = tokio::time::timeout(Duration::from_secs(40), read)
        .await
        .expect("the read hung")
        .unwrap();
    assert_eq!(got.unwrap().as_deref(), Some(&b"kept"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_master_fails_typed_within_a_short_deadline_and_is_ridden_through_a_long_one() {
    let _gate = GATE.lock().await;
    let mut cluster = RedisCluster::start();
    let client = client_for(&cluster).await;
    // The same cluster through a client whose requests may take 300 ms.
    let urls = cluster.seed_urls();
    let mut cfg = ClientConfig::from_urls(&[urls[0].as_str()]).unwrap();
    cfg.seeds[0].request_timeout = Some(Duration::from_millis(300));
    let hasty = Client::connect_with(cfg).await.unwrap();
    let slot = 100u16;
    let key = RedisCluster::key_for_slot(slot);
    client.set(key.as_str(), "before").await.unwrap();
    assert_eq!(
        hasty.get(key.as_str()).await.unwrap().as_deref(),
        Some(&b"before"[..])
    );
    let victim = cluster.master_for_slot(slot);
    let replica = cluster.replicas_of(victim)[0];
    // Make sure the write reached the replica before the master dies.
    let conn = client.connection_for_key(key.as_str()).await.unwrap();
    assert_eq!(conn.wait(1, Duration::from_secs(2)).await.unwrap(), 1);
    cluster.node_mut(victim).kill();

    // Before the failover (node timeout 1 s), a 300 ms deadline runs out:
    // a typed failure, at about the deadline, not a hang.
    let started = Instant::now();
    let e = hasty.get(key.as_str()).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::Routing { .. } | Error::Io(_) | Error::ConnectionClosed
        ),
        "untyped failure: {e}"
    );
    assert!(started.elapsed() < Duration::from_secs(5), "a request hung");
    // A request with the default deadline (30 s) rides the failover out:
    // retried (refused connects, then CLUSTERDOWN or MOVED) until the
    // replica is promoted and found.
    let started = Instant::now();
    let v = client.get(key.as_str()).await.unwrap();
    eprintln!(
        "RECOVERY fault=kill get_ms={}",
        started.elapsed().as_millis()
    );
    assert_eq!(v.as_deref(), Some(&b"before"[..]));
    assert!(cluster.masters().contains(&replica));
    client.set(key.as_str(), "after").await.unwrap();
    assert_eq!(
        client.get(key.as_str()).await.unwrap().as_deref(),
        Some(&b"after"[..])
    );

    // The old master restarts empty (no persistence, no script cache) and
    // rejoins; scripts keep working on every master, with the same client.
    cluster.node_mut(victim).restart().unwrap();
    cluster.wait_healthy().unwrap();
    for &m in &cluster.masters() {
        cluster.node(m).cli(&["SCRIPT", "FLUSH"]).unwrap();
    }
    for i in 0..300 {
        let k = format!("after-restart:{i}");
        let v = client
            .eval_script(&COUNT, &[k.as_str()], &["2"])
            .await
            .unwrap();
        assert_eq!(v, Frame::Integer(2));
    }
    // Locks too: their prepared acquire (shared) and their release (built
    // from a prepared head) heal NOSCRIPT through the router, on every master.
    let locks = keylatch_lock::Locks::new(client.clone(), keylatch_lock::LocksConfig::default());
    let handles: Vec<_> = (0..30)
        .map(|i| locks.lock(&format!("flushed:{i}")))
        .collect();
    for lock in &handles {
        lock.acquire().await.unwrap().unlock().await.unwrap();
    }
    for &m in &cluster.masters() {
        cluster.node(m).cli(&["SCRIPT", "FLUSH"]).unwrap();
    }
    for lock in &handles {
        let g = lock.acquire().await.unwrap();
        assert!(lock.is_held_by_me().await.unwrap());
        g.unlock().await.unwrap();
        assert!(!lock.is_locked().await.unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_exclude_across_clients_with_tagged_and_untagged_names() {
    use keylatch_lock::{Locks, LocksConfig};
    let _gate = GATE.lock().await;
    let cluster = RedisCluster::start();
    let cfg = LocksConfig::default().watchdog_timeout(Duration::from_millis(1500));
    let mut all = Vec::new();
    for _ in 0..2 {
        all.push(Locks::new(client_for(&cluster).await, cfg.clone()));
    }
    for name in ["plain-name", "{tenant-3}:orders"] {
        let counter = format!("{name}:counter");
        let counter = if name.contains('{') {
            counter
        } else {
            format!("{{{name}}}:counter")
        };
        let mut tasks = Vec::new();
        for locks in &all {
            for _ in 0..3 {
                let lock = locks.lock(name);
                let client = locks.client().clone();
                let counter = counter.clone();
                tasks.push(tokio::spawn(async move {
                    let mut tokens = Vec::new();
                    for _ in 0..15 {
                        let g = lock.acquire().await.unwrap();
                        let v: Option<i64> = client
                            .cmd(Cmd::new("GET").key(counter.as_str()))
                            .await
                            .unwrap();
                        client
                            .set(counter.as_str(), v.unwrap_or(0) + 1)
                            .await
                            .unwrap();
                        tokens.push(g.fencing_token().unwrap());
                        g.unlock().await.unwrap();
                    }
                    tokens
                }));
            }
        }
        let mut tokens = Vec::new();
        for t in tasks {
            let mine = t.await.unwrap();
            assert!(
                mine.windows(2).all(|w| w[0] < w[1]),
                "{name}: tokens rise per holder"
            );
            tokens.extend(mine);
        }
        let v: i64 = all[0]
            .client()
            .cmd(Cmd::new("GET").key(counter.as_str()))
            .await
            .unwrap();
        assert_eq!(v, 90, "{name}: exclusion");
        tokens.sort_unstable();
        tokens.dedup();
        assert_eq!(tokens.len(), 90, "{name}: every hold got its own token");
    }
    // A waiter wakes on the sharded unlock message: with 30 s leases and
    // 30 s re-checks, nothing else could wake it within the 20 s wait.
    let slow = LocksConfig::default()
        .watchdog_timeout(Duration::from_secs(30))
        .recheck(Duration::from_secs(30));
    let holder = Locks::new(client_for(&cluster).await, slow.clone());
    let waiter = Locks::new(client_for(&cluster).await, slow);
    for name in ["handoff-plain", "{t7}:handoff"] {
        let g = holder.lock(name).acquire().await.unwrap();
        let w = waiter.lock(name);
        let task = tokio::spawn(async move { w.try_acquire(Duration::from_secs(20), None).await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let released = Instant::now();
        g.unlock().await.unwrap();
        let got = task.await.unwrap().unwrap().expect("woken by SPUBLISH");
        eprintln!(
            "{name}: release → cluster waiter acquired in {:?}",
            released.elapsed()
        );
        got.unlock().await.unwrap();
    }
    // Replica sync: every master has one replica that acknowledges.
    for policy in [
        keylatch_lock::ReplicaSync::AtLeast {
            replicas: 1,
            timeout: Duration::from_secs(2),
        },
        keylatch_lock::ReplicaSync::AllReplicas {
            timeout: Duration::from_secs(2),
        },
    ] {
        let lock = all[1].lock("synced-lock").with_replica_sync(policy);
        let g = lock.try_acquire_now(None).await.unwrap().expect("free");
        g.unlock().await.unwrap();
    }
    // Watchdog holds spread over every master renew in per-node batches.
    let locks = &all[0];
    let mut guards = Vec::new();
    for i in 0..600 {
        guards.push(
            locks
                .lock(&format!("spread:{i}"))
                .try_acquire_now(None)
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let before = locks.renewal_calls();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let calls = locks.renewal_calls() - before;
    eprintln!("600 holds on 3 masters: {calls} renewal calls in ~2 rounds");
    if locks.client().has_sharded_pubsub() {
        assert!(
            (3..=2 * 9 + 6).contains(&calls),
            "per-node batches expected, got {calls}"
        );
    } else {
        // Redis 6.2: no script flags, so one call per slot (600 names in
        // about as many slots), still one per slot per round, not per hold.
        assert!(
            (3..=2 * 600 + 6).contains(&calls),
            "per-slot batches expected, got {calls}"
        );
    }
    for g in &guards {
        assert!(!g.is_lost());
    }
    drop(guards);
}
