//! The `keylatch` binary against a real redis-server: `exec` exclusion
//! (from timestamps the commands write), exit codes, `--wait` timeouts,
//! lock loss, signals, `status --json` and `unlock --force`; `bench` (table
//! and SVG); `-v` tracing output; and the same commands on a 6-node cluster
//! reached through several `--url` seeds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use keylatch_harness::{FailoverMode, Masters, RedisCluster, RedisServer, TempDir};

mod common;
use common::lines::Lines;
use common::{acl_user, stderr, stdout, Soon, NO_SUBSCRIBE};

/// The built binary, pointed at `server` only through `$KEYLATCH_URL`.
fn keylatch(server: &RedisServer) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_keylatch"));
    c.env("KEYLATCH_URL", server.url());
    c
}

fn run(server: &RedisServer, args: &[&str]) -> Output {
    keylatch(server).args(args).output().unwrap()
}

/// Waits for a file the command writes once it runs (i.e. holds the lock).
fn wait_for(path: &Path) -> String {
    Soon::new(Duration::from_secs(10), Duration::from_millis(10)).until_blocking(|| {
        std::fs::read_to_string(path)
            .ok()
            .filter(|s| s.ends_with('\n'))
            .ok_or_else(|| format!("{} never appeared", path.display()))
    })
}

