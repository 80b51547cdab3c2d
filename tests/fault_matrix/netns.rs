//! The partition row: the client processes run in a network namespace of
//! this test's own, joined to the host by two veth pairs (one to the lock
//! server, one to the resource). The partition takes the lock server's
//! link down (packets silently dropped, no reset), then brings it back.
//!
//! Needs root and `ip`. Without them the row says so on stderr and passes
//! without running, unless `KEYLATCH_REQUIRE_NETNS=1` (as `.ci/run` sets).

use std::process::Command;
use std::time::Duration;

use keylatch_harness::RedisServer;

use crate::row::{self, nap, Workload};
use crate::{names, no_lock_outlives_its_lease, serial};

/// A namespace with two veth pairs; removed (with the pairs) on drop.
struct Netns {
    name: String,
    /// Host-side interface of the lock server's pair.
    lock_if: String,
    /// Host-side addresses: (lock server's, resource's).
    host: (String, String),
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Netns {
    fn create() -> Result<Self, String> {
        let id = std::process::id() % 200 + 20;
        let name = format!("klfm{id}");
        let ns = Netns {
            name: name.clone(),
            lock_if: format!("klfm{id}l"),
            host: (format!("10.201.{id}.1"), format!("10.202.{id}.1")),
        };
        // Left over from an aborted run of the same pid: start clean.
        let _ = ip(&["netns", "del", &name]);
        let _ = ip(&["link", "del", &ns.lock_if]);
        let _ = ip(&["link", "del", &format!("klfm{id}r")]);
        ip(&["netns", "add", &name])?;
        let in_ns = |args: &[&str]| -> Result<(), String> {
            let mut all = vec!["netns", "exec", &name, "ip"];
            all.extend_from_slice(args);
            ip(&all)
        };
        in_ns(&["link", "set", "lo", "up"])?;
        for (host_if, net) in [(format!("klfm{id}l"), 201), (format!("klfm{id}r"), 202)] {
            let peer = format!("{host_if}n");
            ip(&[
                "link", "add", &host_if, "type", "veth", "peer", "name", &peer,
            ])?;
            ip(&["link", "set", &peer, "netns", &name])?;
            ip(&[
                "addr",
                "add",
                &format!("10.{net}.{id}.1/30"),
                "dev",
                &host_if,
            ])?;
            ip(&["link", "set", &host_if, "up"])?;
            in_ns(&["addr", "add", &format!("10.{net}.{id}.2/30"), "dev", &peer])?;
            in_ns(&["link", "set", &peer, "up"])?;
        }
        Ok(ns)
    }

    fn link(&self, up: bool) {
        ip(&["link", "set", &self.lock_if, if up { "up" } else { "down" }]).expect("link");
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
        let _ = ip(&["link", "del", &self.lock_if]);
        let _ = ip(&[
            "link",
            "del",
            &format!("{}r", &self.lock_if[..self.lock_if.len() - 1]),
        ]);
    }
}

#[test]
fn a_partition_between_the_clients_and_the_server() {
    let _serial = serial();
    let ns = match Netns::create() {
        Ok(ns) => ns,
        // CI (which runs as root with `ip`) sets KEYLATCH_REQUIRE_NETNS=1:
        // there the row may not be skipped.
        Err(why) if std::env::var("KEYLATCH_REQUIRE_NETNS").as_deref() == Ok("1") => {
            panic!("the partition row cannot run: {why}");
        }
        Err(why) => {
            eprintln!("[partition] not run: a network namespace could not be made ({why})");
            return;
        }
    };
    let server = RedisServer::builder()
        .args(["--bind", "127.0.0.1", &ns.host.0, "--protected-mode", "no"])
        .start()
        .expect("lock server");
    let resource = RedisServer::builder()
        .args(["--bind", "127.0.0.1", &ns.host.1, "--protected-mode", "no"])
        .start()
        .expect("resource server");
    let w = Workload {
        netns: Some(ns.name.clone()),
        ..Workload::new(names("partition"))
    };
    let url = format!("redis://{}:{}", ns.host.0, server.port());
    let resource_url = format!("redis://{}:{}", ns.host.1, resource.port());
    let r = row::run(
        "partition",
        &url,
        &resource,
        &resource_url,
        &w,
        |stop, log| {
            while nap(stop, Duration::from_millis(3000)) {
                log.span(|| {
                    ns.link(false);
                    std::thread::sleep(Duration::from_millis(2500));
                    ns.link(true);
                });
            }
        },
    );
    assert!(r.clean(), "{r}");
    assert!(r.losses > 0, "holders were told of their losses: {r}");
    no_lock_outlives_its_lease(&server.url(), &w.names, w.lease);
}
