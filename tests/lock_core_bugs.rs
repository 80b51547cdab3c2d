#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Regression tests for four known bugs of the lock core, against real
//! redis-server processes, through the public API only:
//!
//! 1. one overwritten key fails a whole renewal batch, so every other hold in
//!    it is reported lost and really expires;
//! 2. a cancelled attempt of a handle acting as another process's owner
//!    releases that process's hold by owner;
//! 3. a hold replaced behind its guard (same owner, new hold) keeps being
//!    renewed for the old guard, whose `lost()` never fires;
//! 4. with fencing off, an over-counted hold hides a replaced hold the same
//!    way.
//!
//! Each test's doc comment says which bug it covers and why it fails on the
//! code that has the bug.

mod common;
use common::locks::poll_once;

use std::future::Future;
use std::time::{Duration, Instant};

use keylatch_cluster::{Client, Commands};
use keylatch_harness::{RedisCluster, RedisServer};
use keylatch_lock::{Lock, LockGuard, Locks, LocksConfig, LossReason};

use common::Soon;

/// The watchdog lease of every test here: renewed every 500 ms.
const LEASE: Duration = Duration::from_millis(1500);

fn cfg() -> LocksConfig {
    LocksConfig::default().watchdog_timeout(LEASE)
}

async fn locks(server: &RedisServer, cfg: LocksConfig) -> Locks {
    Locks::new(Client::connect(&server.url()).await.unwrap(), cfg)
}

/// Any await of the test that should finish soon, bounded: `what` names it
/// in the panic.
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: not done within 5 s"))
}

/// Takes `lock` at once under the watchdog; panics unless it is free (or
/// already this owner's).
async fn hold(lock: &Lock, what: &str) -> LockGuard {
    within(what, lock.try_acquire_now(None))
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{what}: held by another owner"))
}

/// `redis-cli` output as a number; `None` for a nil reply (an empty line).
fn number(out: &str) -> Option<i64> {
    let t = out.trim();
    (!t.is_empty()).then(|| t.parse().unwrap_or_else(|e| panic!("{t:?}: {e}")))
}

/// `HGET key field` on `server`: the hold count of owner `field` (`None`
/// when the key or the field is missing).
fn hget(server: &RedisServer, key: &str, field: &str) -> Option<i64> {
    number(&server.cli(&["HGET", key, field]).unwrap())
}

fn pttl(server: &RedisServer, key: &str) -> i64 {
    number(&server.cli(&["PTTL", key]).unwrap()).unwrap()
}

/// The fencing counter of lock `name` on `server`.
fn token_counter(server: &RedisServer, name: &str) -> Option<u64> {
    let key = format!("redisson_lock_token:{{{name}}}");
    number(&server.cli(&["GET", &key]).unwrap()).map(|n| n.unsigned_abs())
}

/// `guard` is not reported lost for `span`; `what` names it in the panic,
/// which gives the loss reason and when it came.
async fn stays_held(guard: &LockGuard, span: Duration, what: &str) {
    let start = Instant::now();
    if let Ok(reason) = tokio::time::timeout(span, guard.lost()).await {
        panic!(
            "{what}: reported lost ({reason:?}) after {:?}, expected it held for {span:?}",
            start.elapsed()
        );
    }
}

/// The loss `guard` reports within `span` (from now); panics with `what`
/// when none comes.
async fn lost_within(guard: &LockGuard, span: Duration, what: &str) -> LossReason {
    tokio::time::timeout(span, guard.lost())
        .await
        .unwrap_or_else(|_| panic!("{what}: lost() did not fire within {span:?}"))
}

/// The loss of a guard whose hold was replaced behind it: found gone, or at
/// least no longer renewed for it (never its max hold: none is set).
fn assert_replaced(reason: LossReason) {
    assert!(
        matches!(reason, LossReason::Gone | LossReason::Expired),
        "{reason:?}"
    );
}

