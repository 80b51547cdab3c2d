//! `rediss://` against real TLS-only redis-servers (the harness' throwaway
//! CA): commands, pipelines, scripts, both handshakes, certificate
//! verification (untrusted, wrong name, the explicit opt-out), mutual TLS,
//! reconnect, locks woken through the pub/sub hub, a TLS cluster, and the
//! CLI.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use keylatch_cluster::{
    Client, ClientConfig, Commands, Connection, ConnectionConfig, Error, Event, Negotiated,
    Pipeline, Protocol, PubSub, Script,
};
use keylatch_harness::{RedisCluster, RedisServer};
use keylatch_lock::{Locks, LocksConfig};
use keylatch_resp::{Cmd, Frame};

mod common;
use common::{stderr, stdout, Soon};

/// The server's `rediss://` URL, trusting the harness CA.
fn tls_cfg(server: &RedisServer) -> ConnectionConfig {
    ConnectionConfig::from_url(&server.url())
        .unwrap()
        .tls_ca_file(server.tls_certs().unwrap().ca_file())
        .unwrap()
}

fn tls_server() -> RedisServer {
    RedisServer::builder().tls().start().unwrap()
}

/// A TLS error of one line that mentions `needle`.
#[track_caller]
fn assert_tls_error(r: Result<Connection, Error>, needle: &str) -> String {
    match r {
        Err(Error::Tls(m)) => {
            let line = Error::Tls(m.clone()).to_string();
            assert!(!line.contains('\n'), "one line: {line}");
            assert!(line.contains(needle), "{needle:?} not in {line:?}");
            eprintln!("{line}");
            line
        }
        other => panic!("expected Error::Tls, got {other:?}"),
    }
}

