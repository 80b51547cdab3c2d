#![allow(clippy::unwrap_used, clippy::expect_used)]
//! What is left on the server after a keylatch process (the CLI, or a
//! program using the library) exits at an awkward moment (review 37, an
//! outside tester): an exec interrupted while its try is in flight, a
//! RedLock round dropped mid-way, a library user's wait or unlock dropped
//! before its reply, then `Locks::settle` and the runtime's end. Eleven
//! cases here left a hold or permits behind, held by nobody for a lease,
//! until `settle` waited for late replies' handlers (`lock::Unanswered`: a
//! barrier queued behind the abandoned acquire) and for cancelled unlocks;
//! the fair and read first tries and the cancelled releases of reads,
//! permits and multi-locks passed before and stay as the same check of
//! those kinds.
//!
//! A server stopped with SIGSTOP keeps what a client sent in its socket
//! buffer and runs it once continued (unlike `CLIENT PAUSE`, which drops
//! the postponed command of a client whose connection closed): that is a
//! slow server or network, with a try "in flight" at the moment of exit.
//! Nothing here depends on the server's version: Redis 7.0 runs it in CI.

use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use keylatch_harness::{Masters, RedisServer, TempDir};
use keylatch_lock::{Locks, LocksConfig};

mod common;
use common::{stderr, Soon};

// ---------------------------------------------------------------- helpers

fn keylatch(url: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_keylatch"));
    c.env("KEYLATCH_URL", url);
    c
}

fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "kill -{sig} {pid}");
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
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits for a file a command writes once it runs (i.e. holds the lock).
fn wait_for(path: &Path) -> String {
    Soon::new(Duration::from_secs(15), Duration::from_millis(5)).until_blocking(|| {
        std::fs::read_to_string(path)
            .ok()
            .filter(|s| s.ends_with('\n'))
            .ok_or_else(|| format!("{} never appeared", path.display()))
    })
}

/// `exec NAMES MODE --wait 0 -- true`: 0 when free at once, 75 when held.
fn try_now(url: &str, names: &[&str], mode: &[&str]) -> Output {
    keylatch(url)
        .arg("exec")
        .args(names)
        .args(mode)
        .args(["--wait", "0", "--", "true"])
        .output()
        .unwrap()
}

/// How long until the next exec of that mode gets in (at most 30 s).
fn time_to_acquire(url: &str, names: &[&str], mode: &[&str]) -> Duration {
    let t = Instant::now();
    let o = keylatch(url)
        .arg("exec")
        .args(names)
        .args(mode)
        .args(["--wait", "30s", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    t.elapsed()
}

/// Every key of the server with its type and PTTL, for messages.
fn dump(server: &RedisServer) -> String {
    let keys = server.cli(&["KEYS", "*"]).unwrap();
    let mut out = String::new();
    for k in keys.lines().filter(|k| !k.is_empty()) {
        let ty = server.cli(&["TYPE", k]).unwrap();
        let pttl = server.cli(&["PTTL", k]).unwrap();
        out.push_str(&format!("  {k} ({}, pttl {})\n", ty.trim(), pttl.trim()));
    }
    out
}

/// The waiter registry, fair queue and writers-waiting entries of `name`.
fn places(server: &RedisServer, name: &str) -> (u64, u64, u64, u64) {
    let n = |args: &[&str]| -> u64 { server.cli(args).unwrap().trim().parse().unwrap_or(0) };
    (
        n(&["ZCARD", &format!("keylatch_lock_waiters:{{{name}}}")]),
        n(&["LLEN", &format!("redisson_lock_queue:{{{name}}}")]),
        n(&["ZCARD", &format!("redisson_lock_timeout:{{{name}}}")]),
        n(&["ZCARD", &format!("{{{name}}}:rwlock_writers_waiting")]),
    )
}

/// An exec holding `names` in `mode` for a fixed `lease`, then SIGKILLed
/// with its command: the hold stays, released by nobody, until the lease
/// ends.
fn orphan_hold(url: &str, names: &[&str], mode: &[&str], lease: &str, dir: &Path) {
    let ready = dir.join(format!("ready-{}", names[0]));
    let _ = std::fs::remove_file(&ready);
    let mut holder = keylatch(url)
        .arg("exec")
        .args(names)
        .args(mode)
        .args(["--lease", lease, "--grace", "1s", "--", "sh", "-c"])
        .arg(format!("echo $$ > {}; exec sleep 60", ready.display()))
        .spawn()
        .unwrap();
    let pid: u32 = wait_for(&ready).trim().parse().unwrap();
    holder.kill().unwrap();
    holder.wait().unwrap();
    signal(pid, "KILL");
}

/// Milliseconds until lock `name`'s hold expires (server PTTL).
fn pttl(server: &RedisServer, name: &str) -> i64 {
    server.cli(&["PTTL", name]).unwrap().trim().parse().unwrap()
}

/// Milliseconds until the first leased permit of semaphore `name` expires
/// (server time).
fn permit_left(server: &RedisServer, name: &str) -> i64 {
    let script = "local s = redis.call('zrange', KEYS[1], 0, 0, 'withscores') \
                  if not s[2] then return -1 end \
                  local t = redis.call('time') \
                  return tonumber(s[2]) - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))";
    let key = format!("{{{name}}}:timeout");
    server
        .cli(&["EVAL", script, "1", &key])
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn sleep_ms(ms: i64) {
    if ms > 0 {
        std::thread::sleep(Duration::from_millis(ms.unsigned_abs()));
    }
}

const SIGS: [(&str, i32); 3] = [("INT", 130), ("TERM", 143), ("HUP", 129)];

// ------------------------------------------- CLI: a try in flight at exit

/// One CLI mode: the names, the mode of the orphaned holder, the waiter's.
struct Mode<'a> {
    label: &'static str,
    names: &'a [&'a str],
    holder: &'a [&'a str],
    waiter: &'a [&'a str],
}

