//! Elections, `keylatch elect`/`watch`, and acquires through a server
//! stall, as an outside review (session 28) found them failing against
//! real redis-server processes; each test here failed on main before its
//! fix:
//!
//! - a read-write lock's hash is no election (`Leader::current` named its
//!   reader or writer; `elect --observe` printed it and exited 0);
//! - a campaigner elected again is not shown with its lost term's token
//!   and value (the proclamation must carry the latest term's token);
//! - `watch` exits 69 when its server goes away (was 70);
//! - a leadership lost before it proclaimed is campaigned for again
//!   (`elect` exited 70), and `elect` with no `--wait` rides out a server
//!   stall longer than its lease (it gave up undoing after 5 s, exit 70);
//! - an acquire answered after its lease ran out by the local clock (a
//!   stalled server) is given back and tried again, not handed out lost
//!   (locks, leased permits, `exec`'s waiter);
//! - `Locks::settle` waits for a dropped leased-permit guard's release.
//!
//! Nothing here depends on the server's version: CI runs it on Redis 7.0.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keylatch_harness::RedisServer;
use keylatch_lock::{LockError, Locks};

mod common;
use common::lines::Lines;
use common::locks::connect_with_watchdog;
use common::{stderr, Soon};

const T: Duration = Duration::from_secs(10);

async fn process(server: &RedisServer) -> Locks {
    connect_with_watchdog(server, Duration::from_secs(1)).await
}

fn keylatch(server: &RedisServer) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_keylatch"));
    c.env("KEYLATCH_URL", server.url());
    c
}

/// `Leader::current` ("who leads now, if anyone") on a name that holds a
/// read-write lock's read hold: nobody campaigned, and a campaign there
/// waits. The unit test in leader.rs says "a read-write lock's hash is no
/// leader either"; `current()` must not name the reader as the leader.
#[tokio::test]
async fn a1_a_read_hold_is_not_shown_as_the_leader() {
    let server = RedisServer::start();
    let locks = process(&server).await;
    let read = locks.rw_lock("rwl").read().acquire().await.unwrap();
    let r = tokio::time::timeout(T, locks.leader("rwl").current())
        .await
        .unwrap();
    assert!(
        matches!(r, Ok(None) | Err(LockError::WrongType { .. })),
        "current() on a name holding a read hold (nobody campaigned) answered {r:?}"
    );
    read.unlock().await.unwrap();
}

/// The same for the write hold of a read-write lock.
#[tokio::test]
async fn a2_a_write_hold_is_not_shown_as_the_leader() {
    let server = RedisServer::start();
    let locks = process(&server).await;
    let write = locks.rw_lock("rww").write().acquire().await.unwrap();
    let r = tokio::time::timeout(T, locks.leader("rww").current())
        .await
        .unwrap();
    assert!(
        matches!(r, Ok(None) | Err(LockError::WrongType { .. })),
        "current() on a name holding a write hold (nobody campaigned) answered {r:?}"
    );
    write.unlock().await.unwrap();
}

/// `keylatch watch` exit codes: "69 server unreachable, 70 server error".
/// A server that goes away while watching is unreachable, not a server
/// error.
#[test]
fn c1_watch_exits_69_when_the_server_goes_away() {
    let mut server = RedisServer::start();
    let mut cmd = keylatch(&server);
    cmd.args(["watch", "x*", "--json", "--interval", "100ms"])
        .stderr(Stdio::piped());
    let mut child = cmd.stdout(Stdio::null()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    server.kill();
    let deadline = Instant::now() + T;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("watch still running 10 s after its server died");
    };
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(69), "stderr: {err}");
}

/// A child's exit within `limit`, else it is killed and the test fails.
fn wait_exit(
    child: &mut std::process::Child,
    limit: Duration,
    what: &str,
) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_file(path: &std::path::Path) {
    Soon::new(T, Duration::from_millis(10))
        .until_blocking(|| std::fs::metadata(path).map(drop).map_err(|e| e.to_string()));
}

