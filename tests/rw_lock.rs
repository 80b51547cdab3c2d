//! The read-write lock (`Locks::rw_lock`) against real servers: readers
//! overlap and a writer excludes them (from a history with timestamps,
//! standalone and on a cluster), downgrade, a refused upgrade, a crashed
//! reader freeing the lock within its lease while a live reader renews, a
//! writer not starved by a stream of readers, read holds of different
//! leases expiring on their own, a waiting writer's marker taken back when
//! it gives up, `lost()` per guard, and Redisson's own read and write lock
//! scripts (sent as a Java client sends them) sharing one lock with ours.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Soon;
use keylatch_cluster::{Client, ClientConfig, Commands, PubSub};
use keylatch_harness::{RedisCluster, RedisServer};
use keylatch_lock::{LockError, Locks, LocksConfig, LossReason};
use keylatch_resp::{Cmd, Frame};

const SOON: Soon = Soon::new(Duration::from_secs(10), Duration::from_millis(20));

fn config() -> LocksConfig {
    LocksConfig::default()
        .watchdog_timeout(Duration::from_secs(3))
        .fair_waiter_timeout(Duration::from_secs(2))
}

async fn locks_at(url: &str) -> Locks {
    Locks::new(Client::connect(url).await.unwrap(), config())
}

async fn cluster_locks(cluster: &RedisCluster) -> Locks {
    cluster_locks_with(cluster, config()).await
}

async fn cluster_locks_with(cluster: &RedisCluster, cfg: LocksConfig) -> Locks {
    let urls = cluster.seed_urls();
    let seeds: Vec<&str> = urls.iter().map(String::as_str).take(2).collect();
    let client = Client::connect_with(ClientConfig::from_urls(&seeds).unwrap())
        .await
        .unwrap();
    assert!(client.is_cluster());
    Locks::new(client, cfg)
}

