//! `keylatch exec` supervises the whole command (issue 28, part 1): the real
//! binary runs forking commands (`sh` with background jobs, a command that
//! ignores SIGTERM) under every mode, and real signals reach keylatch while
//! it waits and while the command runs. Checked from outside: the exit code
//! (128 + the signal, the command's own, 76 on a lost lock), that no process
//! of the command's group is alive once keylatch has exited, that no other
//! `exec` gets the lock while any of them still runs, and that the lock is
//! free right after.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use keylatch_harness::{Masters, RedisServer, TempDir};

mod common;
use common::terminal::Terminal;
use common::{stderr, Soon};

/// The built binary, pointed at `server`.
fn keylatch(server: &RedisServer) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_keylatch"));
    c.env("KEYLATCH_URL", server.url());
    c
}

fn signal(pid: u32, name: &str) {
    let st = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "kill -{name} {pid}");
}

/// `(state, pgrp)` of a process from `/proc`, `None` once it is gone.
fn stat(pid: u32) -> Option<(char, u32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    let mut f = rest.split_ascii_whitespace();
    let state = f.next()?.chars().next()?;
    f.next()?;
    Some((state, f.next()?.parse().ok()?))
}

/// Runs (exists and is not a zombie waiting for init to reap it).
fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|(s, _)| s != 'Z' && s != 'X')
}

/// Live processes in process group `group`.
fn group_alive(group: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| stat(p).is_some_and(|(s, g)| g == group && s != 'Z' && s != 'X'))
        .collect()
}

/// A forking command: the shell writes its own pid, then starts two
/// background jobs (one of them a subshell that would write to `late` if it
/// ever finished) and writes their pids, then says it is up. With
/// `ignore_term`, every process of it ignores SIGTERM, so only SIGKILL ends
/// it.
fn forking_script(dir: &Path, ignore_term: bool) -> String {
    let d = dir.display();
    let trap = if ignore_term { "trap '' TERM; " } else { "" };
    format!(
        "{trap}echo $$ > {d}/shell; \
         sleep 300 & echo $! >> {d}/pids; \
         (sleep 300; echo late >> {d}/late) & echo $! >> {d}/pids; \
         echo up > {d}/ready; wait; wait"
    )
}

/// The command's processes, once it is up: its shell (the group leader)
/// and the background jobs.
struct Tree {
    shell: u32,
    jobs: Vec<u32>,
    dir: PathBuf,
}

impl Tree {
    /// Waits for the command to come up; checks it leads its own group.
    fn wait_up(dir: &Path) -> Tree {
        let tree = Tree::read(dir);
        assert_eq!(stat(tree.shell).map(|s| s.1), Some(tree.shell), "own group");
        tree
    }

    fn read(dir: &Path) -> Tree {
        Soon::new(Duration::from_secs(15), Duration::from_millis(10)).until_blocking(|| {
            std::fs::read_to_string(dir.join("ready"))
                .ok()
                .filter(|s| s.ends_with('\n'))
                .map(|_| ())
                .ok_or_else(|| "the command never came up".to_owned())
        });
        let read = |f: &str| -> Vec<u32> {
            std::fs::read_to_string(dir.join(f))
                .unwrap()
                .lines()
                .map(|l| l.trim().parse().unwrap())
                .collect()
        };
        let tree = Tree {
            shell: read("shell")[0],
            jobs: read("pids"),
            dir: dir.to_owned(),
        };
        assert_eq!(tree.jobs.len(), 2);
        tree
    }

    /// Every process of the command is gone, and so is its whole group.
    fn assert_all_gone(&self, context: &str) {
        for &p in std::iter::once(&self.shell).chain(&self.jobs) {
            assert!(!alive(p), "{context}: pid {p} of the command still runs");
        }
        let left = group_alive(self.shell);
        assert!(left.is_empty(), "{context}: group members alive: {left:?}");
        assert!(
            !self.dir.join("late").exists(),
            "{context}: a background job ran on to its end"
        );
    }

    fn assert_all_alive(&self, context: &str) {
        for &p in std::iter::once(&self.shell).chain(&self.jobs) {
            assert!(alive(p), "{context}: pid {p} of the command died early");
        }
    }
}

/// One `exec` mode: its options, and the options of a rival that the hold
/// excludes (the same for exclusive modes; a writer against a reader).
struct Mode {
    label: &'static str,
    args: Vec<String>,
    rival: Vec<String>,
}