/// `elect --observe` on a name that holds something else than an election
/// "exits 64"; a read-write lock's read hold is printed as a leader
/// instead.
#[test]
fn b1_observe_on_a_read_write_lock_is_no_election() {
    let server = RedisServer::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let locks = rt.block_on(process(&server));
    let read = rt
        .block_on(locks.rw_lock("obs-rw").read().acquire())
        .unwrap();
    let mut cmd = keylatch(&server);
    cmd.args(["elect", "--observe", "obs-rw", "--json"]);
    let observer = Lines::start(cmd);
    std::thread::sleep(Duration::from_millis(1500));
    let so_far = observer.so_far();
    let (code, lines) = observer.stop();
    rt.block_on(read.unlock()).unwrap();
    assert!(
        !so_far.iter().any(|l| l.contains(r#""owner":"#)),
        "a read hold printed as the election's leader (exit {code:?}): {lines:?}"
    );
}

async fn long_lease(server: &RedisServer) -> Locks {
    connect_with_watchdog(server, Duration::from_secs(30)).await
}

/// "Between an election and its proclamation (one round trip) an observer
/// may see the new leader with no value yet." A campaigner whose earlier
/// term was lost (its key deleted: no resign took the proclamation back)
/// is elected again: in that moment readers are shown the *old* term's
/// token and value as the new term's, since `leader_of` matches the
/// proclamation by owner only. A reader polls `current()` while the owner
/// campaigns again, over several rounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a3_a_reelected_owner_is_never_shown_with_its_old_terms_token() {
    let server = RedisServer::start();
    let locks = process(&server).await;
    let reader = process(&server).await;
    let election = locks.leader("a3");
    let mut stale = Vec::new();
    for round in 0..40 {
        let old = tokio::time::timeout(T, election.campaign(&format!("v{round}")))
            .await
            .unwrap()
            .unwrap();
        let old_token = old.fencing_token();
        server.cli(&["DEL", "a3"]).unwrap();
        tokio::time::timeout(T, old.lost()).await.unwrap();
        drop(old);
        locks.settle(T).await;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let poll = {
            let (reader, stop) = (reader.clone(), stop.clone());
            tokio::spawn(async move {
                let w = reader.leader("a3");
                let mut seen = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Ok(Some(info)) = w.current().await {
                        seen.push(info);
                    }
                }
                seen
            })
        };
        tokio::time::sleep(Duration::from_millis(5)).await;
        let new = tokio::time::timeout(T, election.campaign(&format!("new{round}")))
            .await
            .unwrap()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let seen = poll.await.unwrap();
        stale.extend(
            seen.into_iter()
                .filter(|i| i.token.is_some() && i.token == old_token)
                .map(|i| (round, i, new.fencing_token())),
        );
        new.resign().await.unwrap();
        if !stale.is_empty() {
            break;
        }
    }
    assert!(
        stale.is_empty(),
        "the re-elected owner was shown with its lost term's token and value: (round, shown, new term's token) {stale:?}"
    );
}

