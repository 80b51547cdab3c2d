//! The connection's health check against real servers: a server that stops
//! answering without closing the socket (SIGSTOP, as a crashed host or a
//! partition looks) is given up and reconnected to, and a primary demoted to
//! replica (`READONLY`) makes the connection reconnect.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use keylatch_cluster::{Commands, Connection, ConnectionConfig, Error, ServerErrorKind};
use keylatch_harness::RedisServer;

mod common;
use common::Soon;

/// Resumes a paused server however the test ends.
struct Resume<'a>(&'a RedisServer);

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        let _ = self.0.resume();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_to_a_silent_server_is_given_up_and_comes_back() {
    let server = RedisServer::start();
    let mut cfg = ConnectionConfig::from_url(&server.url())
        .unwrap()
        .health_interval(Some(Duration::from_millis(100)));
    cfg.connect_timeout = Duration::from_millis(400);
    let conn = Connection::connect_with(cfg).await.unwrap();
    conn.set("k", "v").await.unwrap();
    // Idle and healthy: PINGs are answered, the connection stays.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(conn.is_connected());
    assert_eq!(conn.reconnects(), 0);

    server.pause().unwrap();
    let resume = Resume(&server);
    let paused = Instant::now();
    // The unanswered PING gives the socket up; reconnecting cannot finish
    // its handshake while the server is stopped.
    Soon::new(Duration::from_secs(10), Duration::from_millis(20))
        .until(|| async {
            if conn.is_connected() {
                Err("still connected to a stopped server".to_owned())
            } else {
                Ok(())
            }
        })
        .await;
    eprintln!(
        "HEALTH silent server given up after {} ms",
        paused.elapsed().as_millis()
    );
    // Meanwhile callers are told at once that nothing was sent.
    let started = Instant::now();
    let e = conn.get("k").await.unwrap_err();
    assert!(matches!(e, Error::Disconnected), "{e}");
    assert!(started.elapsed() < Duration::from_secs(1));

    drop(resume);
    let v = Soon::new(Duration::from_secs(10), Duration::from_millis(50))
        .until(|| async { conn.get("k").await.map_err(|e| e.to_string()) })
        .await;
    assert_eq!(v.as_deref(), Some(&b"v"[..]));
    assert!(conn.reconnects() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demoted_primary_makes_the_connection_reconnect() {
    let primary = RedisServer::start();
    let other = RedisServer::start();
    let conn = Connection::connect(&primary.url()).await.unwrap();
    conn.set("k", "v").await.unwrap();
    // The server becomes a replica (a failover elsewhere; or a DNS name
    // that now names another host): writes are refused with READONLY.
    let port = other.port().to_string();
    primary.cli(&["REPLICAOF", "127.0.0.1", &port]).unwrap();
    let e = Soon::new(Duration::from_secs(10), Duration::from_millis(20))
        .until(|| async {
            match conn.set("k", "w").await {
                Err(e) if e.server_kind() == Some(ServerErrorKind::ReadOnly) => Ok(e),
                other => Err(format!("not refused yet: {other:?}")),
            }
        })
        .await;
    assert!(!e.is_unknown_outcome());
    // The connection was given up after that reply and made again (to the
    // same name: here the same server, which a real deployment's DNS or
    // proxy would now point elsewhere).
    Soon::new(Duration::from_secs(10), Duration::from_millis(20))
        .until(|| async {
            if conn.reconnects() >= 1 {
                Ok(())
            } else {
                Err("no reconnect after READONLY".to_owned())
            }
        })
        .await;
    primary.cli(&["REPLICAOF", "NO", "ONE"]).unwrap();
    let v = Soon::new(Duration::from_secs(10), Duration::from_millis(50))
        .until(|| async {
            conn.set("k", "x").await.map_err(|e| e.to_string())?;
            conn.get("k").await.map_err(|e| e.to_string())
        })
        .await;
    assert_eq!(v.as_deref(), Some(&b"x"[..]));
}
