#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Lock-core defects A–I, each a test against a real redis-server that
//! fails on the current lock core and states the behaviour the redesign
//! must have. Each test's doc comment names its item and why it fails today.

use std::time::{Duration, Instant};

use keylatch_cluster::{Client, ClientConfig, Commands, Connection};
use keylatch_harness::RedisServer;
use keylatch_lock::{Locks, LocksConfig};
use keylatch_resp::Frame;

mod common;
use common::locks::{freed_within, poll_once_and_drop, server_with_locks, state, take, warm};

/// Item A: a cancelled re-entry leaks a count.
///
/// Guard G holds the lock (count 1, watchdog lease 30 s). A clone of the
/// handle starts a re-entry whose EVALSHA is written while the server is
/// paused, and is cancelled (timeout) before its reply is read. After the
/// server resumes the re-entry runs (count 2); G.unlock() then leaves count 1
/// held by nobody.
///
/// Fails today: `InFlight::drop` releases by owner only when the owner has
/// nothing else here; with G alive it leaves the possible extra count "to end
/// with its lease", so after G.unlock() the key stays for the whole 30 s
/// lease instead of being freed at once.
#[tokio::test]
async fn a_cancelled_reentry_does_not_leak_a_count() {
    let (server, locks) = server_with_locks(LocksConfig::default()).await;
    let lock = locks.lock("item-a");
    warm(&lock).await;
    let g = take(&lock, None, "free").await;
    assert_eq!(g.hold_count(), 1);

    server.pause().unwrap();
    let clone = lock.clone();
    // 100 ms: the connection task writes the re-entry (the kernel takes it
    // while the server is stopped); no reply can come.
    let cancelled = tokio::time::timeout(Duration::from_millis(100), clone.try_acquire_now(None))
        .await
        .is_err();
    server.resume().unwrap();
    assert!(
        cancelled,
        "the re-entry must still be waiting for its reply"
    );
    // Let the server run the re-entry that was written.
    tokio::time::sleep(Duration::from_millis(100)).await;

    g.unlock().await.unwrap();
    freed_within(
        &lock,
        Duration::from_secs(2),
        "after the only live guard unlocked (a cancelled re-entry must not leave a count behind)",
    )
    .await;
}

/// Item B: `unlock()` cancelled before its release is written sends
/// nothing.
///
/// The `unlock()` future is polled once (it stops watching the hold and
/// queues the release) and dropped before the connection task can write the
/// release (current-thread runtime, no await in between). The hold has a
/// fixed 30 s lease.
///
/// Fails today: the first poll marks the guard done, so dropping the future
/// (and the guard in it) spawns no release, and the connection task skips
/// the queued request whose caller left: the lock stays held for its 30 s
/// lease instead of being released in the background within ~1 s.
#[tokio::test]
async fn b_an_unlock_cancelled_before_its_release_is_written_still_releases() {
    let (_server, locks) = server_with_locks(LocksConfig::default()).await;
    let lock = locks.lock("item-b");
    warm(&lock).await;
    let g = take(&lock, Some(Duration::from_secs(30)), "free").await;

    let finished = poll_once_and_drop(g.unlock());
    assert!(
        !finished,
        "one poll cannot have finished a release round trip"
    );

    freed_within(
        &lock,
        Duration::from_secs(2),
        "after unlock() was polled once and cancelled",
    )
    .await;
}

/// Item C: `is_lost()` reads only the watchdog's flag.
///
/// On a current-thread runtime, a fixed 200 ms lease is taken and the thread
/// is then blocked for 600 ms (std::thread::sleep), so the watchdog task
/// cannot run. The lease has ended by the local clock: `is_lost()` must say
/// so and `remaining_lease()` must be `None`.
///
/// Fails today: `is_lost()` only reads the loss signal the watchdog task
/// sets, which it has had no chance to set: it answers `false` (and
/// `remaining_lease()` `Some(0)`).
#[tokio::test]
async fn c_is_lost_judges_the_lease_by_the_local_clock() {
    let (_server, locks) = server_with_locks(LocksConfig::default()).await;
    let lock = locks.lock("item-c");
    let g = take(&lock, Some(Duration::from_millis(200)), "free").await;
    // Blocks this (the only) runtime thread: no watchdog turn can happen.
    std::thread::sleep(Duration::from_millis(600));
    let (lost, left) = (g.is_lost(), g.remaining_lease());
    assert!(
        lost,
        "600 ms into a 200 ms lease, is_lost() must be true (remaining_lease()={left:?})"
    );
    assert_eq!(left, None, "remaining_lease() of an ended hold");
    drop(g);
}

