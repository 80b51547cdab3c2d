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
use keylatch_lock::scripts::{
    NONREENTRANT_ACQUIRE, REENTRANT_ACQUIRE, REENTRANT_RELEASE, WAITER_LEAVE,
};
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

/// A holder for the tests that count EVALSHA: a [`process`] that tracks no
/// hold. The first waiter to register marks the held hash
/// (`keylatch_waiters`), and a holder whose tracked read came first (2 ms
/// after its acquire) hears of that write and checks its hold with one
/// more EVALSHA (two on a server that has yet to load the renewal script).
/// Whether the read comes first is a race the tests do not count: they
/// count the waiter's calls and the releases.
async fn untracked_holder(server: &RedisServer) -> Locks {
    let cfg = LocksConfig::default()
        .recheck(Duration::from_secs(30))
        .fair_waiter_timeout(Duration::from_secs(60))
        .tracked_holds(0);
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

/// `calls` and `until_registered` through a client of the test's own, no
/// process spawned: the tests of warm waits must stay well within a
/// handle's half-second window (`CONTENDED_FOR`) on a loaded machine.
async fn calls_fast(raw: &Client, command: &str) -> u64 {
    let text = raw.info(Some("commandstats")).await.unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:")))
        .and_then(|s| s.split(',').find_map(|f| f.strip_prefix("calls=")))
        .map_or(0, |v| v.parse().unwrap())
}

async fn until_registered_fast(raw: &Client, name: &str, n: i64) {
    let key = format!("keylatch_lock_waiters:{{{name}}}");
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let count: i64 = raw.cmd(Cmd::new("ZCARD").key(key.as_str())).await.unwrap();
        if count == n {
            return;
        }
        assert!(Instant::now() < until, "{n} waiters of {name} registered");
        tokio::time::sleep(Duration::from_millis(1)).await;
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

/// Three processes wait on a lock a fourth holds. Each release hands the
/// lock to one of them by name (a grant): the three acquisitions cost no
/// EVALSHA of their own, only the releases (a wake would add one acquire
/// each, a herd two failed tries after the first release and one after
/// the second), and the registry is empty after (the last grant's mark
/// goes with the last release).
#[tokio::test]
async fn each_release_hands_the_lock_to_one_waiting_process() {
    let server = RedisServer::start();
    let holder = untracked_holder(&server).await;
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
    // The holder's release, then per waiter its release alone.
    assert_eq!(used, 4, "EVALSHA calls for 3 handoffs");
    assert_eq!(registered(&server, "herd"), 0);
}

/// Redisson's waiters still wake when the lock is free: with a keylatch
/// waiter woken (not granted) the release says "00" on Redisson's channel
/// (Java's `Long.valueOf` reads 0, its unlock message); with none it says
/// "0", as Redisson does. A release that grants the lock says nothing
/// there (it is held again): the granted holder's release says "0".
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

    // A registered keylatch waiter with a lease of its own is woken, not
    // granted: "00", and that waiter then takes the lock.
    let waiter = process(&server).await;
    for lease in [Some(Duration::from_secs(10)), None] {
        let guard = take_free(&holder, "java").await;
        let waiter = waiter.clone();
        let w = tokio::spawn(async move {
            let g = waiter
                .lock("java")
                .try_acquire(Duration::from_secs(15), lease)
                .await
                .unwrap()
                .expect("acquired");
            g.unlock().await.unwrap();
        });
        until_registered(&server, "java", 1).await;
        guard.unlock().await.unwrap();
        let next = next_message(&mut sub).await;
        if lease.is_some() {
            assert_eq!(next, "00");
            assert_eq!(next.parse::<i64>().unwrap(), 0);
            // The woken waiter's own release, with nobody registered.
            assert_eq!(next_message(&mut sub).await, "0");
        } else {
            // Granted: the first word on Redisson's channel is the granted
            // holder's own release.
            assert_eq!(next, "0");
        }
        tokio::time::timeout(Duration::from_secs(5), w)
            .await
            .unwrap()
            .unwrap();
    }
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

/// A raw waiter's try of `script` on `name`: owner `owner`, a 60 s span,
/// wait tag `tag`; the reply as text.
async fn raw_try(
    raw: &Client,
    script: &keylatch_cluster::Script,
    name: &str,
    owner: &str,
    tag: &str,
) -> String {
    let counter = format!("redisson_lock_token:{{{name}}}");
    let registry = format!("keylatch_lock_waiters:{{{name}}}");
    let reply = raw
        .eval_script(
            script,
            &[name, counter.as_str()],
            &["30000", owner, "600000", "60000", registry.as_str(), tag],
        )
        .await
        .unwrap();
    format!("{:?}", reply.value())
}

/// The release of a lock a tagged waiter waits for makes the hash that
/// waiter's first hold, with the counter's next token, for the releaser's
/// watchdog lease, and names it with the grant on the waiters' channel. A
/// try of that wait that was already on its way takes the grant as its
/// first hold (once: the next is a re-entry), for its own lease.
#[tokio::test]
async fn a_release_grants_the_lock_to_a_tagged_waiter_and_its_late_try_takes_it() {
    let server = RedisServer::start();
    let raw = Client::connect(&server.url()).await.unwrap();
    let holder = process(&server).await;
    let guard = take_free(&holder, "granted").await;
    let before: u64 = server
        .cli(&["GET", "redisson_lock_token:{granted}"])
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let tried = raw_try(&raw, &REENTRANT_ACQUIRE, "granted", "ghost:1", "5").await;
    assert!(tried.contains("Integer(0)"), "held, registered: {tried}");
    let hub = PubSub::connect(&server.url()).await.unwrap();
    // The ghost's process channel (its client id "ghost"), the registry's
    // own name (an earlier keylatch's waiters) and Redisson's channel.
    let mut named = hub
        .subscribe("keylatch_lock_waiters:{granted}:ghost")
        .await
        .unwrap();
    let mut shared = hub
        .subscribe("keylatch_lock_waiters:{granted}")
        .await
        .unwrap();
    let mut java = hub
        .subscribe("redisson_lock__channel:{granted}")
        .await
        .unwrap();
    guard.unlock().await.unwrap();
    let message = next_message(&mut named).await;
    // Held again at once: no other process is woken.
    for quiet in [&mut shared, &mut java] {
        assert!(
            tokio::time::timeout(Duration::from_millis(200), quiet.recv())
                .await
                .is_err(),
            "a grant wakes nobody else"
        );
    }
    let token = before + 1;
    assert_eq!(message, format!("ghost:1 5 {token} 30000"));
    assert_eq!(
        server.cli(&["HGET", "granted", "ghost:1"]).unwrap().trim(),
        "1"
    );
    let pttl: i64 = server
        .cli(&["PTTL", "granted"])
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        pttl > 25_000 && pttl <= 30_000,
        "the watchdog lease: {pttl}"
    );
    // Another wait of the same owner (tag 7) is not the grant's.
    assert_eq!(
        server
            .cli(&["ZSCORE", "keylatch_lock_waiters:{granted}", "ghost:1"])
            .unwrap()
            .trim()
            .parse::<f64>()
            .unwrap(),
        5.0 / 1024.0,
        "the grant's mark"
    );
    // Inspection shows the mark as a grant, not as a registration whose
    // end was half a century ago.
    let seen = holder.inspect("granted").await.unwrap();
    assert_eq!(seen.registered.len(), 1, "{seen:?}");
    assert!(seen.registered[0].granted, "{seen:?}");
    assert_eq!(seen.registered[0].deadline_in_ms, None, "{seen:?}");
    // The wait's own try: its first hold, the grant's token, and the mark
    // taken out.
    let took = raw_try(&raw, &REENTRANT_ACQUIRE, "granted", "ghost:1", "5").await;
    assert_eq!(took, format!("Array([Integer(1), Integer({token})])"));
    assert_eq!(
        server.cli(&["HGET", "granted", "ghost:1"]).unwrap().trim(),
        "1"
    );
    assert_eq!(
        server
            .cli(&["ZSCORE", "keylatch_lock_waiters:{granted}", "ghost:1"])
            .unwrap()
            .trim(),
        ""
    );
    // Taken once: the same try again is a re-entry.
    let again = raw_try(&raw, &REENTRANT_ACQUIRE, "granted", "ghost:1", "5").await;
    assert_eq!(again, format!("Array([Integer(2), Integer({token})])"));
}

/// Raw calls of the reentrant scripts on `name`, as a client makes them.
struct RawLock<'a> {
    raw: &'a Client,
    name: &'a str,
    counter: String,
    registry: String,
}