/// An exec waits behind an orphaned hold (its holder was SIGKILLed) whose
/// lease is about to end: its next try goes out just as the lease ends. The
/// server is stopped 400 ms before that (the try sits in its socket), the
/// waiter gets `sig` 400 ms after it, and the server is continued 500 ms
/// later, well within the 3 s exec settles for after a signal. Then: nothing
/// may be held, queued or registered, and the next exec gets in at once.
fn in_flight_case(
    server: &RedisServer,
    m: &Mode<'_>,
    sig: (&str, i32),
    dir: &Path,
    measure: bool,
) -> Vec<String> {
    let url = server.url();
    let mut problems = Vec::new();
    orphan_hold(&url, m.names, m.holder, "4s", dir);
    let mut waiter = keylatch(&url)
        .arg("exec")
        .args(m.names)
        .args(m.waiter)
        .args(["--wait", "30s", "--", "true"])
        .spawn()
        .unwrap();
    let semaphore = m.holder.contains(&"--semaphore");
    let left = if semaphore {
        permit_left(server, m.names[0])
    } else {
        pttl(server, m.names[0])
    };
    assert!(
        left > 1500,
        "{}: the orphan hold has {left} ms left",
        m.label
    );
    sleep_ms(left - 400);
    server.pause().unwrap();
    sleep_ms(800);
    signal(waiter.id(), sig.0);
    let t = Instant::now();
    sleep_ms(500);
    server.resume().unwrap();
    let code = exit_code(&mut waiter, Duration::from_secs(20));
    let exited_after = t.elapsed();
    if code != Some(sig.1) {
        problems.push(format!("waiter exited {code:?}, expected {}", sig.1));
    }
    sleep_ms(300);
    let state = dump(server);
    let (reg, queue, timeouts, writers) = places(server, m.names[0]);
    if reg + queue + timeouts + writers > 0 {
        problems.push(format!(
            "places left: registry {reg}, fair queue {queue}/{timeouts}, writers waiting {writers}"
        ));
    }
    let o = try_now(&url, m.names, m.waiter);
    if o.status.code() != Some(0) {
        let took = if measure {
            format!("{:?}", time_to_acquire(&url, m.names, m.waiter))
        } else {
            "(not measured)".to_owned()
        };
        problems.push(format!(
            "next `exec {} {} --wait 0` exited {:?} ({}); a waiting exec got in only after {took}; keys then:\n{state}",
            m.names.join(" "),
            m.waiter.join(" "),
            o.status.code(),
            stderr(&o).trim(),
        ));
    } else {
        // A second one: a registration left behind is granted the lock
        // by the first one's release.
        let o = try_now(&url, m.names, m.waiter);
        if o.status.code() != Some(0) {
            problems.push(format!(
                "second exec --wait 0 exited {:?} ({}); keys:\n{}",
                o.status.code(),
                stderr(&o).trim(),
                dump(server)
            ));
        }
    }
    eprintln!(
        "{} SIG{}: waiter exited {code:?} {exited_after:?} after the signal; problems: {problems:?}",
        m.label, sig.0
    );
    problems
}

