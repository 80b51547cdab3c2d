//! Issue 30, "logs an operator can turn on", through the real binary:
//! `-v`/`-vv` and `RUST_LOG` show the library's events on a normal exec, a
//! timed-out wait, a refused connection and a connection killed during a
//! wait; without either, stderr stays quiet.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use keylatch_harness::RedisServer;

mod common;
use common::{stderr, stdout};

/// The binary with neither `$KEYLATCH_URL` nor `$RUST_LOG` of the caller's.
fn keylatch() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_keylatch"));
    c.env_remove("KEYLATCH_URL").env_remove("RUST_LOG");
    c
}

fn run(c: &mut Command) -> Output {
    c.output().unwrap()
}

/// The lines of `err` that come from the subscriber (keylatch's own error
/// line starts `keylatch: `, an event line `keylatch [`).
fn events(err: &str) -> Vec<&str> {
    err.lines()
        .filter(|l| l.starts_with("keylatch ["))
        .collect()
}

#[test]
fn a_normal_exec_shows_the_connection_at_v_and_nothing_without() {
    let server = RedisServer::start();
    let url = server.url();
    let loud = run(keylatch().args(["-v", "exec", "vjob", "--url", &url, "--", "echo", "ran"]));
    assert_eq!(loud.status.code(), Some(0), "{}", stderr(&loud));
    assert_eq!(stdout(&loud), "ran\n", "the command's output is untouched");
    let err = stderr(&loud);
    let ev = events(&err);
    assert!(
        ev.iter()
            .any(|l| l.contains("INFO") && l.contains("connected")),
        "{err}"
    );
    // -v is INFO: no debug event.
    assert!(!ev.iter().any(|l| l.contains("DEBUG")), "{err}");
    let quiet = run(keylatch().args(["exec", "vjob", "--url", &url, "--", "echo", "ran"]));
    assert_eq!(quiet.status.code(), Some(0));
    assert_eq!(stderr(&quiet), "", "silent without -v or RUST_LOG");
}

#[test]
fn a_timed_out_wait_shows_the_wait_at_vv() {
    let server = RedisServer::start();
    let url = server.url();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let locks = rt.block_on(keylatch::Locks::connect(&url)).unwrap();
    let guard = rt.block_on(locks.lock("vbusy").acquire()).unwrap();
    let out = run(keylatch().args([
        "-vv", "exec", "vbusy", "--wait", "600ms", "--url", &url, "--", "true",
    ]));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(75), "{err}");
    let ev = events(&err);
    assert!(
        ev.iter()
            .any(|l| l.contains("DEBUG") && l.contains("waiting") && l.contains("lock=vbusy")),
        "{err}"
    );
    assert!(
        ev.iter()
            .any(|l| l.contains("acquire") && l.contains("lock=vbusy")),
        "{err}"
    );
    rt.block_on(guard.unlock()).unwrap();
}

#[test]
fn a_refused_connection_shows_the_failed_connect_at_v() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("redis://127.0.0.1:{port}");
    let out = run(keylatch().args(["-v", "status", "vjob", "--url", &url]));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(69), "{err}");
    assert!(
        events(&err)
            .iter()
            .any(|l| l.contains("WARN") && l.contains("connect failed") && l.contains("refused")),
        "{err}"
    );
    // keylatch's own one-line message still ends the output.
    assert!(
        err.lines()
            .last()
            .unwrap()
            .starts_with("keylatch: cannot connect"),
        "{err}"
    );
}

#[test]
fn a_connection_killed_during_a_wait_shows_the_loss_and_the_reconnect() {
    let server = RedisServer::start();
    let url = server.url();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let locks = rt.block_on(keylatch::Locks::connect(&url)).unwrap();
    let guard = rt.block_on(locks.lock("vkill").acquire()).unwrap();
    let child = keylatch()
        .args([
            "-v", "exec", "vkill", "--wait", "20s", "--url", &url, "--", "true",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the exec's client is connected and waiting (its
    // subscription to the lock's channel is up), then kill every normal
    // client's connection: the exec's and this test's own.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let subs = server
            .cli(&["PUBSUB", "NUMSUB", "redisson_lock__channel:{vkill}"])
            .unwrap();
        if subs.lines().nth(1).is_some_and(|n| n.trim() != "0") {
            break;
        }
        assert!(Instant::now() < until, "the exec never waited: {subs}");
        std::thread::sleep(Duration::from_millis(20));
    }
    server.cli(&["CLIENT", "KILL", "TYPE", "normal"]).unwrap();
    server.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    rt.block_on(guard.unlock()).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let ev = events(&err);
    assert!(
        ev.iter()
            .any(|l| l.contains("connection lost") || l.contains("pub/sub connection lost")),
        "{err}"
    );
    assert!(
        ev.iter()
            .any(|l| l.contains("reconnected") || l.contains("resubscribing")),
        "{err}"
    );
}

#[test]
fn rust_log_alone_turns_events_on_by_target() {
    let server = RedisServer::start();
    let url = server.url();
    let out = run(keylatch()
        .env("RUST_LOG", "keylatch_lock=debug")
        .args(["exec", "vlog", "--url", &url, "--", "true"]));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let ev = events(&err);
    assert!(
        ev.iter().any(|l| l.contains("keylatch_lock")
            && l.contains("acquire")
            && l.contains("lock=vlog")),
        "{err}"
    );
    // Only the target asked for: the cluster crate's `connected` is not shown.
    assert!(!ev.iter().any(|l| l.contains("keylatch_cluster")), "{err}");
    // A directive that cannot be read is said once and skipped.
    let out = run(keylatch()
        .env("RUST_LOG", "=[bad,keylatch_lock=debug")
        .args(["exec", "vlog", "--url", &url, "--", "true"]));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("RUST_LOG: ignoring"), "{err}");
    assert!(events(&err).iter().any(|l| l.contains("acquire")), "{err}");
}
