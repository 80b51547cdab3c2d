//! `Locks::inspect`: what a lock name holds, for every type, read from a
//! real server (one standalone server and one 6-node cluster, shared by the
//! cases of each test; every case has names of its own). Each type describes
//! its own part through the lock crate's seam; these check the values.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use keylatch_cluster::{Client, ClientConfig, Commands};
use keylatch_harness::{RedisCluster, RedisServer};
use keylatch_lock::{Holder, Inspection, Locks, LocksConfig};
use keylatch_resp::Cmd;

fn config() -> LocksConfig {
    LocksConfig::default().watchdog_timeout(Duration::from_secs(10))
}

async fn locks_on(url: &str) -> Locks {
    Locks::new(Client::connect(url).await.unwrap(), config())
}

/// Every case in turn on one deployment.
async fn every_case(locks: &Locks) {
    free(locks).await;
    reentrant(locks).await;
    registered_waiter(locks).await;
    fair_queue(locks).await;
    read_write(locks).await;
    expirable_semaphore(locks).await;
    plain_count(locks).await;
    not_a_lock(locks).await;
}

async fn free(locks: &Locks) {
    let seen = locks.inspect("inspect-free").await.unwrap();
    assert_eq!(seen.name, "inspect-free");
    assert_eq!(seen.redis_type, "none");
    assert_eq!(seen.ttl_ms, None);
    assert!(seen.holders.is_empty() && seen.waiters.is_empty());
    assert_eq!(seen.permits, None);
    assert_eq!(seen.fencing_token, None);
}

/// A keylatch waiter of a reentrant lock, registered to be woken by name:
/// shown beside the holder (not as one), gone once the release hands it
/// the lock. (Added in session 25: status showed no waiters for these.)
async fn registered_waiter(locks: &Locks) {
    let name = "inspect-registered";
    let holder = locks.lock(name).acquire().await.unwrap();
    let waiter = locks.lock(name);
    let owner = waiter.owner().to_owned();
    let waiting = tokio::spawn(async move {
        let g = waiter
            .try_acquire(Duration::from_secs(20), None)
            .await
            .unwrap()
            .expect("handed the lock on release");
        g.unlock().await.unwrap();
    });
    let mut seen = locks.inspect(name).await.unwrap();
    for _ in 0..200 {
        if !seen.registered.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        seen = locks.inspect(name).await.unwrap();
    }
    assert_eq!(seen.registered.len(), 1, "{seen:?}");
    let w = &seen.registered[0];
    assert_eq!(w.owner, owner);
    assert!(w.keylatch);
    assert!(w.deadline_in_ms.is_some_and(|ms| ms > 0), "{w:?}");
    assert_eq!(seen.holders.len(), 1, "the waiter is no holder: {seen:?}");
    assert!(!seen.shapeless, "{seen:?}");
    holder.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .unwrap()
        .unwrap();
    assert!(locks.inspect(name).await.unwrap().registered.is_empty());
}

async fn reentrant(locks: &Locks) {
    let lock = locks.lock("inspect-held");
    let first = lock.acquire().await.unwrap();
    let again = lock.acquire().await.unwrap();
    let seen = locks.inspect("inspect-held").await.unwrap();
    assert_eq!(seen.redis_type, "hash");
    assert_eq!(seen.holders, vec![Holder::new(lock.owner(), 2)]);
    let ttl = seen.ttl_ms.unwrap();
    assert!(ttl > 8_000 && ttl <= 10_000, "{ttl}");
    assert_eq!(seen.fencing_token, first.fencing_token());
    assert!(!seen.shapeless && seen.mode.is_none());
    again.unlock().await.unwrap();
    first.unlock().await.unwrap();
    assert_eq!(
        locks.inspect("inspect-held").await.unwrap().redis_type,
        "none"
    );
}

