//! Helpers shared by the integration tests. Each file in `tests/` is a crate
//! of its own and takes this module in with `mod common;`, so a helper that
//! several files need is written once, here.
//!
//! - [`Soon`]: bounded waiting (retry until `Ok`, poll until true, the next
//!   pub/sub event), async or blocking, with the deadline in the panic.
//! - Pub/sub facts from a server: [`counts`], [`pubsub_clients`], [`field`],
//!   [`expect_quiet`].
//! - `INFO` counters: [`info_count`], [`error_count`].
//! - Set-up: [`client_for`] (a cluster), [`acl_user`] with [`NO_SUBSCRIBE`],
//!   [`take_free`] (a free lock, under the watchdog).
//! - Process output: [`stdout`], [`stderr`]; [`lines::Lines`], a running
//!   process's lines as they come; [`terminal::Terminal`], a tmux session.

// Every test binary uses only some of these helpers; in each, the others
// would be reported as dead code.
#![allow(dead_code)]

pub(crate) mod lines;
pub(crate) mod locks;
pub(crate) mod terminal;

use std::future::Future;
use std::process::Output;
use std::time::{Duration, Instant};

use keylatch_cluster::{Client, ClientConfig, Connection, Event, Subscription};
use keylatch_harness::{RedisCluster, RedisServer};
use keylatch_resp::{Cmd, Frame};

/// How long a test waits for something that should happen soon, and how
/// often it looks meanwhile. Past the limit the test fails, naming what did
/// not happen: nothing a test waits for may hang it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Soon {
    within: Duration,
    every: Duration,
}

impl Soon {
    pub(crate) const fn new(within: Duration, every: Duration) -> Self {
        Self { within, every }
    }

    /// The same limit, looking every `every`.
    pub(crate) const fn every(self, every: Duration) -> Self {
        Self { every, ..self }
    }

    /// Calls `attempt` until it returns `Ok`, pausing between tries; once
    /// the limit has passed, panics with the last `Err` (what is still not
    /// so, with whatever state explains it).
    pub(crate) async fn until<T, F, Fut>(self, mut attempt: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, String>>,
    {
        let deadline = Instant::now() + self.within;
        loop {
            match attempt().await {
                Ok(v) => return v,
                Err(why) => tokio::time::sleep(self.pause(deadline, &why)).await,
            }
        }
    }

    /// [`until`](Self::until) for tests without a runtime: sleeps the thread.
    pub(crate) fn until_blocking<T>(self, mut attempt: impl FnMut() -> Result<T, String>) -> T {
        let deadline = Instant::now() + self.within;
        loop {
            match attempt() {
                Ok(v) => return v,
                Err(why) => std::thread::sleep(self.pause(deadline, &why)),
            }
        }
    }

    /// Polls `check` until it holds.
    pub(crate) async fn eventually<F, Fut>(self, what: &str, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        self.until(|| {
            let holds = check();
            async move { holds.await.then_some(()).ok_or_else(|| what.to_owned()) }
        })
        .await;
    }

    /// After a failed try: panics with `why` once `deadline` has passed,
    /// else the pause before the next try.
    fn pause(self, deadline: Instant, why: &str) -> Duration {
        assert!(
            Instant::now() < deadline,
            "{why}: not within {:?}",
            self.within
        );
        self.every
    }

    /// The next event of `sub`; panics when none comes in time or its
    /// stream ends.
    pub(crate) async fn next(self, sub: &mut Subscription) -> Event {
        tokio::time::timeout(self.within, sub.recv())
            .await
            .unwrap_or_else(|_| panic!("no event on {:?} within {:?}", sub.name(), self.within))
            .unwrap_or_else(|| panic!("stream of {:?} ended", sub.name()))
    }

    /// The next event of `sub` is a message on `channel` carrying `payload`.
    pub(crate) async fn expect_message(self, sub: &mut Subscription, channel: &str, payload: &str) {
        match self.next(sub).await {
            Event::Message {
                channel: c,
                payload: p,
                ..
            } => assert_eq!((&c[..], &p[..]), (channel.as_bytes(), payload.as_bytes())),
            other => panic!("expected a message on {channel}, got {other:?}"),
        }
    }

    /// The next event of `sub` other than `Gap` is a message on `channel`
    /// carrying `payload`. A listener that moves may be told more than once
    /// (parked, then live again on its new node).
    pub(crate) async fn expect_message_after_gaps(
        self,
        sub: &mut Subscription,
        channel: &str,
        payload: &str,
    ) {
        loop {
            match self.next(sub).await {
                Event::Gap => continue,
                Event::Message {
                    channel: c,
                    payload: p,
                    ..
                } => {
                    assert_eq!((&c[..], &p[..]), (channel.as_bytes(), payload.as_bytes()));
                    return;
                }
                other => panic!("expected a message on {channel}, got {other:?}"),
            }
        }
    }

    /// The next event of `sub` is a `Gap`.
    pub(crate) async fn expect_gap(self, sub: &mut Subscription) {
        let event = self.next(sub).await;
        assert_eq!(event, Event::Gap, "{:?}", sub.name());
    }
}

/// Nothing is queued for this listener right now.
pub(crate) async fn expect_quiet(sub: &mut Subscription) {
    if let Ok(event) = tokio::time::timeout(Duration::from_millis(100), sub.recv()).await {
        panic!("unexpected event on {:?}: {event:?}", sub.name());
    }
}

/// `PUBSUB NUMSUB|SHARDNUMSUB names…` (`sub`) as counts, in the order of
/// `names` (a RESP2 flat array or a RESP3 map).
pub(crate) async fn counts(conn: &Connection, sub: &str, names: &[String]) -> Vec<i64> {
    let mut cmd = Cmd::new("PUBSUB").arg(sub);
    for n in names {
        cmd.push_arg(n.as_str());
    }
    let values: Vec<Frame> = match conn.send(cmd).await.expect("PUBSUB") {
        Frame::Array(items) => items.into_iter().skip(1).step_by(2).collect(),
        Frame::Map(pairs) => pairs.into_iter().map(|(_, v)| v).collect(),
        other => panic!("PUBSUB {sub} answered {other}"),
    };
    values
        .into_iter()
        .map(|v| match v {
            Frame::Integer(n) => n,
            other => panic!("count {other}"),
        })
        .collect()
}

/// `CLIENT LIST TYPE pubsub` of the server behind `conn`, one list of
/// fields per client.
pub(crate) async fn pubsub_clients(conn: &Connection) -> Vec<Vec<(String, String)>> {
    let text: String = conn
        .cmd(Cmd::new("CLIENT").arg("LIST").arg("TYPE").arg("pubsub"))
        .await
        .expect("CLIENT LIST");
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.split(' ')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .collect()
}

/// One field of a [`pubsub_clients`] entry, `""` when it has none.
pub(crate) fn field<'a>(client: &'a [(String, String)], name: &str) -> &'a str {
    client
        .iter()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