/// `exec --semaphore`: a signal while the permit try is
/// in flight; `acquire_permits` relies on the late reply's handler, which
/// `settle` does not wait for until the reply has come.
#[test]
fn semaphore_exec_interrupted_with_its_try_in_flight_leaves_no_permit_leased() {
    let server = RedisServer::start();
    let dir = TempDir::new("rev37").unwrap();
    let mut all = Vec::new();
    for (i, sig) in SIGS.iter().enumerate().take(2) {
        let name = format!("if-sem-{i}");
        let names = [name.as_str()];
        let m = Mode {
            label: "semaphore",
            names: &names,
            holder: &["--semaphore", "1", "--permits", "1"],
            waiter: &["--semaphore", "1"],
        };
        for p in in_flight_case(&server, &m, *sig, dir.path(), i == 0) {
            all.push(format!("[semaphore SIG{}] {p}", sig.0));
        }
    }
    assert!(all.is_empty(), "{}", all.join("\n"));
}

/// `exec --redlock`: the masters stop
/// just before the orphaned RedLock's lease ends, and the waiter gets SIGINT
/// 150 ms later, while a round's tries sit unanswered (each master's bound
/// is 200 ms, the pause between rounds under 200 ms). The masters continue
/// 500 ms after the signal, within the 3 s `RedLock::settle` allows.
#[test]
fn redlock_exec_interrupted_mid_round_leaves_no_member_held() {
    let masters = Masters::start(3);
    let urls = masters.urls().join(",");
    let url0 = masters.get(0).url();
    let dir = TempDir::new("rev37").unwrap();
    let mut left_held = Vec::new();
    let n = 4;
    for i in 0..n {
        let name = format!("rl-if-{i}");
        let mode = ["--redlock", urls.as_str()];
        orphan_hold(&url0, &[name.as_str()], &mode, "4s", dir.path());
        let mut waiter = keylatch(&url0)
            .args([
                "exec",
                name.as_str(),
                "--redlock",
                urls.as_str(),
                "--wait",
                "30s",
                "--",
                "true",
            ])
            .spawn()
            .unwrap();
        let left = pttl(masters.get(0), &name);
        assert!(left > 1500, "{left}");
        sleep_ms(left - 300);
        for m in masters.iter() {
            m.pause().unwrap();
        }
        sleep_ms(150);
        signal(waiter.id(), "INT");
        sleep_ms(500);
        for m in masters.iter() {
            m.resume().unwrap();
        }
        let code = exit_code(&mut waiter, Duration::from_secs(20));
        assert_eq!(code, Some(130));
        sleep_ms(300);
        let held: Vec<String> = masters
            .iter()
            .map(|m| {
                format!(
                    "{}:{}",
                    m.cli(&["EXISTS", &name]).unwrap().trim(),
                    m.cli(&["PTTL", &name]).unwrap().trim()
                )
            })
            .collect();
        let o = try_now(&url0, &[name.as_str()], &mode);
        eprintln!(
            "redlock {i}: per master (exists:pttl) {held:?}; next exec --wait 0 exited {:?}",
            o.status.code()
        );
        if o.status.code() != Some(0) {
            left_held.push(format!(
                "{name}: held on masters (exists:pttl) {held:?}; next exec --wait 0 exited {:?}: {}",
                o.status.code(),
                stderr(&o).trim()
            ));
        }
    }
    assert!(
        left_held.is_empty(),
        "{} of {n} interrupted RedLock execs left the lock held:\n{}",
        left_held.len(),
        left_held.join("\n")
    );
}

// --------------------------------------------- library: drop, settle, exit

/// The kinds of waits a library user can drop.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Lock,
    Fair,
    Write,
    Read,
    Semaphore,
    Multi,
    Leader,
}

async fn connect(url: &str) -> Locks {
    Locks::connect_with(
        keylatch_cluster::ClientConfig::from_url(url).unwrap(),
        LocksConfig::default(),
    )
    .await
    .unwrap()
}