/// Item D: renewals never refresh the fencing counter.
///
/// With `token_idle_ttl` 1 s and a 1.5 s watchdog lease, a watchdog hold is
/// kept 4 s (renewed every 0.5 s), then re-entered through a clone. The
/// re-entry must carry the hold's token and the counter key
/// `redisson_lock_token:{name}` must still exist while the lock is held.
///
/// Fails today: only acquires touch the counter's expiry, so it expired
/// after 1 s although the lock is held; the re-entry reads token 0 and
/// `fencing_token()` is `None` (and a release then skips its token check).
#[tokio::test]
async fn d_renewals_keep_the_fencing_counter_alive() {
    let mut cfg = LocksConfig::default().watchdog_timeout(Duration::from_millis(1500));
    cfg.token_idle_ttl = Duration::from_secs(1);
    let (_server, locks) = server_with_locks(cfg).await;
    let lock = locks.lock("item-d");
    let first = take(&lock, None, "free").await;
    let token = first.fencing_token();
    assert!(token.is_some(), "fencing is on by default");

    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!first.is_lost(), "the watchdog kept the hold");
    let again = take(&lock.clone(), None, "re-entry of the same owner").await;
    assert_eq!(again.hold_count(), 2);
    let counter_exists: bool = locks
        .client()
        .cmd(keylatch_resp::Cmd::new("EXISTS").key("redisson_lock_token:{item-d}"))
        .await
        .unwrap();
    assert_eq!(
        again.fencing_token(),
        token,
        "the re-entry 4 s into the hold must carry its token \
         (counter key redisson_lock_token:{{item-d}} exists: {counter_exists})"
    );
    assert!(
        counter_exists,
        "the fencing counter must outlive a held lock"
    );
    again.unlock().await.unwrap();
    first.unlock().await.unwrap();
}

/// Item E: releasing an inner hold extends a short fixed lease to the
/// watchdog lease.
///
/// A fixed 500 ms lease is re-entered with a fixed 500 ms lease and the
/// inner guard unlocked: the key must keep an expiry of at most 500 ms and
/// be gone about a second later.
///
/// Fails today: the release script is passed the watchdog lease (30 s) and
/// extends the remaining hold to it: PTTL jumps to ~30 000 ms.
#[tokio::test]
async fn e_releasing_an_inner_hold_keeps_a_short_fixed_lease() {
    let (_server, locks) = server_with_locks(LocksConfig::default()).await;
    let lock = locks.lock("item-e");
    let lease = Some(Duration::from_millis(500));
    let outer = take(&lock, lease, "free").await;
    let inner = take(&lock.clone(), lease, "re-entry").await;
    assert_eq!(inner.hold_count(), 2);
    inner.unlock().await.unwrap();

    let ttl = lock.remaining_ttl().await.unwrap();
    assert!(
        ttl.map_or(true, |t| t <= Duration::from_millis(500)),
        "after releasing the inner hold the key's PTTL must stay within the 500 ms lease: {ttl:?}"
    );
    freed_within(
        &lock,
        Duration::from_millis(1500),
        "the 500 ms lease of the outer hold ended",
    )
    .await;
    drop(outer);
}

/// Item F (1): a script error after HINCRBY leaves the lock held by nobody.
///
/// The fencing counter key `redisson_lock_token:{name}` is a hash, so the
/// acquire script's GET of it fails. The acquire must fail and leave no
/// lock behind.
///
/// Fails today: the script has already run HINCRBY and PEXPIRE on the lock
/// key when GET raises WRONGTYPE (Redis does not roll back), and the caller
/// only sees the error: the lock stays held for a whole lease (30 s) by an
/// owner that believes it has nothing.
#[tokio::test]
async fn f_a_failed_acquire_script_leaves_no_hold() {
    let (server, locks) = server_with_locks(LocksConfig::default()).await;
    server
        .cli(&["HSET", "redisson_lock_token:{item-f}", "f", "v"])
        .unwrap();
    let lock = locks.lock("item-f");
    let outcome = lock.try_acquire_now(None).await;
    assert!(
        outcome.is_err(),
        "the counter key has the wrong type: {:?}",
        outcome.map(|g| g.map(|g| g.fencing_token()))
    );
    let err = outcome.err().unwrap();
    assert!(
        !lock.is_locked().await.unwrap(),
        "the failed acquire ({err}) left the lock held by nobody: {}",
        state(&lock).await
    );
}

