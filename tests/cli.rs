//! The `keylatch` binary against a real redis-server: `exec` exclusion
//! (from timestamps the commands write), exit codes, `--wait` timeouts,
//! lock loss, signals, `status --json` and `unlock --force`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use keylatch_harness::{RedisServer, TempDir};

/// The built binary, pointed at `server` only through `$KEYLATCH_URL`.
fn keylatch(server: &RedisServer) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_keylatch"));
    c.env("KEYLATCH_URL", server.url());
    c
}

fn run(server: &RedisServer, args: &[&str]) -> Output {
    keylatch(server).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Waits for a file the command writes once it runs (i.e. holds the lock).
fn wait_for(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            if s.ends_with('\n') {
                return s;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
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

#[test]
fn concurrent_execs_on_one_name_never_overlap() {
    let server = RedisServer::start();
    let dir = TempDir::new("keylatch-cli").unwrap();
    let log = dir.path().join("log");
    let log = log.to_str().unwrap();
    let children: Vec<Child> = (0..3)
        .map(|id| {
            let script = format!(
                "echo {id} start $(date +%s%N) >> {log}; sleep 0.2; echo {id} end $(date +%s%N) >> {log}"
            );
            spawn_exec(&server, "excl", &["--wait", "10s"], &script)
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
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&o).starts_with("keylatch: "),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    let o = run(&server, &["status", "x", "--url", "redis://127.0.0.1:1"]);
    assert_eq!(o.status.code(), Some(2));
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
    let json = stdout(&run(&server, &["status", "fq", "--json"]));
    assert!(json.contains(r#""type":"fair""#), "{json}");
    assert!(json.contains(r#""holders":{"h:1":2}"#), "{json}");
    assert!(json.contains(r#""waiters":["w:1","w:2"]"#), "{json}");
    let text = stdout(&run(&server, &["status", "fq"]));
    assert!(text.contains("2 fair-queue waiter(s)"), "{text}");

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
