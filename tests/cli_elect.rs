//! `keylatch elect` against a real redis-server: campaigners that run their
//! commands one at a time with rising tokens, `elect --observe` printing
//! each change in order, `--wait` running out (75), and a lost leadership
//! (a force unlock) stopping the leader's command (76). The cluster test in
//! `cli.rs` observes an election through a failover.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use keylatch_harness::{RedisServer, TempDir};

mod common;
use common::lines::Lines;
use common::{stderr, Soon};

fn keylatch(server: &RedisServer) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_keylatch"));
    c.env("KEYLATCH_URL", server.url());
    c
}

/// The (token, value) of each `--json` line that names a leader with both.
fn leaders(lines: &[String]) -> Vec<(u64, String)> {
    lines
        .iter()
        .filter_map(|l| {
            let token = l
                .split(r#""token":"#)
                .nth(1)?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            let value = l
                .split(r#""value":""#)
                .nth(1)?
                .split('"')
                .next()?
                .to_owned();
            Some((token, value))
        })
        .collect()
}

#[test]
fn elect_leads_one_at_a_time_observe_prints_each_change_and_a_loss_stops_the_leader() {
    let server = RedisServer::start();
    let mut watch = keylatch(&server);
    watch.args(["elect", "--observe", "el", "--json"]);
    let observer = Lines::start(watch);
    observer.wait_for(r#""leader":null"#);

    // Three campaigners at once: their commands run one at a time, each
    // with a token above the one before.
    let dir = TempDir::new("keylatch-elect").unwrap();
    let log = dir.path().join("log");
    let log = log.to_str().unwrap();
    let campaigners: Vec<Child> = (0..3)
        .map(|id| {
            let script = format!(
                "echo {id} start $(date +%s%N) $KEYLATCH_FENCING_TOKEN >> {log}; sleep 0.3; \
                 echo {id} end $(date +%s%N) >> {log}"
            );
            keylatch(&server)
                .args(["elect", "el", "--proclaim", &format!("p{id}")])
                .args(["--", "sh", "-c", &script])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in campaigners {
        assert!(c.wait().unwrap().success());
    }
    let text = std::fs::read_to_string(log).unwrap();
    let mut terms: Vec<(u128, u128, u64, String)> = (0..3)
        .map(|id| {
            let field = |what: &str, i: usize| -> String {
                let prefix = format!("{id} {what} ");
                let line = text.lines().find(|l| l.starts_with(&prefix)).unwrap();
                line[prefix.len()..].split(' ').nth(i).unwrap().to_owned()
            };
            (
                field("start", 0).parse().unwrap(),
                field("end", 0).parse().unwrap(),
                field("start", 1).parse().unwrap(),
                format!("p{id}"),
            )
        })
        .collect();
    terms.sort();
    for w in terms.windows(2) {
        assert!(w[0].1 <= w[1].0, "two leaders at once: {w:?}\n{text}");
        assert!(w[0].2 < w[1].2, "tokens rise: {w:?}");
    }

    // --wait runs out while another leads: 75.
    let ready = dir.path().join("ready");
    let mut leader = keylatch(&server)
        .args(["elect", "el", "--proclaim", "H", "--grace", "200ms", "--"])
        .args([
            "sh",
            "-c",
            &format!("echo up > {}; exec sleep 30", ready.display()),
        ])
        .spawn()
        .unwrap();
    Soon::new(Duration::from_secs(10), Duration::from_millis(10))
        .until_blocking(|| std::fs::metadata(&ready).map_err(|e| e.to_string()));
    let o = keylatch(&server)
        .args(["elect", "el", "--wait", "300ms", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    assert!(stderr(&o).contains("not elected within"), "{}", stderr(&o));

    // The leadership lost (a force unlock): the leader's command is
    // stopped, and keylatch exits 76.
    observer.wait_for(r#""value":"H""#);
    let t = Instant::now();
    let o = keylatch(&server)
        .args(["unlock", "--force", "--yes", "el"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(leader.wait().unwrap().code(), Some(76));
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());

    // The observer saw each term, in the order they led, then nobody.
    observer.wait_for(r#""leader":null"#);
    let (code, lines) = observer.stop();
    assert_eq!(code, Some(0), "Ctrl-C ends an observer cleanly");
    let mut seen = leaders(&lines);
    seen.dedup();
    let want: Vec<(u64, String)> = terms.iter().map(|t| (t.2, t.3.clone())).collect();
    assert_eq!(&seen[..3], &want[..], "{lines:#?}");
    assert_eq!(seen[3].1, "H", "{lines:#?}");
    assert!(
        lines.last().unwrap().contains(r#""leader":null"#),
        "{lines:#?}"
    );
}
