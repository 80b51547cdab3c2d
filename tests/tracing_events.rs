#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The `tracing` events an operator turns on, fired against real servers:
//! connect and handshake, a reconnect with the reason the old connection
//! died, a lock lost with its reason, the batched renew round with its
//! counts, a `NOSCRIPT` reload, and no password in any event.
//!
//! Each test installs a small capturing subscriber as the thread's default
//! and runs a current-thread runtime on that thread, so every task the
//! library spawns (connection, pub/sub, lease engine) reports to it, and
//! tests running in parallel do not see each other's events.

mod common;

/// The message of a script reload after a node lost its script cache.
const RELOAD: &str = "NOSCRIPT: the node lost its script cache; loading the script again";

use std::fmt::Write as _;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keylatch_cluster::{Commands, Connection};
use keylatch_harness::RedisServer;
use keylatch_lock::{Locks, LocksConfig, LossReason};
use keylatch_resp::Cmd;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

use common::Soon;

/// One captured event: its level, target, message and the other fields
/// as `name=value` pairs (Display/Debug as the macro recorded them).
#[derive(Clone, Debug)]
struct Captured {
    level: Level,
    target: String,
    message: String,
    fields: Vec<(String, String)>,
}

impl Captured {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The whole event as one line, as a formatting subscriber would print it.
    fn line(&self) -> String {
        let mut s = format!("{} {}: {}", self.level, self.target, self.message);
        for (n, v) in &self.fields {
            let _ = write!(s, " {n}={v}");
        }
        s
    }
}

/// A subscriber that keeps every event (spans are given ids and otherwise
/// ignored).
#[derive(Clone, Default)]
struct Capture {
    events: Arc<Mutex<Vec<Captured>>>,
    next_id: Arc<AtomicU64>,
}

struct Fields<'a> {
    message: &'a mut String,
    fields: &'a mut Vec<(String, String)>,
}

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.message = format!("{value:?}");
        } else {
            self.fields
                .push((field.name().to_owned(), format!("{value:?}")));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            value.clone_into(self.message);
        } else {
            self.fields
                .push((field.name().to_owned(), value.to_owned()));
        }
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut message = String::new();
        let mut fields = Vec::new();
        event.record(&mut Fields {
            message: &mut message,
            fields: &mut fields,
        });
        let meta = event.metadata();
        self.events.lock().unwrap().push(Captured {
            level: *meta.level(),
            target: meta.target().to_owned(),
            message,
            fields,
        });
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

impl Capture {
    fn all(&self) -> Vec<Captured> {
        self.events.lock().unwrap().clone()
    }

    fn with_message(&self, message: &str) -> Vec<Captured> {
        self.all()
            .into_iter()
            .filter(|e| e.message == message)
            .collect()
    }

    fn dump(&self) -> String {
        self.all()
            .iter()
            .map(Captured::line)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits (at most 10 s) for an event with `message` that `accept`
    /// takes; panics with every event captured so far.
    async fn wait_for(&self, message: &str, accept: impl Fn(&Captured) -> bool) -> Captured {
        Soon::new(Duration::from_secs(10), Duration::from_millis(20))
            .until(|| async {
                self.with_message(message)
                    .into_iter()
                    .find(|e| accept(e))
                    .ok_or_else(|| format!("no {message:?} event yet; captured:\n{}", self.dump()))
            })
            .await
    }
}

/// Runs `test` on a current-thread runtime with `capture` as this
/// thread's default subscriber (the runtime's tasks all run here).
fn run<F: Future<Output = ()>>(capture: &Capture, test: impl FnOnce() -> F) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tracing::subscriber::with_default(capture.clone(), || rt.block_on(test()));
}

#[test]
fn connect_logs_address_protocol_and_handshake() {
    let server = RedisServer::start();
    let capture = Capture::default();
    run(&capture, || async {
        let conn = Connection::connect(&server.url()).await.unwrap();
        conn.ping().await.unwrap();
        let node = format!("127.0.0.1:{}", server.port());
        let e = capture
            .wait_for("connected", |e| e.field("node") == Some(node.as_str()))
            .await;
        assert_eq!(e.level, Level::INFO, "{}", e.line());
        assert_eq!(e.target, "keylatch_cluster::handshake");
        assert_eq!(e.field("protocol"), Some("3"), "{}", e.line());
        assert_eq!(e.field("handshake"), Some("HELLO 3"), "{}", e.line());
        assert_eq!(e.field("auth"), Some("none"), "{}", e.line());
        assert_eq!(e.field("tls"), Some("false"), "{}", e.line());

        // A refused connect says where and why, at warn.
        let closed = format!(
            "redis://127.0.0.1:{}",
            keylatch_harness::free_port().unwrap()
        );
        assert!(Connection::connect(&closed).await.is_err());
        let e = capture.wait_for("connect failed", |_| true).await;
        assert_eq!(e.level, Level::WARN, "{}", e.line());
        assert_eq!(e.field("step"), Some("connect"), "{}", e.line());
        assert!(
            e.field("error").is_some_and(|v| !v.is_empty()),
            "{}",
            e.line()
        );
    });
}