impl<'a> RawLock<'a> {
    fn new(raw: &'a Client, name: &'a str) -> Self {
        Self {
            raw,
            name,
            counter: format!("redisson_lock_token:{{{name}}}"),
            registry: format!("keylatch_lock_waiters:{{{name}}}"),
        }
    }

    /// A try by `owner`: `span` "0" takes or finds it held; else a wait
    /// registered for `span` ms with tag `tag`.
    async fn try_as(&self, owner: &str, span: &str, tag: &str) -> String {
        let keys = [self.name, self.counter.as_str()];
        let argv = ["30000", owner, "600000", span, self.registry.as_str(), tag];
        let reply = self
            .raw
            .eval_script(&REENTRANT_ACQUIRE, &keys, &argv)
            .await
            .unwrap();
        format!("{:?}", reply.value())
    }

    /// `owner`'s release of hold `token` ("0": by owner), granting a tagged
    /// waiter the lock for 30 s.
    async fn release_as(&self, owner: &str, token: &str) -> String {
        let channel = format!("redisson_lock__channel:{{{}}}", self.name);
        let keys = [self.name, self.counter.as_str()];
        let argv = [
            owner,
            channel.as_str(),
            "publish",
            self.registry.as_str(),
            "30000",
            token,
        ];
        let reply = self
            .raw
            .eval_script(&REENTRANT_RELEASE, &keys, &argv)
            .await
            .unwrap();
        format!("{:?}", reply.value())
    }
}