/// Takes `name` of `kind` (waiting up to `wait`) and, if taken, keeps it
/// for `keep` then gives it back; `true` if taken.
async fn take(
    locks: &Locks,
    kind: Kind,
    name: &str,
    wait: Duration,
    keep: Option<Duration>,
) -> bool {
    let second = format!("{name}-2");
    match kind {
        Kind::Lock => match locks.lock(name).try_acquire(wait, None).await.unwrap() {
            Some(g) => {
                match keep {
                    Some(k) => {
                        tokio::time::sleep(k).await;
                        g.unlock().await.unwrap();
                    }
                    None => drop(g),
                }
                true
            }
            None => false,
        },
        Kind::Fair => match locks.fair_lock(name).try_acquire(wait, None).await.unwrap() {
            Some(g) => {
                match keep {
                    Some(k) => {
                        tokio::time::sleep(k).await;
                        g.unlock().await.unwrap();
                    }
                    None => drop(g),
                }
                true
            }
            None => false,
        },
        Kind::Write => match locks
            .rw_lock(name)
            .write()
            .try_acquire(wait, None)
            .await
            .unwrap()
        {
            Some(g) => {
                match keep {
                    Some(k) => {
                        tokio::time::sleep(k).await;
                        g.unlock().await.unwrap();
                    }
                    None => drop(g),
                }
                true
            }
            None => false,
        },
        Kind::Read => match locks
            .rw_lock(name)
            .read()
            .try_acquire(wait, None)
            .await
            .unwrap()
        {
            Some(g) => {
                match keep {
                    Some(k) => {
                        tokio::time::sleep(k).await;
                        g.unlock().await.unwrap();
                    }
                    None => drop(g),
                }
                true
            }
            None => false,
        },
        Kind::Semaphore => {
            let sem = locks.expirable_semaphore(name);
            match sem.try_acquire(1, wait, None).await.unwrap() {
                Some(g) => {
                    match keep {
                        Some(k) => {
                            tokio::time::sleep(k).await;
                            g.release().await.unwrap();
                        }
                        None => drop(g),
                    }
                    true
                }
                None => false,
            }
        }
        Kind::Multi => {
            match locks
                .multi_lock(&[name, second.as_str()])
                .try_acquire(wait, None)
                .await
                .unwrap()
            {
                Some(g) => {
                    match keep {
                        Some(k) => {
                            tokio::time::sleep(k).await;
                            g.unlock().await.unwrap();
                        }
                        None => drop(g),
                    }
                    true
                }
                None => false,
            }
        }
        Kind::Leader => match locks.leader(name).try_campaign(wait, "me").await.unwrap() {
            Some(g) => {
                match keep {
                    Some(k) => {
                        tokio::time::sleep(k).await;
                        g.resign().await.unwrap();
                    }
                    None => drop(g),
                }
                true
            }
            None => false,
        },
    }
}

/// Makes a semaphore `name` with one permit (other kinds need nothing).
async fn prepare(locks: &Locks, kind: Kind, name: &str) {
    if matches!(kind, Kind::Semaphore) {
        let _ = locks
            .expirable_semaphore(name)
            .try_set_permits(1)
            .await
            .unwrap();
    }
}

/// Whether another process (a fresh `Locks`) takes `name` of `kind` at
/// once, twice in a row.
fn free_at_once(url: &str, kind: Kind, name: &str) -> bool {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let other = connect(url).await;
        prepare(&other, kind, name).await;
        let first = take(&other, kind, name, Duration::ZERO, Some(Duration::ZERO)).await;
        let second = first && take(&other, kind, name, Duration::ZERO, Some(Duration::ZERO)).await;
        if !second {
            eprintln!("{name}: taken at once by another process: first {first}, second {second}");
        }
        second
    })
}