#[test]
fn a_killed_connection_logs_the_reason_and_the_reconnect() {
    let server = RedisServer::start();
    let capture = Capture::default();
    run(&capture, || async {
        let conn = Connection::connect(&server.url()).await.unwrap();
        conn.ping().await.unwrap();
        let killed = server
            .cli(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"])
            .unwrap();
        assert_eq!(killed.trim(), "1", "one client killed");
        let lost = capture
            .wait_for("connection lost; reconnecting", |_| true)
            .await;
        assert_eq!(lost.level, Level::WARN, "{}", lost.line());
        assert_eq!(
            lost.field("reason"),
            Some("the server closed the connection"),
            "{}",
            lost.line()
        );
        assert!(lost.field("error").is_some(), "{}", lost.line());
        let back = capture.wait_for("reconnected", |_| true).await;
        assert_eq!(back.level, Level::INFO, "{}", back.line());
        assert_eq!(back.field("reconnects"), Some("1"), "{}", back.line());
        // And the new connection's own "connected": the first and this one.
        Soon::new(Duration::from_secs(5), Duration::from_millis(20))
            .until(|| async {
                let n = capture.with_message("connected").len();
                (n >= 2)
                    .then_some(())
                    .ok_or_else(|| format!("{n} connected events"))
            })
            .await;
        conn.ping().await.unwrap();
    });
}

#[test]
fn a_deleted_lock_key_logs_the_loss_with_its_reason() {
    let server = RedisServer::start();
    let capture = Capture::default();
    run(&capture, || async {
        // Locks::connect: client tracking on, so the DEL is pushed and the
        // loss is found at once (not at the next renewal, 10 s away).
        let locks = Locks::connect(&server.url()).await.unwrap();
        let guard = locks.lock("traced-loss").acquire().await.unwrap();
        let acquired = capture
            .wait_for("acquire", |e| e.field("lock") == Some("traced-loss"))
            .await;
        assert_eq!(acquired.level, Level::DEBUG, "{}", acquired.line());
        assert_eq!(
            acquired.field("kind"),
            Some("reentrant"),
            "{}",
            acquired.line()
        );
        assert_eq!(
            acquired.field("outcome"),
            Some("acquired"),
            "{}",
            acquired.line()
        );
        assert!(acquired.field("waited_ms").is_some(), "{}", acquired.line());
        // Past the tracked read's start, so the key is tracked.
        tokio::time::sleep(Duration::from_millis(300)).await;
        server.cli(&["DEL", "traced-loss"]).unwrap();
        let reason = tokio::time::timeout(Duration::from_secs(5), guard.lost())
            .await
            .expect("lost within 5 s");
        assert_eq!(reason, LossReason::Gone);
        let e = capture
            .wait_for("lock lost", |e| e.field("lock") == Some("traced-loss"))
            .await;
        assert_eq!(e.level, Level::WARN, "{}", e.line());
        assert_eq!(e.field("reason"), Some("Gone"), "{}", e.line());
        assert!(
            e.field("detail").is_some_and(|d| d.contains("gone")),
            "{}",
            e.line()
        );
        assert_eq!(
            capture.with_message("lock lost").len(),
            1,
            "one loss, one event:\n{}",
            capture.dump()
        );
    });
}

#[test]
fn renewals_log_one_event_per_round_with_counts() {
    let server = RedisServer::start();
    let capture = Capture::default();
    run(&capture, || async {
        // A 900 ms watchdog lease: a renewal round every 300 ms.
        let cfg = LocksConfig::default().watchdog_timeout(Duration::from_millis(900));
        let client = keylatch_cluster::Client::connect(&server.url())
            .await
            .unwrap();
        let locks = Locks::new(client, cfg);
        let mut guards = Vec::new();
        for i in 0..5 {
            guards.push(
                locks
                    .lock(&format!("traced-renew-{i}"))
                    .acquire()
                    .await
                    .unwrap(),
            );
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let rounds = capture.with_message("renew round");
        assert!(!rounds.is_empty(), "renew rounds:\n{}", capture.dump());
        let num = |e: &Captured, f: &str| -> u64 {
            e.field(f)
                .unwrap_or_else(|| panic!("no {f} in {}", e.line()))
                .parse()
                .unwrap()
        };
        let mut renewed = 0;
        for e in &rounds {
            assert_eq!(e.level, Level::DEBUG, "{}", e.line());
            assert_eq!(e.target, "keylatch_lock::lease::actor");
            assert_eq!(num(e, "failed_calls"), 0, "{}", e.line());
            assert_eq!(num(e, "gone"), 0, "{}", e.line());
            assert!(num(e, "calls") >= 1, "{}", e.line());
            renewed += num(e, "renewed");
        }
        // Batched: five holds renewed together give fewer events than
        // renewals (one per hold would give exactly as many).
        assert!(
            renewed > rounds.len() as u64,
            "{renewed} renewals in {} events:\n{}",
            rounds.len(),
            capture.dump()
        );
        assert!(
            rounds.iter().any(|e| num(e, "renewed") == 5),
            "a round renewing all five holds:\n{}",
            capture.dump()
        );
        for g in guards {
            g.unlock().await.unwrap();
        }
    });
}

#[test]
fn a_flushed_script_cache_logs_the_reload() {
    let server = RedisServer::start();
    let capture = Capture::default();
    run(&capture, || async {
        let locks = Locks::connect(&server.url()).await.unwrap();
        let lock = locks.lock("traced-noscript");
        lock.acquire().await.unwrap().unlock().await.unwrap();
        assert!(
            capture.with_message(RELOAD).is_empty(),
            "no reload before the flush (first loads are routine):\n{}",
            capture.dump()
        );
        assert!(
            !capture
                .with_message("loading the script (first use on this node)")
                .is_empty(),
            "first loads at debug:\n{}",
            capture.dump()
        );
        server.cli(&["SCRIPT", "FLUSH"]).unwrap();
        lock.acquire().await.unwrap().unlock().await.unwrap();
        let node = format!("127.0.0.1:{}", server.port());
        let e = capture.wait_for(RELOAD, |_| true).await;
        assert_eq!(e.level, Level::INFO, "{}", e.line());
        assert_eq!(e.field("node"), Some(node.as_str()), "{}", e.line());
        assert!(
            e.field("script").is_some_and(|s| !s.is_empty()),
            "{}",
            e.line()
        );
        assert_eq!(e.field("sha1").map(str::len), Some(40), "{}", e.line());
    });
}

#[test]
fn no_event_carries_a_password() {
    let server = RedisServer::start();
    server
        .cli(&["CONFIG", "SET", "requirepass", "s3cret-pw"])
        .unwrap();
    let capture = Capture::default();
    run(&capture, || async {
        let port = server.port();
        let url = format!("redis://:s3cret-pw@127.0.0.1:{port}");
        // A refused password: the failure is logged, the password is not.
        let wrong = format!("redis://:wr0ng-pw@127.0.0.1:{port}");
        assert!(Connection::connect(&wrong).await.is_err());
        let e = capture.wait_for("connect failed", |_| true).await;
        assert_eq!(e.field("step"), Some("HELLO 3"), "{}", e.line());

        let locks = Locks::connect(&url).await.unwrap();
        let guard = locks.lock("traced-secret").acquire().await.unwrap();
        let admin = Connection::connect(&url).await.unwrap();
        // The handshake says a password was used, not which.
        let e = capture
            .wait_for("connected", |e| e.field("auth") == Some("password"))
            .await;
        assert!(
            e.field("handshake")
                .is_some_and(|h| h.starts_with("HELLO 3")),
            "{}",
            e.line()
        );
        // A reconnect (handshake again) and a script reload, with credentials.
        admin
            .send(
                Cmd::new("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg("normal")
                    .arg("SKIPME")
                    .arg("yes"),
            )
            .await
            .unwrap();
        capture.wait_for("reconnected", |_| true).await;
        admin.send(Cmd::new("SCRIPT").arg("FLUSH")).await.unwrap();
        Soon::new(Duration::from_secs(10), Duration::from_millis(50))
            .until(|| async {
                locks
                    .lock("traced-secret-2")
                    .try_acquire_now(None)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or("busy")?
                    .unlock()
                    .await
                    .map_err(|e| e.to_string())
            })
            .await;
        guard.unlock().await.unwrap();
        capture.wait_for(RELOAD, |_| true).await;

        let all = capture.all();
        assert!(all.len() > 5, "events captured:\n{}", capture.dump());
        for e in &all {
            let line = e.line();
            assert!(
                !line.contains("s3cret-pw") && !line.contains("wr0ng-pw"),
                "a password in an event: {line}"
            );
        }
    });
}

#[test]
fn a_cluster_logs_its_topology_a_redirect_and_the_change() {
    let cluster = keylatch_harness::RedisCluster::builder()
        .masters(3)
        .replicas(0)
        .start()
        .unwrap();
    let capture = Capture::default();
    run(&capture, || async {
        let client = common::client_for(&cluster).await;
        let first = capture
            .wait_for("cluster topology changed", |e| {
                e.field("masters") == Some("3")
            })
            .await;
        assert_eq!(first.level, Level::INFO, "{}", first.line());
        assert_eq!(first.field("slots"), Some("16384"), "{}", first.line());

        // Give an empty slot to another master behind the client's back:
        // the next command on it meets MOVED.
        let key = keylatch_harness::RedisCluster::key_for_slot(1234);
        let from = cluster.master_for_slot(1234);
        let to = *cluster.masters().iter().find(|&&m| m != from).unwrap();
        let id = cluster.node(to).node_id().to_owned();
        for m in cluster.masters() {
            let out = cluster
                .node(m)
                .cli(&["CLUSTER", "SETSLOT", "1234", "NODE", &id])
                .unwrap();
            assert_eq!(out.trim(), "OK");
        }
        Soon::new(Duration::from_secs(10), Duration::from_millis(50))
            .until(|| async { client.set(&key, "v").await.map_err(|e| e.to_string()) })
            .await;
        let moved = capture
            .wait_for("redirected", |e| e.field("redirect") == Some("MOVED"))
            .await;
        assert_eq!(moved.level, Level::DEBUG, "{}", moved.line());
        assert_eq!(moved.field("slot"), Some("1234"), "{}", moved.line());
        let to_addr = format!("127.0.0.1:{}", cluster.node(to).port());
        assert_eq!(
            moved.field("to"),
            Some(to_addr.as_str()),
            "{}",
            moved.line()
        );
        // The MOVED patched the table (debug); the refresh it asked for
        // finds it already so, or reports the one slot moved.
        capture
            .wait_for("slot moved: table patched from MOVED", |e| {
                e.field("slot") == Some("1234")
            })
            .await;
    });
}

#[test]
fn an_outage_warns_on_some_reconnect_attempts_not_all() {
    let mut server = RedisServer::start();
    let capture = Capture::default();
    run(&capture, || async {
        let conn = Connection::connect(&server.url()).await.unwrap();
        conn.ping().await.unwrap();
        server.kill();
        capture
            .wait_for("connection lost; reconnecting", |_| true)
            .await;
        // Backoff 10 ms doubling to 2 s: about 9 attempts in 3 s.
        tokio::time::sleep(Duration::from_secs(3)).await;
        server.restart().unwrap();
        capture.wait_for("reconnected", |_| true).await;
        let failed = capture.with_message("connect failed");
        let warned = failed.iter().filter(|e| e.level == Level::WARN).count();
        assert!(
            warned >= 2 && warned < failed.len(),
            "{warned} of {} failed attempts at warn:\n{}",
            failed.len(),
            capture.dump()
        );
        let retries = capture.with_message("reconnect attempt failed; retrying");
        assert_eq!(retries.len(), failed.len(), "{}", capture.dump());
        assert!(retries.iter().all(|e| e.level == Level::DEBUG
            && e.field("attempt").is_some()
            && e.field("retry_in").is_some()));
        conn.ping().await.unwrap();
    });
}

#[test]
fn pubsub_logs_subscribe_the_lost_connection_and_the_resubscribe() {
    let server = RedisServer::start();
    let capture = Capture::default();
    run(&capture, || async {
        let cfg = keylatch_cluster::ConnectionConfig::from_url(&server.url()).unwrap();
        let hub =
            keylatch_cluster::PubSub::connect_with(cfg, keylatch_cluster::PubSubConfig::default())
                .await
                .unwrap();
        let mut subs = Vec::new();
        for ch in ["traced-a", "traced-b"] {
            subs.push(hub.subscribe(ch).await.unwrap());
        }
        let sub = capture
            .wait_for("pub/sub", |e| e.field("command") == Some("SUBSCRIBE"))
            .await;
        assert_eq!(sub.level, Level::DEBUG, "{}", sub.line());
        server.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]).unwrap();
        let lost = capture
            .wait_for(
                "pub/sub connection lost; reconnecting to resubscribe",
                |_| true,
            )
            .await;
        assert_eq!(lost.level, Level::WARN, "{}", lost.line());
        assert_eq!(
            lost.field("reason"),
            Some("the server closed the connection"),
            "{}",
            lost.line()
        );
        assert_eq!(lost.field("names"), Some("2"), "{}", lost.line());
        let back = capture
            .wait_for("pub/sub reconnected; resubscribing", |_| true)
            .await;
        assert_eq!(back.level, Level::INFO, "{}", back.line());
        assert_eq!(back.field("names"), Some("2"), "{}", back.line());
        // The resubscribe is one command for both names.
        capture
            .wait_for("pub/sub", |e| {
                e.field("command") == Some("SUBSCRIBE") && e.field("names") == Some("2")
            })
            .await;
        drop(subs);
    });
}

#[test]
fn a_semaphore_acquire_and_a_timed_out_wait_are_logged() {
    let server = RedisServer::start();
    let capture = Capture::default();
    run(&capture, || async {
        let locks = Locks::connect(&server.url()).await.unwrap();
        let sem = locks.semaphore("traced-sem");
        assert!(sem.try_set_permits(1).await.unwrap());
        let _held = sem.acquire(1).await.unwrap();
        let got = capture
            .wait_for("acquire", |e| e.field("lock") == Some("traced-sem"))
            .await;
        assert_eq!(got.field("kind"), Some("semaphore"), "{}", got.line());
        assert_eq!(got.field("outcome"), Some("acquired"), "{}", got.line());
        // No permit left: a 300 ms wait subscribes, then gives up.
        assert!(sem
            .try_acquire(1, Duration::from_millis(300))
            .await
            .unwrap()
            .is_none());
        let waiting = capture
            .wait_for("waiting", |e| e.field("lock") == Some("traced-sem"))
            .await;
        assert_eq!(
            waiting.field("via"),
            Some("subscription"),
            "{}",
            waiting.line()
        );
        let timed_out = capture
            .wait_for("acquire", |e| {
                e.field("lock") == Some("traced-sem")
                    && e.field("outcome") == Some("not acquired in time")
            })
            .await;
        let waited: u64 = timed_out.field("waited_ms").unwrap().parse().unwrap();
        assert!(waited >= 250, "{}", timed_out.line());
    });
}

/// A waiter queued behind a process-mate subscribes while it queues (its
/// "waiting" event comes before its turn), so its first try follows its
/// turn at once. Here the second waiter's turn comes only after the
/// holder's release, which the test makes after both events.
#[test]
fn a_waiter_queued_behind_a_process_mate_subscribes_while_it_queues() {
    let server = RedisServer::start();
    let capture = Capture::default();
    run(&capture, || async {
        let name = "queued-subscribed";
        let holder = Locks::connect(&server.url()).await.unwrap();
        let mates = Locks::connect(&server.url()).await.unwrap();
        let held = holder.lock(name).acquire().await.unwrap();
        let wait = |locks: &Locks| {
            let lock = locks.lock(name);
            tokio::spawn(async move {
                let g = lock
                    .try_acquire(Duration::from_secs(15), None)
                    .await
                    .unwrap()
                    .expect("acquired after the holder");
                g.unlock().await.unwrap();
            })
        };
        let first = wait(&mates);
        capture
            .wait_for("waiting", |e| e.field("lock") == Some(name))
            .await;
        let second = wait(&mates);
        Soon::new(Duration::from_secs(10), Duration::from_millis(20))
            .until(|| async {
                let n = capture
                    .with_message("waiting")
                    .iter()
                    .filter(|e| e.field("lock") == Some(name))
                    .count();
                // Two: the first waiter's, then the queued one's.
                (n >= 2)
                    .then_some(())
                    .ok_or_else(|| format!("{n} waiting events; captured:\n{}", capture.dump()))
            })
            .await;
        held.unlock().await.unwrap();
        for w in [first, second] {
            tokio::time::timeout(Duration::from_secs(10), w)
                .await
                .unwrap()
                .unwrap();
        }
    });
}
