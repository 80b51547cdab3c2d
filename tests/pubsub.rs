//! The pub/sub hub against real redis-server processes: one server-side
//! subscription per channel however many listeners, linger before
//! UNSUBSCRIBE, recovery with `Gap` after the server or the connection dies,
//! per-listener lag, patterns and shard channels, RESP2, cancellation, and
//! the hub of a standalone `Client`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use keylatch_cluster::{
    Commands, Connection, ConnectionConfig, Error, Event, PubSub, PubSubConfig, ServerErrorKind,
    Subscription,
};
use keylatch_harness::{Feature, RedisServer};
use keylatch_resp::{Cmd, Frame};

mod common;
use common::{acl_user, counts, expect_quiet, field, info_count, pubsub_clients, Soon};

/// Upper bound for anything that should happen "soon" (a message, a Gap
/// after a reconnect). Generous: two cores run servers, clients and tests.
const SOON: Soon = Soon::new(Duration::from_secs(15), Duration::from_millis(25));

async fn hub_with(server: &RedisServer, config: PubSubConfig) -> PubSub {
    let conn = ConnectionConfig::from_url(&server.url()).expect("url");
    PubSub::connect_with(conn, config).await.expect("hub")
}

/// A server with sharded pub/sub (SSUBSCRIBE), for the tests that use it
/// on a standalone server (Redis 6.2 has none).
fn sharded_server() -> RedisServer {
    RedisServer::builder()
        .needs(Feature::ShardedPubSub)
        .start()
        .unwrap()
}

async fn publisher(server: &RedisServer) -> Connection {
    Connection::connect(&server.url()).await.expect("connect")
}

async fn numsub(conn: &Connection, channel: &str) -> i64 {
    counts(conn, "NUMSUB", &[channel.to_owned()]).await[0]
}

async fn numpat(conn: &Connection) -> i64 {
    conn.cmd(Cmd::new("PUBSUB").arg("NUMPAT"))
        .await
        .expect("NUMPAT")
}

async fn shardnumsub(conn: &Connection, channel: &str) -> i64 {
    counts(conn, "SHARDNUMSUB", &[channel.to_owned()]).await[0]
}

/// `calls` of one command in `INFO commandstats` (0 when never called).
async fn calls(conn: &Connection, command: &str) -> u64 {
    let info = conn.info(Some("commandstats")).await.expect("INFO");
    info_count(&info, &format!("cmdstat_{command}:calls="))
}

async fn reset_stats(conn: &Connection) {
    let _: () = conn
        .cmd(Cmd::new("CONFIG").arg("RESETSTAT"))
        .await
        .expect("RESETSTAT");
}