/// In a process of its own (a thread with its own runtime, which ends at
/// the thread's end as a process's does at exit): connects, loads the
/// kind's scripts on another name, then stops the server (SIGSTOP) and
/// starts taking the free `name`: its first try is sent and sits in the
/// server's socket. Dropped 300 ms later; `settle(5 s)`; the server is
/// continued 700 ms after the drop (within settle's bound). Once the
/// runtime has ended: `name` must be free.
fn lib_in_flight(kind: Kind) {
    let server = RedisServer::start();
    let url = server.url();
    let pid = server.pid().unwrap();
    let name = format!("lib-if-{kind:?}").to_lowercase();
    let n = name.clone();
    let u = url.clone();
    let (settled, took) = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let locks = connect(&u).await;
            // The kind's scripts loaded (an EVALSHA in flight must not
            // meet NOSCRIPT), and a semaphore made.
            let warm = format!("{n}-warm");
            prepare(&locks, kind, &warm).await;
            assert!(take(&locks, kind, &warm, Duration::ZERO, Some(Duration::ZERO)).await);
            prepare(&locks, kind, &n).await;
            signal(pid, "STOP");
            let attempt = take(
                &locks,
                kind,
                &n,
                Duration::from_secs(10),
                Some(Duration::from_secs(60)),
            );
            let r = tokio::time::timeout(Duration::from_millis(300), attempt).await;
            assert!(r.is_err(), "the server is stopped: nothing can be taken");
            let resume = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(700));
                signal(pid, "CONT");
            });
            let t = Instant::now();
            let settled = locks.settle(Duration::from_secs(5)).await;
            let took = t.elapsed();
            drop(locks);
            resume.join().unwrap();
            (settled, took)
        })
    })
    .join()
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let state = dump(&server);
    let free = free_at_once(&url, kind, &name);
    eprintln!("{kind:?}: settle -> {settled} after {took:?}; free at once after: {free}\n{state}");
    assert!(
        free,
        "{kind:?}: a wait dropped with its first try in flight, then settle(5s) = {settled} after {took:?}, \
         and the runtime ended: {name} is not free for another process; keys:\n{state}"
    );
}

#[test]
fn lib_in_flight_first_try_lock() {
    lib_in_flight(Kind::Lock);
}

#[test]
fn lib_in_flight_first_try_fair() {
    lib_in_flight(Kind::Fair);
}

#[test]
fn lib_in_flight_first_try_write() {
    lib_in_flight(Kind::Write);
}

#[test]
fn lib_in_flight_first_try_read() {
    lib_in_flight(Kind::Read);
}

#[test]
fn lib_in_flight_first_try_semaphore() {
    lib_in_flight(Kind::Semaphore);
}

#[test]
fn lib_in_flight_first_try_multi() {
    lib_in_flight(Kind::Multi);
}

#[test]
fn lib_in_flight_first_try_leader() {
    lib_in_flight(Kind::Leader);
}

fn lib_dropped_wait_spread(kind: Kind, rounds: usize, spread: u64) {
    let server = RedisServer::start();
    let url = server.url();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut problems = Vec::new();
    for i in 0..rounds {
        let name = format!("lib-dw-{kind:?}-{i}").to_lowercase();
        let holder = rt.block_on(connect(&url));
        // The holder takes it and gives it back 400 + i*15 ms later, while
        // (or just after) the waiter drops its wait at 400 ms.
        let keep = Duration::from_millis(400 + (i as u64 * 15) % spread);
        let (n, u) = (name.clone(), url.clone());
        let hn = name.clone();
        let holder_id = holder.lock("id").owner().to_owned();
        let held = rt.spawn(async move {
            prepare(&holder, kind, &hn).await;
            let taken = take(&holder, kind, &hn, Duration::ZERO, Some(keep)).await;
            holder.settle(Duration::from_secs(5)).await;
            taken
        });
        std::thread::sleep(Duration::from_millis(100));
        let (settled, waiter_id, waited_out) = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let locks = connect(&u).await;
                let id = locks.lock("id").owner().to_owned();
                // Taken: the guard is dropped (its release counted for settle),
                // not unlocked (a cancelled unlock is lib_cancelled_release_*).
                let wait = take(&locks, kind, &n, Duration::from_secs(10), None);
                let r = tokio::time::timeout(Duration::from_millis(300), wait).await;
                (locks.settle(Duration::from_secs(10)).await, id, r.is_ok())
            })
        })
        .join()
        .unwrap();
        assert!(rt.block_on(held).unwrap(), "the holder took {name}");
        std::thread::sleep(Duration::from_millis(200));
        let p = places(&server, &name);
        let state = dump(&server);
        let hash = server.cli(&["HGETALL", &name]).unwrap();
        let free = free_at_once(&url, kind, &name);
        if !settled || !free || p != (0, 0, 0, 0) {
            problems.push(format!(
                "#{i}: settled {settled}, free at once {free}, places {p:?}; holder {holder_id}, waiter {waiter_id} (its wait ended by itself: {waited_out}); hash {name}: {hash:?}; keys:\n{state}; keys after the two takes:\n{}",
                dump(&server)
            ));
        }
    }
    assert!(problems.is_empty(), "{kind:?}:\n{}", problems.join("\n"));
}

