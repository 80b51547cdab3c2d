//! One multiplexed connection against a real redis-server: ordering under
//! concurrency, pipelines, cancellation, timeouts, server death and reconnect.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::{
    Client, Commands, Connection, ConnectionConfig, Error, Negotiated, Pipeline, SentinelError,
    ServerErrorKind, SetOptions, Ttl,
};
use keylatch_harness::{Feature, RedisServer};
use keylatch_resp::{Cmd, Frame};

mod common;
use common::Soon;

async fn connect(server: &RedisServer) -> Connection {
    Connection::connect(&server.url()).await.expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_concurrent_callers_each_get_their_own_reply() {
    let server = RedisServer::start();
    let conn = connect(&server).await;
    let mut tasks = Vec::new();
    for i in 0..1000u32 {
        let conn = conn.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..5u32 {
                let payload = format!("caller-{i}-round-{round}");
                let echoed: String = conn.cmd(Cmd::new("ECHO").arg(payload.as_str())).await?;
                assert_eq!(echoed, payload);
                let n: i64 = conn.cmd(Cmd::new("INCR").key(format!("ctr:{i}"))).await?;
                assert_eq!(n, i64::from(round) + 1);
            }
            Ok::<_, Error>(())
        }));
    }
    for t in tasks {
        t.await.expect("task").expect("requests");
    }
    let total: i64 = conn.cmd(Cmd::new("DBSIZE")).await.unwrap();
    assert_eq!(total, 1000);
}