/// Polls every future in turn until all are done (the futures crate's
/// `join_all`, which this workspace does not depend on).
async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    poll_fn(|cx| {
        let mut pending = false;
        for (f, out) in futures.iter_mut().zip(outputs.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *out = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("polled to completion"))
        .collect()
}

/// Publishes, retrying while the publisher's own connection reconnects.
async fn publish_retrying(conn: &Connection, channel: &str, payload: &str) -> i64 {
    SOON.until(|| async {
        match conn.publish(channel, payload).await {
            Err(e) if e.is_connection_error() => Err(format!("PUBLISH {channel}: {e}")),
            r => Ok(r.unwrap_or_else(|e| panic!("PUBLISH {channel}: {e}"))),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_listeners_on_a_thousand_channels_share_one_subscription_each() {
    let server = RedisServer::start();
    let conn = publisher(&server).await;
    let hub = hub_with(&server, PubSubConfig::default()).await;
    reset_stats(&conn).await;
    let channels: Vec<String> = (0..1000).map(|i| format!("lock:{i}")).collect();
    let mut tasks = Vec::new();
    for i in 0..10_000usize {
        let hub = hub.clone();
        let channel = channels[i % 1000].clone();
        tasks.push(tokio::spawn(async move {
            hub.subscribe(&channel).await.expect("subscribe")
        }));
    }
    let mut subs = Vec::new();
    for t in tasks {
        subs.push(t.await.expect("task"));
    }

    // One client, subscribed to each channel exactly once.
    let clients = pubsub_clients(&conn).await;
    assert_eq!(clients.len(), 1, "{clients:?}");
    assert_eq!(field(&clients[0], "sub"), "1000");
    for n in counts(&conn, "NUMSUB", &channels).await {
        assert_eq!(n, 1);
    }
    let subscribes = calls(&conn, "subscribe").await;
    assert!(
        (1..=1000).contains(&subscribes),
        "{subscribes} SUBSCRIBE commands"
    );
    eprintln!("10,000 subscribe() calls became {subscribes} SUBSCRIBE commands");

    // Every message reaches every listener of its channel, in order.
    for round in 0..3 {
        let mut p = keylatch_cluster::Pipeline::new();
        for c in &channels {
            p.add(
                Cmd::new("PUBLISH")
                    .arg(c.as_str())
                    .arg(format!("{c}#{round}")),
            );
        }
        for r in conn.pipeline(p).await.expect("pipeline") {
            // One receiver per channel on the server: the hub.
            assert_eq!(r.expect("PUBLISH"), Frame::Integer(1));
        }
    }
    for (i, sub) in subs.iter_mut().enumerate() {
        let c = &channels[i % 1000];
        for round in 0..3 {
            SOON.expect_message(sub, c, &format!("{c}#{round}")).await;
        }
    }
    for sub in subs.iter_mut().step_by(997) {
        expect_quiet(sub).await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn subscribes_requested_together_go_out_as_one_command() {
    let server = RedisServer::start();
    let conn = publisher(&server).await;
    let hub = hub_with(&server, PubSubConfig::default()).await;
    reset_stats(&conn).await;
    // All 1,000 requests are queued in one poll of this task; on one thread
    // the hub's task cannot run in between, so it finds them all at once.
    let names: Vec<String> = (0..1000).map(|i| format!("batch:{i}")).collect();
    let subs: Vec<Subscription> = join_all(names.iter().map(|n| hub.subscribe(n)).collect())
        .await
        .into_iter()
        .map(|r| r.expect("subscribe"))
        .collect();
    assert_eq!(calls(&conn, "subscribe").await, 1);
    assert_eq!(field(&pubsub_clients(&conn).await[0], "sub"), "1000");
    // Dropped together, they leave together after the linger.
    drop(subs);
    SOON.eventually("one UNSUBSCRIBE for all", || async {
        calls(&conn, "unsubscribe").await == 1
    })
    .await;
    // With no subscriptions left, the connection is no longer a pub/sub client.
    SOON.eventually("no channels left", || async {
        pubsub_clients(&conn).await.is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_listener_leaving_unsubscribes_after_the_linger() {
    let server = RedisServer::start();
    let conn = publisher(&server).await;
    let linger = Duration::from_millis(400);
    let hub = hub_with(&server, PubSubConfig::default().linger(linger)).await;
    reset_stats(&conn).await;

    let a = hub.subscribe("c").await.unwrap();
    let mut b = hub.subscribe("c").await.unwrap();
    assert_eq!(numsub(&conn, "c").await, 1);
    drop(a);
    publish_retrying(&conn, "c", "still here").await;
    SOON.expect_message(&mut b, "c", "still here").await;

    let left = Instant::now();
    drop(b);
    SOON.eventually("UNSUBSCRIBE after the linger", || async {
        numsub(&conn, "c").await == 0
    })
    .await;
    assert!(
        left.elapsed() >= linger,
        "unsubscribed after {:?}",
        left.elapsed()
    );
    assert_eq!(calls(&conn, "subscribe").await, 1);
    assert_eq!(calls(&conn, "unsubscribe").await, 1);

    // A new listener subscribes again.
    let mut c = hub.subscribe("c").await.unwrap();
    assert_eq!(numsub(&conn, "c").await, 1);
    assert_eq!(calls(&conn, "subscribe").await, 2);
    publish_retrying(&conn, "c", "again").await;
    SOON.expect_message(&mut c, "c", "again").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_arriving_during_the_linger_reuses_the_subscription() {
    let server = RedisServer::start();
    let conn = publisher(&server).await;
    let hub = hub_with(
        &server,
        PubSubConfig::default().linger(Duration::from_secs(30)),
    )
    .await;
    reset_stats(&conn).await;
    for round in 0..20 {
        let mut sub = hub.subscribe("hot").await.unwrap();
        publish_retrying(&conn, "hot", &round.to_string()).await;
        SOON.expect_message(&mut sub, "hot", &round.to_string())
            .await;
    }
    assert_eq!(calls(&conn, "subscribe").await, 1);
    assert_eq!(calls(&conn, "unsubscribe").await, 0);
    assert_eq!(numsub(&conn, "hot").await, 1);
}

/// Subscriptions of every kind, checked after a recovery: each gets `Gap`
/// once its name is live again, then the messages published after it.
async fn check_recovery(
    hub: &PubSub,
    conn: &Connection,
    subs: &mut [Subscription; 4],
    channels: &str,
    break_it: impl Future<Output = ()>,
) {
    let before = hub.reconnects();
    break_it.await;
    for sub in subs.iter_mut() {
        SOON.expect_gap(sub).await;
    }
    assert!(hub.reconnects() > before);
    assert!(hub.is_connected());
    // The publisher's connection reconnects on its own schedule.
    SOON.eventually("publisher reconnected", || async {
        conn.ping().await.is_ok()
    })
    .await;
    let clients = pubsub_clients(conn).await;
    assert_eq!(clients.len(), 1, "{clients:?}");
    let fields = ["sub", "psub", "ssub"].map(|f| field(&clients[0], f).to_owned());
    assert_eq!(fields, [channels, "1", "1"]);

    assert_eq!(publish_retrying(conn, "r:chan", "after").await, 2);
    let n: i64 = conn.spublish("r:shard", "after").await.expect("server");
    assert_eq!(n, 1);
    let [a, b, p, s] = subs;
    SOON.expect_message(a, "r:chan", "after").await;
    SOON.expect_message(b, "r:chan", "after").await;
    SOON.expect_message(p, "r:chan", "after").await;
    SOON.expect_message(s, "r:shard", "after").await;
    for sub in subs.iter_mut() {
        expect_quiet(sub).await;
    }
}

async fn recovery_subs(hub: &PubSub) -> [Subscription; 4] {
    [
        hub.subscribe("r:chan").await.expect("server"),
        hub.subscribe("r:chan").await.expect("server"),
        hub.psubscribe("r:*").await.expect("server"),
        hub.ssubscribe("r:shard").await.expect("server"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_kill_and_restart_resubscribes_and_reports_a_gap() {
    let mut server = sharded_server();
    let conn = publisher(&server).await;
    let hub = hub_with(&server, PubSubConfig::default()).await;
    let mut subs = recovery_subs(&hub).await;

    // A subscribe during the outage waits for the reconnect rather than
    // failing at once; one that cannot be served in time fails typed.
    let quick = PubSubConfig::default().subscribe_timeout(Duration::from_millis(500));
    let quick_hub = hub_with(&server, quick).await;
    server.kill();
    SOON.eventually("hub notices the dead server", || async {
        !quick_hub.is_connected()
    })
    .await;
    let started = Instant::now();
    let err = quick_hub.subscribe("r:chan").await.unwrap_err();
    assert!(matches!(err, Error::Disconnected), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(400));
    let waiting = {
        let hub = hub.clone();
        tokio::spawn(async move { hub.subscribe("r:during").await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;

    let restart = tokio::task::spawn_blocking(move || {
        server.restart().expect("restart");
        server
    });
    let mut during_outage = None;
    // Two channels: the one subscribed during the outage too.
    check_recovery(&hub, &conn, &mut subs, "2", async {
        during_outage = Some(waiting.await.expect("task").expect("subscribe"));
    })
    .await;
    let server = restart.await.expect("restart task");
    let mut during = during_outage.expect("subscribed");
    publish_retrying(&conn, "r:during", "x").await;
    SOON.expect_message(&mut during, "r:during", "x").await;
    // The listener that joined during the outage saw no Gap: it missed nothing.
    expect_quiet(&mut during).await;
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_connection_is_replaced_and_everything_resubscribed() {
    let server = sharded_server();
    let conn = publisher(&server).await;
    let hub = hub_with(&server, PubSubConfig::default()).await;
    let mut subs = recovery_subs(&hub).await;
    for _ in 0..3 {
        check_recovery(&hub, &conn, &mut subs, "1", async {
            let killed: i64 = conn
                .cmd(Cmd::new("CLIENT").arg("KILL").arg("TYPE").arg("pubsub"))
                .await
                .unwrap();
            assert_eq!(killed, 1);
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_listener_lags_alone() {
    let server = RedisServer::start();
    let conn = publisher(&server).await;
    let capacity = 16;
    let hub = hub_with(&server, PubSubConfig::default().listener_capacity(capacity)).await;
    let mut fast = hub.subscribe("feed").await.unwrap();
    let mut slow = hub.subscribe("feed").await.unwrap();
    let mut barrier = hub.subscribe("barrier").await.unwrap();
    let total = 100;
    for i in 0..total {
        publish_retrying(&conn, "feed", &i.to_string()).await;
        SOON.expect_message(&mut fast, "feed", &i.to_string()).await;
    }
    // The fast listener may have been served before the slow one; the hub
    // delivers frames in order, so once a later frame arrives, the last
    // message has been offered to the slow listener too.
    publish_retrying(&conn, "barrier", "").await;
    SOON.expect_message(&mut barrier, "barrier", "").await;
    // The slow one holds the first `capacity` messages, then the count of
    // the rest, in the place where they would have been.
    for i in 0..capacity {
        SOON.expect_message(&mut slow, "feed", &i.to_string()).await;
    }
    assert_eq!(
        SOON.next(&mut slow).await,
        Event::Lagged((total - capacity) as u64)
    );
    expect_quiet(&mut slow).await;
    publish_retrying(&conn, "feed", "next").await;
    SOON.expect_message(&mut slow, "feed", "next").await;
    SOON.expect_message(&mut fast, "feed", "next").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patterns_and_shard_channels_on_a_standalone_server() {
    let server = sharded_server();
    let conn = publisher(&server).await;
    kinds_scenario(&server, &conn).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resp2_server_works_the_same() {
    let server = RedisServer::builder()
        .needs(Feature::ShardedPubSub)
        .args(["--rename-command", "HELLO", ""])
        .start()
        .unwrap();
    let conn = publisher(&server).await;
    kinds_scenario(&server, &conn).await;
    let hub = hub_with(&server, PubSubConfig::default()).await;
    let mut subs = recovery_subs(&hub).await;
    let clients = pubsub_clients(&conn).await;
    assert_eq!(clients.len(), 1, "{clients:?}");
    assert_eq!(field(&clients[0], "resp"), "2");
    check_recovery(&hub, &conn, &mut subs, "1", async {
        let _: i64 = conn
            .cmd(Cmd::new("CLIENT").arg("KILL").arg("TYPE").arg("pubsub"))
            .await
            .unwrap();
    })
    .await;
}

/// Channels, patterns and shard channels side by side, then unsubscribed.
async fn kinds_scenario(server: &RedisServer, conn: &Connection) {
    let hub = hub_with(
        server,
        PubSubConfig::default().linger(Duration::from_millis(100)),
    )
    .await;
    let mut pat = hub.psubscribe("news.*").await.expect("server");
    let mut chan = hub.subscribe("news.sport").await.expect("server");
    let mut shard = hub.ssubscribe("lock:{42}").await.expect("server");
    assert_eq!(numpat(conn).await, 1);
    assert_eq!(shardnumsub(conn, "lock:{42}").await, 1);

    assert_eq!(publish_retrying(conn, "news.sport", "goal").await, 2);
    assert_eq!(
        SOON.next(&mut pat).await,
        Event::Message {
            channel: Bytes::from_static(b"news.sport"),
            pattern: Some(Bytes::from_static(b"news.*")),
            payload: Bytes::from_static(b"goal"),
        }
    );
    assert_eq!(
        SOON.next(&mut chan).await,
        Event::Message {
            channel: Bytes::from_static(b"news.sport"),
            pattern: None,
            payload: Bytes::from_static(b"goal"),
        }
    );
    publish_retrying(conn, "news.weather", "rain").await;
    SOON.expect_message(&mut pat, "news.weather", "rain").await;
    // Shard messages go only to shard subscribers, and PUBLISH does not
    // reach them.
    assert_eq!(conn.spublish("lock:{42}", "0").await.expect("server"), 1);
    assert_eq!(publish_retrying(conn, "lock:{42}", "not shard").await, 0);
    assert_eq!(
        SOON.next(&mut shard).await,
        Event::Message {
            channel: Bytes::from_static(b"lock:{42}"),
            pattern: None,
            payload: Bytes::from_static(b"0"),
        }
    );
    for sub in [&mut pat, &mut chan, &mut shard] {
        expect_quiet(sub).await;
    }

    drop((pat, chan, shard));
    SOON.eventually("pattern and shard channel unsubscribed", || async {
        numpat(conn).await == 0
            && shardnumsub(conn, "lock:{42}").await == 0
            && numsub(conn, "news.sport").await == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_subscribes_leave_no_subscription_behind() {
    let server = RedisServer::start();
    let conn = publisher(&server).await;
    let hub = hub_with(
        &server,
        PubSubConfig::default().linger(Duration::from_millis(100)),
    )
    .await;
    let names: Vec<String> = (0..200).map(|i| format!("cancel:{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        // Polled once (the request is queued), then dropped before, or
        // sometimes just after, the confirmation.
        let wait = Duration::from_micros((i % 4) as u64 * 50);
        let _ = tokio::time::timeout(wait, hub.subscribe(name)).await;
    }
    // One survivor among them, subscribed and cancelled on the same name.
    let _ = tokio::time::timeout(Duration::ZERO, hub.subscribe("cancel:0")).await;
    let mut kept = hub.subscribe("cancel:0").await.unwrap();
    SOON.eventually("cancelled subscriptions gone", || async {
        let n = counts(&conn, "NUMSUB", &names).await;
        n[0] == 1 && n[1..].iter().all(|&c| c == 0)
    })
    .await;
    assert_eq!(field(&pubsub_clients(&conn).await[0], "sub"), "1");
    publish_retrying(&conn, "cancel:0", "kept").await;
    SOON.expect_message(&mut kept, "cancel:0", "kept").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_subscribe_is_a_typed_error() {
    let server = RedisServer::start();
    let url = acl_user(&server, "nochan", &["~*", "+@all", "resetchannels"]);
    let conn = ConnectionConfig::from_url(&url).unwrap();
    let hub = PubSub::connect_with(conn, PubSubConfig::default())
        .await
        .unwrap();
    let err = hub.subscribe("secret").await.unwrap_err();
    assert_eq!(err.server_kind(), Some(ServerErrorKind::NoPerm), "{err}");
    // The hub is still usable for what the user may do.
    server
        .cli(&["ACL", "SETUSER", "nochan", "&open:*"])
        .unwrap();
    let mut sub = hub.subscribe("open:1").await.unwrap();
    let admin = publisher(&server).await;
    publish_retrying(&admin, "open:1", "yes").await;
    SOON.expect_message(&mut sub, "open:1", "yes").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_closes_when_hub_and_subscriptions_are_gone() {
    let server = RedisServer::start();
    let conn = publisher(&server).await;
    let hub = hub_with(&server, PubSubConfig::default()).await;
    let sub = hub.subscribe("bye").await.unwrap();
    drop(hub);
    // The subscription alone keeps the hub alive.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(pubsub_clients(&conn).await.len(), 1);
    drop(sub);
    SOON.eventually("subscriber connection closed", || async {
        pubsub_clients(&conn).await.is_empty() && numsub(&conn, "bye").await == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standalone_clients_hub_uses_its_server_and_settings() {
    let server = sharded_server();
    let conn = publisher(&server).await;
    let url = format!("{}?name=orders-svc", server.url());
    let client = keylatch_cluster::Client::connect(&url).await.unwrap();
    assert!(!client.is_cluster());
    let hub = PubSub::from_client(&client).await.unwrap();
    let mut chan = hub.subscribe("from-client").await.unwrap();
    let mut shard = hub.ssubscribe("from-client:{7}").await.unwrap();
    // One pub/sub connection, opened with the client's settings.
    let clients = pubsub_clients(&conn).await;
    assert_eq!(clients.len(), 1, "{clients:?}");
    assert_eq!(field(&clients[0], "name"), "orders-svc");
    assert_eq!(client.publish("from-client", "a").await.unwrap(), 1);
    assert_eq!(client.spublish("from-client:{7}", "b").await.unwrap(), 1);
    SOON.expect_message(&mut chan, "from-client", "a").await;
    SOON.expect_message(&mut shard, "from-client:{7}", "b")
        .await;
}
