#![allow(clippy::unwrap_used, clippy::expect_used)]
//! One release wakes one waiting process (issue 31's herd), against a real
//! redis-server: a waiter of a reentrant lock that finds it held registers
//! in `keylatch_lock_waiters:{name}`, and a release wakes the longest
//! registered by name, telling Redisson's channel "00" (Java reads the
//! number 0, its unlock message) instead of "0" (which wakes every
//! keylatch waiter too).
//!
//! Each `Locks` here stands for a process of its own (its own client id,
//! connections and pub/sub hub). Waiters re-check only every 20 s (a 30 s
//! re-check, a 60 s waiter span), so within these tests a try comes only
//! from a wake.

use std::time::{Duration, Instant};

use keylatch_cluster::{Client, Commands, Event, PubSub};
use keylatch_harness::RedisServer;
use keylatch_lock::scripts::{REENTRANT_ACQUIRE, WAITER_LEAVE};
use keylatch_lock::{Locks, LocksConfig};
use keylatch_resp::Cmd;

mod common;
use common::take_free;

/// A process whose waiters try again only when woken (or after 20 s).
async fn process(server: &RedisServer) -> Locks {
    let cfg = LocksConfig::default()
        .recheck(Duration::from_secs(30))
        .fair_waiter_timeout(Duration::from_secs(60));
    Locks::connect_with(
        keylatch_cluster::ClientConfig::from_url(&server.url()).unwrap(),
        cfg,
    )
    .await
    .unwrap()
}

/// Calls of one command so far (`INFO commandstats`).
fn calls(server: &RedisServer, command: &str) -> u64 {
    let text = server.cli(&["INFO", "commandstats"]).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:")))
        .and_then(|s| s.split(',').find_map(|f| f.strip_prefix("calls=")))
        .map_or(0, |v| v.parse().unwrap())
}