/// `elect` "campaigns until elected (or --wait)": a leadership deleted by
/// an outsider in the moment between the election and the proclamation
/// (the library's campaign then answers `Lost`) is no server error and no
/// internal failure (70) before any command ran; at worst the leadership
/// is lost while the command runs (76). An outsider deletes the election's
/// key over and over while `elect` campaigns.
#[test]
fn b8_a_leadership_lost_before_the_command_ran_is_not_exit_70() {
    let server = RedisServer::start();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let deleter = {
        let (url, stop) = (server.url(), stop.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let c = keylatch_cluster::Client::connect(&url).await.unwrap();
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _: Result<i64, _> = c.cmd(keylatch_resp::Cmd::new("DEL").key("b8")).await;
                    n += 1;
                }
                n
            })
        })
    };
    use keylatch_cluster::Commands as _;
    let mut codes = Vec::new();
    let mut seventy = None;
    for _ in 0..15 {
        let o = keylatch(&server)
            .args([
                "elect", "b8", "--wait", "5s", "--grace", "200ms", "--", "true",
            ])
            .output()
            .unwrap();
        codes.push(o.status.code());
        if o.status.code() == Some(70) {
            seventy = Some(stderr(&o));
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let dels = deleter.join().unwrap();
    assert!(
        seventy.is_none(),
        "exit codes {codes:?} ({dels} DELs); the 70's stderr: {}",
        seventy.unwrap_or_default()
    );
}

/// As s3, with only the leased-permit guard dropped (nothing else for
/// `settle` to wait on).
#[test]
fn s4_settle_awaits_a_dropped_permit_guards_release_alone() {
    let server = RedisServer::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let settled = rt.block_on(async {
        let locks = long_lease(&server).await;
        let sem = locks.expirable_semaphore("s4");
        assert!(sem.try_set_permits(1).await.unwrap());
        let leased = sem.acquire(1).await.unwrap();
        drop(leased);
        locks.settle(T).await
    });
    drop(rt);
    assert!(settled);
    let avail = server.cli(&["GET", "s4"]).unwrap();
    let out = server.cli(&["ZCARD", "{s4}:timeout"]).unwrap();
    assert_eq!(
        (avail.trim(), out.trim()),
        ("1", "0"),
        "a dropped leased-permit guard, then settle() = true, then exit: (available, leased out)"
    );
}

/// The server stalls (SIGSTOP) for longer than `elect`'s 10 s lease while
/// one `elect` leads and another campaigns. The leader loses (76, as it
/// should); the campaigner "campaigns until elected": once the server is
/// back it must be elected and run its command (exit 0), not give up with
/// 70 because its try's reply came after that try's lease had run out
/// locally (the campaign's `Lost`).
#[test]
fn b12_a_campaigner_survives_a_server_stall() {
    campaigner_through_a_stall(None);
}

/// b12 with `--wait 60s`: the undo of the acquire of unknown outcome now
/// has the rest of the wait and succeeds once the server is back, but the
/// campaign's next try, answered after its lease's local end (the stall),
/// makes the library's campaign answer `Lost`, which `elect` turns into
/// 70 (as in b8) instead of campaigning on.
#[test]
fn b12b_a_campaigner_with_a_bounded_wait_survives_a_server_stall() {
    campaigner_through_a_stall(Some("60s"));
}

fn campaigner_through_a_stall(wait: Option<&str>) {
    let server = RedisServer::start();
    let dir = keylatch_harness::TempDir::new("r32-b12").unwrap();
    let ready = dir.path().join("ready");
    let mut leader = keylatch(&server)
        .args(["elect", "b12", "--proclaim", "L", "--grace", "200ms", "--"])
        .args([
            "sh",
            "-c",
            &format!("echo up > {}; exec sleep 60", ready.display()),
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_file(&ready);
    let mut waiter = keylatch(&server)
        .args(["elect", "b12", "--proclaim", "W"])
        .args(wait.map(|w| vec!["--wait", w]).unwrap_or_default())
        .args(["--", "true"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (l, w, err) = stall_past_the_lease(&server, &mut leader, &mut waiter, 20);
    assert_eq!(l.code(), Some(76), "the leader lost its leadership");
    assert_eq!(w.code(), Some(0), "the campaigner's stderr: {err}");
}

/// Pauses the server for 11 s (past the CLI's 10 s lease) half a second
/// after the waiter started, then waits for the holder (20 s) and the
/// waiter (`waiter_s`) to exit: their statuses and the waiter's stderr.
fn stall_past_the_lease(
    server: &RedisServer,
    holder: &mut std::process::Child,
    waiter: &mut std::process::Child,
    waiter_s: u64,
) -> (std::process::ExitStatus, std::process::ExitStatus, String) {
    use std::io::Read;
    std::thread::sleep(Duration::from_millis(500));
    server.pause().unwrap();
    std::thread::sleep(Duration::from_millis(11_000));
    server.resume().unwrap();
    let h = wait_exit(holder, Duration::from_secs(20), "the holder");
    let w = wait_exit(waiter, Duration::from_secs(waiter_s), "the waiter");
    let mut err = String::new();
    waiter
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (h, w, err)
}

/// b12b for `exec`: a waiting `exec --wait 60s` through a server stall
/// longer than its 10 s lease. Once the server is back the holder has
/// lost (76) and the waiter must take the lock and run its command
/// (exit 0, its marker written).
#[test]
fn b14_an_exec_waiter_survives_a_server_stall() {
    let server = RedisServer::start();
    let dir = keylatch_harness::TempDir::new("r32-b14").unwrap();
    let ready = dir.path().join("ready");
    let ran = dir.path().join("ran");
    let mut holder = keylatch(&server)
        .args(["exec", "b14", "--grace", "200ms", "--"])
        .args([
            "sh",
            "-c",
            &format!("echo up > {}; exec sleep 60", ready.display()),
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_file(&ready);
    let mut waiter = keylatch(&server)
        .args(["exec", "b14", "--wait", "60s", "--"])
        .args(["sh", "-c", &format!("echo ran > {}", ran.display())])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (h, w, err) = stall_past_the_lease(&server, &mut holder, &mut waiter, 40);
    assert_eq!(h.code(), Some(76), "the holder lost its lock");
    assert_eq!(
        (w.code(), ran.exists()),
        (Some(0), true),
        "the waiter's (exit, command ran); stderr: {err}"
    );
}

/// The library under b14: `try_acquire` waiting through a server stall
/// longer than the lease hands out a guard that is already lost (its
/// try was answered after its lease's local end). An acquire that answers
/// `Some(guard)` should hand out a hold it believes in, not one whose
/// `is_lost()` is true on arrival.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a11_an_acquire_through_a_stall_does_not_hand_out_a_lost_guard() {
    let server = RedisServer::start();
    let a = process(&server).await;
    let b = process(&server).await;
    let held = a.lock("a11").acquire().await.unwrap();
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move {
            let g = b
                .lock("a11")
                .try_acquire(Duration::from_secs(20), None)
                .await;
            g.map(|g| g.map(|g| (g.is_lost(), g.remaining_lease(), g)))
        })
    };
    let got = through_a_stall(&server, waiter).await;
    drop(held);
    let (lost, left, g) = got.unwrap().expect("acquired within the wait");
    assert!(
        !lost,
        "try_acquire answered Some(guard) with is_lost() = {lost}, remaining_lease() = {left:?}"
    );
    drop(g);
}

/// Pauses the server for 2.5 s (past the 1 s lease of `process`) 300 ms
/// after `waiter` started, then waits (at most 20 s) for what it answers.
async fn through_a_stall<T: Send + 'static>(
    server: &RedisServer,
    waiter: tokio::task::JoinHandle<T>,
) -> T {
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.pause().unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    server.resume().unwrap();
    tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .unwrap()
        .unwrap()
}

/// a11 for leased permits: a waiting `try_acquire` through a server stall
/// longer than the lease answers a `PermitGuard` that is lost on arrival.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s7_leased_permits_through_a_stall_are_not_handed_out_lost() {
    let server = RedisServer::start();
    let a = process(&server).await;
    let b = process(&server).await;
    let sem = a.expirable_semaphore("s7");
    assert!(sem.try_set_permits(1).await.unwrap());
    let held = sem.acquire(1).await.unwrap();
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move {
            let g = b
                .expirable_semaphore("s7")
                .try_acquire(1, Duration::from_secs(20), None)
                .await;
            g.map(|g| g.map(|g| (g.is_lost(), g.remaining_lease(), g)))
        })
    };
    let got = through_a_stall(&server, waiter).await;
    drop(held);
    let (lost, left, g) = got.unwrap().expect("acquired within the wait");
    drop(g);
    assert!(
        !lost,
        "try_acquire answered Some(permits) with is_lost() = {lost}, remaining_lease() = {left:?}"
    );
}

/// a11 for a multi-lock whose members one script call takes together
/// (`take_group`): a waiting `try_acquire` through a server stall longer
/// than the lease answers a `MultiGuard` none of whose members is lost on
/// arrival (a member answered after its lease is given back and the group
/// is tried again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m1_a_multi_lock_through_a_stall_is_not_handed_out_lost() {
    let server = RedisServer::start();
    let a = process(&server).await;
    let b = process(&server).await;
    let held = a.lock("{m1}a").acquire().await.unwrap();
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move {
            let g = b
                .multi_lock(&["{m1}a", "{m1}b"])
                .try_acquire(Duration::from_secs(20), None)
                .await;
            g.map(|g| g.map(|g| (g.is_lost(), g)))
        })
    };
    let got = through_a_stall(&server, waiter).await;
    drop(held);
    let (lost, g) = got.unwrap().expect("acquired within the wait");
    assert!(
        !lost,
        "try_acquire answered Some(guard) with is_lost() = true"
    );
    g.unlock().await.unwrap();
    assert_eq!(
        server.cli(&["EXISTS", "{m1}a", "{m1}b"]).unwrap().trim(),
        "0"
    );
}