fn modes(masters: &Masters) -> Vec<Mode> {
    let s = |v: &[&str]| v.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    let redlock = vec!["--redlock".to_owned(), masters.urls().join(",")];
    vec![
        Mode {
            label: "plain",
            args: vec![],
            rival: vec![],
        },
        Mode {
            label: "fair",
            args: s(&["--fair"]),
            rival: s(&["--fair"]),
        },
        Mode {
            label: "read",
            args: s(&["--read"]),
            rival: s(&["--write"]),
        },
        Mode {
            label: "write",
            args: s(&["--write"]),
            rival: s(&["--read"]),
        },
        Mode {
            label: "semaphore",
            args: s(&["--semaphore", "1", "--permits", "1"]),
            rival: s(&["--semaphore", "1"]),
        },
        // A second name after NAME: a multi-lock of both.
        Mode {
            label: "several",
            args: s(&["member-b"]),
            rival: s(&["member-b"]),
        },
        Mode {
            label: "several-write",
            args: s(&["member-c", "--write"]),
            rival: s(&["member-c", "--read"]),
        },
        Mode {
            label: "redlock",
            args: redlock.clone(),
            rival: redlock,
        },
    ]
}

/// `exec NAME <args> --wait 0 -- true`: 0 when the lock was free.
fn try_now(server: &RedisServer, name: &str, args: &[String]) -> Output {
    keylatch(server)
        .args(["exec", name])
        .args(args)
        .args(["--wait", "0", "--", "true"])
        .output()
        .unwrap()
}

fn spawn_holder(
    server: &RedisServer,
    name: &str,
    args: &[String],
    extra: &[&str],
    script: &str,
) -> Child {
    keylatch(server)
        .args(["exec", name])
        .args(args)
        .args(extra)
        .args(["--", "sh", "-c", script])
        .spawn()
        .unwrap()
}

/// A rival `exec --wait 0` of the mode's rival kind exits `code` (75: the
/// lock is held; 0: it was free).
fn assert_rival(server: &RedisServer, name: &str, rival: &[String], code: i32, what: &str) {
    let o = try_now(server, name, rival);
    assert_eq!(o.status.code(), Some(code), "{what}: {}", stderr(&o));
}