async fn fair_queue(locks: &Locks) {
    let holder = locks.fair_lock("inspect-fair");
    let held = holder.acquire().await.unwrap();
    let waiter = locks.fair_lock("inspect-fair");
    let owner = waiter.owner().to_owned();
    let waiting = tokio::spawn(async move {
        waiter
            .try_acquire(Duration::from_secs(5), None)
            .await
            .unwrap()
    });
    let mut seen = Inspection::default();
    for _ in 0..100 {
        seen = locks.inspect("inspect-fair").await.unwrap();
        if !seen.waiters.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(seen.waiters.len(), 1, "{seen:?}");
    let w = &seen.waiters[0];
    assert_eq!(w.owner, owner);
    assert!(w.keylatch, "a keylatch waiter has a liveness record");
    let left = w.deadline_in_ms.unwrap();
    assert!(left > 0 && left <= 5_000, "{left}");
    assert_eq!(seen.holders, vec![Holder::new(holder.owner(), 1)]);
    held.unlock().await.unwrap();
    let got = waiting.await.unwrap().expect("the waiter takes it");
    got.unlock().await.unwrap();
    assert!(locks
        .inspect("inspect-fair")
        .await
        .unwrap()
        .waiters
        .is_empty());
}

async fn read_write(locks: &Locks) {
    let rw = locks.rw_lock("inspect-rw");
    let r1 = rw.read().acquire().await.unwrap();
    let r2 = rw.read().acquire().await.unwrap();
    let writer = locks.rw_lock("inspect-rw").write();
    let writer_owner = writer.owner().to_owned();
    let waiting = tokio::spawn(async move {
        writer
            .try_acquire(Duration::from_secs(5), None)
            .await
            .unwrap()
    });
    let mut seen = Inspection::default();
    for _ in 0..100 {
        seen = locks.inspect("inspect-rw").await.unwrap();
        if !seen.writers_waiting.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(seen.mode.as_deref(), Some("read"));
    assert_eq!(seen.readers.len(), 1, "{seen:?}");
    let reader = &seen.readers[0];
    assert_eq!((reader.owner.as_str(), reader.count), (rw.owner(), 2));
    assert_eq!(reader.holds_ttl_ms.len(), 2);
    assert!(reader.holds_ttl_ms.iter().all(|t| *t > 0), "{reader:?}");
    assert_eq!(seen.writer, None);
    assert_eq!(seen.writers_waiting.len(), 1, "{seen:?}");
    assert_eq!(seen.writers_waiting[0].owner, writer_owner);
    assert!(seen.writers_waiting[0].deadline_in_ms > 0);
    r2.unlock().await.unwrap();
    r1.unlock().await.unwrap();
    let w = waiting.await.unwrap().expect("the writer takes it");
    let seen = locks.inspect("inspect-rw").await.unwrap();
    assert_eq!(seen.mode.as_deref(), Some("write"));
    assert_eq!(seen.writer, Some(Holder::new(&writer_owner, 1)));
    assert!(seen.readers.is_empty() && seen.writers_waiting.is_empty());
    w.unlock().await.unwrap();
}

async fn expirable_semaphore(locks: &Locks) {
    let sem = locks.expirable_semaphore("inspect-permits");
    assert!(sem.try_set_permits(3).await.unwrap());
    let leased = sem
        .try_acquire(2, Duration::from_secs(10), Some(Duration::from_secs(20)))
        .await
        .unwrap()
        .unwrap();
    let seen = locks.inspect("inspect-permits").await.unwrap();
    assert_eq!(seen.redis_type, "string");
    assert_eq!(seen.value.as_deref(), Some("1"));
    let permits = seen.permits.expect("leased permits");
    let mut ids: Vec<String> = permits.iter().map(|p| p.id.clone()).collect();
    ids.sort();
    let mut want: Vec<String> = leased.ids().iter().map(ToString::to_string).collect();
    want.sort();
    assert_eq!(ids, want);
    for p in &permits {
        let left = p.expires_in_ms.unwrap();
        assert!(left > 15_000 && left <= 20_000, "{p:?}");
    }
    leased.release().await.unwrap();
}

async fn plain_count(locks: &Locks) {
    let sem = locks.semaphore("inspect-count");
    assert!(sem.try_set_permits(4).await.unwrap());
    let seen = locks.inspect("inspect-count").await.unwrap();
    assert_eq!(seen.redis_type, "string");
    assert_eq!(seen.value.as_deref(), Some("4"));
    assert_eq!(seen.permits, None, "a plain semaphore leases nothing");
}

async fn not_a_lock(locks: &Locks) {
    let client = locks.client();
    let _: i64 = client
        .cmd(Cmd::new("RPUSH").key("inspect-list").arg("a"))
        .await
        .unwrap();
    let seen = locks.inspect("inspect-list").await.unwrap();
    assert_eq!(seen.redis_type, "list");
    assert!(seen.holders.is_empty());
    let _: i64 = client
        .cmd(
            Cmd::new("HSET")
                .key("inspect-app-hash")
                .arg("colour")
                .arg("blue"),
        )
        .await
        .unwrap();
    let seen = locks.inspect("inspect-app-hash").await.unwrap();
    assert!(seen.shapeless, "{seen:?}");
}

#[tokio::test]
async fn every_type_describes_itself_standalone() {
    let server = RedisServer::start();
    let locks = locks_on(&server.url()).await;
    every_case(&locks).await;
}

#[tokio::test]
async fn every_type_describes_itself_in_a_cluster() {
    let cluster = RedisCluster::start();
    let urls = cluster.seed_urls();
    let seeds: Vec<&str> = urls.iter().map(String::as_str).take(2).collect();
    let client = Client::connect_with(ClientConfig::from_urls(&seeds).unwrap())
        .await
        .unwrap();
    assert!(client.is_cluster());
    every_case(&Locks::new(client, config())).await;
}