/// The first fair waiter's `deadline_in_ms` in `status --json` output.
fn first_waiter_deadline(json: &str) -> i64 {
    json.split(r#""deadline_in_ms":"#)
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no waiter deadline in {json}"))
}

/// Starts `exec NAME -- sh -c SCRIPT` in the background.
fn spawn_exec(server: &RedisServer, name: &str, extra: &[&str], script: &str) -> Child {
    keylatch(server)
        .args(["exec", name])
        .args(extra)
        .args(["--", "sh", "-c", script])
        .spawn()
        .unwrap()
}

/// Three `exec`s of one lock name started at once, each through `exec`
/// (a fresh command with the lock name and `extra` options set): the
/// start/end timestamps their commands log never interleave.
fn assert_execs_never_overlap(exec: impl Fn(&str) -> Command, extra: &[&str]) {
    let dir = TempDir::new("keylatch-cli").unwrap();
    let log = dir.path().join("log");
    let log = log.to_str().unwrap();
    let children: Vec<Child> = (0..3)
        .map(|id| {
            let script = format!(
                "echo {id} start $(date +%s%N) >> {log}; sleep 0.2; echo {id} end $(date +%s%N) >> {log}"
            );
            exec("excl")
                .args(["--wait", "10s"])
                .args(extra)
                .args(["--", "sh", "-c", &script])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let text = std::fs::read_to_string(log).unwrap();
    let mut intervals = Vec::new();
    for id in 0..3 {
        let at = |what: &str| -> u128 {
            let prefix = format!("{id} {what} ");
            let line = text.lines().find(|l| l.starts_with(&prefix)).unwrap();
            line[prefix.len()..].parse().unwrap()
        };
        intervals.push((at("start"), at("end")));
    }
    intervals.sort();
    for w in intervals.windows(2) {
        assert!(w[0].1 <= w[1].0, "holds overlap: {w:?}\n{text}");
    }
}

#[test]
fn concurrent_execs_on_one_name_never_overlap() {
    let server = RedisServer::start();
    assert_execs_never_overlap(
        |name| {
            let mut c = keylatch(&server);
            c.args(["exec", name]);
            c
        },
        &[],
    );
}

#[test]
fn fair_execs_never_overlap_and_queue_where_status_shows_them() {
    let server = RedisServer::start();
    assert_execs_never_overlap(
        |name| {
            let mut c = keylatch(&server);
            c.args(["exec", name, "--fair"]);
            c
        },
        &[],
    );
    // A fair exec waiting behind a holder is in the queue, with a deadline.
    let dir = TempDir::new("keylatch-cli").unwrap();
    let ready = dir.path().join("ready");
    let mut holder = spawn_exec(
        &server,
        "fq-exec",
        &["--fair"],
        &format!("echo up > {}; sleep 2", ready.display()),
    );
    wait_for(&ready);
    let mut waiter = spawn_exec(&server, "fq-exec", &["--fair", "--wait", "20s"], "true");
    let json = Soon::new(Duration::from_secs(10), Duration::from_millis(20)).until_blocking(|| {
        let json = stdout(&run(&server, &["status", "fq-exec", "--json"]));
        if json.contains(r#""type":"fair""#) && json.contains(r#""deadline_in_ms":"#) {
            Ok(json)
        } else {
            Err(format!("no fair waiter yet: {json}"))
        }
    });
    assert!(json.contains(r#""state":"held""#), "{json}");
    // A keylatch waiter is shown with its liveness (purged within the 5 s
    // fair_waiter_timeout if it stops calling), not with the Redisson
    // deadline it keeps an allowance (300 s) ahead for Java waiters.
    assert!(json.contains(r#""client":"keylatch""#), "{json}");
    let deadline = first_waiter_deadline(&json);
    // Never above the timeout: the status read takes the server's clock
    // after the deadlines (Valkey 8.1 once answered 5,001 when it read the
    // clock first and the waiter renewed in between).
    assert!((0..=5_000).contains(&deadline), "{json}");
    assert!(holder.wait().unwrap().success());
    assert!(waiter.wait().unwrap().success());
    let json = stdout(&run(&server, &["status", "fq-exec", "--json"]));
    assert!(json.contains(r#""state":"free""#), "{json}");
    assert!(json.contains(r#""waiters":[]"#), "{json}");
}

#[test]
fn read_execs_share_write_execs_exclude_and_status_shows_them() {
    let server = RedisServer::start();
    // Writers alone never overlap.
    assert_execs_never_overlap(
        |name| {
            let mut c = keylatch(&server);
            c.args(["exec", name, "--write"]);
            c
        },
        &[],
    );
    let dir = TempDir::new("keylatch-cli").unwrap();
    let (r1, r2) = (dir.path().join("r1"), dir.path().join("r2"));
    let log = dir.path().join("log");
    let log = log.display();
    // Two readers hold at once: each waits until the other's file exists.
    let reader = |me: &Path, other: &Path, id: &str| {
        spawn_exec(
            &server,
            "rw-exec",
            &["--read", "--wait", "20s"],
            &format!(
                "echo up > {me}; i=0; while [ ! -e {other} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; \
                 [ -e {other} ] || exit 9; sleep 1; echo {id} end $(date +%s%N) >> {log}",
                me = me.display(),
                other = other.display()
            ),
        )
    };
    let mut a = reader(&r1, &r2, "r1");
    let mut b = reader(&r2, &r1, "r2");
    wait_for(&r1);
    wait_for(&r2);
    let json = stdout(&run(&server, &["status", "rw-exec", "--json"]));
    assert!(json.contains(r#""type":"read-write""#), "{json}");
    assert!(json.contains(r#""mode":"read""#), "{json}");
    assert_eq!(json.matches(r#""holds_ttl_ms":["#).count(), 2, "{json}");
    assert!(json.contains(r#""writer":null"#), "{json}");
    // A writer waits for both, and says so in the marker.
    let mut w = spawn_exec(
        &server,
        "rw-exec",
        &["--write", "--wait", "20s"],
        &format!("echo w start $(date +%s%N) >> {log}; echo $KEYLATCH_FENCING_TOKEN > {log}.token"),
    );
    let text = Soon::new(Duration::from_secs(10), Duration::from_millis(20)).until_blocking(|| {
        let text = stdout(&run(&server, &["status", "rw-exec"]));
        if text.contains("writer waiting") {
            Ok(text)
        } else {
            Err(format!("no waiting writer shown: {text}"))
        }
    });
    assert!(
        text.contains("(read-write)") && text.contains("reader "),
        "{text}"
    );
    assert!(a.wait().unwrap().success(), "reader 1 saw reader 2");
    assert!(b.wait().unwrap().success(), "reader 2 saw reader 1");
    assert!(w.wait().unwrap().success());
    let text = std::fs::read_to_string(dir.path().join("log")).unwrap();
    let at = |prefix: &str| -> u128 {
        let line = text.lines().find(|l| l.starts_with(prefix)).unwrap();
        line[prefix.len()..].parse().unwrap()
    };
    assert!(
        at("w start ") > at("r1 end ").max(at("r2 end ")),
        "the writer ran after both readers: {text}"
    );
    let token = std::fs::read_to_string(dir.path().join("log.token")).unwrap();
    assert!(
        token.trim().parse::<u64>().is_ok(),
        "a writer's token: {token}"
    );
    let json = stdout(&run(&server, &["status", "rw-exec", "--json"]));
    assert!(json.contains(r#""state":"free""#), "{json}");
    let o = run(&server, &["exec", "x", "--read", "--write", "--", "true"]);
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
}

#[test]
fn semaphore_execs_limit_concurrency_and_status_shows_the_permits() {
    let server = RedisServer::start();
    let o = run(
        &server,
        &["exec", "slots", "--semaphore", "1", "--", "true"],
    );
    assert_eq!(
        o.status.code(),
        Some(64),
        "missing semaphore: {}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("--permits"), "{}", stderr(&o));

    let dir = TempDir::new("keylatch-cli").unwrap();
    let log = dir.path().join("log");
    let log = log.display();
    let children: Vec<Child> = (0..4)
        .map(|id| {
            spawn_exec(
                &server,
                "slots",
                &["--semaphore", "1", "--permits", "2", "--wait", "20s"],
                &format!(
                    "echo {id} start $(date +%s%N) $KEYLATCH_PERMIT_IDS >> {log}; sleep 0.6; echo {id} end $(date +%s%N) >> {log}"
                ),
            )
        })
        .collect();
    // While two run, status shows two leased permits with their expiries.
    let json = Soon::new(Duration::from_secs(10), Duration::from_millis(20)).until_blocking(|| {
        let json = stdout(&run(&server, &["status", "slots", "--json"]));
        if json.matches(r#""expires_in_ms":"#).count() == 2 {
            Ok(json)
        } else {
            Err(format!("not two leased permits: {json}"))
        }
    });
    // (The count is read apart from the permits, so a hand-over between
    // the two reads may show it at 1: not checked here.)
    assert!(json.contains(r#""type":"expirable semaphore""#), "{json}");
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let text = std::fs::read_to_string(dir.path().join("log")).unwrap();
    // Events in time order: never more than two inside at once.
    let mut events: Vec<(u128, i32)> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[2].parse().unwrap(), if f[1] == "start" { 1 } else { -1 })
        })
        .collect();
    events.sort();
    let (mut inside, mut most) = (0, 0);
    for (_, d) in &events {
        inside += d;
        most = most.max(inside);
    }
    assert_eq!(most, 2, "two permits, two at once at most:\n{text}");
    assert!(
        text.lines()
            .filter(|l| l.contains("start"))
            .all(|l| l.split_whitespace().nth(3).is_some_and(|id| id.len() == 32)),
        "each command saw its permit id:\n{text}"
    );
    let json = stdout(&run(&server, &["status", "slots", "--json"]));
    assert!(json.contains(r#""value":"2""#), "all back: {json}");
}

#[test]
fn latch_from_the_shell() {
    let server = RedisServer::start();
    let o = run(&server, &["latch", "loaded", "--set", "2"]);
    assert_eq!((o.status.code(), stdout(&o).trim()), (Some(0), "2"));
    let o = run(&server, &["latch", "loaded", "--set", "5"]);
    assert_eq!(o.status.code(), Some(1), "set already");
    let o = run(
        &server,
        &["latch", "loaded", "--wait", "--timeout", "200ms"],
    );
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    let mut waiter = keylatch(&server)
        .args(["latch", "loaded", "--wait", "--timeout", "20s"])
        .spawn()
        .unwrap();
    let o = run(&server, &["latch", "loaded", "--count-down"]);
    assert_eq!(stdout(&o).trim(), "1");
    let o = run(&server, &["latch", "loaded", "--count"]);
    assert_eq!(stdout(&o).trim(), "1");
    let o = run(&server, &["latch", "loaded", "--count-down"]);
    assert_eq!(stdout(&o).trim(), "0");
    assert!(waiter.wait().unwrap().success(), "the waiter saw it open");
    let o = run(&server, &["latch", "loaded"]);
    assert_eq!(o.status.code(), Some(64), "no action is a usage error");
}

#[test]
fn redlock_execs_never_overlap_and_status_reads_several_names() {
    let masters = Masters::start(3);
    let urls = masters.urls().join(",");
    let dir = TempDir::new("keylatch-cli").unwrap();
    let log = dir.path().join("log");
    let log = log.display();
    let children: Vec<Child> = (0..3)
        .map(|id| {
            Command::new(env!("CARGO_BIN_EXE_keylatch"))
                // No --url server is needed: the masters are the RedLock's.
                .env("KEYLATCH_URL", "redis://127.0.0.1:1")
                .args(["exec", "rl-exec", "--redlock", &urls, "--wait", "20s", "--"])
                .args([
                    "sh",
                    "-c",
                    &format!(
                        "echo {id} start $(date +%s%N) >> {log}; sleep 0.2; echo {id} end $(date +%s%N) >> {log}; [ -z \"$KEYLATCH_FENCING_TOKEN\" ]"
                    ),
                ])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success(), "ran, and saw no fencing token");
    }
    let text = std::fs::read_to_string(dir.path().join("log")).unwrap();
    let mut intervals = Vec::new();
    for id in 0..3 {
        let at = |what: &str| -> u128 {
            let prefix = format!("{id} {what} ");
            let line = text.lines().find(|l| l.starts_with(&prefix)).unwrap();
            line[prefix.len()..].parse().unwrap()
        };
        intervals.push((at("start"), at("end")));
    }
    intervals.sort();
    for w in intervals.windows(2) {
        assert!(w[0].1 <= w[1].0, "RedLock holds overlap: {w:?}\n{text}");
    }
    let o = Command::new(env!("CARGO_BIN_EXE_keylatch"))
        .args([
            "exec",
            "x",
            "--redlock",
            "redis://127.0.0.1:1",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(64),
        "one URL is no RedLock: {}",
        stderr(&o)
    );

    // status of several names (a multi-lock's members): a JSON array.
    let server = RedisServer::start();
    let mut holder = spawn_exec(&server, "m-1", &[], "sleep 2");
    Soon::new(Duration::from_secs(10), Duration::from_millis(20)).until_blocking(|| {
        let json = stdout(&run(&server, &["status", "m-1", "m-2", "--json"]));
        if json.starts_with('[') && json.contains(r#""name":"m-1","state":"held""#) {
            assert!(json.contains(r#""name":"m-2","state":"free""#), "{json}");
            Ok(())
        } else {
            Err(format!("no array with m-1 held: {json}"))
        }
    });
    let text = stdout(&run(&server, &["status", "m-1", "m-2"]));
    assert!(
        text.contains("lock \"m-1\": held") && text.contains("lock \"m-2\": free"),
        "{text}"
    );
    assert!(holder.wait().unwrap().success());
}

#[test]
fn exit_code_passthrough_and_environment() {
    let server = RedisServer::start();
    let o = run(&server, &["exec", "codes", "--", "sh", "-c", "exit 7"]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    let o = run(
        &server,
        &[
            "exec",
            "codes",
            "--",
            "sh",
            "-c",
            "echo $KEYLATCH_LOCK_NAME $KEYLATCH_FENCING_TOKEN $KEYLATCH_LOCK_OWNER",
        ],
    );
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    let fields: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(fields.len(), 3, "{out}");
    assert_eq!(fields[0], "codes");
    assert!(fields[1].parse::<u64>().is_ok(), "{out}");
    assert!(fields[2].contains(':'), "{out}");
    // A command that cannot be found: 127, as shells say.
    let o = run(&server, &["exec", "codes", "--", "/nonexistent/cmd"]);
    assert_eq!(o.status.code(), Some(127));
    // A fixed lease that runs out stops the command: 76, within about the
    // lease plus the grace period.
    let t = Instant::now();
    let o = run(
        &server,
        &[
            "exec", "codes", "--lease", "300ms", "--grace", "100ms", "--", "sleep", "5",
        ],
    );
    assert_eq!(o.status.code(), Some(76), "{}", stderr(&o));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    // The lock was released each time.
    let o = run(&server, &["status", "codes", "--json"]);
    assert!(stdout(&o).contains(r#""state":"free""#), "{}", stdout(&o));
}

/// Several names: each name's fencing token, in the order given, in
/// KEYLATCH_FENCING_TOKENS (a multi-lock's members each have their own, so
/// KEYLATCH_FENCING_TOKEN is unset).
#[test]
fn several_names_give_each_fencing_token_in_the_order_given() {
    let server = RedisServer::start();
    let o = run(
        &server,
        &[
            "exec",
            "tok-b",
            "--",
            "sh",
            "-c",
            "echo $KEYLATCH_FENCING_TOKENS $KEYLATCH_FENCING_TOKEN",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let one: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(one.len(), 2, "one name: its token in both: {out}");
    assert_eq!(one[0], one[1], "{out}");
    let b: u64 = one[0].parse().unwrap();
    let o = run(
        &server,
        &[
            "exec",
            "tok-b",
            "tok-a",
            "--",
            "sh",
            "-c",
            "echo \"$KEYLATCH_FENCING_TOKENS\" \"[$KEYLATCH_FENCING_TOKEN]\"",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let fields: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(fields.len(), 2, "{out}");
    assert_eq!(fields[1], "[]", "no single token for several names: {out}");
    let tokens: Vec<u64> = fields[0].split(',').map(|t| t.parse().unwrap()).collect();
    assert_eq!(tokens.len(), 2, "{out}");
    // tok-b's counter goes on from its first hold; tok-a's is new.
    assert_eq!(tokens[0], b + 1, "tok-b first, as given: {out}");
    assert_ne!(tokens[1], b + 1, "{out}");
}

#[test]
fn wait_timeout_status_json_and_sigterm_release() {
    let server = RedisServer::start();
    let dir = TempDir::new("keylatch-cli").unwrap();
    let ready = dir.path().join("ready");
    let mut holder = spawn_exec(
        &server,
        "busy",
        &[],
        &format!(
            "echo $KEYLATCH_LOCK_OWNER > {}; exec sleep 10",
            ready.display()
        ),
    );
    let owner = wait_for(&ready).trim().to_owned();

    let t = Instant::now();
    let o = run(&server, &["exec", "busy", "--wait", "200ms", "--", "true"]);
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("busy") && err.contains("200ms"), "{err}");

    let o = run(&server, &["status", "busy", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let json = stdout(&o);
    assert!(
        json.trim().starts_with('{') && json.trim().ends_with('}'),
        "{json}"
    );
    assert!(json.contains(r#""name":"busy""#), "{json}");
    assert!(json.contains(r#""state":"held""#), "{json}");
    assert!(json.contains(r#""type":"reentrant""#), "{json}");
    assert!(
        json.contains(&format!(r#""holders":{{"{owner}":1}}"#)),
        "{json}"
    );
    assert!(json.contains(r#""waiters":[]"#), "{json}");

    // SIGTERM to keylatch: the command is stopped, the lock released.
    let st = Command::new("kill")
        .args(["-TERM", &holder.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(holder.wait().unwrap().code(), Some(143));
    let o = run(&server, &["status", "busy", "--json"]);
    let json = stdout(&o);
    assert!(json.contains(r#""state":"free""#), "{json}");
    assert!(json.contains(r#""holders":{}"#), "{json}");
}

#[test]
fn force_unlock_frees_a_held_lock_and_the_holder_stops() {
    let server = RedisServer::start();
    let dir = TempDir::new("keylatch-cli").unwrap();
    let ready = dir.path().join("ready");
    let mut holder = spawn_exec(
        &server,
        "stuck",
        &["--grace", "200ms"],
        &format!("echo up > {}; exec sleep 10", ready.display()),
    );
    wait_for(&ready);
    // Without --yes and with no "y" on stdin nothing happens.
    let o = keylatch(&server)
        .args(["unlock", "--force", "stuck"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&run(&server, &["status", "stuck", "--json"])).contains(r#""state":"held""#));

    let t = Instant::now();
    let o = run(&server, &["unlock", "--force", "--yes", "stuck"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&run(&server, &["status", "stuck", "--json"])).contains(r#""state":"free""#));
    // The holder notices the loss, stops its command, exits 76.
    assert_eq!(holder.wait().unwrap().code(), Some(76));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

/// Output into a pipe whose reader is gone (`keylatch exec --help | head
/// -1`) is dropped, never a panic.
#[test]
fn output_into_a_pipe_with_no_reader_is_dropped_without_a_panic() {
    let server = RedisServer::start();
    for args in [
        &["exec", "--help"][..],
        &["--help"],
        &["status", "nothing-here"],
        &["status", "nothing-here", "--json"],
    ] {
        // The write end of a pipe whose only reader (`true`) has exited:
        // every write to it fails with EPIPE. (A closed stdout would not
        // do: Rust's runtime reopens it on /dev/null.)
        let mut reader = Command::new("true").stdin(Stdio::piped()).spawn().unwrap();
        let pipe = reader.stdin.take().unwrap();
        reader.wait().unwrap();
        let o = keylatch(&server)
            .args(args)
            .stdout(Stdio::from(pipe))
            .output()
            .unwrap();
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
    }
}

#[test]
fn usage_and_connection_errors_exit_2_with_one_line() {
    let server = RedisServer::start();
    for args in [
        &["exec", "x"][..],
        &["exec", "x", "--wait", "soon", "--", "true"],
        &["status"],
        &["unlock", "x"],
        &["frobnicate"],
    ] {
        let o = run(&server, args);
        assert_eq!(o.status.code(), Some(64), "{args:?}");
        assert!(
            stderr(&o).starts_with("keylatch: "),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    let o = run(&server, &["status", "x", "--url", "redis://127.0.0.1:1"]);
    assert_eq!(o.status.code(), Some(69));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot connect to redis://127.0.0.1:1"),
        "{err}"
    );
    let o = run(&server, &["exec", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("75") && stdout(&o).contains("76"));
}

#[test]
fn ctrl_c_stops_the_command_and_releases() {
    let server = RedisServer::start();
    let dir = TempDir::new("keylatch-cli").unwrap();
    let ready = dir.path().join("ready");
    let mut holder = spawn_exec(
        &server,
        "intr",
        &[],
        &format!("echo up > {}; exec sleep 10", ready.display()),
    );
    wait_for(&ready);
    // A second exec waiting for the lock, interrupted while it waits.
    let mut waiter = keylatch(&server)
        .args(["exec", "intr", "--wait", "10s", "--", "true"])
        .spawn()
        .unwrap();
    // keylatch handles SIGINT from its first moments (before connecting);
    // this pause only has to outlast process start-up.
    std::thread::sleep(Duration::from_millis(500));
    for child in [&waiter, &holder] {
        let st = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
    }
    assert_eq!(waiter.wait().unwrap().code(), Some(130));
    assert_eq!(holder.wait().unwrap().code(), Some(130));
    let json = stdout(&run(&server, &["status", "intr", "--json"]));
    assert!(json.contains(r#""state":"free""#), "{json}");
}

#[test]
fn status_shows_fair_queue_waiters_and_other_types() {
    let server = RedisServer::start();
    server
        .cli(&["RPUSH", "redisson_lock_queue:{fq}", "w:1", "w:2"])
        .unwrap();
    server.cli(&["HSET", "fq", "h:1", "2"]).unwrap();
    server.cli(&["PEXPIRE", "fq", "60000"]).unwrap();
    // w:1's deadline 60 s after the server's now; w:2 has none.
    let time = server.cli(&["TIME"]).unwrap();
    let mut parts = time.split_whitespace().map(|p| p.parse::<i64>().unwrap());
    let now_ms = parts.next().unwrap() * 1000 + parts.next().unwrap() / 1000;
    server
        .cli(&[
            "ZADD",
            "redisson_lock_timeout:{fq}",
            &(now_ms + 60_000).to_string(),
            "w:1",
        ])
        .unwrap();
    let json = stdout(&run(&server, &["status", "fq", "--json"]));
    assert!(json.contains(r#""type":"fair""#), "{json}");
    assert!(json.contains(r#""holders":{"h:1":2}"#), "{json}");
    assert!(
        json.contains(r#""waiters":[{"owner":"w:1","deadline_in_ms":"#),
        "{json}"
    );
    assert!(
        json.contains(r#"{"owner":"w:2","deadline_in_ms":null,"client":"redisson"}]"#),
        "{json}"
    );
    let deadline = first_waiter_deadline(&json);
    assert!((50_000..=60_000).contains(&deadline), "{json}");
    let text = stdout(&run(&server, &["status", "fq"]));
    assert!(text.contains("2 fair-queue waiter(s)"), "{text}");
    assert!(text.contains("w:1  deadline in"), "{text}");
    assert!(text.contains("(Redisson's deadline)"), "{text}");
    assert!(text.contains("w:2  no deadline"), "{text}");

    server
        .cli(&["HSET", "rw", "mode", "read", "r:1", "1"])
        .unwrap();
    let json = stdout(&run(&server, &["status", "rw", "--json"]));
    assert!(json.contains(r#""type":"read-write""#), "{json}");
    assert!(json.contains(r#""mode":"read""#), "{json}");
    assert!(json.contains(r#""ttl_ms":-1"#), "{json}");

    server.cli(&["SET", "sem", "3"]).unwrap();
    let json = stdout(&run(&server, &["status", "sem", "--json"]));
    assert!(
        json.contains(r#""state":"other","type":"semaphore/latch""#),
        "{json}"
    );
    assert!(json.contains(r#""value":"3""#), "{json}");
}

/// A duration as `bench` prints it: `850ns`, `45.2µs`, `1.23ms`, `2.50s`.
fn parse_printed_duration(text: &str) -> Duration {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap();
    let (n, unit) = text.split_at(split);
    let n: f64 = n.parse().unwrap();
    let scale = match unit {
        "ns" => 1e-9,
        "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        other => panic!("unit {other:?} in {text:?}"),
    };
    Duration::from_secs_f64(n * scale)
}

/// Checks `bench`'s table: one row per scenario, each with operations and
/// a positive rate, and p50 ≤ p90 ≤ p99 ≤ max.
fn assert_bench_table(out: &str) {
    for prefix in [
        "a. uncontended pair",
        "b. distinct locks",
        "c. contended handoff",
    ] {
        let row = out
            .lines()
            .find(|l| l.starts_with(prefix) && l.contains("keylatch"))
            .unwrap_or_else(|| panic!("no {prefix:?} row in\n{out}"));
        // scenario (3 words), client, ops, unit, ops/s, p50, p90, p99, max, CPU/op
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells.len(), 12, "{row}");
        let ops: u64 = cells[4].parse().unwrap();
        assert!(ops > 0, "{row}");
        let rate: f64 = cells[6].trim_end_matches("/s").parse().unwrap();
        assert!(rate > 0.0, "{row}");
        let p: Vec<Duration> = cells[7..11]
            .iter()
            .map(|c| parse_printed_duration(c))
            .collect();
        assert!(p[0] > Duration::ZERO, "{row}");
        assert!(p[0] <= p[1] && p[1] <= p[2] && p[2] <= p[3], "{row}");
    }
}

/// Scale mode on a server already in use: it reports each phase, loses no
/// hold, and leaves the server as it found it (its keys deleted, someone
/// else's key untouched).
#[test]
fn bench_holds_reports_each_phase_and_leaves_no_key_behind() {
    let server = RedisServer::start();
    server.cli(&["SET", "someone-elses", "kept"]).unwrap();
    let o = run(
        &server,
        &[
            "bench",
            "--holds",
            "2000",
            "--rounds",
            "2",
            "--watchdog",
            "600ms",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("2000 watchdog holds"), "{out}");
    assert!(out.contains("acquire: 2000 held, 0 failed"), "{out}");
    assert!(out.contains("B per hold while held"), "{out}");
    assert!(out.contains(" 0 lost"), "{out}");
    assert!(out.contains("µs per renewed hold"), "{out}");
    assert!(out.contains("Redisson's LockTask renewal"), "{out}");
    assert_eq!(server.cli(&["DBSIZE"]).unwrap().trim(), "1", "{out}");
    assert_eq!(
        server.cli(&["GET", "someone-elses"]).unwrap().trim(),
        "kept"
    );
}

#[test]
fn bench_prints_three_scenarios_and_plots_one_curve_each() {
    let server = RedisServer::start();
    let dir = TempDir::new("keylatch-cli").unwrap();
    let svg = dir.path().join("cdf.svg");
    let o = Command::new(env!("CARGO_BIN_EXE_keylatch"))
        .env_remove("KEYLATCH_URL")
        .args([
            "bench",
            "--url",
            &server.url(),
            "--duration",
            "1s",
            "--clients",
            "8",
        ])
        .arg("--plot")
        .arg(&svg)
        .arg("--timeline")
        .arg(dir.path().join("timeline.svg"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("(standalone)"), "{out}");
    assert_bench_table(&out);
    // Progress: not a terminal here, so one plain line per scenario.
    let err = stderr(&o);
    assert_eq!(
        err.lines().filter(|l| l.starts_with("bench: ")).count(),
        3,
        "{err}"
    );
    assert!(!err.contains('\r'), "no redrawing into a log: {err:?}");
    let image = std::fs::read_to_string(&svg).unwrap();
    assert!(image.starts_with("<svg") && image.trim_end().ends_with("</svg>"));
    assert_eq!(image.matches("<path").count(), 3, "{image}");
    for label in [
        "a. uncontended pair",
        "b. distinct locks",
        "c. contended handoff",
    ] {
        assert!(image.contains(label), "legend lacks {label}");
    }
    assert!(image.contains(">99.9 %<"), "the percentile axis");
    // The timeline: a lane per contender (8), holds drawn.
    let timeline = std::fs::read_to_string(dir.path().join("timeline.svg")).unwrap();
    assert_eq!(timeline.matches("holds (").count(), 8, "{timeline}");
    assert!(timeline.contains("class=\"hold\""));
    assert!(out.contains("timeline: "), "{out}");

    // --cluster insists on a cluster: one line, exit 64.
    let o = run(
        &server,
        &["bench", "--cluster", &server.url(), "--duration", "1s"],
    );
    assert_eq!(o.status.code(), Some(64));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not a cluster"), "{err}");
    let o = run(&server, &["bench", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("--compare"));
}

#[test]
fn verbose_shows_the_polling_fallback_warning_and_quiet_does_not() {
    let server = RedisServer::start();
    // A user who may publish (its releases must) but not subscribe: a
    // waiter cannot have the unlock channel and falls back to polling,
    // which the library reports as a WARN event.
    let url = acl_user(&server, "nochan", NO_SUBSCRIBE);
    let dir = TempDir::new("keylatch-cli").unwrap();
    let (ready, go) = (dir.path().join("ready"), dir.path().join("go"));
    // Holds the lock until the test creates `go`.
    let mut holder = spawn_exec(
        &server,
        "vlock",
        &[],
        &format!(
            "echo up > {}; while [ ! -e {} ]; do sleep 0.05; done",
            ready.display(),
            go.display()
        ),
    );
    wait_for(&ready);
    let waiter = |verbose: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_keylatch"))
            .env_remove("KEYLATCH_URL")
            .args(verbose)
            .args([
                "exec", "vlock", "--wait", "10s", "--url", &url, "--", "echo", "ran",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // The server's ACL log shows when a waiter's SUBSCRIBE was refused, so
    // each waiter is known to have hit the fallback while the lock was held.
    let refused = || {
        Soon::new(Duration::from_secs(10), Duration::from_millis(20)).until_blocking(|| {
            let log = server.cli(&["ACL", "LOG"]).unwrap();
            log.contains("subscribe")
                .then_some(())
                .ok_or_else(|| "no refused SUBSCRIBE in the ACL log".to_owned())
        });
        server.cli(&["ACL", "LOG", "RESET"]).unwrap();
    };
    let loud = waiter(&["-v"]);
    refused();
    let quiet = waiter(&[]);
    refused();
    std::fs::write(&go, "").unwrap();
    let (loud, quiet) = (
        loud.wait_with_output().unwrap(),
        quiet.wait_with_output().unwrap(),
    );
    assert!(holder.wait().unwrap().success());
    assert_eq!(loud.status.code(), Some(0), "{}", stderr(&loud));
    assert_eq!(stdout(&loud), "ran\n", "the command's output is untouched");
    let err = stderr(&loud);
    let line = err
        .lines()
        .find(|l| l.contains("waiting by polling instead"))
        .unwrap_or_else(|| panic!("no polling warning with -v: {err:?}"));
    assert!(
        line.starts_with("keylatch [") && line.contains("WARN"),
        "{line}"
    );
    assert!(line.contains("lock=vlock"), "{line}");
    assert_eq!(quiet.status.code(), Some(0), "{}", stderr(&quiet));
    assert_eq!(stdout(&quiet), "ran\n");
    assert_eq!(stderr(&quiet), "", "silent without -v");
}

/// `keylatch SUB ARGS... --url seed1 --url seed2 --url seed3 [-- CMD...]`,
/// with no `$KEYLATCH_URL`: the cluster is found from several seeds.
fn on_cluster(seeds: &[String], sub: &[&str], command: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_keylatch"));
    c.env_remove("KEYLATCH_URL").args(sub);
    for s in seeds {
        c.args(["--url", s]);
    }
    if !command.is_empty() {
        c.arg("--").args(command);
    }
    c
}

/// One cluster for every cluster CLI check: it is heavy to build.
#[test]
fn cluster_exec_status_unlock_and_bench_through_several_seeds() {
    let cluster = RedisCluster::start();
    let seeds: Vec<String> = cluster.seed_urls().into_iter().take(3).collect();

    // exec: three concurrent holders of one name never overlap.
    // (The helper appends `--wait`, `--` and the command after the seeds.)
    assert_execs_never_overlap(|name| on_cluster(&seeds, &["exec", name], &[]), &[]);

    // status --json while held, unlock --force --yes, the holder stops (76).
    let dir = TempDir::new("keylatch-cli").unwrap();
    let ready = dir.path().join("ready");
    let script = format!(
        "echo $KEYLATCH_LOCK_OWNER > {}; exec sleep 10",
        ready.display()
    );
    let mut holder = on_cluster(
        &seeds,
        &["exec", "cl-stuck", "--grace", "200ms"],
        &["sh", "-c", &script],
    )
    .spawn()
    .unwrap();
    let owner = wait_for(&ready).trim().to_owned();
    let o = on_cluster(&seeds, &["status", "cl-stuck", "--json"], &[])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let json = stdout(&o);
    assert!(json.contains(r#""state":"held""#), "{json}");
    assert!(
        json.contains(&format!(r#""holders":{{"{owner}":1}}"#)),
        "{json}"
    );
    let o = on_cluster(&seeds, &["unlock", "--force", "--yes", "cl-stuck"], &[])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(holder.wait().unwrap().code(), Some(76));
    let json = stdout(
        &on_cluster(&seeds, &["status", "cl-stuck", "--json"], &[])
            .output()
            .unwrap(),
    );
    assert!(json.contains(r#""state":"free""#), "{json}");

    // bench --cluster: the same table, against the cluster.
    let mut bench = Command::new(env!("CARGO_BIN_EXE_keylatch"));
    bench.env_remove("KEYLATCH_URL").arg("bench");
    for s in &seeds[..2] {
        bench.args(["--cluster", s]);
    }
    let o = bench
        .args(["--duration", "1s", "--clients", "8"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("(cluster)"), "{out}");
    assert_bench_table(&out);

    // watch: locks on every master are found (SCAN on each), one JSON line
    // each.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let names: Vec<String> = (0..6).map(|i| format!("cw-{i}")).collect();
    let (locks, guards) = rt.block_on(async {
        let urls: Vec<&str> = seeds.iter().map(String::as_str).collect();
        let locks = keylatch_lock::Locks::connect_with(
            keylatch_cluster::ClientConfig::from_urls(&urls).unwrap(),
            keylatch_lock::LocksConfig::default(),
        )
        .await
        .unwrap();
        let mut guards = Vec::new();
        for n in &names {
            guards.push(locks.lock(n).acquire().await.unwrap());
        }
        (locks, guards)
    });
    let masters: std::collections::BTreeSet<_> = names
        .iter()
        .map(|n| {
            locks
                .client()
                .master_for_slot(keylatch_cluster::Client::slot_of(n.as_str()))
        })
        .collect();
    assert!(masters.len() > 1, "the names span masters: {masters:?}");
    let o = on_cluster(&seeds, &["watch", "cw-*", "--once", "--json"], &[])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 6, "{out}");
    for n in &names {
        assert!(
            out.contains(&format!(r#""name":"{n}","state":"held""#)),
            "{out}"
        );
    }
    rt.block_on(async {
        for g in guards {
            g.unlock().await.unwrap();
        }
    });

    elect_observed_through_a_failover(&cluster, &seeds, &dir);
}

/// `elect --observe` through a failover: the leader leads on across it
/// (the promoted replica has its hold, and renewal finds it there), then
/// steps down on SIGTERM; the next campaigner is elected with a higher
/// token. The observer's lines are printed (`--nocapture` shows them).
fn elect_observed_through_a_failover(cluster: &RedisCluster, seeds: &[String], dir: &TempDir) {
    let observer = Lines::start(on_cluster(seeds, &["elect", "--observe", "cl-elect"], &[]));
    observer.wait_for(" none");
    let ready_a = dir.path().join("ready-a");
    let script = format!("echo up > {}; exec sleep 60", ready_a.display());
    let mut a = on_cluster(
        seeds,
        &[
            "elect",
            "cl-elect",
            "--proclaim",
            "10.0.0.1:80",
            "--grace",
            "200ms",
        ],
        &["sh", "-c", &script],
    )
    .spawn()
    .unwrap();
    wait_for(&ready_a);
    observer.wait_for(r#"value="10.0.0.1:80""#);

    let master = cluster.master_for_slot(RedisCluster::slot_of("cl-elect"));
    let t = Instant::now();
    cluster
        .failover(cluster.replicas_of(master)[0], FailoverMode::Default)
        .unwrap();
    eprintln!("failover done in {:?}", t.elapsed());
    // Past a renewal (every ~3.3 s), which runs on the new master.
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        a.try_wait().unwrap().is_none(),
        "A still leads after the failover"
    );

    let ready_b = dir.path().join("ready-b");
    let go_b = dir.path().join("go-b");
    // B leads until the observer has seen it (at most 20 s): a tenure of a
    // few milliseconds may end before the observer reads the proclamation,
    // and then it shows nothing to see.
    let script = format!(
        "echo up > {}; i=0; while [ ! -e {} ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done",
        ready_b.display(),
        go_b.display()
    );
    let mut b = on_cluster(
        seeds,
        &["elect", "cl-elect", "--proclaim", "10.0.0.2:80"],
        &["sh", "-c", &script],
    )
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        std::fs::metadata(&ready_b).is_err(),
        "B waits while A leads"
    );
    let ok = Command::new("kill")
        .args(["-TERM", &a.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    assert_eq!(a.wait().unwrap().code(), Some(143), "A stopped by SIGTERM");
    observer.wait_for(r#"value="10.0.0.2:80""#);
    std::fs::write(&go_b, "go").unwrap();
    assert!(b.wait().unwrap().success(), "B elected, ran, resigned");
    std::thread::sleep(Duration::from_millis(300));
    let (code, lines) = observer.stop();
    eprintln!("elect --observe through a failover:\n{}", lines.join("\n"));
    assert_eq!(code, Some(0));
    let token = |value: &str| -> u64 {
        let line = lines.iter().find(|l| l.contains(value)).unwrap();
        line.split("token=")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(token("10.0.0.1:80") < token("10.0.0.2:80"), "{lines:#?}");
    assert!(lines.last().unwrap().ends_with(" none"), "{lines:#?}");
}

/// Found by an outside review: `exec --redlock … --lease D` scheduled no
/// stop before the lease ended (the command ran on 4.1 s beside the next
/// holder); and with a master down, exec exits 69 as its help now says.
mod redlock_exec {
    use std::process::{Command, Output, Stdio};
    use std::time::Duration;

    use super::common::{stderr, stdout};
    use keylatch_harness::{free_port, Masters};

    fn keylatch() -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_keylatch"));
        c.stdin(Stdio::null());
        c
    }

    /// Runs with a hard bound so a hang fails the test instead of blocking it.
    fn output_within(mut c: Command, limit: Duration) -> std::process::Output {
        let child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(limit) {
            Ok(o) => o.unwrap(),
            Err(_) => {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                panic!("keylatch did not finish within {limit:?}");
            }
        }
    }

    /// Holder A (fixed 2 s lease, ignores SIGTERM, would run 6 s) logs a
    /// heartbeat; B waits for the same lock and logs when it starts. A's last
    /// heartbeat must come before B's start.
    fn fixed_lease_overlap(extra: &[&str], url: &str) -> (u128, u128, String) {
        let dir = keylatch_harness::TempDir::new("review2-lease").unwrap();
        let log = dir.path().join("log");
        let log = log.to_str().unwrap().to_owned();
        let mut a = keylatch();
        a.env("KEYLATCH_URL", url)
            .args(["exec", "lease-overlap"])
            .args(extra)
            .args(["--lease", "2s", "--grace", "5s", "--", "sh", "-c"])
            .arg(format!(
                "trap '' TERM; i=0; while [ $i -lt 60 ]; do echo A $(date +%s%N) >> {log}; sleep 0.1; i=$((i+1)); done"
            ));
        let mut a = a
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // A holds it once its first heartbeat is there.
        for _ in 0..100 {
            if std::fs::read_to_string(&log)
                .map(|t| t.contains('A'))
                .unwrap_or(false)
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut b = keylatch();
        b.env("KEYLATCH_URL", url)
            .args(["exec", "lease-overlap"])
            .args(extra)
            .args(["--wait", "15s", "--", "sh", "-c"])
            .arg(format!("echo B $(date +%s%N) >> {log}"));
        let ob = output_within(b, Duration::from_secs(30));
        assert_eq!(ob.status.code(), Some(0), "B: {}", stderr(&ob));
        // A is done within lease + grace + slack.
        for _ in 0..200 {
            if a.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if a.try_wait().unwrap().is_none() {
            let _ = a.kill();
            panic!("A still running after 10 s");
        }
        let text = std::fs::read_to_string(&log).unwrap();
        let at = |who: &str| -> Vec<u128> {
            text.lines()
                .filter_map(|l| l.strip_prefix(who))
                .map(|n| n.trim().parse().unwrap())
                .collect()
        };
        let last_a = *at("A ").iter().max().unwrap();
        let b_start = at("B ")[0];
        (last_a, b_start, text)
    }

    #[test]
    fn redlock_fixed_lease_exec_is_stopped_before_the_next_holder() {
        let masters = Masters::start(3);
        let urls = masters.urls().join(",");
        let (last_a, b_start, text) =
            fixed_lease_overlap(&["--redlock", &urls], "redis://127.0.0.1:1");
        let overlap_ms = (last_a as i128 - b_start as i128) / 1_000_000;
        eprintln!("redlock: A's command ran on {overlap_ms} ms after B took the RedLock");
        assert!(
            last_a < b_start,
            "redlock: A's command ran on {overlap_ms} ms after B held the RedLock\n{text}"
        );
    }

    /// `exec --redlock` over `up` live masters and `down` ports nothing
    /// listens on: the outcome and the down masters' URLs.
    fn redlock_exec_with_masters_down(up: usize, down: usize, name: &str) -> (Output, Vec<String>) {
        let masters = Masters::start(up);
        let mut urls = masters.urls();
        let gone: Vec<String> = (0..down)
            .map(|_| format!("redis://127.0.0.1:{}", free_port().unwrap()))
            .collect();
        urls.extend(gone.iter().cloned());
        let mut c = keylatch();
        c.env("KEYLATCH_URL", "redis://127.0.0.1:1").args([
            "exec",
            name,
            "--redlock",
            &urls.join(","),
            "--wait",
            "3s",
            "--",
            "sh",
            "-c",
            "echo ran",
        ]);
        let o = output_within(c, Duration::from_secs(30));
        eprintln!(
            "code {:?}\nstdout: {}\nstderr: {}",
            o.status.code(),
            stdout(&o),
            stderr(&o)
        );
        (o, gone)
    }

    #[test]
    fn redlock_exec_with_one_of_three_masters_down_runs_on_the_other_two() {
        let (o, gone) = redlock_exec_with_masters_down(2, 1, "rl-minority");
        // A RedLock exists to survive a minority of masters down.
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(stdout(&o).contains("ran"), "the command ran");
        assert!(
            stderr(&o).contains(&gone[0]),
            "names the master that does not answer: {}",
            stderr(&o)
        );
    }

    #[test]
    fn redlock_exec_with_two_of_three_masters_down_exits_69() {
        let (o, gone) = redlock_exec_with_masters_down(1, 2, "rl-majority-down");
        assert_eq!(o.status.code(), Some(69), "{}", stderr(&o));
        assert!(!stdout(&o).contains("ran"), "the command did not run");
        for g in &gone {
            assert!(stderr(&o).contains(g.as_str()), "names {g}: {}", stderr(&o));
        }
    }
}

/// Outside review (session 25): the admin and inspection surface.
mod admin_surface_review {
    use super::*;
    use std::os::unix::ffi::OsStrExt as _;

    /// Runs `keylatch ARGS` against `server`, killed after `limit` (a hang
    /// is a failure, not a stuck test); `None` when it had to be killed.
    fn run_within(
        server: &RedisServer,
        args: &[&std::ffi::OsStr],
        limit: Duration,
    ) -> Option<Output> {
        let child = keylatch(server)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || drop(tx.send(child.wait_with_output())));
        match rx.recv_timeout(limit) {
            Ok(o) => Some(o.unwrap()),
            Err(_) => {
                // Ours: the child this test started.
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                let _ = rx.recv_timeout(Duration::from_secs(10));
                None
            }
        }
    }

    /// A command line with a byte that is no UTF-8 (a Latin-1 file name,
    /// say) in the command `exec` runs: passed through untouched, as any
    /// Unix tool passes `argv`; in a NAME: a usage error (64), one line.
    /// Never a panic (exit 101 with a Rust backtrace).
    #[test]
    fn arguments_that_are_not_utf8_never_panic() {
        let server = RedisServer::start();
        let latin1 = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
        let o = run_within(
            &server,
            &[
                "exec".as_ref(),
                "non-utf8".as_ref(),
                "--".as_ref(),
                "printf".as_ref(),
                "%s".as_ref(),
                latin1,
            ],
            Duration::from_secs(30),
        )
        .expect("exec finished");
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(o.stdout, b"caf\xe9.txt");
        for sub in ["status", "unlock", "watch"] {
            let mut args: Vec<&std::ffi::OsStr> = vec![sub.as_ref()];
            if sub == "unlock" {
                args.push(std::ffi::OsStr::new("--force"));
                args.push(std::ffi::OsStr::new("--yes"));
            }
            args.push(std::ffi::OsStr::from_bytes(b"lock-\xff"));
            let o = run_within(&server, &args, Duration::from_secs(30)).expect("finished");
            let err = stderr(&o);
            assert!(!err.contains("panicked"), "{sub}: {err}");
            assert_eq!(o.status.code(), Some(64), "{sub}: {err}");
        }
    }

    /// A `$KEYLATCH_URL` that is not UTF-8 is refused (64), not silently
    /// replaced by the default server.
    #[test]
    fn a_keylatch_url_that_is_not_utf8_is_refused() {
        let o = Command::new(env!("CARGO_BIN_EXE_keylatch"))
            .env(
                "KEYLATCH_URL",
                std::ffi::OsStr::from_bytes(b"redis://127.0.0.1:6\xff"),
            )
            .args(["status", "x"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    }

    /// `latch` on a name that holds no count, and a count no latch can
    /// hold: both are requests the name cannot serve / bad command lines,
    /// which keylatch exits 64 for (`keylatch --help`: "64 usage error (bad
    /// command line, or a request the name cannot serve)"; exec on such a
    /// name exits 64), not 70 ("the server answered with an error").
    #[test]
    fn latch_refusals_are_usage_errors_not_server_errors() {
        let server = RedisServer::start();
        server.cli(&["HSET", "a-hash", "f", "v"]).unwrap();
        server.cli(&["RPUSH", "a-list", "x"]).unwrap();
        let mut wrong = Vec::new();
        for args in [
            &["latch", "a-hash", "--count"][..],
            &["latch", "a-hash", "--count-down"],
            &["latch", "a-list", "--set", "3"],
            &["latch", "a-list", "--wait", "--timeout", "2s"],
            &["latch", "fresh", "--set", "9007199254740992"],
        ] {
            let o = run(&server, args);
            if o.status.code() != Some(64) {
                wrong.push(format!(
                    "{args:?}: exit {:?}: {}",
                    o.status.code(),
                    stderr(&o).trim()
                ));
            }
        }
        // The same name reached by exec: 64.
        let o = run(&server, &["exec", "a-list", "--", "true"]);
        assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
        assert!(wrong.is_empty(), "{wrong:#?}");
        assert_eq!(
            server.cli(&["TYPE", "fresh"]).unwrap().trim(),
            "none",
            "nothing was set"
        );
    }

    /// `elect --observe NAME` where NAME holds a list: `elect NAME` exits
    /// 64 at once naming what the key holds; the observer must not sit
    /// silent for ever, printing nothing on stdout ("reading again until
    /// it answers" — the server did answer).
    #[test]
    fn observing_an_election_on_a_name_that_is_no_lock_does_not_hang() {
        let server = RedisServer::start();
        server.cli(&["RPUSH", "not-an-election", "x"]).unwrap();
        let o = run(&server, &["elect", "not-an-election", "--", "true"]);
        assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
        let o = run_within(
            &server,
            &[
                "elect".as_ref(),
                "--observe".as_ref(),
                "not-an-election".as_ref(),
                "--json".as_ref(),
            ],
            Duration::from_secs(20),
        );
        let o = o.expect("elect --observe on a list printed nothing and never exited (20 s)");
        assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    }
}