/// The number after `prefix` in `INFO` output, up to a comma or the line's
/// end (`errorstat_MOVED:count=3`, `cmdstat_get:calls=7,usec=…`); 0 when no
/// line starts with `prefix` (the server has counted none yet).
pub(crate) fn info_count(info: &str, prefix: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .map_or(0, |rest| {
            let n = rest.split(',').next().unwrap_or_default().trim();
            n.parse()
                .unwrap_or_else(|e| panic!("{prefix}{n} in INFO: {e}"))
        })
}

/// `errorstat_<kind>` count (`ASK`, `MOVED`, …) of cluster node `idx`.
pub(crate) fn error_count(cluster: &RedisCluster, idx: usize, kind: &str) -> u64 {
    let info = cluster.node(idx).cli(&["INFO", "errorstats"]).unwrap();
    info_count(&info, &format!("errorstat_{kind}:count="))
}

/// A cluster `Client` seeded with two of the nodes, checked to have found
/// the cluster.
pub(crate) async fn client_for(cluster: &RedisCluster) -> Client {
    let urls = cluster.seed_urls();
    let seeds: Vec<&str> = urls.iter().map(String::as_str).take(2).collect();
    let client = Client::connect_with(ClientConfig::from_urls(&seeds).unwrap())
        .await
        .unwrap();
    assert!(client.is_cluster());
    client
}

/// ACL rules of a user who may publish (its lock releases must) but not
/// subscribe: a waiter cannot have the unlock channel and polls instead.
pub(crate) const NO_SUBSCRIBE: &[&str] = &[
    "~*",
    "&*",
    "+@all",
    "-subscribe",
    "-ssubscribe",
    "-psubscribe",
];

/// Creates ACL user `name` (password `pw`, enabled) with `rules` on
/// `server`; returns its `redis://` URL.
///
/// A rule naming a command this server does not have (`-ssubscribe` on
/// Redis 6.2) is left out: the server would refuse the whole `SETUSER`, and
/// a user denied a command that does not exist is denied it anyway. Any
/// other refusal fails the test.
pub(crate) fn acl_user(server: &RedisServer, name: &str, rules: &[&str]) -> String {
    let mut args = vec!["ACL", "SETUSER", name, "on", ">pw"];
    for rule in rules {
        let command = rule
            .strip_prefix('-')
            .or_else(|| rule.strip_prefix('+'))
            .filter(|c| !c.starts_with('@') && !c.contains('|'));
        if let Some(command) = command {
            let info = server.cli(&["COMMAND", "INFO", command]).unwrap();
            if info.trim().is_empty() || info.trim() == "(nil)" {
                continue;
            }
        }
        args.push(rule);
    }
    let out = server.cli(&args).unwrap();
    assert_eq!(out.trim(), "OK", "ACL SETUSER {name} refused: {out}");
    format!("redis://{name}:pw@127.0.0.1:{}", server.port())
}

/// tmux, which CI installs; `None` (and a line on stderr naming `test`)
/// where it is missing and `KEYLATCH_REQUIRE_TMUX` is not set.
pub(crate) fn tmux(test: &str) -> Option<&'static str> {
    let ok = std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var_os("KEYLATCH_REQUIRE_TMUX").is_some() {
        panic!("tmux is required (KEYLATCH_REQUIRE_TMUX) but missing");
    }
    if !ok {
        eprintln!("{test}: no tmux here; the terminal test is not run");
    }
    ok.then_some("tmux")
}

/// A finished process' standard output, as text.
pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A finished process' standard error, as text.
pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Takes free lock `name` at once under the watchdog (panics if it is held).
pub(crate) async fn take_free(
    locks: &keylatch_lock::Locks,
    name: &str,
) -> keylatch_lock::LockGuard {
    locks
        .lock(name)
        .try_acquire_now(None)
        .await
        .unwrap()
        .expect("free")
}