/// A grant keeps the registry, and the grant's mark in it, at least the
/// grant's lease though the waiter registered for less (its late try must
/// still find the mark), and leaves the waiters' field on the hash, so the
/// new holder's release serves whoever waits behind. A grant needs the
/// counter: a release that did not find it (by owner, or by token with the
/// counter gone) wakes the waiter instead and deletes the hash. Checked on
/// every server the suite runs on (Redis 6.2 has no `PEXPIRE … GT`).
#[tokio::test]
async fn a_grant_keeps_the_registry_and_the_waiters_field_for_its_lease() {
    let server = RedisServer::start();
    let raw = Client::connect(&server.url()).await.unwrap();
    let cli = |args: &[&str]| server.cli(args).unwrap().trim().to_owned();
    for (case, by_token) in [("by-owner", false), ("by-token", true)] {
        let name = format!("grant-keeps-{case}");
        let lock = RawLock::new(&raw, &name);
        let taken = lock.try_as("holder:1", "0", "0").await;
        assert!(taken.starts_with("Array([Integer(1),"), "{case}: {taken}");
        let token = cli(&["GET", &lock.counter]);
        let tried = lock.try_as("ghost:1", "2000", "5").await;
        assert!(tried.contains("Integer(0)"), "{case}: held: {tried}");
        let short: i64 = cli(&["PTTL", &lock.registry]).parse().unwrap();
        assert!((0..=2000).contains(&short), "{case}: {short}");
        let release_token = if by_token { token.as_str() } else { "0" };
        assert_eq!(
            lock.release_as("holder:1", release_token).await,
            "Integer(1)"
        );
        assert_eq!(cli(&["HGET", &name, "ghost:1"]), "1", "{case}: granted");
        assert_eq!(cli(&["HEXISTS", &name, "holder:1"]), "0", "{case}");
        assert_eq!(cli(&["HEXISTS", &name, "keylatch_waiters"]), "1", "{case}");
        let kept: i64 = cli(&["PTTL", &lock.registry]).parse().unwrap();
        assert!(
            kept > 25_000,
            "{case}: the registry lives the grant: {kept}"
        );
        let mark: f64 = cli(&["ZSCORE", &lock.registry, "ghost:1"]).parse().unwrap();
        assert_eq!(mark, 5.0 / 1024.0, "{case}: the mark");

        // No counter: the waiter is woken, not granted, and the hash goes.
        let name = format!("grant-needs-a-counter-{case}");
        let lock = RawLock::new(&raw, &name);
        lock.try_as("holder:1", "0", "0").await;
        let token = cli(&["GET", &lock.counter]);
        lock.try_as("ghost:1", "60000", "5").await;
        cli(&["DEL", &lock.counter]);
        let release_token = if by_token { token.as_str() } else { "0" };
        assert_eq!(
            lock.release_as("holder:1", release_token).await,
            "Integer(1)"
        );
        assert_eq!(cli(&["EXISTS", &name]), "0", "{case}: nothing granted");
        assert_eq!(
            cli(&["EXISTS", &lock.counter]),
            "0",
            "{case}: no counter made"
        );
    }
}

