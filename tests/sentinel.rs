//! Sentinel deployments (issue 33) against real sentinels: a master, two
//! replicas and three sentinels (`redis-server --sentinel`, from the
//! harness). The client finds the master through a `redis+sentinel://` URL,
//! checks it with `ROLE`, never writes to a replica, and follows a
//! `SENTINEL FAILOVER`, a SIGKILLed master and a SIGSTOPped one; a sentinel
//! that is paused is no matter while a majority answers; a client started
//! while a failover is under way connects to the new master; sentinels that
//! cannot name a master give a typed error within the connect timeout.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use keylatch_cluster::{Client, ClientConfig, Commands, Error, SentinelError};
use keylatch_harness::{SentinelGroup, MASTER_NAME};
use keylatch_lock::{Locks, LocksConfig, ReplicaSync};

mod common;
use common::Soon;

/// Sentinel tests start their own groups (six processes each): one at a
/// time on two cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The port the client's last connect reached (`Client::sentinel_master`).
fn reached(client: &Client) -> Option<u16> {
    let (addr, _via) = client.sentinel_master()?;
    addr.rsplit(':').next()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_finds_the_master_and_follows_a_sentinel_failover() {
    let _serial = SERIAL.lock().await;
    let group = SentinelGroup::start();
    let client = Client::connect(&group.url()).await.unwrap();
    assert!(!client.is_cluster());
    client.set("s:k", "one").await.unwrap();
    // The write is on the master, and the client says which it reached.
    let master = group.master();
    assert_eq!(reached(&client), Some(group.nodes()[master].port()));
    let on_master = group.nodes()[master].cli(&["GET", "s:k"]).unwrap();
    assert_eq!(on_master.trim(), "one");

    let t = Instant::now();
    let new = tokio::task::block_in_place(|| group.failover()).unwrap();
    let switched = t.elapsed();
    // The sentinels announce the switch (+switch-master): the client's
    // connection is given up and made again through them, to the new
    // master. Until then a write may still reach the old master (not yet
    // demoted): the window a failover without replica sync has.
    let t = Instant::now();
    let port = group.nodes()[new].port();
    Soon::new(Duration::from_secs(10), Duration::from_millis(20))
        .until(|| async {
            client.set("s:k", "two").await.map_err(|e| e.to_string())?;
            (reached(&client) == Some(port))
                .then_some(())
                .ok_or_else(|| format!("still on {:?}", client.sentinel_master()))
        })
        .await;
    eprintln!(
        "SENTINEL FAILOVER: new master named after {switched:?}; writes reached it {:?} later",
        t.elapsed()
    );
    let value = group.nodes()[new].cli(&["GET", "s:k"]).unwrap();
    assert_eq!(value.trim(), "two");

    // The CLI takes the same URL (also from $KEYLATCH_URL, commas and all),
    // and `status` says which master it read, named by which sentinel.
    let cli = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_keylatch"))
            .env("KEYLATCH_URL", group.url())
            .args(args)
            .output()
            .unwrap()
    };
    let o = cli(&[
        "exec",
        "s:cli",
        "--",
        "sh",
        "-c",
        "test -n \"$KEYLATCH_FENCING_TOKEN\"",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let o = cli(&["status", "s:cli"]);
    let out = common::stdout(&o);
    let port = group.nodes()[new].port();
    assert!(
        out.starts_with(&format!(
            "master 127.0.0.1:{port} (named by sentinel 127.0.0.1:"
        )),
        "{out}"
    );
    let o = cli(&["status", "s:cli", "--json"]);
    let out = common::stdout(&o);
    assert!(
        out.contains(&format!(r#""reached":{{"master":"127.0.0.1:{port}""#)),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_through_sentinels_survive_a_killed_and_a_paused_master() {
    let _serial = SERIAL.lock().await;
    let mut group = SentinelGroup::start();
    // The lease must outlast a failover: from the master's last renewal,
    // the sentinels take 2.3-3.2 s to promote a replica of a paused master
    // (down-after 1 s; Redis 6.2 the slowest), and only then can the
    // client renew on the new master. A 3 s lease ran out on 6.2 in CI
    // (`Expired`, which was the truth); 10 s leaves room.
    let cfg = LocksConfig::default().watchdog_timeout(Duration::from_secs(10));
    let locks = Locks::connect_with(ClientConfig::from_url(&group.url()).unwrap(), cfg)
        .await
        .unwrap();
    // A hold taken with both replicas' acknowledgement survives the
    // master's death: the promoted replica has it, and renewal finds it.
    let held = locks
        .lock("s:held")
        .with_replica_sync(ReplicaSync::AtLeast {
            replicas: 2,
            timeout: Duration::from_millis(500),
        })
        .acquire()
        .await
        .unwrap();
    let acquired = Instant::now();

    // Another process waits for it through both failovers: its
    // subscription and its retries follow the client to each new master.
    let other = Locks::connect_with(
        ClientConfig::from_url(&group.url()).unwrap(),
        LocksConfig::default(),
    )
    .await
    .unwrap();
    let waiter = tokio::spawn(async move {
        let lock = other.lock("s:held");
        let until = Instant::now() + Duration::from_secs(90);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match lock.try_acquire(left, None).await {
                Ok(Some(g)) => return Some((Instant::now(), g)),
                Ok(None) => return None,
                // A wait cut by the failover (its attempt's outcome
                // unknown): wait again.
                Err(_) if !left.is_zero() => tokio::time::sleep(Duration::from_millis(50)).await,
                Err(_) => return None,
            }
        }
    });

    let old = group.master();
    group.node_mut(old).kill();
    let t = Instant::now();
    let new = tokio::task::block_in_place(|| group.wait_new_master(old, Duration::from_secs(30)))
        .unwrap();
    let promoted = t.elapsed();
    let took = acquire_soon(&locks, "s:after-kill").await;
    eprintln!("kill -9 master: promoted after {promoted:?}; a new lock acquired {took:?} later");
    assert!(!held.is_lost(), "the replicated hold survives the failover");
    assert_eq!(reached(locks.client()), Some(group.nodes()[new].port()));

    // A SIGSTOPped master: sentinels fail it over; the client's health
    // check gives its socket up and asks the sentinels again.
    let old = new;
    group.nodes()[old].pause().unwrap();
    let t = Instant::now();
    let new = tokio::task::block_in_place(|| group.wait_new_master(old, Duration::from_secs(30)))
        .unwrap();
    let promoted = t.elapsed();
    let took = acquire_soon(&locks, "s:after-pause").await;
    eprintln!("SIGSTOP master: promoted after {promoted:?}; a new lock acquired {took:?} later");
    group.nodes()[old].resume().unwrap();
    assert_eq!(reached(locks.client()), Some(group.nodes()[new].port()));
    // Past the first lease: the hold stands only if the watchdog renewed it
    // on a promoted master (the waiter, retrying at the lease's end, would
    // otherwise have taken it).
    tokio::time::sleep(
        (acquired + Duration::from_secs(11)).saturating_duration_since(Instant::now()),
    )
    .await;
    assert!(!held.is_lost(), "the hold is renewed after both failovers");
    assert!(
        !waiter.is_finished(),
        "the waiter waits while the hold stands"
    );
    let released = Instant::now();
    held.unlock().await.unwrap();
    let (at, guard) = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("the waiter answers")
        .unwrap()
        .expect("the waiter acquires");
    eprintln!(
        "a waiter registered before both failovers acquired {:?} after the release",
        at - released
    );
    guard.unlock().await.unwrap();
}

/// A lock acquired and released within 20 s (tried again while the client
/// follows the failover); how long it took.
async fn acquire_soon(locks: &Locks, name: &str) -> Duration {
    let t = Instant::now();
    let lock = locks.lock(name);
    let guard = Soon::new(Duration::from_secs(20), Duration::from_millis(50))
        .until(|| async {
            lock.try_acquire(Duration::from_secs(1), None)
                .await
                .map_err(|e| format!("acquire {name}: {e}"))
                .and_then(|g| g.ok_or_else(|| format!("{name} held by another")))
        })
        .await;
    let took = t.elapsed();
    guard.unlock().await.unwrap();
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_down_a_failover_under_way_and_sentinels_that_cannot_answer() {
    let _serial = SERIAL.lock().await;
    let mut group = SentinelGroup::start();
    // One of three sentinels paused (its port open, nothing answered): the
    // other two are a majority, and the client does not wait for the third.
    group.sentinel(0).signal("-STOP").unwrap();
    let url = group.url();
    let t = Instant::now();
    let client = Client::connect(&url).await.unwrap();
    let took = t.elapsed();
    eprintln!("one sentinel paused: connected in {took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    client.set("s:a", "1").await.unwrap();

    // A client that starts while a failover is under way (the master just
    // killed; the sentinels still name it, then elect, then name the new
    // one) connects once a node says it is the master, or fails with a
    // typed error within its connect timeout; asked again, it connects.
    let old = group.master();
    group.node_mut(old).kill();
    let t = Instant::now();
    let mut typed = Vec::new();
    let during = loop {
        match Client::connect(&url).await {
            Ok(c) => break c,
            Err(e) => {
                assert!(
                    matches!(e, Error::Sentinel(_) | Error::Io(_)),
                    "a typed error: {e:?}"
                );
                typed.push(e.to_string());
                assert!(t.elapsed() < Duration::from_secs(30), "{typed:?}");
            }
        }
    };
    let connected = t.elapsed();
    // The sentinels' +switch-master may still come after this connect
    // (it ends their failover): the connection is then made again, and a
    // request meanwhile is refused unsent (`Disconnected`), to be retried.
    Soon::new(Duration::from_secs(10), Duration::from_millis(20))
        .until(|| async { during.set("s:b", "2").await.map_err(|e| e.to_string()) })
        .await;
    eprintln!("a client started as the master died: connected after {connected:?} ({} typed errors before: {typed:?})", typed.len());
    let new = tokio::task::block_in_place(|| group.wait_new_master(old, Duration::from_secs(30)))
        .unwrap();
    assert_eq!(reached(&during), Some(group.nodes()[new].port()));
    let value = group.nodes()[new].cli(&["GET", "s:b"]).unwrap();
    assert_eq!(value.trim(), "2", "written to the new master");

    // A master name the sentinels do not know: a typed error, at once.
    let unknown = url.replace(&format!("/{MASTER_NAME}"), "/nosuch");
    let t = Instant::now();
    let e = Client::connect(&unknown).await.unwrap_err();
    assert!(
        matches!(e, Error::Sentinel(SentinelError::UnknownMaster { .. })),
        "{e:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    // Two of three sentinels down: one answer is no majority; the client
    // does not guess, and says so within its connect timeout (5 s).
    group.sentinel_mut(0).kill();
    group.sentinel_mut(1).kill();
    let t = Instant::now();
    let e = Client::connect(&url).await.unwrap_err();
    assert!(
        matches!(e, Error::Sentinel(SentinelError::Disagree { .. })),
        "{e:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(7), "{:?}", t.elapsed());
}
