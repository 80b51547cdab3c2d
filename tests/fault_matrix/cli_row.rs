//! The CLI row, as it was measured from outside: 4 shells each run
//! `keylatch exec --wait 30s` over and over against a 6-node cluster, the
//! command a read-modify-write of a counter on another server, while one
//! disturbance a second rotates through a failover, a slot migration,
//! SCRIPT FLUSH on every node and CLIENT KILL on every node. Every run
//! must succeed (ride through the disturbances within its wait) and no
//! update may be lost.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use keylatch_harness::{cli_binary, FailoverMode, RedisCluster, RedisServer};

use crate::cluster_rows::{other_master, pair_for};
use crate::row::nap;
use crate::serial;

const SLOT: u16 = 6182;
const WORKERS: usize = 4;
/// Two rounds of the four disturbances at least.
const MIN_DISTURBANCES: usize = 8;

/// Runs per shell: 200 with `KEYLATCH_FAULT_FULL=1` (the measurement's
/// count), 25 by default.
fn runs() -> usize {
    match std::env::var("KEYLATCH_FAULT_FULL").as_deref() {
        Ok("1") => 200,
        _ => 25,
    }
}

/// Runs one `keylatch exec`, killed if it outlives its wait by a minute:
/// `Err` with what went wrong (exit code and stderr, or the hang).
fn exec_bounded(cmd: &mut Command) -> Result<(), String> {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let limit = std::time::Instant::now() + Duration::from_secs(90);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < limit => {
                std::thread::sleep(Duration::from_millis(10));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("hung: killed after 90 s".to_owned());
            }
        }
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    if status.success() {
        Ok(())
    } else {
        Err(format!("exit {:?}: {}", status.code(), err.trim()))
    }
}

#[test]
fn cli_exec_rides_through_one_disturbance_a_second() {
    let _serial = serial();
    let cluster = RedisCluster::start();
    let resource = RedisServer::start();
    let name = RedisCluster::key_for_slot(SLOT);
    let rmw = format!(
        "v=$({cli} -p {p} GET c); {cli} -p {p} SET c $((${{v:-0}} + 1)) >/dev/null",
        cli = cli_binary(),
        p = resource.port()
    );
    let stop = AtomicBool::new(false);
    // Each shell goes on until two rounds of the four disturbances are done.
    let seen = AtomicUsize::new(0);
    let injector_done = AtomicBool::new(false);
    let total = AtomicUsize::new(0);
    let mut failures: Vec<String> = Vec::new();
    let mut took: Vec<Duration> = Vec::new();
    let mut disturbances = 0;
    std::thread::scope(|s| {
        let shells: Vec<_> = (0..WORKERS)
            .map(|_| {
                let (name, rmw, url, seen, total, injector_done) =
                    (&name, &rmw, cluster.url(), &seen, &total, &injector_done);
                s.spawn(move || {
                    let mut failed = Vec::new();
                    let mut took = Vec::new();
                    let mut i = 0;
                    // Bounded however the injector fares (it may panic).
                    let give_up = std::time::Instant::now() + Duration::from_secs(600);
                    while (i < runs() || seen.load(Ordering::Relaxed) < MIN_DISTURBANCES)
                        && !injector_done.load(Ordering::Relaxed)
                        && std::time::Instant::now() < give_up
                    {
                        i += 1;
                        total.fetch_add(1, Ordering::Relaxed);
                        let started = std::time::Instant::now();
                        let out = exec_bounded(
                            Command::new(env!("CARGO_BIN_EXE_keylatch"))
                                .args(["exec", name, "--wait", "30s", "--url", &url, "--"])
                                .args(["sh", "-c", rmw]),
                        );
                        took.push(started.elapsed());
                        if started.elapsed() > Duration::from_secs(5) {
                            eprintln!("[cli-exec] a run took {:?}: {out:?}", started.elapsed());
                        }
                        if let Err(why) = &out {
                            failed.push(why.clone());
                        }
                    }
                    (failed, took)
                })
            })
            .collect();
        let injector = s.spawn(|| {
            /// Tells the shells the injector ended, however it ends.
            struct Done<'a>(&'a AtomicBool);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
            let _done = Done(&injector_done);
            let mut n = 0;
            while nap(&stop, Duration::from_millis(1000)) {
                let (master, replica) = pair_for(&cluster, SLOT);
                match n % 4 {
                    0 => {
                        cluster
                            .failover(replica, FailoverMode::Default)
                            .expect("failover");
                    }
                    1 => {
                        let to = other_master(&cluster, master);
                        cluster.move_slot(SLOT, master, to).expect("slot moved");
                    }
                    2 => {
                        for node in cluster.nodes() {
                            let _ = node.cli(&["SCRIPT", "FLUSH"]);
                        }
                    }
                    _ => {
                        for node in cluster.nodes() {
                            let _ = node.cli(&["CLIENT", "KILL", "TYPE", "normal"]);
                        }
                    }
                }
                n += 1;
                seen.store(n, Ordering::Relaxed);
            }
            n
        });
        for shell in shells {
            let (failed, times) = shell.join().expect("shell thread");
            failures.extend(failed);
            took.extend(times);
        }
        stop.store(true, Ordering::Relaxed);
        disturbances = injector.join().expect("injector");
    });
    let total = total.into_inner();
    let count: usize = resource
        .cli(&["GET", "c"])
        .expect("GET")
        .trim()
        .parse()
        .unwrap_or(0);
    took.sort_unstable();
    let at = |p: usize| took[(took.len() - 1) * p / 100];
    eprintln!(
        "[cli-exec] runs {total} | failed {} | counter {count} (lost updates {}) | \
         disturbances {disturbances} | run time p50 {:?} p99 {:?} max {:?}",
        failures.len(),
        total as i64 - count as i64,
        at(50),
        at(99),
        at(100),
    );
    assert!(
        failures.is_empty(),
        "{} of {total} runs failed: {failures:?}",
        failures.len()
    );
    assert_eq!(count, total, "lost updates");
    assert!(disturbances > 0);
}