/// A try of another wait of the same owner (a clone of the handle, tag 7)
/// that finds the grant of wait 5 is a re-entry, and leaves the mark: the
/// grant is wait 5's to take.
#[tokio::test]
async fn a_grant_is_taken_only_by_the_wait_it_names() {
    let server = RedisServer::start();
    let raw = Client::connect(&server.url()).await.unwrap();
    let holder = process(&server).await;
    let guard = take_free(&holder, "named-wait").await;
    raw_try(&raw, &REENTRANT_ACQUIRE, "named-wait", "ghost:1", "5").await;
    guard.unlock().await.unwrap();
    let other = raw_try(&raw, &REENTRANT_ACQUIRE, "named-wait", "ghost:1", "7").await;
    assert!(other.contains("Integer(2)"), "a re-entry: {other}");
    let own = raw_try(&raw, &REENTRANT_ACQUIRE, "named-wait", "ghost:1", "5").await;
    assert!(own.starts_with("Array([Integer(1),"), "the grant: {own}");
    assert_eq!(
        server
            .cli(&["HGET", "named-wait", "ghost:1"])
            .unwrap()
            .trim(),
        "2"
    );
}

/// A non-reentrant lock's waiter whose late try finds its grant takes it
/// (not the refused re-entry it would otherwise be), and a fenced lock's
/// granted waiter shows the grant's token, above the holder's.
#[tokio::test]
async fn non_reentrant_and_fenced_waiters_take_their_grants() {
    let server = RedisServer::start();
    let raw = Client::connect(&server.url()).await.unwrap();
    let holder = untracked_holder(&server).await;
    let guard = holder
        .non_reentrant_lock("nr")
        .try_acquire_now(None)
        .await
        .unwrap()
        .expect("free");
    let tried = raw_try(&raw, &NONREENTRANT_ACQUIRE, "nr", "ghost:1", "3").await;
    assert!(tried.contains("Integer(0)"), "{tried}");
    guard.unlock().await.unwrap();
    let took = raw_try(&raw, &NONREENTRANT_ACQUIRE, "nr", "ghost:1", "3").await;
    assert!(took.starts_with("Array([Integer(1),"), "the grant: {took}");
    let again = raw_try(&raw, &NONREENTRANT_ACQUIRE, "nr", "ghost:1", "3").await;
    assert!(again.starts_with("Array([Integer(-1),"), "refused: {again}");

    let fenced = holder
        .fenced_lock("fenced")
        .try_acquire_now(None)
        .await
        .unwrap()
        .expect("free");
    let first = fenced.fencing_token().expect("a token");
    let waiter = process(&server).await;
    let w = tokio::spawn(async move {
        let g = waiter
            .fenced_lock("fenced")
            .try_acquire(Duration::from_secs(15), None)
            .await
            .unwrap()
            .expect("granted");
        let t = g.fencing_token();
        g.unlock().await.unwrap();
        t
    });
    until_registered(&server, "fenced", 1).await;
    let before = calls(&server, "evalsha");
    fenced.unlock().await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(10), w)
        .await
        .unwrap()
        .unwrap()
        .expect("a token");
    assert!(second > first, "{second} after {first}");
    // The holder's release and the waiter's: no acquire of its own.
    assert_eq!(calls(&server, "evalsha") - before, 2);
}

/// A wait that gives up with a grant it never took gives the lock back
/// (`waiter_leave.lua` answers 2): the hash goes and "0" wakes the waiters
/// behind, one of which then holds it.
#[tokio::test]
async fn a_grant_nobody_took_is_given_back_by_the_leave() {
    let server = RedisServer::start();
    let raw = Client::connect(&server.url()).await.unwrap();
    let holder = process(&server).await;
    let guard = take_free(&holder, "given-back").await;
    raw_try(&raw, &REENTRANT_ACQUIRE, "given-back", "ghost:1", "9").await;
    until_registered(&server, "given-back", 1).await;
    let waiter = process(&server).await;
    let (tx, mut rx) = tokio::sync::mpsc::channel(1);
    let w = tokio::spawn(async move {
        let g = waiter
            .lock("given-back")
            .try_acquire(Duration::from_secs(25), None)
            .await
            .unwrap()
            .expect("acquired");
        tx.send(()).await.unwrap();
        g.unlock().await.unwrap();
    });
    until_registered(&server, "given-back", 2).await;
    // The release grants the lock to the ghost, registered first.
    guard.unlock().await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(500), rx.recv())
            .await
            .is_err(),
        "the ghost holds it, not the live waiter"
    );
    assert_eq!(
        server
            .cli(&["HGET", "given-back", "ghost:1"])
            .unwrap()
            .trim(),
        "1"
    );
    let left = raw
        .eval_script(
            &WAITER_LEAVE,
            &["given-back"],
            &[
                "ghost:1",
                "redisson_lock__channel:{given-back}",
                "publish",
                "keylatch_lock_waiters:{given-back}",
                "9",
            ],
        )
        .await
        .unwrap();
    assert_eq!(format!("{:?}", left.value()), "Integer(2)");
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("the live waiter is woken and takes the lock")
        .unwrap();
    w.await.unwrap();
}