/// Waits for keylatch to exit (bounded: a hang fails the test).
fn exit_code(child: &mut Child, within: Duration) -> Option<i32> {
    let until = Instant::now() + within;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code();
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("keylatch did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

const SIGNALS: [(&str, i32); 4] = [("TERM", 143), ("INT", 130), ("HUP", 129), ("QUIT", 131)];

#[test]
fn every_signal_in_every_mode_stops_the_whole_group_before_the_release() {
    let server = RedisServer::start();
    let masters = Masters::start(3);
    let mut n = 0;
    for mode in modes(&masters) {
        for (sig, code) in SIGNALS {
            // Every signal on the plain lock; one per other mode, in turn.
            if mode.label != "plain" && SIGNALS[n % 4].0 != sig {
                continue;
            }
            n += 1;
            let ctx = format!("{} / SIG{sig}", mode.label);
            let name = format!("sig-{}-{sig}", mode.label);
            let dir = TempDir::new("keylatch-sig").unwrap();
            let mut holder = spawn_holder(
                &server,
                &name,
                &mode.args,
                // Background jobs of a non-interactive shell ignore INT and
                // QUIT: those runs end by SIGKILL after the grace.
                &["--grace", "1s"],
                &forking_script(dir.path(), false),
            );
            let tree = Tree::wait_up(dir.path());
            assert_rival(
                &server,
                &name,
                &mode.rival,
                75,
                &format!("{ctx}: rival while held"),
            );

            signal(holder.id(), sig);
            assert_eq!(
                exit_code(&mut holder, Duration::from_secs(30)),
                Some(code),
                "{ctx}"
            );
            tree.assert_all_gone(&ctx);
            assert_rival(
                &server,
                &name,
                &mode.rival,
                0,
                &format!("{ctx}: rival after"),
            );
        }
    }
}

#[test]
fn a_command_that_ignores_the_signal_keeps_the_lock_until_sigkill_ends_its_group() {
    let server = RedisServer::start();
    let masters = Masters::start(3);
    for mode in modes(&masters) {
        let ctx = mode.label;
        let name = format!("stubborn-{ctx}");
        let dir = TempDir::new("keylatch-sig").unwrap();
        let mut holder = spawn_holder(
            &server,
            &name,
            &mode.args,
            &["--grace", "2s"],
            &forking_script(dir.path(), true),
        );
        let tree = Tree::wait_up(dir.path());
        signal(holder.id(), "TERM");
        // Within the grace period: the command ignores SIGTERM and runs on,
        // so the lock must still exclude everyone else.
        std::thread::sleep(Duration::from_millis(500));
        tree.assert_all_alive(ctx);
        assert_rival(
            &server,
            &name,
            &mode.rival,
            75,
            &format!("{ctx}: rival in grace"),
        );
        assert_eq!(
            exit_code(&mut holder, Duration::from_secs(30)),
            Some(143),
            "{ctx}"
        );
        tree.assert_all_gone(ctx);
        assert_rival(
            &server,
            &name,
            &mode.rival,
            0,
            &format!("{ctx}: rival after"),
        );
    }
}

#[test]
fn a_second_signal_in_the_grace_period_kills_at_once() {
    let server = RedisServer::start();
    let dir = TempDir::new("keylatch-sig").unwrap();
    let mut holder = spawn_holder(
        &server,
        "twice",
        &[],
        &["--grace", "120s"],
        &forking_script(dir.path(), true),
    );
    let tree = Tree::wait_up(dir.path());
    // Ignored by the command: the grace period starts.
    signal(holder.id(), "TERM");
    std::thread::sleep(Duration::from_millis(300));
    tree.assert_all_alive("after the first SIGTERM");
    signal(holder.id(), "TERM");
    // Far less than the 120 s grace: bounded only against a hang. The code
    // is the first signal's.
    assert_eq!(exit_code(&mut holder, Duration::from_secs(30)), Some(143));
    tree.assert_all_gone("second SIGTERM");
    assert_eq!(try_now(&server, "twice", &[]).status.code(), Some(0));
}

#[test]
fn a_lost_lock_stops_the_whole_group_with_exit_76() {
    let server = RedisServer::start();
    // The hold's key is the lock's name for the plain, fair and read-write
    // locks: deleting it behind the holder loses the lock.
    for (label, args) in [
        ("plain", vec![]),
        ("fair", vec!["--fair".to_owned()]),
        ("write", vec!["--write".to_owned()]),
    ] {
        let name = format!("lost-{label}");
        let dir = TempDir::new("keylatch-sig").unwrap();
        let mut holder = spawn_holder(
            &server,
            &name,
            &args,
            &["--grace", "1s"],
            &forking_script(dir.path(), true),
        );
        let tree = Tree::wait_up(dir.path());
        server.cli(&["DEL", &name]).unwrap();
        assert_eq!(
            exit_code(&mut holder, Duration::from_secs(30)),
            Some(76),
            "{label}"
        );
        tree.assert_all_gone(label);
    }
}

#[test]
fn a_command_that_exits_leaving_jobs_behind_has_them_stopped_and_keeps_its_code() {
    let server = RedisServer::start();
    let dir = TempDir::new("keylatch-sig").unwrap();
    let d = dir.path().display();
    let o = keylatch(&server)
        .args(["exec", "leaver", "--grace", "1s", "--", "sh", "-c"])
        .arg(format!(
            "echo $$ > {d}/shell; sleep 300 & echo $! >> {d}/pids; \
             (sleep 300; echo late >> {d}/late) & echo $! >> {d}/pids; echo up > {d}/ready; exit 7"
        ))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("process(es) in its group"),
        "{}",
        stderr(&o)
    );
    Tree::read(dir.path()).assert_all_gone("leftovers");
    assert_eq!(try_now(&server, "leaver", &[]).status.code(), Some(0));
}

#[test]
fn every_signal_while_waiting_exits_128_plus_n_and_takes_nothing() {
    let server = RedisServer::start();
    let dir = TempDir::new("keylatch-sig").unwrap();
    let mut holder = spawn_holder(
        &server,
        "queue",
        &[],
        &[],
        &forking_script(dir.path(), false),
    );
    let tree = Tree::wait_up(dir.path());
    for fair in [false, true] {
        for (sig, code) in SIGNALS {
            let mut waiter = keylatch(&server)
                .args(["exec", "queue", "--wait", "60s"])
                .args(fair.then_some("--fair"))
                .args(["--", "true"])
                .spawn()
                .unwrap();
            // keylatch handles these from before it connects: this pause
            // only has to outlast the process's start.
            std::thread::sleep(Duration::from_millis(300));
            signal(waiter.id(), sig);
            assert_eq!(
                exit_code(&mut waiter, Duration::from_secs(30)),
                Some(code),
                "waiting, SIG{sig}"
            );
        }
    }
    // The holder was not disturbed, and still excludes.
    tree.assert_all_alive("holder");
    assert_eq!(try_now(&server, "queue", &[]).status.code(), Some(75));
    signal(holder.id(), "TERM");
    assert_eq!(exit_code(&mut holder, Duration::from_secs(30)), Some(143));
    tree.assert_all_gone("holder");
}

#[test]
fn foreground_mode_signals_the_command_itself() {
    let server = RedisServer::start();
    let dir = TempDir::new("keylatch-sig").unwrap();
    let ready = dir.path().join("ready");
    let mut holder = keylatch(&server)
        .args(["exec", "fg", "--foreground", "--", "sh", "-c"])
        .arg(format!("echo $$ > {}; exec sleep 300", ready.display()))
        .spawn()
        .unwrap();
    let pid: u32 =
        Soon::new(Duration::from_secs(15), Duration::from_millis(10)).until_blocking(|| {
            std::fs::read_to_string(&ready)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| "not up".to_owned())
        });
    // In keylatch's own group, not one of its own.
    assert_eq!(stat(pid).map(|s| s.1), stat(holder.id()).map(|s| s.1));
    signal(holder.id(), "TERM");
    assert_eq!(exit_code(&mut holder, Duration::from_secs(30)), Some(143));
    assert!(!alive(pid));
    assert_eq!(try_now(&server, "fg", &[]).status.code(), Some(0));
}

