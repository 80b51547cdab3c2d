#![allow(clippy::unwrap_used, clippy::expect_used)]
//! What a watchdog renewal costs the server, and what it keeps (issue 31),
//! against a real redis-server through `Locks::connect_with` (tracking on,
//! as `Locks::connect` has it):
//! - renewed keys stay tracked, so a key deleted from outside is reported
//!   by push, not found at the next renewal;
//! - the fencing counter's idle expiry is refreshed by a hold's first
//!   renewal (unless the hold's acquire made the counter) and then every
//!   few hours, not every round;
//! - a plain renewal reads the counter one time in eight, unless another
//!   process may act as the hold's owner (then every time);
//! - a key with no expiry is not given one, and a longer expiry is kept.

use std::time::{Duration, Instant};

use keylatch_cluster::{ClientConfig, Commands};
use keylatch_harness::RedisServer;
use keylatch_lock::{LockGuard, Locks, LocksConfig, LossReason};
use keylatch_resp::Cmd;

mod common;
use common::take_free;

const HOLDS: usize = 40;

async fn tracked_locks(server: &RedisServer, cfg: LocksConfig) -> Locks {
    Locks::connect_with(ClientConfig::from_url(&server.url()).unwrap(), cfg)
        .await
        .unwrap()
}

/// One `INFO` field as a number (0 when absent).
fn info_field(server: &RedisServer, section: &str, field: &str) -> u64 {
    let text = server.cli(&["INFO", section]).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0)
}