/// A granted hold is its holder's watchdog's to renew: with a 1 s watchdog
/// it is held (not lost, the key still its) well past the grant's lease.
#[tokio::test]
async fn a_granted_hold_is_renewed_by_its_watchdog() {
    let server = RedisServer::start();
    // The holder tracks no hold (see `untracked_holder`); the waiter does.
    let url = server.url();
    let short = |tracked: usize| {
        let url = url.clone();
        async move {
            let cfg = LocksConfig::default()
                .recheck(Duration::from_secs(30))
                .fair_waiter_timeout(Duration::from_secs(60))
                .watchdog_timeout(Duration::from_secs(1))
                .tracked_holds(tracked);
            Locks::connect_with(keylatch_cluster::ClientConfig::from_url(&url).unwrap(), cfg)
                .await
                .unwrap()
        }
    };
    let holder = short(0).await;
    take_free(&holder, "warm").await.unlock().await.unwrap();
    let guard = take_free(&holder, "renewed").await;
    let waiter = short(10_000).await;
    let w = tokio::spawn({
        let waiter = waiter.clone();
        async move {
            waiter
                .lock("renewed")
                .try_acquire(Duration::from_secs(15), None)
                .await
                .unwrap()
                .expect("granted")
        }
    });
    until_registered(&server, "renewed", 1).await;
    // The holder renews every third of a second: the count starts just
    // after one of its rounds (whose script is then loaded: no NOSCRIPT
    // round counted), and any renewal that still falls in it is taken off.
    let raw = Client::connect(&server.url()).await.unwrap();
    let rounds = holder.renewal_rounds();
    let until = Instant::now() + Duration::from_secs(5);
    while holder.renewal_rounds() == rounds {
        assert!(Instant::now() < until, "a renewal round of the holder");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // (A round is counted as it is sent: its one call lands meanwhile.)
    tokio::time::sleep(Duration::from_millis(20)).await;
    let renewals = || holder.renewal_calls() + waiter.renewal_calls();
    let (renewed, before) = (renewals(), calls_fast(&raw, "evalsha").await);
    guard.unlock().await.unwrap();
    let granted = tokio::time::timeout(Duration::from_secs(10), w)
        .await
        .unwrap()
        .unwrap();
    let (after, renewed) = (calls_fast(&raw, "evalsha").await, renewals() - renewed);
    assert_eq!(after - before - renewed, 1, "the release alone");
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert!(
        !granted.is_lost(),
        "renewed before the grant's lease ran out"
    );
    let fields = server.cli(&["HKEYS", "renewed"]).unwrap();
    assert!(fields.contains(':'), "still held: {fields}");
    let pttl: i64 = server
        .cli(&["PTTL", "renewed"])
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        pttl > 0 && pttl <= 1_000,
        "renewed with the 1 s lease: {pttl}"
    );
    granted.unlock().await.unwrap();
    assert_eq!(server.cli(&["EXISTS", "renewed"]).unwrap().trim(), "0");
}

/// A waiter with a lease of its own is woken by name, not granted: it
/// takes the lock with its own try, for its own lease.
#[tokio::test]
async fn a_waiter_with_a_fixed_lease_is_woken_not_granted() {
    let server = RedisServer::start();
    let holder = untracked_holder(&server).await;
    // The scripts cached on the server, so no NOSCRIPT round is counted.
    take_free(&holder, "warm").await.unlock().await.unwrap();
    let guard = take_free(&holder, "fixed").await;
    let waiter = process(&server).await;
    let w = tokio::spawn(async move {
        waiter
            .lock("fixed")
            .try_acquire(Duration::from_secs(15), Some(Duration::from_secs(8)))
            .await
            .unwrap()
            .expect("acquired")
    });
    until_registered(&server, "fixed", 1).await;
    let before = calls(&server, "evalsha");
    guard.unlock().await.unwrap();
    let g = tokio::time::timeout(Duration::from_secs(10), w)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(calls(&server, "evalsha") - before, 2, "release + own try");
    let pttl: i64 = server
        .cli(&["PTTL", "fixed"])
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(pttl > 0 && pttl <= 8_000, "its own lease: {pttl}");
    g.unlock().await.unwrap();
}

