//! Rows against one standalone server: no disturbance without locks (the
//! control), a pause longer than the lease, killed connections, restarts
//! with and without persistence, a lost script cache, a slow server.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use keylatch_harness::RedisServer;

use crate::history::Report;
use crate::row::{self, nap, Log, Workload};
use crate::{names, no_lock_outlives_its_lease, serial};

/// Runs a row on a fresh server started with `args`.
fn standalone(
    label: &str,
    args: &[&str],
    w: impl FnOnce(Workload) -> Workload,
    disturb: impl FnOnce(&mut RedisServer, &AtomicBool, &Log) + Send,
) -> Report {
    let _serial = serial();
    let mut server = RedisServer::builder()
        .args(args.iter().copied())
        .start()
        .expect("lock server");
    let resource = RedisServer::start();
    let w = w(Workload::new(names(label)));
    let url = server.url();
    let report = row::run(label, &url, &resource, &resource.url(), &w, |stop, log| {
        disturb(&mut server, stop, log);
    });
    if w.locking {
        no_lock_outlives_its_lease(&url, &w.names, w.lease);
    }
    report
}

#[test]
fn control_the_same_workload_without_locks_loses_updates() {
    let r = standalone(
        "no-locks",
        &[],
        |w| Workload {
            locking: false,
            disturbances: 0,
            ..w
        },
        |_, _, _| {},
    );
    assert!(
        r.overlaps > 0 && r.lost_updates_plain > 0,
        "the checker must see the races of unlocked holders: {r}"
    );
}

#[test]
fn a_server_paused_longer_than_the_lease() {
    let r = standalone(
        "pause",
        &[],
        |w| w,
        |server, stop, log| {
            while nap(stop, Duration::from_millis(3000)) {
                log.span(|| {
                    server.pause().expect("SIGSTOP");
                    std::thread::sleep(Duration::from_millis(2500));
                    server.resume().expect("SIGCONT");
                });
            }
        },
    );
    assert!(r.clean(), "{r}");
    assert!(r.losses > 0, "holders were told of their losses: {r}");
    // Each holder live at the pause learns of its loss by its local
    // deadline: at most one lease after the pause began (and slack for a
    // loaded machine).
    let p99 = r.lost_latency_p99.expect("losses after pauses");
    assert!(p99 <= Duration::from_millis(1500 + 1000), "{r}");
}

#[test]
fn connections_killed_under_load() {
    let r = standalone(
        "client-kill",
        &[],
        |w| w,
        |server, stop, log| {
            let mut kind = "normal";
            while nap(stop, Duration::from_millis(300)) {
                let killed = log.span(|| server.cli(&["CLIENT", "KILL", "TYPE", kind]));
                killed.expect("CLIENT KILL");
                kind = if kind == "normal" { "pubsub" } else { "normal" };
            }
        },
    );
    assert!(r.clean(), "{r}");
}

/// SHUTDOWN NOSAVE, then a new server on the same port and directory.
fn restart(server: &mut RedisServer) {
    // The connection closes as the server exits: an error here is expected.
    let _ = server.cli_timeout(&["SHUTDOWN", "NOSAVE"], Duration::from_secs(5));
    server.restart().expect("server back");
}

#[test]
fn restarts_of_a_server_that_persists_every_write() {
    let r = standalone(
        "restart-aof",
        &["--appendonly", "yes", "--appendfsync", "always"],
        |w| w,
        |server, stop, log| {
            while nap(stop, Duration::from_millis(1500)) {
                log.span(|| restart(server));
            }
        },
    );
    assert!(r.clean(), "{r}");
    assert!(r.disturbances > 0, "{r}");
}

#[test]
fn control_restarts_that_lose_the_data_are_caught_by_fencing() {
    let r = standalone(
        "restart-empty",
        &[],
        |w| w,
        |server, stop, log| {
            while nap(stop, Duration::from_millis(1500)) {
                log.span(|| restart(server));
            }
        },
    );
    // What a lock cannot promise when its server forgets it: the holds are
    // gone while their holders still believe in them. The fencing counter
    // starts again above every earlier token (server time), so a resource
    // that checks tokens loses nothing.
    assert!(r.losses > 0, "the restarts met holders, who were told: {r}");
    assert!(r.fenced_writes > 0, "{r}");
    assert_eq!(r.token_violations, 0, "{r}");
    assert_eq!(r.lost_updates_fenced, 0, "{r}");
    assert_eq!(r.resource_errors, 0, "{r}");
    assert_eq!(r.hangs, 0, "{r}");
    assert_eq!(r.waits_past_bound, 0, "{r}");
}

#[test]
fn the_script_cache_flushed_under_load() {
    let r = standalone(
        "script-flush",
        &[],
        |w| w,
        |server, stop, log| {
            while nap(stop, Duration::from_millis(200)) {
                log.span(|| server.cli(&["SCRIPT", "FLUSH"]))
                    .expect("SCRIPT FLUSH");
            }
        },
    );
    assert!(r.clean(), "{r}");
    assert_eq!(r.acquire_failures, 0, "no error surfaces: {r}");
}

#[test]
fn a_server_that_stalls_longer_than_the_request_timeout() {
    let r = standalone(
        "slow",
        keylatch_harness::debug_command_args(),
        |w| w,
        |server, stop, log| {
            while nap(stop, Duration::from_millis(3000)) {
                log.span(|| server.cli_timeout(&["DEBUG", "SLEEP", "2"], Duration::from_secs(10)))
                    .expect("DEBUG SLEEP");
            }
        },
    );
    assert!(r.clean(), "{r}");
}
