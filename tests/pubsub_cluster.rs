//! The pub/sub hub of a cluster `Client` against a real 6-node cluster (3
//! masters + 3 replicas) that the harness builds: sharded pub/sub on every
//! master with one subscriber connection per master, classic pub/sub on one
//! master, and subscriptions that follow their slot through a `CLUSTER
//! FAILOVER`, a resharded slot, a `MOVED` answer to SSUBSCRIBE and a killed
//! master, with `Gap` for the listeners that moved; cancelled subscribes and
//! dropped hubs leave nothing subscribed.
//!
//! Server-side facts are read from the nodes themselves: `PUBSUB
//! SHARDNUMSUB` (answered by any node for any slot, without a redirect) and
//! `CLIENT LIST TYPE pubsub`. Cluster tests run one at a time (a static
//! gate): two cores run every node, and failover timing must not starve.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use keylatch_cluster::{Client, Commands, Connection, PubSub, PubSubConfig, Subscription};
use keylatch_harness::{FailoverMode, Feature, RedisCluster};
use keylatch_resp::Cmd;

mod common;
use common::{client_for, counts, error_count, expect_quiet, field, pubsub_clients, Soon};

static GATE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Upper bound for anything that should happen "soon". A killed master is
/// replaced after the node timeout (1 s) plus an election; two cores run six
/// servers and the test.
const SOON: Soon = Soon::new(Duration::from_secs(30), Duration::from_millis(50));

/// A cluster with sharded pub/sub (SSUBSCRIBE), which every test here
/// uses (Redis 6.2 has none).
fn sharded_cluster() -> RedisCluster {
    RedisCluster::builder()
        .needs(Feature::ShardedPubSub)
        .start()
        .unwrap()
}

async fn hub_for(client: &Client) -> PubSub {
    // A short linger: tests that check a node lets go do not wait long.
    let config = PubSubConfig::default().linger(Duration::from_millis(200));
    PubSub::from_client_with(client, config).await.unwrap()
}

/// A direct connection to node `idx`, for server-side checks.
async fn node_conn(cluster: &RedisCluster, idx: usize) -> Connection {
    Connection::connect(&cluster.node(idx).url()).await.unwrap()
}

fn lock_channel(n: usize) -> String {
    format!("redisson_lock__channel:{{lock-{n}}}")
}

/// `PUBSUB SHARDNUMSUB names…` on one node, as counts.
async fn shardnumsub(conn: &Connection, names: &[String]) -> Vec<i64> {
    counts(conn, "SHARDNUMSUB", names).await
}

fn owner_of(cluster: &RedisCluster, channel: &str) -> usize {
    cluster.master_for_slot(RedisCluster::slot_of(channel))
}

/// The `ssub`, `sub`, `psub` counts of the one pub/sub client on node
/// `idx`, or `None` when it has no pub/sub client.
async fn subscriber_on(cluster: &RedisCluster, idx: usize) -> Option<[usize; 3]> {
    let clients = pubsub_clients(&node_conn(cluster, idx).await).await;
    assert!(clients.len() <= 1, "node {idx}: {clients:?}");
    clients
        .first()
        .map(|c| ["ssub", "sub", "psub"].map(|f| field(c, f).parse().unwrap()))
}

/// `SPUBLISH` through the client, retrying while the cluster settles;
/// returns the number of receivers.
async fn spublish(client: &Client, channel: &str, payload: &str) -> i64 {
    let every = Duration::from_millis(100);
    SOON.every(every)
        .until(|| async {
            client.spublish(channel, payload).await.map_err(|e| {
                eprintln!("SPUBLISH {channel}: {e}; retrying");
                format!("SPUBLISH {channel}: {e}")
            })
        })
        .await
}

