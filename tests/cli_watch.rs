#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `keylatch watch` against a real server: what it lists (every lock type,
//! no companion key, no other data), its JSON lines, and its screen in a
//! real terminal (tmux), redrawn as locks come and go, ended by Ctrl-C.
//! (Its cluster run, SCAN on every master, is in `cli.rs`'s one cluster
//! test.)

use std::process::Command;
use std::time::Duration;

use keylatch_harness::RedisServer;
use keylatch_lock::{Locks, LocksConfig};

mod common;
use common::terminal::Terminal;
use common::{stderr, stdout, Soon};

fn watch(server: &RedisServer, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_keylatch"))
        .env("KEYLATCH_URL", server.url())
        .arg("watch")
        .args(args)
        .output()
        .unwrap()
}

async fn locks(server: &RedisServer) -> Locks {
    Locks::connect_with(
        keylatch_cluster::ClientConfig::from_url(&server.url()).unwrap(),
        LocksConfig::default(),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_lists_every_lock_type_and_nothing_else() {
    let server = RedisServer::start();
    let a = locks(&server).await;
    let b = locks(&server).await;
    let plain = a.lock("wt-plain").acquire().await.unwrap();
    let fenced = a.fenced_lock("wt-fenced").acquire().await.unwrap();
    let fair = a.fair_lock("wt-fair").acquire().await.unwrap();
    // A waiter queued on the fair lock (B, in the background).
    let queued = tokio::spawn({
        let b = b.clone();
        async move {
            let _ = b
                .fair_lock("wt-fair")
                .try_acquire(Duration::from_secs(5), None)
                .await;
        }
    });
    let read = a.rw_lock("wt-rw").read().acquire().await.unwrap();
    let sem = a.expirable_semaphore("wt-sem");
    assert!(sem.try_set_permits(2).await.unwrap());
    let permit = sem.acquire(1).await.unwrap();
    server.cli(&["RPUSH", "wt-list", "x"]).unwrap();
    // Until B's wait is queued.
    Soon::new(Duration::from_secs(5), Duration::from_millis(20))
        .until(|| async {
            let s = a.inspect("wt-fair").await.unwrap();
            (!s.waiters.is_empty())
                .then_some(())
                .ok_or_else(|| "no waiter yet".to_owned())
        })
        .await;

    let o = watch(&server, &["wt-*", "--once", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let mut names: Vec<&str> = out
        .lines()
        .map(|l| {
            assert!(l.starts_with(r#"{"at_ms":"#), "{l}");
            l.split(r#""name":""#)
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
        })
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["wt-fair", "wt-fenced", "wt-plain", "wt-rw", "wt-sem"],
        "{out}"
    );
    let fair_line = out
        .lines()
        .find(|l| l.contains(r#""name":"wt-fair""#))
        .unwrap();
    assert!(fair_line.contains(r#""type":"fair""#), "{fair_line}");
    assert!(
        fair_line.contains(b.lock("x").owner().rsplit_once(':').unwrap().0),
        "B's waiter: {fair_line}"
    );

    // `*`: the companion keys (fencing counters, the fair queue, the
    // semaphore's leases) stay out; so does the list.
    let o = watch(&server, &["*", "--once", "--json"]);
    let all = stdout(&o);
    assert_eq!(all.lines().count(), 5, "{all}");
    assert!(
        !all.contains("redisson_lock_") && !all.contains("wt-list"),
        "{all}"
    );

    // The text form, with the header.
    let o = watch(&server, &["wt-*", "--once"]);
    let text = stdout(&o);
    assert!(text.starts_with("keylatch watch wt-* — 5 locks"), "{text}");
    assert!(!text.contains('\x1b'), "no screen control into a pipe");

    queued.abort();
    for g in [plain, fenced, fair, read] {
        g.unlock().await.unwrap();
    }
    permit.release().await.unwrap();
}

#[test]
fn in_a_terminal_watch_redraws_as_locks_come_and_go_until_ctrl_c() {
    let Some(term) = Terminal::start("cli_watch", 160, 40) else {
        return;
    };
    let server = RedisServer::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let locks = rt.block_on(locks(&server));
    let guard = rt.block_on(locks.lock("tm-held").acquire()).unwrap();
    term.line(&format!(
        "KEYLATCH_URL={} {} watch 'tm-*' --interval 200ms; echo EXIT=$?",
        server.url(),
        env!("CARGO_BIN_EXE_keylatch")
    ));
    term.until(
        |s| s.contains(r#"lock "tm-held": held (reentrant)"#) && s.contains("1 lock"),
        "the held lock shown",
    );
    // A second lock appears, the first goes: the screen follows.
    let second = rt.block_on(locks.lock("tm-second").acquire()).unwrap();
    rt.block_on(guard.unlock()).unwrap();
    term.until(
        |s| s.contains(r#"lock "tm-second""#) && !s.contains(r#"lock "tm-held""#),
        "redrawn",
    );
    // One screen, redrawn in place: the header once.
    let screen = term.screen();
    assert_eq!(screen.matches("keylatch watch tm-*").count(), 1, "{screen}");
    term.keys(&["C-c"]);
    term.shows("EXIT=0");
    rt.block_on(second.unlock()).unwrap();
}