/// With `grant_to_waiters(false)` a process's waits are not tagged: the
/// release wakes the waiter, which takes the lock with a try of its own.
#[tokio::test]
async fn a_process_that_turns_grants_off_is_woken_and_tries() {
    let server = RedisServer::start();
    let holder = untracked_holder(&server).await;
    take_free(&holder, "warm").await.unlock().await.unwrap();
    let guard = take_free(&holder, "no-grant").await;
    let waiter = Locks::connect_with(
        keylatch_cluster::ClientConfig::from_url(&server.url()).unwrap(),
        LocksConfig::default()
            .recheck(Duration::from_secs(30))
            .fair_waiter_timeout(Duration::from_secs(60))
            .grant_to_waiters(false),
    )
    .await
    .unwrap();
    let w = waits_then_releases(waiter, "no-grant");
    until_registered(&server, "no-grant", 1).await;
    let entries = server
        .cli(&[
            "ZRANGE",
            "keylatch_lock_waiters:{no-grant}",
            "0",
            "-1",
            "WITHSCORES",
        ])
        .unwrap();
    let end: f64 = entries.lines().nth(1).unwrap().trim().parse().unwrap();
    assert_eq!(end.fract(), 0.0, "an untagged entry: {entries}");
    let before = calls(&server, "evalsha");
    guard.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), w)
        .await
        .unwrap()
        .unwrap();
    // The holder's release, the waiter's try, the waiter's release.
    assert_eq!(calls(&server, "evalsha") - before, 3);
}

/// An owner id the application gave (`lock_with_owner`) may be acted as by
/// other handles and processes too: its waits are never tagged, so it is
/// woken, not granted.
#[tokio::test]
async fn an_owner_the_application_named_is_woken_not_granted() {
    let server = RedisServer::start();
    let holder = untracked_holder(&server).await;
    take_free(&holder, "warm").await.unlock().await.unwrap();
    let guard = take_free(&holder, "named-owner").await;
    let waiter = process(&server).await;
    let w = tokio::spawn(async move {
        let g = waiter
            .lock_with_owner("named-owner", "billing-worker:7")
            .try_acquire(Duration::from_secs(15), None)
            .await
            .unwrap()
            .expect("acquired");
        g.unlock().await.unwrap();
    });
    until_registered(&server, "named-owner", 1).await;
    let before = calls(&server, "evalsha");
    guard.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), w)
        .await
        .unwrap()
        .unwrap();
    // The holder's release, the waiter's try, the waiter's release.
    assert_eq!(calls(&server, "evalsha") - before, 3);
}

/// A grant made before a waiter's try ran and undone since (a force
/// unlock, then another holder) is stale: the try's reply says the
/// counter it saw, and the waiter, hearing the grant after that reply,
/// does not take it. Here the waiter is raw: its try registers after the
/// undone grant, and the reply's counter is at least the grant's token.
#[tokio::test]
async fn a_waiters_held_reply_names_the_counter_it_saw() {
    let server = RedisServer::start();
    let raw = Client::connect(&server.url()).await.unwrap();
    let holder = process(&server).await;
    let guard = take_free(&holder, "stale").await;
    raw_try(&raw, &REENTRANT_ACQUIRE, "stale", "ghost:1", "4").await;
    guard.unlock().await.unwrap();
    let token: i64 = server
        .cli(&["GET", "redisson_lock_token:{stale}"])
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        server.cli(&["HGET", "stale", "ghost:1"]).unwrap().trim(),
        "1"
    );
    // Undone: a force unlock, and another holder.
    holder.force_unlock("stale").await.unwrap();
    let other = take_free(&holder, "stale").await;
    let reply = raw_try(&raw, &REENTRANT_ACQUIRE, "stale", "ghost:1", "4").await;
    // [0, pttl, counter, tag]
    let ints: Vec<i64> = reply
        .split("Integer(")
        .skip(1)
        .map(|s| s.split(')').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ints.len(), 4, "{reply}");
    assert_eq!((ints[0], ints[3]), (0, 4), "{reply}");
    let seen = ints[2];
    assert!(seen > token, "the counter after the undone grant: {reply}");
    other.unlock().await.unwrap();
}