/// The write wait dropped just as the holder releases (400..=430 ms).
#[test]
fn lib_dropped_wait_write_release_at_drop() {
    lib_dropped_wait_spread(Kind::Write, 12, 40);
}

/// The same for a plain lock (a grant by name may be on its way).
#[test]
fn lib_dropped_wait_lock_release_at_drop() {
    lib_dropped_wait_spread(Kind::Lock, 12, 40);
}

/// Takes free `name` of `kind`, then starts its release and cancels it
/// after its first poll (the release is queued, its reply not in): the
/// documented "dropped before it finished, the release goes on in the
/// background". `true` if the release answered on its first poll.
async fn take_then_cancel_release(locks: &Locks, kind: Kind, name: &str) -> bool {
    macro_rules! cancel {
        ($fut:expr) => {
            tokio::select! {
                biased;
                _ = $fut => true,
                () = std::future::ready(()) => false,
            }
        };
    }
    let second = format!("{name}-2");
    let z = Duration::ZERO;
    match kind {
        Kind::Lock => {
            let g = locks
                .lock(name)
                .try_acquire(z, None)
                .await
                .unwrap()
                .unwrap();
            cancel!(g.unlock())
        }
        Kind::Fair => {
            let g = locks
                .fair_lock(name)
                .try_acquire(z, None)
                .await
                .unwrap()
                .unwrap();
            cancel!(g.unlock())
        }
        Kind::Write => {
            let g = locks
                .rw_lock(name)
                .write()
                .try_acquire(z, None)
                .await
                .unwrap()
                .unwrap();
            cancel!(g.unlock())
        }
        Kind::Read => {
            let g = locks
                .rw_lock(name)
                .read()
                .try_acquire(z, None)
                .await
                .unwrap()
                .unwrap();
            cancel!(g.unlock())
        }
        Kind::Semaphore => {
            let g = locks
                .expirable_semaphore(name)
                .try_acquire(1, z, None)
                .await
                .unwrap()
                .unwrap();
            cancel!(g.release())
        }
        Kind::Multi => {
            let g = locks
                .multi_lock(&[name, second.as_str()])
                .try_acquire(z, None)
                .await
                .unwrap()
                .unwrap();
            cancel!(g.unlock())
        }
        Kind::Leader => {
            let g = locks
                .leader(name)
                .try_campaign(z, "me")
                .await
                .unwrap()
                .unwrap();
            cancel!(g.resign())
        }
    }
}

/// A process takes `name`, cancels its `unlock()` (documented cancel safe:
/// "the release goes on in the background"), settles (documented to wait
/// for background releases) and ends its runtime: `name` must be free for
/// another process.
fn lib_cancelled_release(kind: Kind) {
    let server = RedisServer::start();
    let url = server.url();
    let name = format!("lib-cr-{kind:?}").to_lowercase();
    let (n, u) = (name.clone(), url.clone());
    let (answered, settled, took) = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let locks = connect(&u).await;
            prepare(&locks, kind, &n).await;
            let answered = take_then_cancel_release(&locks, kind, &n).await;
            let t = Instant::now();
            let settled = locks.settle(Duration::from_secs(5)).await;
            (answered, settled, t.elapsed())
        })
    })
    .join()
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let state = dump(&server);
    let free = free_at_once(&url, kind, &name);
    eprintln!("{kind:?}: release answered at once {answered}; settle -> {settled} after {took:?}; free after: {free}\n{state}");
    assert!(
        free,
        "{kind:?}: unlock cancelled after its first poll (answered at once: {answered}), then settle(5s) = {settled} after {took:?}, \
         and the runtime ended: {name} is not free for another process; keys:\n{state}"
    );
}

#[test]
fn lib_cancelled_release_lock() {
    lib_cancelled_release(Kind::Lock);
}

#[test]
fn lib_cancelled_release_fair() {
    lib_cancelled_release(Kind::Fair);
}

#[test]
fn lib_cancelled_release_write() {
    lib_cancelled_release(Kind::Write);
}

#[test]
fn lib_cancelled_release_read() {
    lib_cancelled_release(Kind::Read);
}

#[test]
fn lib_cancelled_release_semaphore() {
    lib_cancelled_release(Kind::Semaphore);
}

#[test]
fn lib_cancelled_release_multi() {
    lib_cancelled_release(Kind::Multi);
}

#[test]
fn lib_cancelled_release_leader() {
    lib_cancelled_release(Kind::Leader);
}