#[tokio::test]
async fn typed_helpers_round_trip() {
    let server = RedisServer::start();
    let conn = connect(&server).await;
    conn.ping().await.unwrap();
    assert_eq!(conn.get("missing").await.unwrap(), None);
    conn.set("k", "v").await.unwrap();
    assert_eq!(conn.get("k").await.unwrap().as_deref(), Some(&b"v"[..]));
    assert!(conn
        .set_nx_px("lock", "me", Duration::from_secs(5))
        .await
        .unwrap());
    assert!(!conn
        .set_nx_px("lock", "you", Duration::from_secs(5))
        .await
        .unwrap());
    match conn.pttl("lock").await.unwrap() {
        Ttl::Expires(left) => {
            assert!(left <= Duration::from_secs(5) && left > Duration::from_secs(3))
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(conn.pttl("k").await.unwrap(), Ttl::Persistent);
    assert_eq!(conn.pttl("nope").await.unwrap(), Ttl::Missing);
    assert!(conn.pexpire("k", Duration::from_secs(9)).await.unwrap());
    assert!(!conn.pexpire("nope", Duration::from_secs(9)).await.unwrap());
    let xx = SetOptions::default().condition(keylatch_cluster::SetCondition::IfPresent);
    assert!(!conn.set_with("absent", "x", xx).await.unwrap());
    assert_eq!(conn.del(["k", "lock", "nope"]).await.unwrap(), 2);

    let script = "return {KEYS[1], ARGV[1]}";
    let sha = conn.script_load(script).await.unwrap();
    assert_eq!(sha.len(), 40);
    let by_sha = conn.evalsha(&sha, ["key1"], ["arg1"]).await.unwrap();
    let by_body = conn.eval(script, ["key1"], ["arg1"]).await.unwrap();
    assert_eq!(by_sha, by_body);
    let missing = conn
        .evalsha("0000000000000000000000000000000000000000", ["k"], ["a"])
        .await
        .unwrap_err();
    assert_eq!(missing.server_kind(), Some(ServerErrorKind::NoScript));

    assert_eq!(conn.publish("chan", "hello").await.unwrap(), 0);
    let now = conn.time().await.unwrap();
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    // `Duration::abs_diff` is newer than the MSRV (1.80).
    let skew = now.checked_sub(wall).unwrap_or_else(|| wall - now);
    assert!(skew < Duration::from_secs(5));
    assert_eq!(conn.wait(0, Duration::from_millis(10)).await.unwrap(), 0);
    assert!(conn
        .info(Some("server"))
        .await
        .unwrap()
        .contains("redis_version"));
}

#[tokio::test]
async fn pipelines_return_every_reply_in_order_with_per_command_errors() {
    let server = RedisServer::start();
    let conn = connect(&server).await;
    let mut p = Pipeline::new();
    p.add(Cmd::new("SET").key("p").arg("text"))
        .add(Cmd::new("INCR").key("p")) // WRONGTYPE-ish: not an integer
        .add(Cmd::new("GET").key("p"))
        .add(Cmd::new("NOSUCHCOMMAND"));
    for i in 0..500 {
        p.add(Cmd::new("RPUSH").key("list").arg(i));
    }
    let replies = conn.pipeline(p).await.unwrap();
    assert_eq!(replies.len(), 504);
    assert_eq!(replies[0].as_ref().unwrap(), &Frame::Simple("OK".into()));
    assert!(matches!(&replies[1], Err(Error::Server(_))));
    assert_eq!(replies[2].as_ref().unwrap(), &"text");
    assert_eq!(
        replies[3].as_ref().unwrap_err().server_kind(),
        Some(ServerErrorKind::UnknownCommand)
    );
    for (i, r) in replies[4..].iter().enumerate() {
        assert_eq!(r.as_ref().unwrap(), &Frame::Integer(i as i64 + 1));
    }
    assert!(conn.pipeline(Pipeline::new()).await.unwrap().is_empty());
    // Pipelines from concurrent tasks interleave as wholes, never mixed up.
    let mut tasks = Vec::new();
    for t in 0..50 {
        let conn = conn.clone();
        tasks.push(tokio::spawn(async move {
            let p: Pipeline = (0..20)
                .map(|i| Cmd::new("ECHO").arg(format!("{t}:{i}")))
                .collect();
            let replies = conn.pipeline(p).await.unwrap();
            for (i, r) in replies.into_iter().enumerate() {
                assert_eq!(r.unwrap(), format!("{t}:{i}").as_str());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test]
async fn subscriber_commands_are_refused_before_sending() {
    let server = RedisServer::start();
    let conn = connect(&server).await;
    for name in ["SUBSCRIBE", "subscribe", "MONITOR", "psubscribe"] {
        let err = conn.send(Cmd::new(name).arg("c")).await.unwrap_err();
        assert!(matches!(err, Error::InvalidCommand(_)), "{name}: {err}");
    }
    let err = conn
        .send(Cmd::new("client").arg("reply").arg("off"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidCommand(_)), "{err}");
    // Other CLIENT subcommands are fine.
    let _: i64 = conn.cmd(Cmd::new("CLIENT").arg("ID")).await.unwrap();
    // WAIT with a sub-millisecond timeout must not become `WAIT n 0` (forever).
    let started = Instant::now();
    assert_eq!(conn.wait(1, Duration::from_micros(10)).await.unwrap(), 0);
    assert!(started.elapsed() < Duration::from_secs(5));
    conn.ping().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_requests_never_desync_replies() {
    let server = RedisServer::start();
    let conn = connect(&server).await;
    let mut completed = 0u32;
    let mut cancelled = 0u32;
    for i in 0..150u32 {
        // Each round mixes a slow request (cancelled by a short timer while
        // its reply is still outstanding) with fast ones that must each get
        // their own reply.
        let slow = Cmd::new("BLPOP").key(format!("never:{i}")).arg("0.02");
        let slow_fut = conn.send_timeout(slow, None);
        let timer = tokio::time::sleep(Duration::from_micros(u64::from(i % 7) * 200));
        tokio::select! {
            r = slow_fut => { r.unwrap(); completed += 1; }
            () = timer => { cancelled += 1; }
        }
        let payload = format!("after-{i}");
        let echoed: String = conn
            .cmd(Cmd::new("ECHO").arg(payload.as_str()))
            .await
            .unwrap();
        assert_eq!(echoed, payload);
        // A request cancelled at a random point after being polled once.
        let quick = conn.cmd::<String>(Cmd::new("ECHO").arg("dropped"));
        let _ = tokio::time::timeout(Duration::from_micros(u64::from(i % 3) * 50), quick).await;
    }
    assert!(
        cancelled > 0,
        "the test must actually cancel in-flight requests"
    );
    // Replies of cancelled requests were read and discarded: still in sync.
    for i in 0..50 {
        let v: i64 = conn.cmd(Cmd::new("ECHO").arg(i)).await.unwrap();
        assert_eq!(v, i);
    }
    eprintln!("cancelled {cancelled}, completed {completed}");
}

#[tokio::test]
async fn request_whose_caller_left_is_never_sent() {
    let server = RedisServer::start();
    let cfg = ConnectionConfig::from_url(&server.url()).unwrap();
    let (conn, task) = Connection::connect_unspawned(cfg).await.unwrap();
    // The task is not running yet: queue a request, then drop it.
    {
        let fut = conn.send(Cmd::new("INCR").key("side-effect"));
        tokio::pin!(fut);
        let polled = futures_poll_once(fut.as_mut()).await;
        assert!(polled.is_none(), "request cannot complete without the task");
    }
    tokio::spawn(task);
    // A later request goes through; the dropped INCR never ran.
    let v: Option<i64> = conn.cmd(Cmd::new("GET").key("side-effect")).await.unwrap();
    assert_eq!(v, None);
}

/// Polls a future once and returns its output if it was ready.
async fn futures_poll_once<F: std::future::Future + Unpin>(mut fut: F) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut fut).poll(cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

#[tokio::test]
async fn request_timeout_is_typed_and_the_late_reply_is_discarded() {
    let server = RedisServer::start();
    let cfg = ConnectionConfig::from_url(&server.url())
        .unwrap()
        .request_timeout(Some(Duration::from_millis(100)));
    let conn = Connection::connect_with(cfg).await.unwrap();
    let started = Instant::now();
    let err = conn
        .send(Cmd::new("BLPOP").key("empty").arg("2"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout), "{err}");
    assert!(err.is_unknown_outcome());
    // Well before the server's 2 s answer (loose, for loaded machines).
    assert!(started.elapsed() < Duration::from_millis(1500));
    // The BLPOP reply (nil, after 2 s) must be discarded, not handed to the
    // next request, which waits behind it on the pipelined socket.
    let pong = conn
        .send_timeout(Cmd::new("PING"), Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(pong, "PONG");
    let v = conn
        .send_timeout(Cmd::new("ECHO").arg("x"), Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(v, "x");
}

#[tokio::test]
async fn a_short_timeout_queued_behind_a_long_one_fires_on_time() {
    // Deadlines are enforced by the connection task with one timer armed for
    // the earliest deadline; a shorter timeout arriving later must move it.
    let server = RedisServer::start();
    let cfg = ConnectionConfig::from_url(&server.url())
        .unwrap()
        .request_timeout(Some(Duration::from_secs(10)));
    let conn = Connection::connect_with(cfg).await.unwrap();
    let slow = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.send(Cmd::new("BLPOP").key("nothing").arg("2")).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    let err = conn
        .send_timeout(Cmd::new("PING"), Some(Duration::from_millis(100)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout), "{err}");
    // The PING's reply waits behind the BLPOP's (2 s): it must not.
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "timed out after {:?}",
        started.elapsed()
    );
    // The long request is unaffected and the connection stays paired.
    assert_eq!(slow.await.unwrap().unwrap(), Frame::Null);
    assert_eq!(
        conn.send(Cmd::new("ECHO").arg("after")).await.unwrap(),
        "after"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_against_a_paused_server_fails_in_time_and_recovers() {
    // Callers whose requests wait in the queue (the task takes no more while
    // the in-flight cap is reached) have no timer of their own: when requests
    // time out with the queue full, the connection is given up and rebuilt,
    // so nobody waits past their timeout for a server that does not answer.
    let server = RedisServer::start();
    let mut cfg = ConnectionConfig::from_url(&server.url())
        .unwrap()
        .request_timeout(Some(Duration::from_millis(300)))
        .queue_capacity(2);
    cfg.max_in_flight = 1;
    let conn = Connection::connect_with(cfg).await.unwrap();
    conn.ping().await.unwrap();
    server.pause().unwrap();
    let started = Instant::now();
    let mut calls = Vec::new();
    for _ in 0..20 {
        let conn = conn.clone();
        calls.push(tokio::spawn(async move {
            let r = conn.ping().await;
            (r, Instant::now())
        }));
    }
    for c in calls {
        let (r, at) = tokio::time::timeout(Duration::from_secs(10), c)
            .await
            .expect("a caller hung behind a full queue")
            .unwrap();
        let err = r.unwrap_err();
        assert!(
            matches!(err, Error::Timeout | Error::Disconnected),
            "typed failure expected, got {err}"
        );
        assert!(
            at.duration_since(started) < Duration::from_secs(5),
            "a caller waited {:?}",
            at.duration_since(started)
        );
    }
    server.resume().unwrap();
    Soon::new(Duration::from_secs(10), Duration::from_millis(50))
        .until(|| async {
            let pong = conn.ping().await;
            pong.map_err(|e| format!("no recovery after resume: {e}"))
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_death_fails_pending_fast_and_the_handle_reconnects() {
    let mut server = RedisServer::start();
    let cfg = ConnectionConfig::from_url(&server.url())
        .unwrap()
        .request_timeout(Some(Duration::from_secs(20)));
    let conn = Connection::connect_with(cfg).await.unwrap();
    conn.ping().await.unwrap();

    // 100 requests blocked server-side, so they are surely pending when it dies.
    let mut blocked = Vec::new();
    for i in 0..100 {
        let conn = conn.clone();
        blocked.push(tokio::spawn(async move {
            conn.send(Cmd::new("BLPOP").key(format!("q{i}")).arg(10))
                .await
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let killed_at = Instant::now();
    server.kill();
    for t in blocked {
        let err = t.await.unwrap().unwrap_err();
        assert!(
            matches!(err, Error::ConnectionClosed | Error::Io(_)),
            "pending request got {err}"
        );
    }
    let failed_after = killed_at.elapsed();
    assert!(
        failed_after < Duration::from_secs(5),
        "took {failed_after:?}"
    );

    // While the server is down, requests fail fast (not sent), never hang.
    let started = Instant::now();
    let err = conn.ping().await.unwrap_err();
    assert!(err.is_connection_error(), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));

    server.restart().unwrap();
    Soon::new(Duration::from_secs(15), Duration::from_millis(50))
        .until(|| async {
            conn.ping().await.map_err(|e| {
                assert!(e.is_connection_error(), "{e}");
                format!("no reconnect: {e}")
            })
        })
        .await;
    assert!(conn.reconnects() >= 1);
    conn.set("after", "restart").await.unwrap();
    assert_eq!(
        conn.get("after").await.unwrap().as_deref(),
        Some(&b"restart"[..])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_queue_applies_backpressure_without_errors() {
    let server = RedisServer::start();
    let cfg = ConnectionConfig::from_url(&server.url())
        .unwrap()
        .queue_capacity(4);
    let conn = Arc::new(Connection::connect_with(cfg).await.unwrap());
    let mut tasks = Vec::new();
    for i in 0..200 {
        let conn = Arc::clone(&conn);
        tasks.push(tokio::spawn(async move {
            let v: i64 = conn.cmd(Cmd::new("ECHO").arg(i)).await.unwrap();
            assert_eq!(v, i);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test]
async fn dropping_every_handle_stops_the_task() {
    let server = RedisServer::start();
    let cfg = ConnectionConfig::from_url(&server.url()).unwrap();
    let (conn, task) = Connection::connect_unspawned(cfg).await.unwrap();
    let handle = tokio::spawn(task);
    conn.ping().await.unwrap();
    drop(conn);
    tokio::time::timeout(Duration::from_secs(5), handle)
        .await
        .expect("task ends when the last handle drops")
        .unwrap();
}

#[tokio::test]
async fn resp3_by_default_with_maps() {
    let server = RedisServer::start();
    let conn = connect(&server).await;
    assert_eq!(conn.protocol(), Some(Negotiated::Resp3));
    conn.send(Cmd::new("HSET").key("h").arg("f").arg("v"))
        .await
        .unwrap();
    let reply = conn.send(Cmd::new("HGETALL").key("h")).await.unwrap();
    assert!(matches!(reply, Frame::Map(_)), "{reply}");
    let pairs: Vec<(String, String)> = conn.cmd(Cmd::new("HGETALL").key("h")).await.unwrap();
    assert_eq!(pairs, vec![("f".to_owned(), "v".to_owned())]);
}

/// `DEBUG PROTOCOL attrib` answers, over RESP3, a bulk string preceded by
/// the attribute `key-popularity: ["key:123", 90]`: the frame keeps it for a
/// caller who asks for the frame, typed conversions see through it, and
/// replies stay paired with their requests.
#[tokio::test]
async fn a_reply_with_attributes_keeps_them_and_converts_typed() {
    let server = RedisServer::builder()
        .needs(Feature::EnableDebugCommand)
        .args(["--enable-debug-command", "local"])
        .start()
        .unwrap();
    let conn = connect(&server).await;
    assert_eq!(conn.protocol(), Some(Negotiated::Resp3));
    let attrib = || Cmd::new("DEBUG").arg("PROTOCOL").arg("attrib");
    const TEXT: &str = "Some real reply following the attribute";
    let popularity = (
        Frame::Bulk("key-popularity".into()),
        Frame::Array(vec![Frame::Bulk("key:123".into()), Frame::Integer(90)]),
    );

    let frame = conn.send(attrib()).await.unwrap();
    assert_eq!(
        frame.attributes(),
        Some(std::slice::from_ref(&popularity)),
        "{frame}"
    );
    assert_eq!(frame.value(), &Frame::Bulk(TEXT.into()));
    assert_eq!(frame, TEXT);
    let (plain, attributes) = frame.into_parts();
    assert_eq!(plain, Frame::Bulk(TEXT.into()));
    assert_eq!(attributes, Some(vec![popularity.clone()]));

    // Typed: the conversion to `Frame` keeps them, any other sees through.
    let frame: Frame = conn.cmd(attrib()).await.unwrap();
    assert!(frame.attributes().is_some(), "{frame}");
    let text: String = conn.cmd(attrib()).await.unwrap();
    assert_eq!(text, TEXT);
    let bytes: Option<bytes::Bytes> = conn.cmd(attrib()).await.unwrap();
    assert_eq!(bytes.as_deref(), Some(TEXT.as_bytes()));
    let err = conn.cmd::<i64>(attrib()).await.unwrap_err();
    assert!(matches!(err, Error::UnexpectedReply(_)), "{err:?}");

    // Pipelined among plain replies: each reply keeps its own, in order.
    let mut p = Pipeline::new();
    p.add(attrib())
        .add(Cmd::new("INCR").key("n"))
        .add(attrib())
        .add(Cmd::new("ECHO").arg("e"));
    let replies = conn.pipeline(p).await.unwrap();
    let replies: Vec<Frame> = replies.into_iter().map(Result::unwrap).collect();
    assert!(replies[0].attributes().is_some());
    assert_eq!(replies[1], Frame::Integer(1));
    assert_eq!(replies[2].value(), &Frame::Bulk(TEXT.into()));
    assert_eq!(replies[3], Frame::Bulk("e".into()));

    // The connection carries on, and a plain reply has no attributes.
    let n: i64 = conn.cmd(Cmd::new("INCR").key("n")).await.unwrap();
    assert_eq!(n, 2);
    assert_eq!(
        conn.send(Cmd::new("PING")).await.unwrap().attributes(),
        None
    );

    // RESP2 has no attributes: the server sends the string alone.
    let resp2 = Connection::connect(&format!("{}?protocol=resp2", server.url()))
        .await
        .unwrap();
    assert_eq!(resp2.protocol(), Some(Negotiated::Resp2));
    assert_eq!(
        resp2.send(attrib()).await.unwrap(),
        Frame::Bulk(TEXT.into())
    );
}

#[tokio::test]
async fn hello_refused_falls_back_to_resp2() {
    let server = RedisServer::builder()
        .args(["--rename-command", "HELLO", ""])
        .start()
        .unwrap();
    let conn = Connection::connect(&format!("{}/3", server.url()))
        .await
        .unwrap();
    assert_eq!(conn.protocol(), Some(Negotiated::Resp2));
    conn.send(Cmd::new("HSET").key("h").arg("f").arg("v"))
        .await
        .unwrap();
    let reply = conn.send(Cmd::new("HGETALL").key("h")).await.unwrap();
    assert!(matches!(reply, Frame::Array(_)), "{reply}");
    let pairs: Vec<(String, String)> = conn.cmd(Cmd::new("HGETALL").key("h")).await.unwrap();
    assert_eq!(pairs, vec![("f".to_owned(), "v".to_owned())]);
    // SELECT 3 happened on the RESP2 path too.
    assert_eq!(
        server.cli(&["-n", "3", "HGET", "h", "f"]).unwrap().trim(),
        "v"
    );
    // Asking for RESP3 explicitly is an error against this server.
    let err = Connection::connect(&format!("{}?protocol=resp3", server.url()))
        .await
        .unwrap_err();
    assert_eq!(err.server_kind(), Some(ServerErrorKind::UnknownCommand));
}

#[tokio::test]
async fn explicit_resp2_and_select() {
    let server = RedisServer::start();
    let conn = Connection::connect(&format!("{}/5?protocol=resp2&name=probe", server.url()))
        .await
        .unwrap();
    assert_eq!(conn.protocol(), Some(Negotiated::Resp2));
    conn.set("in5", "yes").await.unwrap();
    assert_eq!(
        server.cli(&["-n", "5", "GET", "in5"]).unwrap().trim(),
        "yes"
    );
    let name: Option<String> = conn.cmd(Cmd::new("CLIENT").arg("GETNAME")).await.unwrap();
    assert_eq!(name.as_deref(), Some("probe"));
}

#[tokio::test]
async fn acl_user_authenticates_in_both_protocols_and_bad_passwords_are_typed() {
    let server = RedisServer::start();
    server
        .cli(&[
            "ACL", "SETUSER", "locker", "on", ">s3cret", "~*", "&*", "+@all",
        ])
        .unwrap();
    server
        .cli(&["CONFIG", "SET", "requirepass", "adminpw"])
        .unwrap();
    let port = server.port();
    for proto in ["resp3", "resp2"] {
        let url = format!("redis://locker:s3cret@127.0.0.1:{port}?protocol={proto}&name=lk");
        let conn = Connection::connect(&url).await.unwrap();
        let who: String = conn.cmd(Cmd::new("ACL").arg("WHOAMI")).await.unwrap();
        assert_eq!(who, "locker");
        let name: String = conn.cmd(Cmd::new("CLIENT").arg("GETNAME")).await.unwrap();
        assert_eq!(name, "lk");
    }
    // Password-only URL authenticates the default user.
    let conn = Connection::connect(&format!("redis://:adminpw@127.0.0.1:{port}"))
        .await
        .unwrap();
    let who: String = conn.cmd(Cmd::new("ACL").arg("WHOAMI")).await.unwrap();
    assert_eq!(who, "default");

    for proto in ["resp3", "resp2"] {
        let url = format!("redis://locker:wrong@127.0.0.1:{port}?protocol={proto}");
        let err = Connection::connect(&url).await.unwrap_err();
        assert_eq!(
            err.server_kind(),
            Some(ServerErrorKind::WrongPass),
            "{proto}: {err}"
        );
    }
    let err = Connection::connect(&format!("redis://127.0.0.1:{port}"))
        .await
        .unwrap_err();
    assert_eq!(err.server_kind(), Some(ServerErrorKind::NoAuth), "{err}");
    // The same server asked as a sentinel, with a wrong and with no
    // sentinel password: typed the same, through the sentinel error.
    for (q, kind) in [
        ("?sentinel_password=wrong", ServerErrorKind::WrongPass),
        ("", ServerErrorKind::NoAuth),
    ] {
        let url = format!("redis+sentinel://127.0.0.1:{port}/mymaster{q}");
        let err = tokio::time::timeout(Duration::from_secs(10), Client::connect(&url))
            .await
            .expect("a refused sentinel answers at once")
            .unwrap_err();
        assert_eq!(err.server_kind(), Some(kind), "{q:?}: {err}");
        assert!(
            matches!(err, Error::Sentinel(SentinelError::Refused { .. })),
            "{q:?}: {err:?}"
        );
        assert!(
            !err.to_string().contains("wrong"),
            "the password printed: {err}"
        );
    }
    // A user without the permission gets NOPERM per command, not a broken connection.
    server
        .cli(&[
            "--user", "default", "--pass", "adminpw", "ACL", "SETUSER", "reader", "on", ">r", "~*",
            "+get", "+hello", "+client", "+ping",
        ])
        .unwrap();
    let conn = Connection::connect(&format!("redis://reader:r@127.0.0.1:{port}"))
        .await
        .unwrap();
    let err = conn.set("x", "y").await.unwrap_err();
    assert_eq!(err.server_kind(), Some(ServerErrorKind::NoPerm), "{err}");
    conn.ping().await.unwrap();
}

#[tokio::test]
async fn unreachable_server_is_a_typed_io_error() {
    let port = keylatch_harness::free_port().unwrap();
    let err = Connection::connect(&format!("redis://127.0.0.1:{port}"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Io(_)), "{err}");
    // rediss:// to nothing fails at the TCP connect, typed the same (a
    // build without the `tls` feature refuses the URL itself).
    let err = Connection::connect(&format!("rediss://127.0.0.1:{port}"))
        .await
        .unwrap_err();
    #[cfg(feature = "tls")]
    assert!(matches!(err, Error::Io(_)), "{err}");
    #[cfg(not(feature = "tls"))]
    assert!(matches!(err, Error::Config(_)), "{err}");
}

#[tokio::test]
async fn large_values_round_trip() {
    let server = RedisServer::start();
    let conn = connect(&server).await;
    let big: Vec<u8> = (0..(4 << 20)).map(|i| (i % 251) as u8).collect();
    conn.set("big", big.as_slice()).await.unwrap();
    let back = conn.get("big").await.unwrap().unwrap();
    assert_eq!(back.len(), big.len());
    assert!(back == big);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_callers_behind_a_request_without_timeout_still_fail_in_time() {
    // The task takes nothing while the in-flight cap is reached; the one
    // pending request (a BLPOP with no timeout) never answers. Queued
    // callers have no timer of their own: after a whole request timeout of
    // taking nothing with callers queued, the connection is rebuilt so they
    // fail rather than wait for the BLPOP.
    let server = RedisServer::start();
    let mut cfg = ConnectionConfig::from_url(&server.url())
        .unwrap()
        .request_timeout(Some(Duration::from_millis(300)))
        .queue_capacity(4);
    cfg.max_in_flight = 1;
    let conn = Connection::connect_with(cfg).await.unwrap();
    let forever = {
        let conn = conn.clone();
        tokio::spawn(async move {
            conn.send_timeout(Cmd::new("BLPOP").key("never").arg("0"), None)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    let mut queued = Vec::new();
    for _ in 0..3 {
        let conn = conn.clone();
        queued.push(tokio::spawn(async move { conn.ping().await }));
    }
    for q in queued {
        let r = tokio::time::timeout(Duration::from_secs(10), q)
            .await
            .expect("a queued caller waited without bound")
            .unwrap();
        // Failed typed, or (when the new connection was up before the task
        // looked at its queue) answered on the rebuilt connection: either
        // way within bounded time, not behind the BLPOP.
        if let Err(err) = r {
            assert!(
                matches!(err, Error::Timeout | Error::Disconnected),
                "typed failure expected, got {err}"
            );
        }
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    // The rebuild failed the BLPOP too (documented: pending callers get
    // Timeout, outcome unknown), and the connection works again.
    let blpop = tokio::time::timeout(Duration::from_secs(5), forever)
        .await
        .expect("the BLPOP caller was told")
        .unwrap();
    assert!(matches!(blpop, Err(Error::Timeout)), "{blpop:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while conn.ping().await.is_err() {
        assert!(Instant::now() < deadline, "no recovery");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_timeout_expiring_while_nobody_queues_does_not_drop_the_connection() {
    // At the in-flight cap, one pending request times out; nobody waits in
    // the queue, so the connection stays (the other pending request is
    // answered normally on the same socket).
    let server = RedisServer::start();
    let mut cfg = ConnectionConfig::from_url(&server.url())
        .unwrap()
        .request_timeout(Some(Duration::from_secs(10)));
    cfg.max_in_flight = 2;
    let conn = Connection::connect_with(cfg).await.unwrap();
    let slow = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.send(Cmd::new("BLPOP").key("empty").arg("0.5")).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let err = conn
        .send_timeout(Cmd::new("PING"), Some(Duration::from_millis(100)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout), "{err}");
    assert_eq!(slow.await.unwrap().unwrap(), Frame::Null);
    assert_eq!(conn.reconnects(), 0, "no rebuild without queued callers");
    assert_eq!(conn.send(Cmd::new("ECHO").arg("ok")).await.unwrap(), "ok");
}

/// A request with a late handler: past its deadline the caller gets a typed
/// timeout, and the reply that comes later (the server resumed) goes to the
/// handler instead of being discarded; later requests stay paired.
#[tokio::test]
async fn a_settled_request_hands_its_late_reply_to_the_handler() {
    let server = RedisServer::start();
    let client = keylatch_cluster::Client::connect(&server.url())
        .await
        .unwrap();
    let script = keylatch_cluster::Script::new("late_echo", "return ARGV[1]");
    let cmd = Arc::new(script.evalsha_cmd(&[] as &[&str], &["late"]));
    // Loaded first: the paused call must not meet NOSCRIPT.
    let _ = client
        .eval_script(&script, &[] as &[&str], &["warm"])
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tx = std::sync::Mutex::new(Some(tx));
    server.pause().unwrap();
    let reply = client
        .eval_shared_settled(
            &script,
            &cmd,
            Some(Duration::from_millis(200)),
            Arc::new(move |frame| {
                if let Some(tx) = tx.lock().unwrap().take() {
                    let _ = tx.send(frame);
                }
            }),
        )
        .await;
    server.resume().unwrap();
    assert!(
        matches!(reply, Err(keylatch_cluster::Error::Timeout)),
        "{reply:?}"
    );
    let late = tokio::time::timeout(Duration::from_secs(5), rx)
        .await
        .expect("the late reply reached the handler")
        .unwrap();
    assert_eq!(late, "late");
    assert_eq!(client.get("after").await.unwrap(), None, "still paired");
}

/// A command sent with `eval_with_written` runs even when its caller drops
/// the future right after queueing it (a plain request would be skipped).
#[tokio::test]
async fn a_written_request_runs_though_its_caller_left() {
    let server = RedisServer::start();
    let client = keylatch_cluster::Client::connect(&server.url())
        .await
        .unwrap();
    static SCRIPT: keylatch_cluster::Script =
        keylatch_cluster::Script::new("incr_it", "return redis.call('incr', KEYS[1])");
    let script = &SCRIPT;
    let make = || script.evalsha_cmd(&["written"], &[] as &[&str]);
    client.eval_with(script, make).await.unwrap();
    // Polled once (queued), then dropped before the connection could write it.
    assert!(
        futures_poll_once(Box::pin(client.eval_with_written(script, make, None)))
            .await
            .is_none()
    );
    Soon::new(Duration::from_secs(5), Duration::from_millis(10))
        .until(|| async {
            match client.get("written").await.map_err(|e| e.to_string())? {
                Some(v) if v.as_ref() == b"2" => Ok(()),
                other => Err(format!("written = {other:?}")),
            }
        })
        .await;
}