/// One listener per channel, subscribed concurrently.
async fn ssubscribe_all(hub: &PubSub, channels: &[String]) -> Vec<Subscription> {
    let tasks: Vec<_> = channels
        .iter()
        .map(|c| {
            let (hub, c) = (hub.clone(), c.clone());
            tokio::spawn(async move { hub.ssubscribe(&c).await.unwrap() })
        })
        .collect();
    let mut subs = Vec::new();
    for t in tasks {
        subs.push(t.await.unwrap());
    }
    subs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_channels_on_every_master_share_one_connection_per_master() {
    let _gate = GATE.lock().await;
    let cluster = sharded_cluster();
    let client = client_for(&cluster).await;
    let hub = hub_for(&client).await;
    let channels: Vec<String> = (0..300).map(lock_channel).collect();
    // Two listeners per channel: one server-side subscription each.
    let mut first = ssubscribe_all(&hub, &channels).await;
    let mut second = ssubscribe_all(&hub, &channels).await;

    let masters = cluster.masters();
    let owners: Vec<usize> = channels.iter().map(|c| owner_of(&cluster, c)).collect();
    for &m in &masters {
        let mine = owners.iter().filter(|&&o| o == m).count();
        assert!(mine > 50, "master {m} owns only {mine} of the channels");
        // Each channel subscribed exactly once, on its slot's master only.
        let counts = shardnumsub(&node_conn(&cluster, m).await, &channels).await;
        for (i, n) in counts.iter().enumerate() {
            let want = i64::from(owners[i] == m);
            assert_eq!(*n, want, "{} on master {m}", channels[i]);
        }
        // One pub/sub connection of ours per master, carrying its channels.
        assert_eq!(subscriber_on(&cluster, m).await, Some([mine, 0, 0]));
    }
    for replica in (0..cluster.nodes().len()).filter(|i| !masters.contains(i)) {
        assert_eq!(subscriber_on(&cluster, replica).await, None);
    }

    // SPUBLISH through the client goes to the owner, whose one subscriber
    // connection hands it to both listeners.
    for c in &channels {
        assert_eq!(spublish(&client, c, c).await, 1, "{c}");
    }
    for (i, c) in channels.iter().enumerate() {
        SOON.expect_message(&mut first[i], c, c).await;
        SOON.expect_message(&mut second[i], c, c).await;
    }
    for sub in first.iter_mut().chain(second.iter_mut()).step_by(50) {
        expect_quiet(sub).await;
    }

    // Classic pub/sub: every name on one master, over a connection already
    // there; a PUBLISH through any node reaches it (the cluster bus).
    let mut chan = hub.subscribe("classic:news").await.unwrap();
    let mut pat = hub.psubscribe("classic:*").await.unwrap();
    assert_classic_on_one_master(&cluster).await;
    for &m in &masters {
        let ssub = subscriber_on(&cluster, m).await.unwrap()[0];
        assert!(
            ssub > 50,
            "master {m}: still one connection, shard channels kept"
        );
    }
    for (i, idx) in (0..cluster.nodes().len()).enumerate() {
        let payload = i.to_string();
        let _: i64 = node_conn(&cluster, idx)
            .await
            .publish("classic:news", payload.as_str())
            .await
            .unwrap();
        SOON.expect_message(&mut chan, "classic:news", &payload)
            .await;
        SOON.expect_message(&mut pat, "classic:news", &payload)
            .await;
    }
    // And through the client (a keyless command: any master).
    client.publish("classic:news", "client").await.unwrap();
    SOON.expect_message(&mut chan, "classic:news", "client")
        .await;
    SOON.expect_message(&mut pat, "classic:news", "client")
        .await;
    assert!(hub.is_connected());
    assert_eq!(hub.reconnects(), 0);

    // A subscriber connection killed on one master: it reconnects and
    // resubscribes; only that master's listeners get a Gap.
    let victim = masters[0];
    let killed: i64 = node_conn(&cluster, victim)
        .await
        .cmd(Cmd::new("CLIENT").arg("KILL").arg("TYPE").arg("pubsub"))
        .await
        .unwrap();
    assert_eq!(killed, 1);
    for (i, c) in channels.iter().enumerate() {
        if owners[i] == victim {
            SOON.expect_gap(&mut first[i]).await;
            SOON.expect_gap(&mut second[i]).await;
        }
        assert_eq!(spublish(&client, c, "again").await, 1, "{c}");
        SOON.expect_message(&mut first[i], c, "again").await;
        SOON.expect_message(&mut second[i], c, "again").await;
    }
    assert_eq!(hub.reconnects(), 1);

    // Cancelled subscribes (dropped before, or just after, their node
    // confirmed them) leave nothing behind on any master; a kept one works.
    let cancelled: Vec<String> = (1000..1150).map(lock_channel).collect();
    for (i, c) in cancelled.iter().enumerate() {
        let wait = Duration::from_micros((i % 4) as u64 * 50);
        let _ = tokio::time::timeout(wait, hub.ssubscribe(c)).await;
    }
    let _ = tokio::time::timeout(Duration::ZERO, hub.ssubscribe(&cancelled[0])).await;
    let mut kept = hub.ssubscribe(&cancelled[0]).await.unwrap();
    let kept_on = owner_of(&cluster, &cancelled[0]);
    for &m in &masters {
        SOON.eventually("cancelled subscriptions gone", || async {
            let counts = shardnumsub(&node_conn(&cluster, m).await, &cancelled).await;
            let want = |i: usize| i64::from(i == 0 && m == kept_on);
            counts.iter().enumerate().all(|(i, &n)| n == want(i))
        })
        .await;
    }
    assert_eq!(spublish(&client, &cancelled[0], "kept").await, 1);
    SOON.expect_message(&mut kept, &cancelled[0], "kept").await;

    // Hub and subscriptions gone: every subscriber connection closes.
    drop((hub, first, second, chan, pat, kept));
    for &m in &masters {
        SOON.eventually("subscriber connections closed", || async {
            subscriber_on(&cluster, m).await.is_none()
        })
        .await;
    }
}

/// Channels spread over every master, one listener each, and the classic
/// pair; returns them with the index of the master carrying the classic ones.
struct Spread {
    channels: Vec<String>,
    subs: Vec<Subscription>,
    chan: Subscription,
    pat: Subscription,
    classic_on: usize,
}

async fn spread(cluster: &RedisCluster, hub: &PubSub) -> Spread {
    let channels: Vec<String> = (0..30).map(lock_channel).collect();
    let subs = ssubscribe_all(hub, &channels).await;
    let chan = hub.subscribe("classic:news").await.unwrap();
    let pat = hub.psubscribe("classic:*").await.unwrap();
    let mut classic_on = None;
    for m in cluster.masters() {
        if subscriber_on(cluster, m).await.unwrap()[1] == 1 {
            classic_on = Some(m);
        }
    }
    Spread {
        channels,
        subs,
        chan,
        pat,
        classic_on: classic_on.expect("a master carries the classic names"),
    }
}

/// `PUBLISH` through the client, retrying while the cluster settles.
async fn publish(client: &Client, channel: &str, payload: &str) {
    let every = Duration::from_millis(100);
    SOON.every(every)
        .until(|| async {
            client
                .publish(channel, payload)
                .await
                .map_err(|e| format!("PUBLISH {channel}: {e}"))
        })
        .await;
}

/// After a change of masters: listeners whose name moved see `Gap` first,
/// then every listener gets what is published through the client (the
/// others without a `Gap` before it).
async fn check_after_move(client: &Client, s: &mut Spread, moved: &[bool], classic_moved: bool) {
    for ((c, sub), &moved) in s.channels.iter().zip(s.subs.iter_mut()).zip(moved) {
        if moved {
            SOON.expect_gap(sub).await;
            // That Gap may be the park's (subscribed nowhere for a moment):
            // publish once the name is live again.
            SOON.until(|| async {
                match spublish(client, c, "after").await {
                    1 => Ok(()),
                    n => Err(format!("{c}: SPUBLISH reached {n}")),
                }
            })
            .await;
        } else {
            // Exactly one receiver: the hub's connection on the current owner.
            assert_eq!(spublish(client, c, "after").await, 1, "{c}");
        }
        SOON.expect_message_after_gaps(sub, c, "after").await;
    }
    if classic_moved {
        SOON.expect_gap(&mut s.chan).await;
        SOON.expect_gap(&mut s.pat).await;
    }
    publish(client, "classic:news", "after").await;
    SOON.expect_message_after_gaps(&mut s.chan, "classic:news", "after")
        .await;
    SOON.expect_message_after_gaps(&mut s.pat, "classic:news", "after")
        .await;
    for sub in s.subs.iter_mut().chain([&mut s.chan, &mut s.pat]) {
        expect_quiet(sub).await;
    }
}

/// The classic pair lives on exactly one master (whichever the hub chose
/// again when its first choice stopped being a master).
async fn assert_classic_on_one_master(cluster: &RedisCluster) {
    let mut carrying = Vec::new();
    for m in cluster.masters() {
        let [_, sub, psub] = subscriber_on(cluster, m).await.unwrap_or_default();
        if (sub, psub) != (0, 0) {
            assert_eq!((sub, psub), (1, 1), "master {m}");
            carrying.push(m);
        }
    }
    assert_eq!(carrying.len(), 1, "classic names on {carrying:?}");
}

/// How many of `channels` node `idx` owns now.
fn owned_by(cluster: &RedisCluster, channels: &[String], idx: usize) -> usize {
    channels
        .iter()
        .filter(|c| owner_of(cluster, c) == idx)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_failover_moves_subscriptions_to_the_new_master_with_a_gap() {
    let _gate = GATE.lock().await;
    let cluster = sharded_cluster();
    let client = client_for(&cluster).await;
    let hub = hub_for(&client).await;
    let mut s = spread(&cluster, &hub).await;
    // Fail over the master carrying the classic names: every kind moves.
    let old = s.classic_on;
    let new = cluster.replicas_of(old)[0];
    let moved: Vec<bool> = s
        .channels
        .iter()
        .map(|c| owner_of(&cluster, c) == old)
        .collect();
    assert!(moved.iter().any(|&m| m) && !moved.iter().all(|&m| m));

    tokio::task::block_in_place(|| cluster.failover(new, FailoverMode::Default)).unwrap();
    check_after_move(&client, &mut s, &moved, true).await;

    // Server side: the promoted replica carries the moved names, the old
    // master (a replica now) no longer has a connection of ours.
    let count = moved.iter().filter(|&&m| m).count();
    assert_eq!(owned_by(&cluster, &s.channels, new), count);
    assert_eq!(subscriber_on(&cluster, new).await.unwrap()[0], count);
    assert_classic_on_one_master(&cluster).await;
    SOON.eventually("the old master's subscriber closed", || async {
        subscriber_on(&cluster, old).await.is_none()
    })
    .await;
    let counts = shardnumsub(&node_conn(&cluster, new).await, &s.channels).await;
    for (n, &m) in counts.iter().zip(&moved) {
        assert_eq!(*n, i64::from(m));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resharded_slot_takes_its_subscription_along() {
    let _gate = GATE.lock().await;
    let cluster = sharded_cluster();
    let client = client_for(&cluster).await;
    let hub = hub_for(&client).await;
    let moving = lock_channel(7);
    let slot = RedisCluster::slot_of(&moving);
    let from = cluster.master_for_slot(slot);
    let to = *cluster.masters().iter().find(|&&m| m != from).unwrap();
    // A neighbour on the same master, in another slot: it stays.
    let staying = (8..)
        .map(lock_channel)
        .find(|c| owner_of(&cluster, c) == from && RedisCluster::slot_of(c) != slot)
        .unwrap();
    let mut sub = hub.ssubscribe(&moving).await.unwrap();
    let mut neighbour = hub.ssubscribe(&staying).await.unwrap();

    // The source drops the slot's shard channels when the slot leaves
    // (`sunsubscribe` pushes); the hub follows the slot to its new owner.
    tokio::task::block_in_place(|| cluster.move_slot(slot, from, to)).unwrap();
    SOON.expect_gap(&mut sub).await;
    assert_eq!(spublish(&client, &moving, "moved").await, 1);
    SOON.expect_message(&mut sub, &moving, "moved").await;
    assert_eq!(spublish(&client, &staying, "stayed").await, 1);
    SOON.expect_message(&mut neighbour, &staying, "stayed")
        .await;
    let names = [moving.clone(), staying.clone()];
    assert_eq!(
        shardnumsub(&node_conn(&cluster, to).await, &names).await,
        [1, 0]
    );
    assert_eq!(
        shardnumsub(&node_conn(&cluster, from).await, &names).await,
        [0, 1]
    );

    // A hub whose topology is stale: the slot moves behind its back, and its
    // SSUBSCRIBE is answered `-MOVED slot host:port`. It subscribes on the
    // node named there; the caller only sees the subscription succeed.
    let stale_client = client_for(&cluster).await;
    let stale = hub_for(&stale_client).await;
    let fresh = (100..)
        .map(lock_channel)
        .find(|c| owner_of(&cluster, c) == to && RedisCluster::slot_of(c) != slot)
        .unwrap();
    let fresh_slot = RedisCluster::slot_of(&fresh);
    // Connected first (to `to`, through a name that stays), so nothing is
    // pending and nobody refreshes the stale topology meanwhile.
    let _warm = stale.ssubscribe(&staying).await.unwrap();
    let _warm_to = stale.ssubscribe(&moving).await.unwrap();
    tokio::task::block_in_place(|| cluster.move_slot(fresh_slot, to, from)).unwrap();
    let moved_before = error_count(&cluster, to, "MOVED");
    let mut late = stale.ssubscribe(&fresh).await.unwrap();
    assert!(
        error_count(&cluster, to, "MOVED") > moved_before,
        "no MOVED happened"
    );
    assert_eq!(spublish(&stale_client, &fresh, "late").await, 1);
    SOON.expect_message(&mut late, &fresh, "late").await;
    expect_quiet(&mut late).await;
    let counts = shardnumsub(
        &node_conn(&cluster, from).await,
        std::slice::from_ref(&fresh),
    )
    .await;
    assert_eq!(counts, [1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_masters_subscriptions_come_back_on_the_promoted_replica() {
    let _gate = GATE.lock().await;
    let mut cluster = sharded_cluster();
    let client = client_for(&cluster).await;
    let hub = hub_for(&client).await;
    let mut s = spread(&cluster, &hub).await;
    let victim = s.classic_on;
    let replica = cluster.replicas_of(victim)[0];
    let moved: Vec<bool> = s
        .channels
        .iter()
        .map(|c| owner_of(&cluster, c) == victim)
        .collect();

    // Nobody sends a command meanwhile: the hub finds the promoted replica
    // on its own (its connection to the victim is down, so it refreshes).
    cluster.node_mut(victim).kill();
    check_after_move(&client, &mut s, &moved, true).await;

    assert!(cluster.masters().contains(&replica));
    let count = moved.iter().filter(|&&m| m).count();
    assert_eq!(subscriber_on(&cluster, replica).await.unwrap()[0], count);
    assert_classic_on_one_master(&cluster).await;
    let counts = shardnumsub(&node_conn(&cluster, replica).await, &s.channels).await;
    for (n, &m) in counts.iter().zip(&moved) {
        assert_eq!(*n, i64::from(m));
    }
}