#[test]
fn a_stopped_command_is_continued_so_the_signal_ends_it_before_the_grace() {
    let server = RedisServer::start();
    let dir = TempDir::new("keylatch-sig").unwrap();
    // The shell stops itself (as a job that read the terminal would be).
    let script = format!(
        "{}; kill -STOP $$; wait",
        forking_script(dir.path(), false).replace("; wait; wait", "")
    );
    let mut holder = spawn_holder(&server, "stopped", &[], &["--grace", "120s"], &script);
    let tree = Tree::wait_up(dir.path());
    Soon::new(Duration::from_secs(10), Duration::from_millis(10)).until_blocking(|| {
        (stat(tree.shell).map(|s| s.0) == Some('T'))
            .then_some(())
            .ok_or_else(|| "the shell never stopped".to_owned())
    });
    signal(holder.id(), "TERM");
    // Well before the 120 s grace: SIGCONT after SIGTERM lets it act.
    assert_eq!(exit_code(&mut holder, Duration::from_secs(30)), Some(143));
    tree.assert_all_gone("stopped");
}

/// In a real terminal (tmux): a command that reads the terminal is a
/// background job in its own group, so it is stopped, and keylatch says
/// so; Ctrl-C still ends it at once. With --foreground it reads the line.
#[test]
fn in_a_terminal_a_reading_command_is_reported_and_foreground_reads() {
    let Some(term) = Terminal::start("exec_signals", 200, 30) else {
        return;
    };
    let server = RedisServer::start();
    let bin = env!("CARGO_BIN_EXE_keylatch");
    term.line(&format!(
        "KEYLATCH_URL={} {bin} exec tty -- sh -c 'read a; echo got $a'; echo EXIT=$?",
        server.url()
    ));
    term.shows("the command is stopped");
    term.keys(&["C-c"]);
    term.shows("EXIT=130");
    term.line(&format!(
        "clear; KEYLATCH_URL={} {bin} exec tty --foreground -- sh -c 'read a; echo got $a'; echo EXIT2=$?",
        server.url()
    ));
    std::thread::sleep(Duration::from_millis(500));
    term.line("hello");
    term.shows("got hello");
    term.shows("EXIT2=0");
}

/// The write end of a pipe whose only reader has exited: every write to it
/// fails (EPIPE), as keylatch's stderr does once a terminal hangs up (EIO)
/// or the reader of `2>&1 | head -1` is gone.
fn dead_pipe() -> std::process::Stdio {
    let mut reader = Command::new("true")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pipe = reader.stdin.take().unwrap();
    reader.wait().unwrap();
    std::process::Stdio::from(pipe)
}