/// Bug 1 (standalone): one overwritten key kills a whole renewal batch.
///
/// One `Locks` holds "orders:1" and "orders:2" under the watchdog (both are
/// renewed by one `reentrant_renew` call), and the application overwrites
/// "orders:1" with a string. Today the script's `HEXISTS` on the string fails
/// the whole call with WRONGTYPE: the watchdog counts that as a failed
/// renewal for *every* key in the batch, retries it the same way until the
/// local deadline, and reports "orders:2" lost (`Expired`) while its key
/// really expires on the server. Must: "orders:2" stays held and renewed for
/// three leases, and only "orders:1" is lost (`Gone`).
#[tokio::test]
async fn an_overwritten_key_does_not_fail_the_renewal_of_the_others() {
    let server = RedisServer::start();
    let locks = locks(&server, cfg()).await;
    let one = locks.lock("orders:1");
    let two = locks.lock("orders:2");
    let g1 = hold(&one, "orders:1").await;
    let g2 = hold(&two, "orders:2").await;
    let start = Instant::now();
    // When orders:1's loss is reported, and why.
    let lost1 = {
        let lost = g1.lost();
        tokio::spawn(async move {
            let reason = lost.await;
            (reason, start.elapsed())
        })
    };
    // The application writes a string over orders:1.
    server.cli(&["SET", "orders:1", "x"]).unwrap();

    stays_held(&g2, LEASE * 3, "orders:2 (only orders:1 was overwritten)").await;
    let ttl = pttl(&server, "orders:2");
    assert!(
        ttl > 0,
        "orders:2 must still exist and be renewed on the server: PTTL {ttl}"
    );
    assert_eq!(hget(&server, "orders:2", two.owner()), Some(1));

    let (reason, after) = within("orders:1's loss", lost1).await.unwrap();
    assert_eq!(reason, LossReason::Gone, "orders:1 was overwritten");
    assert!(
        after <= LEASE * 2,
        "orders:1's loss came only after {after:?}"
    );
    drop(within("orders:2's unlock", g2.unlock()).await);
    drop(g1);
}

/// Bug 1 (cluster): one overwritten key kills the renewal of its whole node.
///
/// Four watchdog holds in four slots served by one master are renewed by one
/// `reentrant_renew_node` call; one of the keys is overwritten with a string.
/// Today that call fails with WRONGTYPE, the per-slot fallback gives up at
/// the first failing slot (the whole fallback answers "failed"), so every
/// hold of the node is retried until its local deadline and reported lost
/// (`Expired`). Must: the three others stay held and renewed for three
/// leases; the overwritten one is lost (`Gone`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwritten_key_in_a_cluster_does_not_fail_its_nodes_renewals() {
    let cluster = RedisCluster::start();
    // Four slots of one master: one renewal call covers them all.
    let master = cluster.master_for_slot(0);
    let slots = [0u16, 101, 202, 303];
    for &s in &slots {
        assert_eq!(
            cluster.master_for_slot(s),
            master,
            "slot {s} is not on the master of slot 0"
        );
    }
    let names: Vec<String> = slots
        .iter()
        .map(|&s| RedisCluster::key_for_slot(s))
        .collect();
    let client = Client::connect(&cluster.url()).await.unwrap();
    let locks = Locks::new(client, cfg());
    let handles: Vec<Lock> = names.iter().map(|n| locks.lock(n)).collect();
    let mut guards = Vec::new();
    for (h, n) in handles.iter().zip(&names) {
        guards.push(hold(h, n).await);
    }
    let node = cluster.node(master);
    // The application writes a string over the first lock's key.
    node.cli(&["SET", &names[0], "x"]).unwrap();
    let start = Instant::now();
    let lost0 = {
        let lost = guards[0].lost();
        tokio::spawn(async move { (lost.await, start.elapsed()) })
    };

    // The others, watched together for three leases.
    let others = async {
        for (g, n) in guards.iter().zip(&names).skip(1) {
            let what = format!("{n} (only {} was overwritten)", names[0]);
            stays_held(g, LEASE * 3 - start.elapsed().min(LEASE * 3), &what).await;
        }
    };
    others.await;
    for (h, n) in handles.iter().zip(&names).skip(1) {
        let ttl = number(&node.cli(&["PTTL", n]).unwrap()).unwrap();
        assert!(ttl > 0, "{n} must still exist and be renewed: PTTL {ttl}");
        let count = number(&node.cli(&["HGET", n, h.owner()]).unwrap());
        assert_eq!(count, Some(1), "{n}'s hold count");
    }
    let (reason, after) = within("the overwritten hold's loss", lost0).await.unwrap();
    assert_eq!(reason, LossReason::Gone, "{} was overwritten", names[0]);
    assert!(after <= LEASE * 2, "its loss came only after {after:?}");
    for g in guards {
        drop(g);
    }
}

