//! `Client` against a standalone server: detection, scripts with the NOSCRIPT
//! fallback, and pipelines that heal NOSCRIPT once per script.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keylatch_cluster::{Client, ClientConfig, ClientMode, Commands, Error, Pipeline, Script};
use keylatch_harness::RedisServer;
use keylatch_resp::{Cmd, Frame};

mod common;
use common::info_count;

static INCR_BY: Script = Script::new("incr_by", "return redis.call('INCRBY', KEYS[1], ARGV[1])");
static ECHO_KEY: Script = Script::new("echo_key", "return KEYS[1] .. ':' .. ARGV[1]");

/// `SCRIPT LOAD` calls `server` has served, given the `SCRIPT FLUSH`es the
/// test sent it. Redis 7+ and Valkey count subcommands apart
/// (`cmdstat_script|load`); Redis 6.2 counts every `SCRIPT` call as one
/// (`cmdstat_script`), so there the flushes are taken off.
fn script_loads(server: &RedisServer, flushes: u64) -> u64 {
    let stats = server.cli(&["INFO", "commandstats"]).unwrap();
    if stats.contains("cmdstat_script|") {
        info_count(&stats, "cmdstat_script|load:calls=")
    } else {
        info_count(&stats, "cmdstat_script:calls=") - flushes
    }
}

#[tokio::test]
async fn standalone_is_detected_and_scripts_survive_script_flush() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    assert!(!client.is_cluster());
    assert_eq!(client.shards().len(), 1);

    // First call: the server has never seen the script (NOSCRIPT → load + retry).
    let v = int(client.eval_script(&INCR_BY, &["n"], &["5"]).await.unwrap());
    assert_eq!(v, 5);
    assert_eq!(script_loads(&server, 0), 1);
    // Cached now: no further load.
    int(client.eval_script(&INCR_BY, &["n"], &["1"]).await.unwrap());
    assert_eq!(script_loads(&server, 0), 1);
    server.cli(&["SCRIPT", "FLUSH"]).unwrap();
    let v = int(client.eval_script(&INCR_BY, &["n"], &["1"]).await.unwrap());
    assert_eq!(v, 7);
    assert_eq!(script_loads(&server, 1), 2);

    // A script error is a typed server error, not a retry loop.
    static BAD: Script = Script::new("bad", "return redis.call('NOPE')");
    let err = client
        .eval_script(&BAD, &["k"], &[] as &[&str])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Server(_)), "{err}");
}

fn int(f: Frame) -> i64 {
    match f {
        Frame::Integer(i) => i,
        other => panic!("expected an integer, got {other}"),
    }
}

#[tokio::test]
async fn pipeline_reloads_each_missing_script_once_and_keeps_order() {
    let server = RedisServer::start();
    let client = Client::connect_with(
        ClientConfig::from_url(&server.url())
            .unwrap()
            .mode(ClientMode::Standalone),
    )
    .await
    .unwrap();
    for round in 0..2u64 {
        server.cli(&["SCRIPT", "FLUSH"]).unwrap();
        let flushes = round + 1;
        let before = script_loads(&server, flushes);
        let mut p = Pipeline::new();
        for i in 0..60 {
            match i % 3 {
                0 => p.add_script(&INCR_BY, &[format!("c{round}")], &["1"]),
                1 => p.add_script(&ECHO_KEY, &[format!("k{i}")], &[format!("{i}")]),
                _ => p.add(Cmd::new("ECHO").arg(format!("plain{i}"))),
            };
        }
        let replies = client.pipeline(p).await.unwrap();
        assert_eq!(replies.len(), 60);
        let mut counter = 0;
        for (i, r) in replies.into_iter().enumerate() {
            let r = r.unwrap();
            match i % 3 {
                0 => {
                    counter += 1;
                    assert_eq!(r, Frame::Integer(counter), "entry {i}");
                }
                1 => assert_eq!(r, format!("k{i}:{i}").as_str(), "entry {i}"),
                _ => assert_eq!(r, format!("plain{i}").as_str(), "entry {i}"),
            }
        }
        // Two distinct scripts, each loaded exactly once for 40 failed entries.
        assert_eq!(script_loads(&server, flushes) - before, 2);
    }
}