/// Item F (2): an invalid `token_idle_ttl` errors after HINCRBY.
///
/// `token_idle_ttl: Duration::MAX` becomes `PX 18446744073709551615`, which
/// SET refuses. The acquire must either succeed normally or fail without
/// leaving the key held. (`Duration::ZERO` does not fail today: it is
/// clamped to 1 ms.)
///
/// Fails today: SET ... PX fails after HINCRBY/PEXPIRE of the lock key, so
/// the acquire returns an error and the lock stays held by nobody.
#[tokio::test]
async fn f_an_out_of_range_token_ttl_leaves_no_orphan_hold() {
    let mut cfg = LocksConfig::default();
    cfg.token_idle_ttl = Duration::MAX;
    let (_server, locks) = server_with_locks(cfg).await;
    let lock = locks.lock("item-f2");
    match lock.try_acquire_now(None).await {
        Ok(Some(g)) => {
            assert!(lock.is_held_by_me().await.unwrap());
            g.unlock().await.unwrap();
            assert!(!lock.is_locked().await.unwrap());
        }
        Ok(None) => panic!("nobody else holds the lock"),
        Err(e) => assert!(
            !lock.is_locked().await.unwrap(),
            "the failed acquire ({e}) left the lock held by nobody: {}",
            state(&lock).await
        ),
    }
}

/// Redisson's RLock scripts (RedissonLock.tryLockInnerAsync and
/// unlockInnerAsync), as in tests/locks.rs: a Java service on the same name.
const REDISSON_LOCK: &str = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";
const REDISSON_UNLOCK: &str = "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;";

/// Item G body: a Redisson holder of `name` (a name with a brace but no
/// usable hash tag) unlocks, publishing on Redisson's channel
/// `redisson_lock__channel:<name>` (Redisson's prefixName: `prefix:name`
/// whenever the name contains `{`); a keylatch waiter (30 s re-check,
/// 30 s lease) must wake within about a second.
async fn waiter_wakes_on_redissons_channel(name: &str) {
    let server = RedisServer::start();
    let java = Connection::connect(&server.url()).await.unwrap();
    let java_owner = "8f1c2d3e-0000-4000-8000-000000000007:1";
    let r = java
        .eval(REDISSON_LOCK, [name], ["30000", java_owner])
        .await
        .unwrap();
    assert_eq!(r, Frame::Null, "the Java side holds {name:?}");
    let client = Client::connect(&server.url()).await.unwrap();
    let locks = Locks::new(
        client,
        LocksConfig::default().recheck(Duration::from_secs(30)),
    );
    let lock = locks.lock(name);
    let mut waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.try_acquire(Duration::from_secs(10), None).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let channel = format!("redisson_lock__channel:{name}");
    let subscribed = server.cli(&["PUBSUB", "CHANNELS", "*"]).unwrap();
    let r = java
        .eval(
            REDISSON_UNLOCK,
            [name, channel.as_str()],
            ["0", "30000", java_owner],
        )
        .await
        .unwrap();
    assert_eq!(r, Frame::Integer(1), "Redisson's unlock of {name:?}");
    let woken = tokio::time::timeout(Duration::from_secs(2), &mut waiter).await;
    let Ok(joined) = woken else {
        waiter.abort();
        panic!(
            "keylatch waiter on {name:?} not woken within 2 s by Redisson's unlock \
             published on {channel:?}; channels subscribed then: {:?}",
            subscribed.split_whitespace().collect::<Vec<_>>()
        );
    };
    let guard = joined
        .unwrap()
        .unwrap()
        .expect("acquired after Redisson's unlock");
    guard.unlock().await.unwrap();
}

/// Item G (`a{b`): Redisson names the unlock channel
/// `redisson_lock__channel:a{b`.
///
/// Fails today: keylatch's `companion()` wraps a name without a usable hash
/// tag in braces, `redisson_lock__channel:{a{b}`, so its waiter never hears
/// Redisson's unlock and sleeps until its 10 s wait ends (30 s re-check and
/// lease).
#[tokio::test]
async fn g_waiter_hears_redissons_unlock_for_an_unclosed_brace() {
    waiter_wakes_on_redissons_channel("a{b").await;
}

/// Item G (`a{}b`): Redisson names the unlock channel
/// `redisson_lock__channel:a{}b`.
///
/// Fails today: an empty hash tag counts as no tag for keylatch, which
/// subscribes to `redisson_lock__channel:{a{}b}` and never hears Redisson's
/// unlock.
#[tokio::test]
async fn g_waiter_hears_redissons_unlock_for_an_empty_brace_pair() {
    waiter_wakes_on_redissons_channel("a{}b").await;
}