/// Bug 2: a cancelled attempt ends another process's hold.
///
/// Process A holds "shared" under the watchdog. Process B (its own client on
/// the same server) acts as A's owner (`lock_with_owner`), starts an attempt,
/// polls it once (its acquire is queued, not yet written) and drops it. B's
/// watchdog has nothing of that owner, so today the cancelled attempt is
/// treated as "maybe acquired" and released BY OWNER: the acquire is dropped
/// unsent, the release is sent, and it ends A's hold (count 1 → key deleted,
/// unlock published); A then learns its hold is gone. Must: A's hold count
/// stays 1, the key stays, and A's guard is not lost.
#[tokio::test]
async fn a_cancelled_attempt_of_another_process_keeps_the_owners_hold() {
    let server = RedisServer::start();
    let a = locks(&server, cfg()).await;
    let b = locks(&server, cfg()).await;
    let lock_a = a.lock("shared");
    let guard = hold(&lock_a, "A's hold").await;
    assert_eq!(hget(&server, "shared", lock_a.owner()), Some(1));

    let lock_b = b.lock_with_owner("shared", lock_a.owner());
    // On this one-thread runtime the connections' tasks do not run between
    // the poll and the drop: the acquire is queued, never written.
    for round in 0..3 {
        let mut attempt = Box::pin(lock_b.try_acquire_now(None));
        assert!(
            poll_once(attempt.as_mut()).is_pending(),
            "round {round}: the attempt finished in its first poll"
        );
        drop(attempt);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let count = hget(&server, "shared", lock_a.owner());
    assert_eq!(
        count,
        Some(1),
        "A's hold count after B's cancelled attempts (nil: A's hold was released)"
    );
    let exists = number(&server.cli(&["EXISTS", "shared"]).unwrap());
    assert_eq!(exists, Some(1), "the key of A's hold");
    assert!(!guard.is_lost(), "A's guard was reported lost");
    within("A's unlock", guard.unlock()).await.unwrap();
}

/// Bug 3 (another process takes the replaced hold): a replaced hold is
/// renewed for the old guard, and its `lost()` never fires.
///
/// A's guard G1 holds "replaced" under the watchdog. The key is deleted from
/// outside and, in the same breath, process B acting as the same owner takes
/// a fresh hold (a new fencing token). Today renewals only check that the
/// owner's field exists, so A's watchdog keeps renewing B's hold for G1 and
/// G1 keeps reporting held while the fencing counter shows a newer token.
/// Must: G1's `lost()` fires within a few leases, and B's hold stays.
#[tokio::test]
async fn a_hold_replaced_by_another_process_of_the_owner_tells_the_old_guard() {
    let server = RedisServer::start();
    let a = locks(&server, cfg()).await;
    let b = locks(&server, cfg()).await;
    let lock = a.lock("replaced");
    let g1 = hold(&lock, "G1").await;
    let old_token = g1.fencing_token().expect("fencing is on");

    // DEL and B's acquire go out in one write, back to back: no renewal of
    // A's can fall between them (and find the key gone).
    let lock_b = b.lock_with_owner("replaced", lock.owner());
    let (deleted, fresh) = within("DEL and B's acquire", async {
        tokio::join!(b.client().del(["replaced"]), lock_b.try_acquire_now(None))
    })
    .await;
    assert_eq!(deleted.unwrap(), 1, "G1's key was there to delete");
    let gb = fresh.unwrap().expect("B takes the deleted lock");
    assert_eq!(gb.hold_count(), 1, "a fresh hold, not a re-entry");
    let new_token = gb.fencing_token().expect("fencing is on");
    assert!(new_token > old_token, "{new_token} > {old_token}");
    assert_eq!(token_counter(&server, "replaced"), Some(new_token));

    let reason = lost_within(&g1, LEASE * 3, "G1, whose hold was replaced").await;
    assert_replaced(reason);
    assert!(!gb.is_lost(), "B's hold is not the one gone");
    assert_eq!(hget(&server, "replaced", lock.owner()), Some(1), "B's hold");
    // G1's release must not end B's hold either.
    drop(within("G1's unlock", g1.unlock()).await);
    assert_eq!(hget(&server, "replaced", lock.owner()), Some(1), "B's hold");
    within("B's unlock", gb.unlock()).await.unwrap();
}

/// Bug 3, with the owner id read off the server: process B learns A's owner
/// id from the lock's hash (as `keylatch status` shows it), not from
/// `Lock::owner`, so A's renewals judge G1 by owner alone. One renewal in
/// eight reads the fencing token anyway: G1's `lost()` fires within eight
/// renewals (2⅔ leases; a few more here for the round's slack), and B's
/// hold stays.
#[tokio::test]
async fn a_hold_replaced_as_an_owner_read_off_the_server_is_found_within_eight_renewals() {
    let server = RedisServer::start();
    let a = locks(&server, cfg()).await;
    let b = locks(&server, cfg()).await;
    let g1 = hold(&a.lock("scraped"), "G1").await;
    let owner = server.cli(&["HKEYS", "scraped"]).unwrap().trim().to_owned();
    assert!(!owner.is_empty(), "A's owner in the hash");
    let lock_b = b.lock_with_owner("scraped", &owner);
    let (deleted, fresh) = within("DEL and B's acquire", async {
        tokio::join!(b.client().del(["scraped"]), lock_b.try_acquire_now(None))
    })
    .await;
    assert_eq!(deleted.unwrap(), 1, "G1's key was there to delete");
    let gb = fresh.unwrap().expect("B takes the deleted lock");
    assert_eq!(gb.hold_count(), 1, "a fresh hold, not a re-entry");
    let reason = lost_within(&g1, LEASE * 4, "G1, whose hold was replaced").await;
    assert_replaced(reason);
    assert!(!gb.is_lost(), "B's hold is not the one gone");
    assert_eq!(hget(&server, "scraped", &owner), Some(1), "B's hold");
    drop(g1);
    within("B's unlock", gb.unlock()).await.unwrap();
}

/// Bug 3, with the owner id taken from a guard's `Debug` (a log line): that
/// hands the id out as `Lock::owner` does, so each replaced hold is found
/// at its next renewal, not at its token turn up to eight renewals later
/// (outside review: `Debug` wrote the id without marking the handle).
/// Eight names, so a token turn cannot hide the difference.
#[tokio::test]
async fn a_hold_replaced_as_an_owner_from_a_debug_line_is_found_at_the_next_renewal() {
    let server = RedisServer::start();
    let a = locks(&server, cfg()).await;
    let b = locks(&server, cfg()).await;
    let mut olds = Vec::new();
    for i in 0..8 {
        let name = format!("debugged-{i}");
        let g1 = hold(&a.lock(&name), "G1").await;
        let line = format!("{g1:?}");
        let from = line.find("owner: \"").expect("owner in Debug") + "owner: \"".len();
        let owner = line[from..].split('"').next().unwrap().to_owned();
        assert_eq!(server.cli(&["HKEYS", &name]).unwrap().trim(), owner);
        olds.push((name, owner, g1));
    }
    // Past the first renewals (a hold's first may read its token anyway).
    tokio::time::sleep(LEASE).await;
    let mut news = Vec::new();
    for (name, owner, _) in &olds {
        let lock_b = b.lock_with_owner(name, owner);
        let (deleted, fresh) = within("DEL and B's acquire", async {
            tokio::join!(
                b.client().del([name.as_str()]),
                lock_b.try_acquire_now(None)
            )
        })
        .await;
        assert_eq!(deleted.unwrap(), 1);
        news.push(fresh.unwrap().expect("B takes the deleted lock"));
    }
    // A renewal every 500 ms: the next one within a lease, with room.
    for (name, _, g1) in &olds {
        let reason = lost_within(g1, LEASE, name).await;
        assert_replaced(reason);
    }
    for gb in news {
        assert!(!gb.is_lost(), "B's hold is not the one gone");
        within("B's unlock", gb.unlock()).await.unwrap();
    }
}

/// Bug 3 (a clone's cancelled fresh acquire): a replaced hold is renewed for
/// the old guard, and its `lost()` never fires.
///
/// A's guard G1 holds "replaced" under the watchdog. With the server paused,
/// a DEL of the key and a clone's acquire are written back to back and the
/// clone's attempt is dropped before its reply (G1 still counts, so no
/// release by owner follows); on resume the DEL runs and the clone's acquire
/// takes a fresh hold with a new token that nobody in A knows of. Today A's
/// renewals only check the owner's field, so they keep that orphaned hold
/// alive for G1, which never learns its own hold is gone. Must: G1's
/// `lost()` fires within a few leases.
#[tokio::test]
async fn a_hold_replaced_by_a_cancelled_clone_attempt_tells_the_old_guard() {
    let server = RedisServer::start();
    let a = locks(&server, cfg()).await;
    let lock = a.lock("replaced");
    let g1 = hold(&lock, "G1").await;
    let old_token = g1.fencing_token().expect("fencing is on");

    let clone = lock.clone();
    server.pause().unwrap();
    // One write, DEL first: no renewal can fall between the two. Both are
    // written while the server is stopped; the attempt is dropped unanswered.
    let cancelled = tokio::time::timeout(Duration::from_millis(300), async {
        tokio::join!(a.client().del(["replaced"]), clone.try_acquire_now(None))
    })
    .await;
    server.resume().unwrap();
    assert!(cancelled.is_err(), "answered by a paused server?");

    // The clone's acquire ran after the DEL: a fresh hold of this owner with
    // a newer token.
    Soon::new(Duration::from_secs(3), Duration::from_millis(20))
        .until(|| async {
            match token_counter(&server, "replaced") {
                Some(t) if t > old_token => Ok(()),
                other => Err(format!("token counter {other:?}, G1's {old_token}")),
            }
        })
        .await;
    assert_eq!(hget(&server, "replaced", lock.owner()), Some(1));

    let reason = lost_within(&g1, LEASE * 3, "G1, whose hold was replaced").await;
    assert_replaced(reason);
    drop(g1);
}

/// Bug 4 (minimal): with fencing off, a replaced hold is not noticed.
///
/// Fencing off: A's guard G1 holds "unfenced". The key is deleted and, in the
/// same write, process B acting as the same owner takes a fresh hold. Today
/// A's renewals see the owner's field and keep renewing B's hold for G1,
/// whose `lost()` never fires. Must: it fires within a few leases.
#[tokio::test]
async fn without_fencing_a_hold_replaced_by_another_process_tells_the_old_guard() {
    let server = RedisServer::start();
    let a = locks(&server, cfg().fencing(false)).await;
    let b = locks(&server, cfg().fencing(false)).await;
    let lock = a.lock("unfenced");
    let g1 = hold(&lock, "G1").await;
    assert_eq!(g1.fencing_token(), None);

    let lock_b = b.lock_with_owner("unfenced", lock.owner());
    let (deleted, fresh) = within("DEL and B's acquire", async {
        tokio::join!(b.client().del(["unfenced"]), lock_b.try_acquire_now(None))
    })
    .await;
    assert_eq!(deleted.unwrap(), 1, "G1's key was there to delete");
    let gb = fresh.unwrap().expect("B takes the deleted lock");
    assert_eq!(gb.hold_count(), 1, "a fresh hold, not a re-entry");

    let reason = lost_within(&g1, LEASE * 3, "G1, whose hold was replaced").await;
    assert_replaced(reason);
    assert!(!gb.is_lost(), "B's hold is not the one gone");
    assert_eq!(hget(&server, "unfenced", lock.owner()), Some(1), "B's hold");
    drop(g1);
    within("B's unlock", gb.unlock()).await.unwrap();
}

/// Bug 4 (the over-count): with fencing off, an over-count hides a replaced
/// hold.
///
/// Fencing off. G1 holds "overcount" (count 1). A clone's re-entry is polled
/// first (registered and queued), then G1 unlocks: its deregistration (the
/// entry's last guard) is handled before the re-entry's reply, so the
/// re-entry's reply (2) confirms an entry that believes the count is 2 while
/// the server, after G1's release, has 1. Then the key is deleted and another
/// clone takes a fresh hold in the same write (reply 1). Today a reply of 1
/// counts as a replaced hold only while the believed count is 1; at 2 the
/// fresh hold is taken for a re-entry of G2's hold, G2's `lost()` never
/// fires, and the watchdog renews the new hold for it. Must: G2's `lost()`
/// fires within a few leases, and the fresh hold stays.
#[tokio::test]
async fn without_fencing_an_over_counted_hold_still_tells_the_old_guard_of_a_replacement() {
    let server = RedisServer::start();
    let a = locks(&server, cfg().fencing(false)).await;
    let lock = a.lock("overcount");
    let g1 = hold(&lock, "G1").await;

    // The clone's re-entry and G1's unlock, polled in that order: the
    // re-entry is registered and queued, then G1 is deregistered (the
    // entry's last guard) and its release queued after the re-entry
    // (server: 1 → 2 → 1); the re-entry's reply is handled only after that.
    let reentering = lock.clone();
    let (reentry, unlocked) = within("the re-entry and G1's unlock", async {
        tokio::join!(reentering.try_acquire_now(None), g1.unlock())
    })
    .await;
    unlocked.unwrap();
    let g2 = reentry.unwrap().expect("the lock is this owner's");
    // Today: the re-entry reports 2 while the server counts 1.
    let counts = format!(
        "G2's count {}, the server's {:?}",
        g2.hold_count(),
        hget(&server, "overcount", lock.owner())
    );

    // The hold is replaced: DEL and a fresh acquire of another clone in one
    // write (no renewal between them).
    let fresh_handle = lock.clone();
    let (deleted, fresh) = within("DEL and the fresh acquire", async {
        tokio::join!(
            a.client().del(["overcount"]),
            fresh_handle.try_acquire_now(None)
        )
    })
    .await;
    assert_eq!(deleted.unwrap(), 1, "G2's key was there to delete");
    let g3 = fresh.unwrap().expect("the deleted lock is free");
    assert_eq!(g3.hold_count(), 1, "a fresh hold, not a re-entry");

    let what = format!("G2, whose hold was replaced ({counts} before)");
    let reason = lost_within(&g2, LEASE * 3, &what).await;
    assert_replaced(reason);
    assert!(!g3.is_lost(), "the fresh hold is not the one gone");
    assert_eq!(
        hget(&server, "overcount", lock.owner()),
        Some(1),
        "G3's hold"
    );
    drop(g2);
    drop(g3);
}