/// A wait dropped just as a release granted it the lock gives the grant
/// back in the background; an acquire on the same handle at once waits
/// for that leave instead of finding its own grant (which a non-reentrant
/// lock refused as a re-entry, and a reentrant one took as a second hold).
#[tokio::test]
async fn an_acquire_right_after_a_wait_dropped_at_its_grant_finds_the_lock_given_back() {
    let server = RedisServer::start();
    let holder = process(&server).await;
    let waiter = process(&server).await;
    for (name, reentrant) in [("dropped-nr", false), ("dropped-r", true)] {
        let lock = if reentrant {
            waiter.lock(name)
        } else {
            waiter.non_reentrant_lock(name)
        };
        let held = if reentrant {
            holder.lock(name)
        } else {
            holder.non_reentrant_lock(name)
        };
        let guard = held.try_acquire_now(None).await.unwrap().expect("free");
        {
            let wait = lock.try_acquire(Duration::from_secs(30), None);
            tokio::pin!(wait);
            // Polled until it is registered, then never again: the grant
            // lands while nothing reads it.
            let until = Instant::now() + Duration::from_secs(10);
            while registered(&server, name) == 0 {
                assert!(Instant::now() < until, "{name}: registered");
                let polled = tokio::time::timeout(Duration::from_millis(10), &mut wait).await;
                assert!(polled.is_err(), "{name}: the lock is held");
            }
            guard.unlock().await.unwrap();
            let fields = server.cli(&["HKEYS", name]).unwrap();
            assert!(
                fields.contains(lock.owner()),
                "{name}: granted to the waiter: {fields}"
            );
        }
        // Dropped: its leave is spawned, not sent yet.
        let again = lock
            .try_acquire_now(None)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .unwrap_or_else(|| panic!("{name}: given back, then free"));
        assert_eq!(again.hold_count(), 1, "{name}: a first hold");
        again.unlock().await.unwrap();
        assert_eq!(server.cli(&["EXISTS", name]).unwrap().trim(), "0", "{name}");
    }
}

/// A handle whose try found the lock held lately still has its
/// subscriptions: its next wait subscribes first and makes one try, which
/// registers it (one EVALSHA), where its first wait made a plain try and
/// then a registering one (two).
#[tokio::test]
async fn a_wait_on_a_name_waited_on_lately_registers_with_its_first_try() {
    let server = RedisServer::start();
    let raw = Client::connect(&server.url()).await.unwrap();
    let holder = untracked_holder(&server).await;
    let waiter = process(&server).await;
    let lock = waiter.lock("warm");
    let mut costs = Vec::new();
    for _ in 0..2 {
        let guard = take_free(&holder, "warm").await;
        let before = calls_fast(&raw, "evalsha").await;
        let w = tokio::spawn({
            let lock = lock.clone();
            async move {
                let g = lock
                    .try_acquire(Duration::from_secs(15), None)
                    .await
                    .unwrap()
                    .expect("granted");
                g.unlock().await.unwrap();
            }
        });
        until_registered_fast(&raw, "warm", 1).await;
        costs.push(calls_fast(&raw, "evalsha").await - before);
        guard.unlock().await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), w)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(costs, [2, 1], "EVALSHA until registered: cold, then warm");
    // Still warm, the lock free: taken by the wait's first try, which is
    // no wait (the stats count the two above only).
    let g = lock
        .try_acquire(Duration::from_secs(5), None)
        .await
        .unwrap()
        .expect("free");
    g.unlock().await.unwrap();
    assert_eq!(waiter.stats().waits.acquired, 2);
}

/// A holder's re-entry while its own process waits on the name, through a
/// handle that found the lock held lately (a warm wait but for the
/// re-entry): the holding handle itself (`same`), or another handle of the
/// owner (its id given to `lock_with_owner`). Either re-enters at once: it
/// does not queue behind the process's waiter, which waits for this
/// owner's release.
async fn re_entry_while_the_process_waits(name: &'static str, same: bool) {
    let server = RedisServer::start();
    let raw = Client::connect(&server.url()).await.unwrap();
    let other = process(&server).await;
    let locks = process(&server).await;
    let first = locks.lock(name);
    let second = if same {
        first.clone()
    } else {
        locks.lock_with_owner(name, first.owner())
    };
    let theirs = take_free(&other, name).await;
    // The re-entering handle finds the lock held first: it counts as
    // contended.
    assert!(second.try_acquire_now(None).await.unwrap().is_none());
    theirs.unlock().await.unwrap();
    let held = first.try_acquire_now(None).await.unwrap().expect("free");
    let w = tokio::spawn({
        let waiter = locks.lock(name);
        async move {
            let g = waiter
                .try_acquire(Duration::from_secs(15), None)
                .await
                .unwrap()
                .expect("granted after both releases");
            g.unlock().await.unwrap();
        }
    });
    until_registered_fast(&raw, name, 1).await;
    let t0 = Instant::now();
    let again = second
        .try_acquire(Duration::from_secs(5), None)
        .await
        .unwrap()
        .expect("a re-entry");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    if same {
        assert_eq!(again.hold_count(), 2);
    }
    again.unlock().await.unwrap();
    held.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), w)
        .await
        .unwrap()
        .unwrap();
}