/// Item H: `try_acquire_now` can block up to the request timeout.
///
/// Default client config (30 s request timeout), connection and scripts
/// warm; with the server paused, `try_acquire_now(None)` of a free name must
/// give up (`Ok(None)` or an error) within 5 s. Bounded by an outer 12 s
/// timeout.
///
/// Fails today: the attempt waits for its script reply for the whole
/// request timeout (30 s): the outer 12 s timeout fires.
#[tokio::test]
async fn h_try_acquire_now_does_not_wait_out_the_request_timeout() {
    let (server, locks) = server_with_locks(LocksConfig::default()).await;
    warm(&locks.lock("item-h-warm")).await;
    let lock = locks.lock("item-h");

    server.pause().unwrap();
    let started = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(12), lock.try_acquire_now(None)).await;
    let took = started.elapsed();
    server.resume().unwrap();
    let outcome = outcome.unwrap_or_else(|_| {
        panic!(
            "try_acquire_now(None) on a paused server had not returned after {took:?} \
             (request timeout 30 s); it must return within 5 s"
        )
    });
    assert!(
        took <= Duration::from_secs(5),
        "try_acquire_now(None) took {took:?} on a paused server: {:?}",
        outcome.map(|g| g.is_some())
    );
    assert!(
        !matches!(outcome, Ok(Some(_))),
        "nothing can be acquired from a paused server"
    );
}

/// Item I: a release must never be dropped.
///
/// Client: 200 ms request timeout and one request in flight at most. A guard
/// holds a fixed 30 s lease. With the server paused, a GET occupies the one
/// in-flight slot, so the guard's release waits in the client queue unsent;
/// after 200 ms the blocked connection is given up and the queued release
/// fails (not sent). The server resumes; the lock must be released within
/// ~2 s (the release retried in the background, bounded by the lease).
///
/// (Pausing before a plain unlock is not enough to fail today: that release
/// is written before it times out and runs once the server resumes.)
///
/// Fails today: `unlock()` reports the client error and nothing retries the
/// release: the lock stays held for its whole 30 s lease.
#[tokio::test]
async fn i_a_release_that_failed_unsent_is_retried() {
    let server = RedisServer::start();
    let mut cfg = ClientConfig::from_url(&server.url()).unwrap();
    cfg.seeds[0] = cfg.seeds[0]
        .clone()
        .request_timeout(Some(Duration::from_millis(200)));
    cfg.seeds[0].max_in_flight = 1;
    let client = Client::connect_with(cfg).await.unwrap();
    let locks = Locks::new(client.clone(), LocksConfig::default());
    let lock = locks.lock("item-i");
    warm(&lock).await;
    let g = take(&lock, Some(Duration::from_secs(30)), "free").await;

    server.pause().unwrap();
    // Written, never answered while paused: the connection can take nothing
    // else until it times out.
    let occupant = tokio::spawn(async move { client.get("item-i-occupant").await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let released = tokio::time::timeout(Duration::from_secs(5), g.unlock()).await;
    server.resume().unwrap();
    let released = released.expect("unlock() returns (bounded by the request timeout)");
    eprintln!("unlock() with the server paused: {released:?}");
    let _ = occupant.await;

    freed_within(
        &lock,
        Duration::from_secs(2),
        &format!("after the server resumed (unlock() returned {released:?})"),
    )
    .await;
}

/// A re-entry against a fencing counter overwritten with another type fails
/// with nothing taken: the script reads the counter before it counts.
#[tokio::test]
async fn a_re_entry_against_a_broken_counter_takes_no_count() {
    let (server, locks) = server_with_locks(LocksConfig::default()).await;
    let lock = locks.lock("item-reentry-counter");
    let g = take(&lock, Some(Duration::from_secs(30)), "free").await;
    server
        .cli(&["DEL", "redisson_lock_token:{item-reentry-counter}"])
        .unwrap();
    server
        .cli(&[
            "HSET",
            "redisson_lock_token:{item-reentry-counter}",
            "f",
            "v",
        ])
        .unwrap();
    assert!(lock.try_acquire_now(None).await.is_err(), "WRONGTYPE");
    let count = server
        .cli(&["HGET", "item-reentry-counter", lock.owner()])
        .unwrap();
    assert_eq!(count.trim(), "1", "no count taken by the failed re-entry");
    drop(g);
}