async fn hget(client: &Client, key: &str, field: &str) -> Option<String> {
    match client
        .send(Cmd::new("HGET").key(key).arg(field))
        .await
        .unwrap()
    {
        Frame::Bulk(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Frame::Null => None,
        other => panic!("HGET answered {other:?}"),
    }
}

async fn exists(client: &Client, key: &str) -> bool {
    client
        .send(Cmd::new("EXISTS").key(key))
        .await
        .unwrap()
        .eq(&Frame::Integer(1))
}

fn read_hold_key(name: &str, owner: &str, i: u32) -> String {
    format!("{{{name}}}:{owner}:rwlock_timeout:{i}")
}

fn marker_key(name: &str) -> String {
    format!("{{{name}}}:rwlock_writers_waiting")
}

/// One hold in the history: when it was surely held (from the acquire's
/// return to the release's start), and the write's fencing token.
#[derive(Clone, Copy, Debug)]
struct Held {
    write: bool,
    from: Instant,
    to: Instant,
    token: Option<u64>,
}

/// Readers and writers on several clients; every write does a
/// read-modify-write of a shared value (a lost update shows a broken
/// exclusion). Returns the history.
async fn mixed_history(clients: &[Locks], name: &str, rounds: usize) -> Vec<Held> {
    let history = Arc::new(Mutex::new(Vec::new()));
    let shared = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (c, locks) in clients.iter().enumerate() {
        for t in 0..4 {
            let write = t == 0;
            let rw = locks.rw_lock(name);
            let (history, shared) = (Arc::clone(&history), Arc::clone(&shared));
            tasks.push(tokio::spawn(async move {
                for i in 0..rounds {
                    let lock = if write { rw.write() } else { rw.read() };
                    let g = lock
                        .try_acquire(Duration::from_secs(30), None)
                        .await
                        .unwrap()
                        .unwrap_or_else(|| panic!("client {c} task {t} round {i}: not in 30 s"));
                    let from = Instant::now();
                    if write {
                        let v = shared.load(Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        shared.store(v + 1, Ordering::SeqCst);
                    } else {
                        tokio::time::sleep(Duration::from_millis(3)).await;
                    }
                    let to = Instant::now();
                    history.lock().unwrap().push(Held {
                        write,
                        from,
                        to,
                        token: g.fencing_token(),
                    });
                    g.unlock().await.unwrap();
                }
            }));
        }
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("the workload finished")
            .unwrap();
    }
    let writes = clients.len() * rounds;
    assert_eq!(
        shared.load(Ordering::SeqCst),
        writes as u64,
        "lost updates: writers overlapped"
    );
    let h = history.lock().unwrap().clone();
    h
}

/// No write overlaps any other hold; write tokens rise in the order the
/// writes held the lock. Returns how many pairs of reads overlapped.
fn check_history(h: &[Held]) -> usize {
    let mut read_overlaps = 0;
    for (i, a) in h.iter().enumerate() {
        for b in &h[i + 1..] {
            let overlap = a.from < b.to && b.from < a.to;
            if overlap && (a.write || b.write) {
                panic!("a write overlapped another hold: {a:?} {b:?}");
            }
            if overlap {
                read_overlaps += 1;
            }
        }
    }
    let mut writes: Vec<&Held> = h.iter().filter(|x| x.write).collect();
    writes.sort_by_key(|x| x.from);
    for w in writes.windows(2) {
        assert!(
            w[1].token > w[0].token,
            "fencing tokens must rise with the writes: {:?} then {:?}",
            w[0],
            w[1]
        );
    }
    assert!(writes.iter().all(|w| w.token.is_some()));
    assert!(h.iter().filter(|x| !x.write).all(|r| r.token.is_none()));
    read_overlaps
}

async fn readers_overlap_writers_exclude(clients: &[Locks], name: &str) {
    // Two readers of different clients hold at once, and a writer is
    // refused meanwhile.
    let r1 = clients[0].rw_lock(name).read().acquire().await.unwrap();
    let r2 = clients[1]
        .rw_lock(name)
        .read()
        .try_acquire_now(None)
        .await
        .unwrap()
        .expect("a second reader joins the first");
    assert!(clients[1]
        .rw_lock(name)
        .write()
        .try_acquire_now(None)
        .await
        .unwrap()
        .is_none());
    r1.unlock().await.unwrap();
    r2.unlock().await.unwrap();

    let h = mixed_history(clients, name, 15).await;
    let overlaps = check_history(&h);
    eprintln!(
        "{} holds ({} writes), {overlaps} overlapping read pairs, no write overlapped",
        h.len(),
        h.iter().filter(|x| x.write).count()
    );
    assert!(
        !exists(clients[0].client(), name).await,
        "nothing held after"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_overlap_and_a_writer_excludes_them() {
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(locks_at(&server.url()).await);
    }
    readers_overlap_writers_exclude(&clients, "rw-history").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_readers_overlap_writers_exclude_and_reads_are_renewed() {
    let cluster = RedisCluster::start();
    // Read holds in many slots, kept by the watchdog past three leases:
    // renewed per node, each owner's own hold keys. Three clients with a
    // 2 s lease (renewed every 667 ms) take them first; they are checked
    // last, at least 6.7 s later (past three leases), while the history runs
    // on another name.
    let renew_lease = Duration::from_secs(2);
    let mut renewing = Vec::new();
    for _ in 0..3 {
        renewing.push(cluster_locks_with(&cluster, config().watchdog_timeout(renew_lease)).await);
    }
    let mut guards = Vec::new();
    let mut keys = Vec::new();
    for i in 0..12 {
        let rw = renewing[i % 3].rw_lock(&format!("rw-renew-{i}"));
        keys.push(read_hold_key(rw.name(), rw.owner(), 1));
        guards.push(rw.read().acquire().await.unwrap());
    }
    let past_three_leases = Instant::now() + renew_lease * 3 + renew_lease / 3;

    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(cluster_locks(&cluster).await);
    }
    readers_overlap_writers_exclude(&clients, "rw-cluster").await;

    tokio::time::sleep_until(past_three_leases.into()).await;
    let admin = clients[0].client();
    for (g, k) in guards.iter().zip(&keys) {
        assert!(!g.is_lost(), "{k}: the watchdog kept it");
        assert!(exists(admin, k).await, "{k} still there");
    }
    for g in guards {
        g.unlock().await.unwrap();
    }
    for k in &keys {
        assert!(!exists(admin, k).await, "{k} deleted by the release");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_downgrades_to_a_read_hold() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let admin = locks.client().clone();
    let name = "rw-downgrade";
    let rw = locks.rw_lock(name);
    let other = locks.rw_lock(name);

    let w = rw.write().acquire().await.unwrap();
    assert_eq!(hget(&admin, name, "mode").await.as_deref(), Some("write"));
    let write_field = format!("{}:write", rw.owner());
    assert_eq!(hget(&admin, name, &write_field).await.as_deref(), Some("1"));
    // The writer may read; nobody else may.
    let r = rw.read().try_acquire_now(None).await.unwrap().unwrap();
    assert!(other.read().try_acquire_now(None).await.unwrap().is_none());

    // Listen for the write unlock's message: "1" even on a downgrade, so
    // readers held back wake now (Redisson publishes nothing there).
    let hub = PubSub::from_client_with(&admin, Default::default())
        .await
        .unwrap();
    let mut sub = hub
        .subscribe(&format!("redisson_rwlock:{{{name}}}"))
        .await
        .unwrap();
    w.unlock().await.unwrap();
    SOON.expect_message(&mut sub, &format!("redisson_rwlock:{{{name}}}"), "1")
        .await;
    assert_eq!(hget(&admin, name, "mode").await.as_deref(), Some("read"));
    assert_eq!(hget(&admin, name, &write_field).await, None);
    assert!(!r.is_lost(), "the read hold survives the downgrade");

    // Now other readers share it, and writers wait.
    let r2 = other.read().try_acquire_now(None).await.unwrap().unwrap();
    assert!(other.write().try_acquire_now(None).await.is_err());
    let third = locks.rw_lock(name);
    assert!(third.write().try_acquire_now(None).await.unwrap().is_none());
    r.unlock().await.unwrap();
    r2.unlock().await.unwrap();
    let w2 = third.write().try_acquire_now(None).await.unwrap().unwrap();
    w2.unlock().await.unwrap();
    assert!(!exists(&admin, name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_is_refused_at_once_and_the_reads_stand() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let name = "rw-upgrade";
    let rw = locks.rw_lock(name);
    let r = rw.read().acquire().await.unwrap();
    let r_again = rw.read().acquire().await.unwrap();
    assert_eq!(r_again.hold_count(), 2, "a read re-entry counts");

    let started = Instant::now();
    let err = rw
        .write()
        .try_acquire(Duration::from_secs(20), None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, LockError::UpgradeRefused { ref name } if name == "rw-upgrade"),
        "{err:?}"
    );
    // A wait without end is refused the same way, not left to hang.
    let err = tokio::time::timeout(Duration::from_secs(10), rw.write().acquire())
        .await
        .expect("refused, not waiting")
        .unwrap_err();
    assert!(matches!(err, LockError::UpgradeRefused { .. }), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "refused at once, not after the 20 s wait"
    );
    assert_eq!(rw.read().hold_count().await.unwrap(), 2, "reads untouched");
    assert!(!exists(locks.client(), &marker_key(name)).await);
    r_again.unlock().await.unwrap();
    r.unlock().await.unwrap();
    // Without reads the same owner takes the write.
    let w = rw.write().try_acquire_now(None).await.unwrap().unwrap();
    w.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_reader_frees_the_lock_within_its_lease_while_another_renews() {
    let server = RedisServer::start();
    let url = server.url();
    let locks = locks_at(&url).await;
    let admin = locks.client().clone();
    let name = "rw-crash";
    let live = locks.rw_lock(name);
    let live_guard = live.read().acquire().await.unwrap();

    // The crashed reader: its own runtime on another thread, dropped while
    // it holds (no release, no renewal after).
    let crash_url = url.clone();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let crashed = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let locks = locks_at(&crash_url).await;
            let rw = locks.rw_lock(name);
            let g = rw.read().acquire().await.unwrap();
            held_tx.send(rw.owner().to_owned()).unwrap();
            std::mem::forget(g);
            std::mem::forget(locks);
        });
        rt.shutdown_background();
    });
    let dead_owner = held_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    crashed.join().unwrap();
    let crashed_at = Instant::now();
    let dead_key = read_hold_key(name, &dead_owner, 1);
    let live_key = read_hold_key(name, live.owner(), 1);
    assert!(exists(&admin, &dead_key).await);

    // The live reader's renewals (every second) do not keep the dead
    // reader's hold: it ends with its own lease (3 s).
    Soon::new(Duration::from_secs(8), Duration::from_millis(50))
        .eventually("the crashed reader's hold expired", || {
            let admin = admin.clone();
            let k = dead_key.clone();
            async move { !exists(&admin, &k).await }
        })
        .await;
    let gone_after = crashed_at.elapsed();
    eprintln!("crashed reader's hold gone {gone_after:?} after the crash (lease 3 s)");
    assert!(exists(&admin, &live_key).await, "the live reader renews");
    assert!(!live_guard.is_lost());

    // A writer waits for the live reader only: its release frees the lock
    // (the dead reader's count, with no hold key left, does not count).
    let writer = locks.rw_lock(name);
    let w = tokio::spawn(async move {
        writer
            .write()
            .try_acquire(Duration::from_secs(20), None)
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!w.is_finished(), "the live reader still holds");
    live_guard.unlock().await.unwrap();
    let g = tokio::time::timeout(Duration::from_secs(10), w)
        .await
        .unwrap()
        .unwrap()
        .expect("the writer got the lock once the live reader left");
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_is_not_starved_by_readers_that_re_acquire_in_a_loop() {
    let server = RedisServer::start();
    let clients = [locks_at(&server.url()).await, locks_at(&server.url()).await];
    let admin = Client::connect(&server.url()).await.unwrap();
    let name = "rw-starve";
    let stop = Arc::new(AtomicBool::new(false));
    // Every read acquisition: (asked at, held at).
    let reads = Arc::new(Mutex::new(Vec::<(Instant, Instant)>::new()));
    let mut readers = Vec::new();
    for i in 0..8u64 {
        let rw = clients[(i % 2) as usize].rw_lock(name);
        let (stop, reads) = (Arc::clone(&stop), Arc::clone(&reads));
        readers.push(tokio::spawn(async move {
            // Staggered, each holding 100 ms of every ~101: the read count
            // never falls to zero by chance for long.
            tokio::time::sleep(Duration::from_millis(12 * i)).await;
            // Bounded: the test stops them well before this.
            for _ in 0..2_000 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let asked = Instant::now();
                if let Some(g) = rw
                    .read()
                    .try_acquire(Duration::from_secs(30), None)
                    .await
                    .unwrap()
                {
                    reads.lock().unwrap().push((asked, Instant::now()));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    g.unlock().await.unwrap();
                }
            }
        }));
    }
    SOON.eventually("readers running", || {
        let reads = Arc::clone(&reads);
        async move { reads.lock().unwrap().len() > 20 }
    })
    .await;
    let started = Instant::now();
    let writer = clients[0].rw_lock(name);
    let owner = writer.owner().to_owned();
    let w = tokio::spawn(async move {
        let g = writer
            .write()
            .try_acquire(Duration::from_secs(20), None)
            .await
            .unwrap();
        (g, Instant::now())
    });
    // When the writer's marker is seen (it is set before this).
    let marked = Soon::new(Duration::from_secs(10), Duration::from_millis(1))
        .until(|| {
            let (admin, owner) = (admin.clone(), owner.clone());
            async move {
                match admin
                    .send(Cmd::new("ZSCORE").key(marker_key("rw-starve")).arg(&*owner))
                    .await
                {
                    Ok(Frame::Null) | Err(_) => Err("the writer is not waiting yet".to_owned()),
                    Ok(_) => Ok(Instant::now()),
                }
            }
        })
        .await;
    let (got, held_at) = tokio::time::timeout(Duration::from_secs(30), w)
        .await
        .unwrap()
        .unwrap();
    let waited = held_at.duration_since(started);
    eprintln!("writer behind 8 looping readers got the lock after {waited:?}");
    let g = got.expect("the writer got the lock within its 20 s wait");
    // The policy itself: no reader that asked after the marker was set got
    // in before the writer.
    let jumped: Vec<_> = reads
        .lock()
        .unwrap()
        .iter()
        .filter(|(asked, held)| *asked > marked && *held < held_at)
        .copied()
        .collect();
    assert!(
        jumped.is_empty(),
        "{} readers asked after the writer's marker and got in before it",
        jumped.len()
    );
    assert!(
        !exists(&admin, &marker_key(name)).await,
        "the marker went with the acquire"
    );
    g.unlock().await.unwrap();
    // Readers go on after the writer.
    let before = reads.lock().unwrap().len();
    SOON.eventually("readers run again after the write", || {
        let reads = Arc::clone(&reads);
        async move { reads.lock().unwrap().len() > before + 8 }
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    for r in readers {
        tokio::time::timeout(Duration::from_secs(30), r)
            .await
            .unwrap()
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_holds_of_different_leases_expire_independently() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let admin = locks.client().clone();
    let name = "rw-leases";
    let short = locks.rw_lock(name);
    let long = locks.rw_lock(name);
    let s = short
        .read()
        .try_acquire_now(Some(Duration::from_millis(400)))
        .await
        .unwrap()
        .unwrap();
    let l = long
        .read()
        .try_acquire_now(Some(Duration::from_millis(2500)))
        .await
        .unwrap()
        .unwrap();
    // One owner with two leases: one read session, whose hold keys expire
    // together at the later lease (a re-entry never cuts a hold short).
    let both = locks.rw_lock(name);
    let b1 = both
        .read()
        .try_acquire_now(Some(Duration::from_millis(400)))
        .await
        .unwrap()
        .unwrap();
    let b2 = both
        .read()
        .try_acquire_now(Some(Duration::from_millis(2500)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b2.hold_count(), 2);

    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), s.lost())
            .await
            .unwrap(),
        LossReason::Expired
    );
    Soon::new(Duration::from_secs(3), Duration::from_millis(20))
        .eventually("the short holds' keys expired", || {
            let admin = admin.clone();
            let a = read_hold_key(name, short.owner(), 1);
            async move { !exists(&admin, &a).await }
        })
        .await;
    assert!(exists(&admin, &read_hold_key(name, long.owner(), 1)).await);
    assert!(exists(&admin, &read_hold_key(name, both.owner(), 1)).await);
    assert!(exists(&admin, &read_hold_key(name, both.owner(), 2)).await);
    assert!(!b1.is_lost(), "the session lives to its later lease");
    assert!(!l.is_lost(), "the long hold stands");
    assert!(
        exists(&admin, name).await,
        "the hash lives with its longest"
    );
    let writer = locks.rw_lock(name);
    assert!(writer
        .write()
        .try_acquire_now(None)
        .await
        .unwrap()
        .is_none());
    assert!(
        matches!(s.unlock().await, Err(LockError::Expired { .. })),
        "unlocking an expired read hold is a typed error"
    );
    // The long holds run out too, and then the writer is in.
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), l.lost())
            .await
            .unwrap(),
        LossReason::Expired
    );
    drop((b1, b2));
    let w = writer
        .write()
        .try_acquire(Duration::from_secs(5), None)
        .await
        .unwrap()
        .expect("free once every read hold ran out");
    w.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_gives_up_takes_its_marker_back() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let admin = locks.client().clone();
    let name = "rw-marker";
    let reader = locks.rw_lock(name).read().acquire().await.unwrap();
    let marker = marker_key(name);

    // Timed out: taken back before the call returns.
    let w = locks.rw_lock(name);
    let got = w
        .write()
        .try_acquire(Duration::from_millis(600), None)
        .await
        .unwrap();
    assert!(got.is_none());
    assert!(!exists(&admin, &marker).await, "timed-out writer left");

    // Cancelled: taken back in the background.
    let w = locks.rw_lock(name);
    let owner = w.owner().to_owned();
    let task =
        tokio::spawn(async move { w.write().try_acquire(Duration::from_secs(30), None).await });
    SOON.eventually("the waiting writer set its marker", || {
        let (admin, m, o) = (admin.clone(), marker.clone(), owner.clone());
        async move {
            !matches!(
                admin.send(Cmd::new("ZSCORE").key(&*m).arg(&*o)).await,
                Ok(Frame::Null) | Err(_)
            )
        }
    })
    .await;
    // Meanwhile a new reader waits behind the writer.
    let newcomer = locks.rw_lock(name);
    assert!(newcomer
        .read()
        .try_acquire_now(None)
        .await
        .unwrap()
        .is_none());
    task.abort();
    let _ = task.await;
    SOON.eventually("the cancelled writer's marker is gone", || {
        let (admin, m) = (admin.clone(), marker.clone());
        async move { !exists(&admin, &m).await }
    })
    .await;
    let r2 = newcomer
        .read()
        .try_acquire_now(None)
        .await
        .unwrap()
        .unwrap();
    r2.unlock().await.unwrap();
    reader.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_per_guard_on_a_force_unlock() {
    let server = RedisServer::start();
    let locks = Locks::connect(&server.url()).await.unwrap();
    let name = "rw-lost";
    let w = locks.rw_lock(name).write().acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await; // tracked by now
    assert!(locks.rw_lock(name).force_unlock().await.unwrap());
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), w.lost())
            .await
            .unwrap(),
        LossReason::Gone
    );
    assert!(w.unlock().await.is_err());

    // Read holds: a force unlock of this process checks its holds of the
    // name at once; one from elsewhere is found at the next renewal (every
    // second with a 3 s watchdog).
    let r = locks.rw_lock(name).read().acquire().await.unwrap();
    assert!(locks.rw_lock(name).force_unlock().await.unwrap());
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), r.lost())
            .await
            .unwrap(),
        LossReason::Gone
    );
    let elsewhere = locks_at(&server.url()).await;
    let r1 = elsewhere.rw_lock(name).read().acquire().await.unwrap();
    let r2 = elsewhere.rw_lock(name).read().acquire().await.unwrap();
    assert!(locks.rw_lock(name).force_unlock().await.unwrap());
    for g in [&r1, &r2] {
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(5), g.lost())
                .await
                .unwrap(),
            LossReason::Gone
        );
    }
}