/// The number of waiters registered for `name`.
fn registered(server: &RedisServer, name: &str) -> u64 {
    server
        .cli(&["ZCARD", &format!("keylatch_lock_waiters:{{{name}}}")])
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Waits (bounded) until `n` waiters of `name` are registered.
async fn until_registered(server: &RedisServer, name: &str, n: u64) {
    let until = Instant::now() + Duration::from_secs(10);
    while registered(server, name) != n {
        assert!(Instant::now() < until, "{n} waiters of {name} registered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A waiter (up to 15 s) that releases at once once it holds: its task
/// answers how long it waited.
fn waits_then_releases(waiter: Locks, name: &'static str) -> tokio::task::JoinHandle<Duration> {
    tokio::spawn(async move {
        let t0 = Instant::now();
        let g = waiter
            .lock(name)
            .try_acquire(Duration::from_secs(15), None)
            .await
            .unwrap()
            .expect("acquired");
        let waited = t0.elapsed();
        g.unlock().await.unwrap();
        waited
    })
}

/// Three processes wait on a lock a fourth holds. Each release wakes one of
/// them by name: the three acquisitions cost one EVALSHA each, with no
/// failed try among them (a herd would add two failed tries after the first
/// release and one after the second), and the registry is empty after.
#[tokio::test]
async fn each_release_wakes_one_waiting_process() {
    let server = RedisServer::start();
    let holder = process(&server).await;
    // Both scripts cached on the server, so no NOSCRIPT round is counted.
    take_free(&holder, "warm").await.unlock().await.unwrap();
    let guard = take_free(&holder, "herd").await;
    let mut waiters = Vec::new();
    for _ in 0..3 {
        let locks = process(&server).await;
        waiters.push(tokio::spawn(async move {
            let g = locks
                .lock("herd")
                .try_acquire(Duration::from_secs(15), None)
                .await
                .unwrap()
                .expect("acquired within the wait");
            tokio::time::sleep(Duration::from_millis(50)).await;
            g.unlock().await.unwrap();
        }));
    }
    until_registered(&server, "herd", 3).await;
    let before = calls(&server, "evalsha");
    guard.unlock().await.unwrap();
    for w in waiters {
        tokio::time::timeout(Duration::from_secs(10), w)
            .await
            .expect("every waiter is woken in turn, well before its re-check")
            .unwrap();
    }
    let used = calls(&server, "evalsha") - before;
    // The holder's release, then per waiter one acquire and one release.
    assert_eq!(used, 7, "EVALSHA calls for 3 handoffs");
    assert_eq!(registered(&server, "herd"), 0);
}

/// Redisson's waiters still wake: with a keylatch waiter registered the
/// release says "00" on Redisson's channel (Java's `Long.valueOf` reads 0,
/// its unlock message); with none it says "0", as Redisson does.
#[tokio::test]
async fn redissons_channel_hears_a_zero_either_way() {
    let server = RedisServer::start();
    let holder = process(&server).await;
    let hub = PubSub::connect(&server.url()).await.unwrap();
    let mut sub = hub
        .subscribe("redisson_lock__channel:{java}")
        .await
        .unwrap();

    // No keylatch waiter: "0".
    take_free(&holder, "java").await.unlock().await.unwrap();
    let first = next_message(&mut sub).await;
    assert_eq!(first, "0");

    // A registered keylatch waiter: "00", and that waiter holds the lock.
    let guard = take_free(&holder, "java").await;
    let waiter = process(&server).await;
    let w = tokio::spawn(async move {
        let g = waiter
            .lock("java")
            .try_acquire(Duration::from_secs(15), None)
            .await
            .unwrap()
            .expect("acquired");
        g.unlock().await.unwrap();
    });
    until_registered(&server, "java", 1).await;
    guard.unlock().await.unwrap();
    let second = next_message(&mut sub).await;
    assert_eq!(second, "00");
    assert_eq!(second.parse::<i64>().unwrap(), 0);
    tokio::time::timeout(Duration::from_secs(5), w)
        .await
        .unwrap()
        .unwrap();
}

/// A registered keylatch waiter still wakes for a plain "0", as a Redisson
/// holder's release (or a force unlock) publishes: here Redisson's own
/// unlock script, run raw.
#[tokio::test]
async fn a_registered_waiter_wakes_for_a_redisson_release() {
    let server = RedisServer::start();
    let java = Client::connect(&server.url()).await.unwrap();
    // A Java holder: Redisson's hash, field "<uuid>:<thread>" = 1, 30 s.
    server.cli(&["HSET", "mixed", "java-uuid:1", "1"]).unwrap();
    server.cli(&["PEXPIRE", "mixed", "30000"]).unwrap();
    let waiter = process(&server).await;
    let w = waits_then_releases(waiter, "mixed");
    until_registered(&server, "mixed", 1).await;
    // Redisson's unlockInnerAsync, last hold: del + publish "0".
    let script = "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; \
        local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
        if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; \
        else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; \
        return nil;";
    let released: i64 = java
        .cmd(
            Cmd::new("EVAL")
                .arg(script)
                .arg("2")
                .key("mixed")
                .arg("redisson_lock__channel:{mixed}")
                .arg("0")
                .arg("30000")
                .arg("java-uuid:1"),
        )
        .await
        .unwrap();
    assert_eq!(released, 1);
    let waited = tokio::time::timeout(Duration::from_secs(10), w)
        .await
        .unwrap()
        .unwrap();
    assert!(
        waited < Duration::from_secs(15),
        "woken by the unlock message, not its 20 s re-check: {waited:?}"
    );
}

/// A wake by name that reaches nobody (the waiter gave up as the release
/// took it out) is passed on when that waiter leaves: `waiter_leave.lua`
/// finds it gone from the registry and the lock free, and publishes "0".
/// Here the waiter that gave up is a raw registration ("ghost"), ahead of
/// a live keylatch waiter.
#[tokio::test]
async fn a_wake_that_reached_nobody_is_passed_on_by_the_leave() {
    let server = RedisServer::start();
    let raw = Client::connect(&server.url()).await.unwrap();
    let holder = process(&server).await;
    let guard = take_free(&holder, "ghosted").await;
    let keys = ["ghosted", "redisson_lock_token:{ghosted}"];
    // The ghost's try: held, so it registers for 60 s.
    let reply = raw
        .eval_script(
            &REENTRANT_ACQUIRE,
            &keys,
            &[
                "30000",
                "ghost:1",
                "600000",
                "60000",
                "keylatch_lock_waiters:{ghosted}",
            ],
        )
        .await
        .unwrap();
    assert!(
        format!("{:?}", reply.value()).contains("Integer(0)"),
        "{reply:?}"
    );
    until_registered(&server, "ghosted", 1).await;
    let waiter = process(&server).await;
    let (tx, mut rx) = tokio::sync::mpsc::channel(1);
    let w = tokio::spawn(async move {
        let g = waiter
            .lock("ghosted")
            .try_acquire(Duration::from_secs(25), None)
            .await
            .unwrap()
            .expect("acquired");
        tx.send(()).await.unwrap();
        g.unlock().await.unwrap();
    });
    until_registered(&server, "ghosted", 2).await;
    // The release wakes the ghost (registered first), who never hears it.
    guard.unlock().await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(500), rx.recv())
            .await
            .is_err(),
        "the live waiter was not the one woken"
    );
    assert_eq!(registered(&server, "ghosted"), 1, "the ghost was taken out");
    // The ghost gives up: its leave finds it taken out and the lock free.
    let left = raw
        .eval_script(
            &WAITER_LEAVE,
            &["ghosted"],
            &[
                "ghost:1",
                "redisson_lock__channel:{ghosted}",
                "publish",
                "keylatch_lock_waiters:{ghosted}",
            ],
        )
        .await
        .unwrap();
    assert_eq!(format!("{:?}", left.value()), "Integer(0)");
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("the passed-on wake reaches the live waiter")
        .unwrap();
    w.await.unwrap();
}

/// A waiter that gives up (its wait runs out) takes its registration back,
/// and the registry key goes with the last one.
#[tokio::test]
async fn a_waiter_that_gives_up_leaves_the_registry() {
    let server = RedisServer::start();
    let holder = process(&server).await;
    let guard = take_free(&holder, "patient").await;
    let waiter = process(&server).await;
    let got = waiter
        .lock("patient")
        .try_acquire(Duration::from_millis(400), None)
        .await
        .unwrap();
    assert!(got.is_none());
    let until = Instant::now() + Duration::from_secs(5);
    while server
        .cli(&["EXISTS", "keylatch_lock_waiters:{patient}"])
        .unwrap()
        .trim()
        != "0"
    {
        assert!(Instant::now() < until, "the registration is taken back");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    guard.unlock().await.unwrap();
}

/// The next message on `sub`, as text (bounded).
async fn next_message(sub: &mut keylatch_cluster::Subscription) -> String {
    loop {
        let e = tokio::time::timeout(Duration::from_secs(5), sub.recv())
            .await
            .expect("a message within 5 s")
            .expect("subscribed");
        if let Event::Message { payload, .. } = e {
            return String::from_utf8(payload.to_vec()).unwrap();
        }
    }
}

/// The waiters' mark in the lock hash is no holder: `inspect` shows the one
/// holder, and the mark goes with the hash when the lock is released.
#[tokio::test]
async fn the_waiters_mark_is_no_holder_and_goes_with_the_hash() {
    let server = RedisServer::start();
    let holder = process(&server).await;
    let guard = take_free(&holder, "marked").await;
    let waiter = process(&server).await;
    let w = tokio::spawn(async move {
        waiter
            .lock("marked")
            .try_acquire(Duration::from_secs(15), None)
            .await
            .unwrap()
            .expect("acquired")
            .unlock()
            .await
            .unwrap();
    });
    until_registered(&server, "marked", 1).await;
    let fields = server.cli(&["HKEYS", "marked"]).unwrap();
    assert!(fields.contains("keylatch_waiters"), "{fields}");
    let seen = holder.inspect("marked").await.unwrap();
    assert_eq!(seen.holders.len(), 1, "{seen:?}");
    assert_ne!(seen.holders[0].owner, "keylatch_waiters");
    guard.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), w)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(server.cli(&["EXISTS", "marked"]).unwrap().trim(), "0");
}

/// A force unlock wakes a registered waiter: it publishes a plain "0",
/// which a waiter woken by name still wakes for (the registry is not
/// consulted by `force_unlock`).
#[tokio::test]
async fn a_force_unlock_wakes_a_registered_waiter() {
    let server = RedisServer::start();
    let holder = process(&server).await;
    let guard = take_free(&holder, "forced").await;
    let waiter = process(&server).await;
    let w = waits_then_releases(waiter, "forced");
    until_registered(&server, "forced", 1).await;
    holder.force_unlock("forced").await.unwrap();
    let waited = tokio::time::timeout(Duration::from_secs(10), w)
        .await
        .expect("woken by the force unlock, not its 20 s re-check")
        .unwrap();
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    assert!(guard.is_lost() || guard.unlock().await.is_err());
}

/// A read-write lock's hash is never marked, and its waiters never
/// registered there: a reentrant lock's waiter on a name a write lock
/// holds is told of the other type (or waits unregistered), and the hash
/// keeps no `keylatch_waiters` field either way.
#[tokio::test]
async fn a_read_write_lock_hash_is_never_marked_by_a_reentrant_waiter() {
    let server = RedisServer::start();
    let holder = process(&server).await;
    let write = holder.rw_lock("shared-name").write();
    let guard = tokio::time::timeout(Duration::from_secs(5), write.try_acquire_now(None))
        .await
        .unwrap()
        .unwrap()
        .expect("a fresh name is free");
    let waiter = process(&server).await;
    let out = waiter
        .lock("shared-name")
        .try_acquire(Duration::from_millis(300), None)
        .await;
    assert!(
        matches!(out, Ok(None) | Err(_)),
        "never acquired while the write lock holds the name: {out:?}"
    );
    let fields = server.cli(&["HKEYS", "shared-name"]).unwrap();
    assert!(
        fields.contains("mode"),
        "still the write lock's hash: {fields}"
    );
    assert!(
        !fields.contains("keylatch_waiters"),
        "a read-write lock's hash is not marked: {fields}"
    );
    assert_eq!(registered(&server, "shared-name"), 0);
    guard.unlock().await.unwrap();
}

/// A registered waiter whose wait is dropped (cancelled) takes its
/// registration back: the same departure as a wait that runs out.
#[tokio::test]
async fn a_cancelled_registered_wait_leaves_the_registry() {
    let server = RedisServer::start();
    let holder = process(&server).await;
    let guard = take_free(&holder, "cancelled").await;
    let waiter = process(&server).await;
    let w = tokio::spawn(async move {
        let _ = waiter
            .lock("cancelled")
            .try_acquire(Duration::from_secs(30), None)
            .await;
    });
    until_registered(&server, "cancelled", 1).await;
    w.abort();
    assert!(w.await.unwrap_err().is_cancelled());
    until_registered(&server, "cancelled", 0).await;
    guard.unlock().await.unwrap();
}