/// Through the holding handle: its hold keeps it from a warm wait.
#[tokio::test]
async fn a_re_entry_does_not_queue_behind_its_own_processs_waiter() {
    re_entry_while_the_process_waits("reenter-warm", true).await;
}

/// Through another handle of the owner, which holds nothing itself: the
/// process's waiter holds the name's local turn, so it tries at once.
#[tokio::test]
async fn a_re_entry_through_another_handle_of_the_owner_does_not_queue_either() {
    re_entry_while_the_process_waits("reenter-other", false).await;
}

/// A waiter queued behind a process-mate hears, while it queues, the grant
/// that ends its process-mate's wait. None of that is for it: after its
/// turn it makes one try (registering, the process-mate holding) and
/// waits for its own grant, not a second try for a stale wake.
#[tokio::test]
async fn a_queued_waiter_makes_one_try_after_its_turn() {
    let server = RedisServer::start();
    let raw = Client::connect(&server.url()).await.unwrap();
    let holder = untracked_holder(&server).await;
    let mates = process(&server).await;
    let name = "queued-one-try";
    // The holder's release script loaded (a first release loads it).
    take_free(&holder, name).await.unlock().await.unwrap();
    let held = take_free(&holder, name).await;
    let (release_first, first_may_release) = tokio::sync::oneshot::channel::<()>();
    let first = tokio::spawn({
        let lock = mates.lock(name);
        async move {
            let g = lock
                .try_acquire(Duration::from_secs(15), None)
                .await
                .unwrap()
                .expect("granted by the holder");
            first_may_release.await.unwrap();
            g.unlock().await.unwrap();
        }
    });
    until_registered_fast(&raw, name, 1).await;
    let before = calls_fast(&raw, "evalsha").await;
    let second = waits_then_releases(mates, name);
    // Its plain first try, then queued behind `first` (subscribed).
    let until = Instant::now() + Duration::from_secs(10);
    while calls_fast(&raw, "evalsha").await == before {
        assert!(Instant::now() < until, "the second waiter's first try");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = calls_fast(&raw, "evalsha").await;
    // The release grants `first` (its mark stays in the registry while it
    // holds); `second` gets its turn, tries once and registers behind
    // `first`'s hold.
    held.unlock().await.unwrap();
    // `first`'s grant mark and `second`'s entry.
    until_registered_fast(&raw, name, 2).await;
    // Room for a second try, were a stale wake to cause one.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let spent = calls_fast(&raw, "evalsha").await - before;
    assert_eq!(spent, 2, "the release and the queued waiter's one try");
    release_first.send(()).unwrap();
    for w in [
        first,
        tokio::spawn(async move { second.await.map(|_| ()).unwrap() }),
    ] {
        tokio::time::timeout(Duration::from_secs(10), w)
            .await
            .unwrap()
            .unwrap();
    }
}

/// A process that drops a registered wait (`keylatch exec` interrupted by
/// a signal while it waits) and then settles before it exits has taken its
/// registration back: the holder's release, after the waiter's runtime is
/// gone, leaves the lock free instead of granting it to a process that no
/// longer exists (held by nobody for a whole watchdog lease). `settle`
/// returned at once while the leave was still only spawned, and the
/// runtime's end dropped it unsent.
#[tokio::test]
async fn a_wait_dropped_then_settled_before_exit_is_not_granted_the_lock() {
    let server = RedisServer::start();
    let holder = process(&server).await;
    let guard = take_free(&holder, "exiting").await;
    let url = server.url();
    let waiting_process = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let cfg = LocksConfig::default().recheck(Duration::from_secs(30));
            let config = keylatch_cluster::ClientConfig::from_url(&url).unwrap();
            let waiter = Locks::connect_with(config, cfg).await.unwrap();
            let raw = Client::connect(&url).await.unwrap();
            let lock = waiter.lock("exiting");
            tokio::select! {
                r = lock.try_acquire(Duration::from_secs(30), None) => panic!("{r:?}"),
                () = until_registered_fast(&raw, "exiting", 1) => {}
            }
            assert!(waiter.settle(Duration::from_secs(10)).await);
        });
        // The runtime ends here, as a process's does at exit.
    });
    waiting_process.join().unwrap();
    guard.unlock().await.unwrap();
    assert_eq!(server.cli(&["EXISTS", "exiting"]).unwrap().trim(), "0");
    assert_eq!(registered(&server, "exiting"), 0);
}
