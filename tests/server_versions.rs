//! What differs between the server versions users run (Redis 6.2, 7.0,
//! Valkey 8.1, 9.1), as an outside review (session 29) found it:
//!
//! A master demoted to replica refuses a script's write with `READONLY` on
//! Redis 7+ and Valkey (`READONLY You can't write against a read only
//! replica. script: …`), but Redis 6.2 wraps it in the script's own error
//! (`ERR Error running script (call to f_…): @user_script:1: @user_script:
//! 1: -READONLY You can't write …`). The client classified errors by their
//! first word, so on 6.2 such a refusal was `Other`: an acquire failed at
//! once instead of being tried again within its wait (`attempt.rs`
//! `not_run`), and the connection was not made again to find the new
//! master (the driver's demotion check). All three tests failed on 6.2
//! before `error::kind_of`; they run on every server.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use keylatch_cluster::{Client, Connection, ServerErrorKind};
use keylatch_harness::RedisServer;
use keylatch_lock::{LockError, Locks, LocksConfig};
use keylatch_resp::Cmd;

mod common;
use common::locks::warm;
use common::Soon;

/// A connection to a master just demoted to a replica of another server.
async fn demoted() -> (RedisServer, RedisServer, Connection) {
    let primary = RedisServer::start();
    let other = RedisServer::start();
    let conn = Connection::connect(&primary.url()).await.unwrap();
    let port = other.port().to_string();
    primary.cli(&["REPLICAOF", "127.0.0.1", &port]).unwrap();
    (primary, other, conn)
}

/// A script that writes (a demoted master refuses it).
const WRITES: &str = "return redis.call('hincrby', KEYS[1], 'f', 1)";

/// A writing script refused by a demoted master is a `READONLY` error, on
/// every server: the same answer a plain write gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_refused_by_a_demoted_master_is_readonly() {
    let (_primary, _other, conn) = demoted().await;
    let e = Soon::new(Duration::from_secs(10), Duration::from_millis(20))
        .until(|| async {
            let cmd = Cmd::new("EVAL").arg(WRITES).arg(1).key("k");
            match conn.cmd::<i64>(cmd).await {
                Err(e) if e.as_server_error().is_some() => Ok(e),
                other => Err(format!("not refused yet: {other:?}")),
            }
        })
        .await;
    assert_eq!(
        e.server_kind(),
        Some(ServerErrorKind::ReadOnly),
        "a script's write refused by a replica: {e}"
    );
}

/// An acquire refused by a master demoted to replica surely did not run:
/// it is tried again within the caller's wait, and takes the lock once the
/// server is a master again (as it does on Redis 7.0 and Valkey).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_refused_by_a_demoted_master_is_tried_again_within_the_wait() {
    let primary = RedisServer::start();
    let other = RedisServer::start();
    let client = Client::connect(&primary.url()).await.unwrap();
    let locks = Locks::new(client, LocksConfig::default());
    let lock = locks.lock("review35-demoted");
    // Warm: scripts loaded, connection up.
    warm(&lock).await;
    let port = other.port().to_string();
    primary.cli(&["REPLICAOF", "127.0.0.1", &port]).unwrap();
    // Promoted again 700 ms later (a failover that came back, or the
    // sentinels' switch landing): well within the 5 s wait.
    let url = primary.port();
    let promote = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        keylatch_harness::redis_cli(url, &["REPLICAOF", "NO", "ONE"]).unwrap();
    });
    let got = lock
        .try_acquire(Duration::from_secs(5), Some(Duration::from_secs(5)))
        .await;
    promote.await.unwrap();
    match got {
        Ok(Some(g)) => g.unlock().await.unwrap(),
        Ok(None) => panic!("not acquired within the wait: nobody holds it"),
        Err(LockError::Client(e)) => panic!(
            "the acquire failed at once instead of being tried again \
             (kind {:?}): {e}",
            e.server_kind()
        ),
        Err(e) => panic!("the acquire failed: {e}"),
    }
}

/// A script's write refused by a demoted master gives the connection up and
/// makes it again, as a plain write's `READONLY` does
/// (`health.rs::a_demoted_primary_makes_the_connection_reconnect`): behind a
/// DNS name or a proxy, the next connection reaches the new master. On
/// Redis 6.2 the wrapped error (`ERR Error running script … -READONLY …`)
/// does not start with `READONLY`: the driver judges it by kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_refused_by_a_demoted_master_makes_the_connection_reconnect() {
    let (_primary, _other, conn) = demoted().await;
    Soon::new(Duration::from_secs(10), Duration::from_millis(20))
        .until(|| async {
            let cmd = Cmd::new("EVAL").arg(WRITES).arg(1).key("k");
            match conn.cmd::<i64>(cmd).await {
                Err(e) if e.as_server_error().is_some() => Ok(()),
                other => Err(format!("not refused yet: {other:?}")),
            }
        })
        .await;
    Soon::new(Duration::from_secs(5), Duration::from_millis(20))
        .until(|| async {
            if conn.reconnects() >= 1 {
                Ok(())
            } else {
                Err("no reconnect after a script's write was refused by a replica".to_owned())
            }
        })
        .await;
}