/// Waits (bounded) until the engine has run `n` more renewal rounds.
async fn rounds(locks: &Locks, n: u64) {
    let from = locks.renewal_rounds();
    let until = Instant::now() + Duration::from_secs(20);
    while locks.renewal_rounds() < from + n {
        assert!(Instant::now() < until, "{n} renewal rounds within 20 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A 900 ms watchdog (a round every 300 ms) and a 60 s counter idle expiry.
async fn short_rounds(server: &RedisServer) -> Locks {
    let mut cfg = LocksConfig::default().watchdog_timeout(Duration::from_millis(900));
    cfg.token_idle_ttl = Duration::from_secs(60);
    tracked_locks(server, cfg).await
}

async fn hold_many(locks: &Locks, prefix: &str) -> Vec<LockGuard> {
    let mut guards = Vec::with_capacity(HOLDS);
    for i in 0..HOLDS {
        guards.push(take_free(locks, &format!("{prefix}-{i}")).await);
    }
    guards
}

/// Forty watchdog holds renewed for at least six rounds: every key is
/// tracked again after each round (its renewal's PEXPIRE ends the server's
/// tracking; a tracked read follows), and a key deleted from outside is
/// reported by push, without waiting for a renewal round to find it gone.
#[tokio::test]
async fn renewed_keys_stay_tracked_and_an_outside_delete_is_pushed() {
    let server = RedisServer::start();
    let cfg = LocksConfig::default().watchdog_timeout(Duration::from_millis(900));
    let locks = tracked_locks(&server, cfg).await;
    let guards = hold_many(&locks, "tracked").await;
    rounds(&locks, 6).await;
    // Between a renewal and its tracked read a key is briefly untracked:
    // ask until every one is tracked (bounded).
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let n = info_field(&server, "stats", "tracking_total_keys");
        if n == HOLDS as u64 {
            break;
        }
        assert!(Instant::now() < until, "{n} of {HOLDS} held keys tracked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let victim = &guards[7];
    let rounds_before = locks.renewal_rounds();
    let other = keylatch_cluster::Client::connect(&server.url())
        .await
        .unwrap();
    let _: i64 = other.cmd(Cmd::new("DEL").key("tracked-7")).await.unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(5), victim.lost())
        .await
        .expect("the deleted hold is reported lost");
    assert_eq!(reason, LossReason::Gone);
    assert!(
        locks.renewal_rounds() <= rounds_before + 1,
        "the loss came from the push, not from renewal rounds"
    );
    for (i, g) in guards.into_iter().enumerate() {
        if i == 7 {
            drop(g);
            continue;
        }
        assert!(!g.is_lost(), "hold {i} stands");
        g.unlock().await.unwrap();
    }
}

/// The fencing counter's idle expiry (60 s here) is refreshed by a hold's
/// first renewal, not by every round: a counter the acquire found with 20 s
/// left has over 50 s after a dozen rounds (300 ms apart), and its TTL has
/// run down by seconds since. A counter refreshed every round would show
/// no more than one round's worth gone.
#[tokio::test]
async fn the_counter_is_refreshed_once_not_every_round() {
    let server = RedisServer::start();
    let locks = short_rounds(&server).await;
    server
        .cli(&["SET", "redisson_lock_token:{counted}", "5", "PX", "20000"])
        .unwrap();
    let g = take_free(&locks, "counted").await;
    assert_eq!(g.fencing_token(), Some(6), "the counter found");
    rounds(&locks, 12).await;
    let pttl: i64 = server
        .cli(&["PTTL", "redisson_lock_token:{counted}"])
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(pttl > 50_000, "refreshed from 20 s: {pttl} ms left");
    assert!(
        pttl < 58_500,
        "refreshed every round? {pttl} ms left of 60 s after a dozen rounds"
    );
    assert!(!g.is_lost());
    g.unlock().await.unwrap();
}

/// A counter the acquire found (made earlier, with less of its idle
/// expiry left) is refreshed by the hold's first renewal; one the acquire
/// made lives its whole idle expiry from then, and that renewal leaves it
/// alone (a refresh costs the server about half a renewal again). A 6 s
/// watchdog: the first renewal comes 2 s after the acquires, so a counter
/// refreshed then would have about 2 s more left than the time since its
/// acquire allows.
#[tokio::test]
async fn a_counter_the_acquire_made_is_left_alone_by_the_first_renewal() {
    let server = RedisServer::start();
    let mut cfg = LocksConfig::default().watchdog_timeout(Duration::from_secs(6));
    cfg.token_idle_ttl = Duration::from_secs(60);
    let locks = tracked_locks(&server, cfg).await;
    server
        .cli(&["SET", "redisson_lock_token:{found}", "5", "PX", "20000"])
        .unwrap();
    let found = take_free(&locks, "found").await;
    let made_at = Instant::now();
    let made = take_free(&locks, "made").await;
    assert_eq!(found.fencing_token(), Some(6), "the counter found");
    assert!(
        made.fencing_token().is_some_and(|t| t > 1_000_000),
        "made from TIME"
    );
    let pttl = |name: &str| -> i64 {
        server
            .cli(&["PTTL", &format!("redisson_lock_token:{{{name}}}")])
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    // The first renewal has landed once the found counter is refreshed
    // (the made one's renewal goes in the same round, in a call of its own:
    // both calls counted once answered).
    let calls = locks.renewal_calls();
    let until = Instant::now() + Duration::from_secs(20);
    while pttl("found") < 50_000 || locks.renewal_calls() < calls + 2 {
        assert!(Instant::now() < until, "the first renewal within 20 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Never refreshed: at most 60 s less the time since its acquire's call
    // (sent after `made_at`, answered within the 600 ms allowed here); a
    // refresh at the first renewal, 1 s or more after it, would add that
    // much.
    let made_left = pttl("made");
    let since = i64::try_from(made_at.elapsed().as_millis()).unwrap();
    assert!(made_left > 0, "the counter lives: {made_left}");
    assert!(
        made_left + since <= 60_600,
        "made at the acquire, {since} ms ago, and {made_left} ms left: refreshed since?"
    );
    found.unlock().await.unwrap();
    made.unlock().await.unwrap();
}

/// A counter that expires while its lock is held anyway (its idle expiry
/// outrun, or deleted alone) is put back by the next renewal that reads it
/// (one in the counter window: here every one, as a 1.6 s idle expiry is
/// too short for a window) with the hold's token, and the hold stands.
#[tokio::test]
async fn a_counter_gone_while_held_is_put_back() {
    let server = RedisServer::start();
    let mut cfg = LocksConfig::default().watchdog_timeout(Duration::from_millis(900));
    cfg.token_idle_ttl = Duration::from_millis(1600);
    let locks = tracked_locks(&server, cfg).await;
    let g = take_free(&locks, "put-back").await;
    let token = g.fencing_token().expect("fenced");
    rounds(&locks, 2).await;
    server
        .cli(&["DEL", "redisson_lock_token:{put-back}"])
        .unwrap();
    rounds(&locks, 2).await;
    let now = server
        .cli(&["GET", "redisson_lock_token:{put-back}"])
        .unwrap();
    assert_eq!(now.trim(), token.to_string());
    assert!(!g.is_lost());
    g.unlock().await.unwrap();
}

/// Calls of one command so far, from `INFO commandstats` (commands a
/// script runs count too).
fn calls(server: &RedisServer, command: &str) -> u64 {
    let text = server.cli(&["INFO", "commandstats"]).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// A plain renewal judges a hold by its owner alone (`owner_renew.lua`:
/// HEXISTS and PEXPIRE, no fencing counter read) when nobody else can have
/// taken the lock as its owner, but one renewal in eight reads the counter
/// anyway; a hold whose owner id was handed out (`Lock::owner`: another
/// process may act as it) is judged by its token every round. Counters
/// deleted under the holds show which: the handed-out hold's is put back
/// at the next round, the others' only at their token turn, within eight
/// renewals.
#[tokio::test]
async fn a_hold_judged_by_owner_reads_its_counter_one_renewal_in_eight() {
    let server = RedisServer::start();
    let locks = short_rounds(&server).await;
    let guards = hold_many(&locks, "plain").await;
    let shared = locks.lock("shared-owner");
    assert!(!shared.owner().is_empty());
    let handed = shared.acquire().await.unwrap();
    let token = handed.fencing_token().expect("fenced");
    rounds(&locks, 2).await;
    server.cli(&["CONFIG", "RESETSTAT"]).unwrap();
    let counter = |name: &str| format!("redisson_lock_token:{{{name}}}");
    server.cli(&["DEL", &counter("shared-owner")]).unwrap();
    for i in 0..HOLDS {
        server
            .cli(&["DEL", &counter(&format!("plain-{i}"))])
            .unwrap();
    }
    let back = || {
        (0..HOLDS)
            .filter(|i| {
                server
                    .cli(&["EXISTS", &counter(&format!("plain-{i}"))])
                    .unwrap()
                    .trim()
                    == "1"
            })
            .count()
    };
    rounds(&locks, 3).await;
    let (mget, hexists) = (calls(&server, "mget"), calls(&server, "hexists"));
    // Three rounds of the 41 holds' HEXISTS at least; the holds judged by
    // token share one call a round (one MGET).
    assert!(hexists >= 3 * 41, "{hexists} HEXISTS over three rounds");
    assert!((3..=6).contains(&mget), "{mget} MGETs: one call a round");
    let shared_back = server.cli(&["GET", &counter("shared-owner")]).unwrap();
    assert_eq!(shared_back.trim(), token.to_string(), "put back by token");
    let early = back();
    assert!(
        early < HOLDS,
        "{early} of {HOLDS} counters put back within three rounds: judged by token every round?"
    );
    // Eight renewals more: each plain hold had its token turn.
    rounds(&locks, 9).await;
    assert_eq!(
        back(),
        HOLDS,
        "put back at each hold's token turn ({early} early)"
    );
    assert!(!handed.is_lost());
    handed.unlock().await.unwrap();
    for g in guards {
        assert!(!g.is_lost());
        g.unlock().await.unwrap();
    }
}

/// An acquire whose outcome this process never learned in time (here a
/// clone's re-entry cancelled while the server is paused) may run later
/// and take the lock again as the same owner behind a lapsed hold: from
/// then on the handle's hold is judged by its token, so a counter deleted
/// under it is read and put back by the next rounds (a hold judged by owner
/// alone would leave it gone until the counter window).
#[tokio::test]
async fn a_hold_whose_handle_had_an_acquire_cancelled_is_judged_by_token() {
    let server = RedisServer::start();
    let locks = short_rounds(&server).await;
    let lock = locks.lock("cancelled");
    let g = lock.acquire().await.unwrap();
    let token = g.fencing_token().expect("fenced");
    rounds(&locks, 1).await;
    let clone = lock.clone();
    server.pause().unwrap();
    let cancelled =
        tokio::time::timeout(Duration::from_millis(200), clone.try_acquire_now(None)).await;
    server.resume().unwrap();
    assert!(cancelled.is_err(), "answered by a paused server?");
    server
        .cli(&["DEL", "redisson_lock_token:{cancelled}"])
        .unwrap();
    // Two rounds: judged by owner, the counter would be read in neither
    // but at one renewal in eight.
    rounds(&locks, 2).await;
    let back = server
        .cli(&["GET", "redisson_lock_token:{cancelled}"])
        .unwrap();
    assert_eq!(back.trim(), token.to_string(), "read and put back by token");
    assert!(!g.is_lost());
    g.unlock().await.unwrap();
}

/// Renewal never gives a key without expiry one (it would shorten it from
/// forever), on every server: Redis 7 and Valkey by `PEXPIRE ... GT`,
/// Redis 6.2 (no GT) by the same rule in the script.
#[tokio::test]
async fn a_renewal_gives_no_expiry_to_a_key_without_one() {
    use keylatch_lock::scripts::REENTRANT_RENEW;
    let server = RedisServer::start();
    let locks = tracked_locks(&server, LocksConfig::default()).await;
    let counter = "redisson_lock_token:{forever}";
    server.cli(&["HSET", "forever", "c:1", "1"]).unwrap();
    server.cli(&["SET", counter, "5"]).unwrap();
    // KEYS: hash, counter; ARGV: lease, idle expiry, flags ("c": refresh
    // the counter too), owner, token.
    let reply = locks
        .client()
        .eval_script(
            &REENTRANT_RENEW,
            &["forever", counter],
            &["900", "60000", "c", "c:1", "5"],
        )
        .await
        .unwrap();
    assert_eq!(
        reply,
        keylatch_resp::Frame::Array(vec![keylatch_resp::Frame::Integer(1)])
    );
    assert_eq!(server.cli(&["PTTL", "forever"]).unwrap().trim(), "-1");
    assert_eq!(server.cli(&["PTTL", counter]).unwrap().trim(), "-1");
    // With an expiry, a short one is stretched to the lease.
    server.cli(&["PEXPIRE", "forever", "100"]).unwrap();
    server.cli(&["PEXPIRE", counter, "100"]).unwrap();
    locks
        .client()
        .eval_script(
            &REENTRANT_RENEW,
            &["forever", counter],
            &["900", "60000", "c", "c:1", "5"],
        )
        .await
        .unwrap();
    let left = |k: &str| -> i64 { server.cli(&["PTTL", k]).unwrap().trim().parse().unwrap() };
    assert!(left("forever") > 500, "{}", left("forever"));
    assert!(left(counter) > 50_000, "{}", left(counter));
}

/// The owner-only renewal (`owner_renew.lua`) keeps the same rules, on
/// every server: a key without expiry keeps none, a longer expiry is kept,
/// a short one is stretched to the lease; a missing owner and a key of
/// another type are each that hold's loss (0), not the call's.
#[tokio::test]
async fn an_owner_only_renewal_judges_each_key_alone_and_never_shortens() {
    use keylatch_lock::scripts::OWNER_RENEW;
    let server = RedisServer::start();
    let locks = tracked_locks(&server, LocksConfig::default()).await;
    server.cli(&["HSET", "forever", "c:1", "1"]).unwrap();
    server.cli(&["HSET", "long", "c:1", "1"]).unwrap();
    server.cli(&["PEXPIRE", "long", "600000"]).unwrap();
    server.cli(&["HSET", "short", "c:1", "1"]).unwrap();
    server.cli(&["PEXPIRE", "short", "100"]).unwrap();
    server.cli(&["HSET", "other", "c:2", "1"]).unwrap();
    server.cli(&["RPUSH", "list", "x"]).unwrap();
    // KEYS: hashes; ARGV: lease, then each hold's owner.
    let keys = ["forever", "long", "short", "other", "list", "gone"];
    let reply = locks
        .client()
        .eval_script(
            &OWNER_RENEW,
            &keys,
            &["900", "c:1", "c:1", "c:1", "c:1", "c:1", "c:1"],
        )
        .await
        .unwrap();
    let one = |v| keylatch_resp::Frame::Integer(v);
    assert_eq!(
        reply,
        keylatch_resp::Frame::Array(vec![one(1), one(1), one(1), one(0), one(0), one(0)])
    );
    let left = |k: &str| -> i64 { server.cli(&["PTTL", k]).unwrap().trim().parse().unwrap() };
    assert_eq!(left("forever"), -1);
    assert!(left("long") > 500_000, "{}", left("long"));
    assert!((500..=900).contains(&left("short")), "{}", left("short"));
    assert_eq!(left("other"), -1, "another owner's key untouched");
}

/// `tracked_holds` bounds what tracking costs: with a budget of 5 and ten
/// holds, five keys are tracked, round after round; a hold past the budget
/// still learns of an outside delete, from its next renewal.
#[tokio::test]
async fn holds_past_the_tracking_budget_are_judged_by_their_renewals() {
    let server = RedisServer::start();
    let cfg = LocksConfig::default()
        .watchdog_timeout(Duration::from_millis(900))
        .tracked_holds(5);
    let locks = tracked_locks(&server, cfg).await;
    let mut guards = Vec::new();
    for i in 0..10 {
        guards.push(take_free(&locks, &format!("budget-{i}")).await);
    }
    rounds(&locks, 3).await;
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let n = info_field(&server, "stats", "tracking_total_keys");
        assert!(n <= 5, "{n} keys tracked, budget 5");
        if n == 5 {
            break;
        }
        assert!(Instant::now() < until, "{n} of 5 tracked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    rounds(&locks, 3).await;
    assert!(info_field(&server, "stats", "tracking_total_keys") <= 5);
    // The last hold came past the budget: untracked, found by renewal.
    server.cli(&["DEL", "budget-9"]).unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(5), guards[9].lost())
        .await
        .expect("the renewal finds the deleted hold");
    assert_eq!(reason, LossReason::Gone);
    for g in guards.into_iter().take(9) {
        assert!(!g.is_lost());
        g.unlock().await.unwrap();
    }
}