// Redisson's own read and write lock scripts (RedissonReadLock and
// RedissonWriteLock, 3.24+), as a Java client sends them: KEYS and ARGV as
// Redisson passes them, nil when acquired, else the PTTL.
const REDISSON_READ: &str = "local mode = redis.call('hget', KEYS[1], 'mode'); \
if (mode == false) then \
redis.call('hset', KEYS[1], 'mode', 'read'); \
redis.call('hset', KEYS[1], ARGV[2], 1); \
redis.call('set', KEYS[2] .. ':1', 1); \
redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); \
redis.call('pexpire', KEYS[1], ARGV[1]); \
return nil; \
end; \
if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then \
local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); \
local key = KEYS[2] .. ':' .. ind;\
redis.call('set', key, 1); \
redis.call('pexpire', key, ARGV[1]); \
local remainTime = redis.call('pttl', KEYS[1]); \
redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); \
return nil; \
end;\
return redis.call('pttl', KEYS[1]);";

const REDISSON_WRITE: &str = "local mode = redis.call('hget', KEYS[1], 'mode'); \
if (mode == false) then \
redis.call('hset', KEYS[1], 'mode', 'write'); \
redis.call('hset', KEYS[1], ARGV[2], 1); \
redis.call('pexpire', KEYS[1], ARGV[1]); \
return nil; \
end; \
if (mode == 'write') then \
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then \
redis.call('hincrby', KEYS[1], ARGV[2], 1); \
local currentExpire = redis.call('pttl', KEYS[1]); \
redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); \
return nil; \
end; \
end;\
return redis.call('pttl', KEYS[1]);";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_readers_and_writers_share_the_lock_with_ours() {
    let server = RedisServer::start();
    let locks = locks_at(&server.url()).await;
    let admin = locks.client().clone();
    let name = "rw-java";
    let java = "6f1c2d4e-0000-4000-8000-00000000java:7";
    let java_prefix = format!("{{{name}}}:{java}:rwlock_timeout");

    // A Java reader: our reader joins it, our writer waits.
    let reply = admin
        .eval(
            REDISSON_READ,
            &[name, &java_prefix],
            &["30000", java, &format!("{java}:write")],
        )
        .await
        .unwrap();
    assert_eq!(reply, Frame::Null, "the Java reader holds");
    let ours = locks.rw_lock(name);
    let r = ours.read().try_acquire_now(None).await.unwrap().unwrap();
    assert!(locks
        .rw_lock(name)
        .write()
        .try_acquire_now(None)
        .await
        .unwrap()
        .is_none());
    // Our release leaves the Java reader's hold alone.
    r.unlock().await.unwrap();
    assert_eq!(hget(&admin, name, "mode").await.as_deref(), Some("read"));
    assert_eq!(hget(&admin, name, java).await.as_deref(), Some("1"));
    // The Java reader's unlock, as Redisson's deletes the hash when it was
    // the last: here simulated by expiry of its hold and the hash.
    admin.del([name]).await.unwrap();
    admin.del([format!("{java_prefix}:1")]).await.unwrap();

    // Our writer: the Java reader and writer both wait, and the write
    // field is Redisson's `<owner>:write`.
    let w = ours.write().acquire().await.unwrap();
    let our_field = format!("{}:write", ours.owner());
    assert_eq!(hget(&admin, name, &our_field).await.as_deref(), Some("1"));
    let reply = admin
        .eval(
            REDISSON_READ,
            &[name, &java_prefix],
            &["30000", java, &format!("{java}:write")],
        )
        .await
        .unwrap();
    assert!(
        matches!(reply, Frame::Integer(n) if n > 0),
        "Java reader waits: {reply:?}"
    );
    let reply = admin
        .eval(
            REDISSON_WRITE,
            &[name],
            &["30000", &format!("{java}:write")],
        )
        .await
        .unwrap();
    assert!(
        matches!(reply, Frame::Integer(n) if n > 0),
        "Java writer waits: {reply:?}"
    );
    // Our write unlock wakes Java waiters with Redisson's message "1".
    let hub = PubSub::from_client_with(&admin, Default::default())
        .await
        .unwrap();
    let channel = format!("redisson_rwlock:{{{name}}}");
    let mut sub = hub.subscribe(&channel).await.unwrap();
    w.unlock().await.unwrap();
    SOON.expect_message(&mut sub, &channel, "1").await;

    // A Java writer holds: our reader and writer wait for it.
    let reply = admin
        .eval(
            REDISSON_WRITE,
            &[name],
            &["30000", &format!("{java}:write")],
        )
        .await
        .unwrap();
    assert_eq!(reply, Frame::Null, "the Java writer holds");
    assert!(ours.read().try_acquire_now(None).await.unwrap().is_none());
    assert!(ours.write().try_acquire_now(None).await.unwrap().is_none());
    // A Java unlock (modelled by its effect: the hash deleted, "1"
    // published) wakes our waiting reader.
    let waiter = ours.read();
    let task = tokio::spawn(async move {
        waiter
            .try_acquire(Duration::from_secs(20), None)
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    admin.del([name]).await.unwrap();
    admin.publish(&channel, "1").await.unwrap();
    let g = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("woken by the message, not the 30 s lease")
        .unwrap()
        .expect("acquired");
    g.unlock().await.unwrap();
}