static INCR_BY: Script = Script::new("incr_by", "return redis.call('INCRBY', KEYS[1], ARGV[1])");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_pipelines_scripts_and_large_values_over_tls() {
    let server = tls_server();
    let conn = Connection::connect_with(tls_cfg(&server)).await.unwrap();
    assert_eq!(conn.protocol(), Some(Negotiated::Resp3));
    conn.set("greeting", "hello").await.unwrap();
    assert_eq!(
        conn.get("greeting").await.unwrap().as_deref(),
        Some(&b"hello"[..])
    );
    let replies = conn
        .pipeline(
            Pipeline::new()
                .cmd(Cmd::new("INCR").key("n"))
                .cmd(Cmd::new("INCR").key("n"))
                .cmd(Cmd::new("GET").key("greeting")),
        )
        .await
        .unwrap();
    assert_eq!(replies.len(), 3);
    assert_eq!(replies[1].as_ref().unwrap(), &Frame::Integer(2));
    // EVALSHA: NOSCRIPT first, then SCRIPT LOAD + retry, then the cached SHA.
    for expected in [5, 10] {
        let r = conn.eval_script(&INCR_BY, &["s"], &["5"]).await.unwrap();
        assert_eq!(r, Frame::Integer(expected));
    }
    // Values larger than a TLS record and than the socket buffers: rustls
    // holds encrypted bytes back when the socket is full, which the
    // connection task must flush.
    let big: Vec<u8> = (0..8 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    conn.set("big", big.as_slice()).await.unwrap();
    assert_eq!(conn.get("big").await.unwrap().as_deref(), Some(&big[..]));
    // Many concurrent callers on the one TLS socket, each its own reply.
    let mut tasks = Vec::new();
    for i in 0..200u32 {
        let conn = conn.clone();
        tasks.push(tokio::spawn(async move {
            let v = format!("v{i}");
            let echoed: String = conn.cmd(Cmd::new("ECHO").arg(v.as_str())).await.unwrap();
            assert_eq!(echoed, v);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test]
async fn resp3_and_resp2_handshakes_over_tls() {
    let server = tls_server();
    server
        .cli(&[
            "ACL", "SETUSER", "app", "on", ">secret", "~*", "&*", "+@all",
        ])
        .unwrap();
    for (protocol, negotiated) in [
        (Protocol::Resp3, Negotiated::Resp3),
        (Protocol::Resp2, Negotiated::Resp2),
        (Protocol::Auto, Negotiated::Resp3),
    ] {
        let mut cfg = tls_cfg(&server).protocol(protocol).client_name("tls-app");
        cfg.username = Some("app".to_owned());
        cfg.password = Some("secret".to_owned());
        cfg.db = 2;
        let conn = Connection::connect_with(cfg).await.unwrap();
        assert_eq!(conn.protocol(), Some(negotiated), "{protocol:?}");
        let who: String = conn.cmd(Cmd::new("ACL").arg("WHOAMI")).await.unwrap();
        assert_eq!(who, "app");
        let name: String = conn.cmd(Cmd::new("CLIENT").arg("GETNAME")).await.unwrap();
        assert_eq!(name, "tls-app");
        conn.set("where", "db2").await.unwrap();
    }
    // The URL form of the same: protocol and the CA as query parameters.
    let ca = server.tls_certs().unwrap().ca_file();
    let url = format!(
        "{}/2?protocol=resp2&ca={}",
        server.url().replace("rediss://", "rediss://app:secret@"),
        ca.display()
    );
    let conn = Connection::connect(&url).await.unwrap();
    assert_eq!(conn.protocol(), Some(Negotiated::Resp2));
    assert_eq!(
        conn.get("where").await.unwrap().as_deref(),
        Some(&b"db2"[..])
    );
}

#[tokio::test]
async fn an_untrusted_certificate_is_a_typed_error_unless_checks_are_off() {
    let server = tls_server();
    // The system roots (the default without a CA file) do not know the
    // harness CA. Either the handshake rejects the issuer, or (a machine
    // without ca-certificates) there are no roots at all: a TLS error both.
    let plain = ConnectionConfig::from_url(&server.url()).unwrap();
    let line = match Connection::connect_with(plain.clone()).await {
        Err(Error::Tls(m)) => m,
        other => panic!("expected Error::Tls, got {other:?}"),
    };
    assert!(
        line.contains("UnknownIssuer") || line.contains("no trusted root"),
        "{line}"
    );
    assert!(!line.contains('\n'));
    // No roots at all: said before any connection is made.
    assert_tls_error(
        Connection::connect_with(plain.clone().tls_system_roots(false)).await,
        "no trusted root certificates",
    );
    // Another CA's bundle does not help either.
    let other_ca = keylatch_harness::TlsCerts::generate().unwrap();
    assert_tls_error(
        Connection::connect_with(plain.clone().tls_ca_file(other_ca.ca_file()).unwrap()).await,
        &server.port().to_string(),
    );
    // The loudly named opt-out: encrypted, not authenticated.
    let conn = Connection::connect_with(plain.danger_accept_invalid_certs(true))
        .await
        .unwrap();
    conn.ping().await.unwrap();
}

#[tokio::test]
async fn a_host_name_not_in_the_certificate_is_refused() {
    let server = tls_server();
    // The certificate names IP 127.0.0.1 only; `localhost` reaches the same
    // server but is not a name the certificate vouches for.
    let mut cfg = tls_cfg(&server);
    cfg.host = "localhost".to_owned();
    let line = assert_tls_error(Connection::connect_with(cfg.clone()).await, "localhost");
    assert!(
        line.contains("NotValidForName") || line.contains("not valid for name"),
        "{line}"
    );
    // The opt-out skips the name check too.
    let conn = Connection::connect_with(cfg.danger_accept_invalid_certs(true))
        .await
        .unwrap();
    conn.ping().await.unwrap();
}

#[tokio::test]
async fn mutual_tls_refuses_a_client_without_a_certificate() {
    let server = RedisServer::builder()
        .tls_require_client_cert()
        .start()
        .unwrap();
    let certs = server.tls_certs().unwrap();
    // The server's refusal comes as an alert after the handshake: a TLS
    // error naming the address.
    let r = Connection::connect_with(tls_cfg(&server)).await;
    let line = assert_tls_error(r, &server.port().to_string());
    eprintln!("without a client certificate: {line}");
    // With the client certificate: accepted (builder and URL forms).
    let cfg = tls_cfg(&server)
        .tls_client_cert(certs.client_cert(), certs.client_key())
        .unwrap();
    let conn = Connection::connect_with(cfg).await.unwrap();
    conn.set("mtls", "yes").await.unwrap();
    let url = format!(
        "{}?ca={}&cert={}&key={}",
        server.url(),
        certs.ca_file().display(),
        certs.client_cert().display(),
        certs.client_key().display()
    );
    let conn = Connection::connect(&url).await.unwrap();
    assert_eq!(
        conn.get("mtls").await.unwrap().as_deref(),
        Some(&b"yes"[..])
    );
    // A key file that is not a key: refused when it is set, not at connect.
    match tls_cfg(&server).tls_client_cert(certs.client_cert(), certs.client_cert()) {
        Err(Error::Tls(m)) => assert!(m.contains("client private key"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_over_tls_after_client_kill() {
    let server = tls_server();
    let conn = Connection::connect_with(tls_cfg(&server)).await.unwrap();
    let id: i64 = conn.cmd(Cmd::new("CLIENT").arg("ID")).await.unwrap();
    let out = server
        .cli(&["CLIENT", "KILL", "ID", &id.to_string()])
        .unwrap();
    assert_eq!(out.trim(), "1");
    Soon::new(Duration::from_secs(10), Duration::from_millis(20))
        .eventually("reconnect on a new connection", || async {
            let now: Result<i64, Error> = conn.cmd(Cmd::new("CLIENT").arg("ID")).await;
            matches!(now, Ok(new_id) if new_id != id)
        })
        .await;
    assert!(conn.reconnects() >= 1);
    conn.set("after", "kill").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_waiter_is_woken_by_pubsub_over_tls() {
    let server = tls_server();
    let mut client = ClientConfig::from_url(&server.url()).unwrap();
    client.seeds[0] = tls_cfg(&server);
    // Rechecks every 30 s and a 30 s lease: within the 20 s wait, only the
    // unlock message (through the TLS pub/sub hub) can wake the waiter.
    let slow = LocksConfig::default()
        .watchdog_timeout(Duration::from_secs(30))
        .recheck(Duration::from_secs(30));
    let a = Locks::connect_with(client.clone(), slow.clone())
        .await
        .unwrap();
    let b = Locks::connect_with(client, slow).await.unwrap();
    let guard = a.lock("tls-handoff").acquire().await.unwrap();
    let token = guard.fencing_token();
    let waiter = tokio::spawn(async move {
        let g = b
            .lock("tls-handoff")
            .try_acquire(Duration::from_secs(20), None)
            .await
            .unwrap();
        (g, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The waiter listens on the lock's channel through the hub's own
    // connection: a TLS client like the others (the server has no other port).
    let channels = server.cli(&["PUBSUB", "CHANNELS"]).unwrap();
    assert!(channels.contains("tls-handoff"), "{channels}");
    let released = Instant::now();
    guard.unlock().await.unwrap();
    let (g, at) = waiter.await.unwrap();
    let g = g.expect("the waiter acquires after the unlock message");
    assert!(g.fencing_token() > token);
    assert!(at.duration_since(released) < Duration::from_secs(10));
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_cluster_routes_locks_and_shard_channels() {
    let cluster = RedisCluster::builder().tls().start().unwrap();
    let ca = cluster.node(0).server().tls_certs().unwrap().ca_file();
    // Seeds as the CLI would give them: URLs with the CA as a parameter.
    let urls: Vec<String> = cluster
        .seed_urls()
        .iter()
        .map(|u| format!("{u}?ca={}", ca.display()))
        .collect();
    let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
    let client = Client::connect_with(ClientConfig::from_urls(&refs).unwrap())
        .await
        .unwrap();
    assert!(client.is_cluster());
    // Every master is addressed by its TLS port (the only one it has).
    let shards = client.shards();
    assert_eq!(shards.len(), 3, "{shards:?}");
    for shard in &shards {
        let port: u16 = shard.master.rsplit(':').next().unwrap().parse().unwrap();
        assert!(cluster.node_index_by_port(port).is_some(), "{shard:?}");
    }
    // Keys spread over every master land where the slot says.
    for i in 0..60 {
        let key = format!("k{i}");
        client.set(key.as_str(), i.to_string()).await.unwrap();
        let owner = cluster.master_for_slot(RedisCluster::slot_of(&key));
        let v = cluster.node(owner).cli(&["GET", &key]).unwrap();
        assert_eq!(v.trim(), i.to_string());
    }
    // Shard channels through the cluster hub (one TLS connection per master).
    let hub = PubSub::from_client(&client).await.unwrap();
    let mut sub = hub.ssubscribe("{tag}:news").await.unwrap();
    assert_eq!(client.spublish("{tag}:news", "hi").await.unwrap(), 1);
    match tokio::time::timeout(Duration::from_secs(5), sub.recv()).await {
        Ok(Some(Event::Message { payload, .. })) => assert_eq!(&payload[..], b"hi"),
        other => panic!("{other:?}"),
    }
    // A lock and a waiter woken through the TLS hub.
    let slow = LocksConfig::default()
        .watchdog_timeout(Duration::from_secs(30))
        .recheck(Duration::from_secs(30));
    let a = Locks::new(client.clone(), slow.clone());
    let b = Locks::connect_with(ClientConfig::from_urls(&refs).unwrap(), slow)
        .await
        .unwrap();
    let guard = a.lock("tls-cluster-lock").acquire().await.unwrap();
    let waiter = tokio::spawn(async move {
        b.lock("tls-cluster-lock")
            .try_acquire(Duration::from_secs(20), None)
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    guard.unlock().await.unwrap();
    let g = waiter.await.unwrap().expect("woken by the unlock message");
    g.unlock().await.unwrap();
}

#[test]
fn the_cli_reads_status_over_tls() {
    let server = tls_server();
    let ca = server.tls_certs().unwrap().ca_file();
    server.cli(&["HSET", "report", "owner-1:1", "2"]).unwrap();
    server.cli(&["PEXPIRE", "report", "60000"]).unwrap();
    // The CA from $KEYLATCH_TLS_CA …
    let o = Command::new(env!("CARGO_BIN_EXE_keylatch"))
        .args(["status", "report", "--json", "--url", &server.url()])
        .env("KEYLATCH_TLS_CA", &ca)
        .env_remove("KEYLATCH_URL")
        .output()
        .unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(out.contains("owner-1:1"), "{out}");
    // … or from the URL.
    let url = format!("{}?ca={}", server.url(), ca.display());
    let o = Command::new(env!("CARGO_BIN_EXE_keylatch"))
        .args(["status", "report", "--url", &url])
        .env_remove("KEYLATCH_TLS_CA")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Without the CA: exit 69 with one line saying it is about TLS.
    let o = Command::new(env!("CARGO_BIN_EXE_keylatch"))
        .args(["status", "report", "--url", &server.url()])
        .env_remove("KEYLATCH_TLS_CA")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(69), "{err}");
    assert!(err.contains("TLS error"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