/// keylatch's own messages ("got SIGTERM; …", "lost while …") cannot be
/// written: it still stops the whole group, releases, and exits with the
/// documented code (a panic on the failed write used to end keylatch with
/// 101 and leave the command running, the lock unrenewed).
#[test]
fn with_stderr_gone_a_signal_and_a_loss_still_stop_the_group_and_release() {
    let server = RedisServer::start();
    for (label, stop, code) in [("signal", "TERM", 143), ("loss", "", 76)] {
        let name = format!("nostderr-{label}");
        let dir = TempDir::new("keylatch-sig").unwrap();
        let mut holder = keylatch(&server)
            .args(["exec", &name, "--grace", "1s", "--", "sh", "-c"])
            .arg(forking_script(dir.path(), false))
            .stderr(dead_pipe())
            .spawn()
            .unwrap();
        let tree = Tree::wait_up(dir.path());
        if stop.is_empty() {
            server.cli(&["DEL", &name]).unwrap();
        } else {
            signal(holder.id(), stop);
        }
        assert_eq!(
            exit_code(&mut holder, Duration::from_secs(30)),
            Some(code),
            "{label}"
        );
        tree.assert_all_gone(label);
        assert_eq!(
            try_now(&server, &name, &[]).status.code(),
            Some(0),
            "{label}"
        );
    }
    // Failures before the command runs keep their codes too.
    let o = keylatch(&server)
        .args(["exec", "nostderr-x", "--", "no-such-command-here"])
        .stderr(dead_pipe())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(127));
    let o = keylatch(&server)
        .args(["exec", "nostderr-x", "--bogus", "--", "true"])
        .stderr(dead_pipe())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(64));
}

/// `--redlock` holds its members under exec's 10 s watchdog lease, as every
/// other mode does; a multi-lock's loss names every member; an empty name
/// is a usage error.
#[test]
fn redlock_lease_multi_lock_loss_message_and_an_empty_name() {
    let server = RedisServer::start();
    let masters = Masters::start(3);
    let dir = TempDir::new("keylatch-sig").unwrap();
    let mut holder = spawn_holder(
        &server,
        "rl-lease",
        &["--redlock".to_owned(), masters.urls().join(",")],
        &[],
        &forking_script(dir.path(), false),
    );
    let tree = Tree::wait_up(dir.path());
    for i in 0..3 {
        let ttl: i64 = masters
            .get(i)
            .cli(&["PTTL", "rl-lease"])
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!((1..=10_000).contains(&ttl), "master {i}: PTTL {ttl}");
    }
    signal(holder.id(), "TERM");
    assert_eq!(exit_code(&mut holder, Duration::from_secs(30)), Some(143));
    tree.assert_all_gone("redlock");

    let dir = TempDir::new("keylatch-sig").unwrap();
    let holder = keylatch(&server)
        .args(["exec", "ml-a", "ml-b", "ml-c", "--", "sh", "-c"])
        .arg(forking_script(dir.path(), false))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let tree = Tree::wait_up(dir.path());
    server.cli(&["DEL", "ml-c"]).unwrap();
    let o = holder.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(76));
    let err = stderr(&o);
    assert!(
        err.contains(r#"locks "ml-a", "ml-b", "ml-c" lost"#),
        "{err}"
    );
    tree.assert_all_gone("multi-lock");

    let o = keylatch(&server)
        .args(["exec", "", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
}

/// A fixed `--lease` ends for sure: the stop begins a grace before its
/// end, so SIGKILL has ended a command that ignores SIGTERM by the time
/// another `exec` can take the lock (it used to begin only at the end, so
/// the command overlapped the next holder by up to the grace). The rival's
/// own command checks, while it holds the lock, that none of the first
/// command's processes runs.
#[test]
fn a_fixed_lease_stops_the_command_before_the_lock_can_pass_on() {
    let server = RedisServer::start();
    let dir = TempDir::new("keylatch-sig").unwrap();
    let mut holder = spawn_holder(
        &server,
        "fixed",
        &[],
        &["--lease", "2s", "--grace", "1s"],
        &forking_script(dir.path(), true),
    );
    let tree = Tree::wait_up(dir.path());
    let pids: Vec<String> = std::iter::once(tree.shell)
        .chain(tree.jobs.iter().copied())
        .map(|p| p.to_string())
        .collect();
    let check = format!(
        "for p in {}; do s=$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null); \
         if [ -n \"$s\" ] && [ \"$s\" != Z ]; then echo \"pid $p runs ($s)\"; exit 9; fi; done",
        pids.join(" ")
    );
    let until = Instant::now() + Duration::from_secs(20);
    let rival = loop {
        let o = keylatch(&server)
            .args(["exec", "fixed", "--wait", "0", "--", "sh", "-c", &check])
            .output()
            .unwrap();
        if o.status.code() != Some(75) || Instant::now() > until {
            break o;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        rival.status.code(),
        Some(0),
        "the next holder saw the first command: {} {}",
        String::from_utf8_lossy(&rival.stdout),
        stderr(&rival)
    );
    assert_eq!(exit_code(&mut holder, Duration::from_secs(30)), Some(76));
    tree.assert_all_gone("fixed lease");
}
