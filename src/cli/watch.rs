//! `keylatch watch NAME|PATTERN`: the locks that match, redrawn every
//! interval, across every master of a cluster. Each lock is read by the
//! library's inspection (as `status` reads it); names come from `SCAN` on
//! each master, and keys that hold no lock (the locks' own companion keys,
//! any other data) are left out.

use std::collections::BTreeSet;
use std::io::IsTerminal as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keylatch::lock::is_companion_key;
use keylatch::{Client, Cmd, Frame};

use super::args::{self, Argv};
use super::status::{read, Status};
use super::{runtime, Failure};

/// `keylatch watch --help`.
pub(crate) const USAGE: &str = "\
usage: keylatch watch NAME|PATTERN [--interval 1s] [--json] [--once] [--url URL]...

Shows every lock whose name matches PATTERN (a Redis glob: * ? [...]; a
NAME without them is that one lock, free or not) as `status` shows it:
type, holders with hold counts, TTL, fair-queue waiters in order, a
read-write lock's readers and writer, leased permits, the fencing token.
Redrawn every --interval until Ctrl-C. Names are found by SCAN on every
master of a cluster (the one server otherwise); keys that hold no lock
(fencing counters, fair queues, waiter registries, other data) are left
out. At most 500 locks are shown per refresh. Reads only.

  --interval D  time between refreshes (100ms to 1h; default 1s)
  --json        one JSON line per lock per refresh: status --json's object
                with \"at_ms\" (Unix time) first; no screen control
  --once        one refresh, then exit
  --url URL     server (repeat for cluster seeds); default $KEYLATCH_URL,
                else redis://127.0.0.1:6379

Exit codes: 0, 64 usage error, 69 server unreachable, 70 server error.";

/// Locks shown per refresh at most.
const MAX_SHOWN: usize = 500;
/// SCAN pages read per master per refresh at most (of 1000 keys each).
const MAX_PAGES: usize = 1000;

struct WatchArgs {
    pattern: String,
    interval: Duration,
    json: bool,
    once: bool,
    urls: Vec<String>,
}

fn parse(mut argv: Argv) -> Result<WatchArgs, Failure> {
    let mut a = WatchArgs {
        pattern: String::new(),
        interval: Duration::from_secs(1),
        json: false,
        once: false,
        urls: Vec::new(),
    };
    while let Some(flag) = argv.next() {
        match flag.as_str() {
            "--interval" => {
                a.interval = args::duration("--interval", &argv.value("--interval")?)?;
                if a.interval < Duration::from_millis(100) || a.interval > Duration::from_secs(3600)
                {
                    return Err(Failure::usage(
                        "watch: --interval must be between 100ms and 1h",
                    ));
                }
            }
            "--json" => a.json = true,
            "--once" => a.once = true,
            "--url" => a.urls.push(argv.value("--url")?),
            f if f.starts_with('-') => {
                return Err(Failure::usage(format!("watch: unknown option {f:?}")))
            }
            _ if !a.pattern.is_empty() => return Err(Failure::usage("watch: one NAME or PATTERN")),
            _ => a.pattern = flag,
        }
    }
    if a.pattern.is_empty() {
        return Err(Failure::usage("watch: missing the NAME or PATTERN"));
    }
    Ok(a)
}

/// Entry point: parses, then refreshes until Ctrl-C (or once).
pub(crate) fn run(argv: Argv) -> Result<u8, Failure> {
    let a = parse(argv)?;
    let urls = args::urls(a.urls.clone());
    let cfg = args::client_config(&urls)?;
    runtime()?.block_on(async move {
        let client = Client::connect_with(cfg)
            .await
            .map_err(|e| args::connect_failure(&urls, e))?;
        let screen = !a.json && std::io::stdout().is_terminal();
        loop {
            let shown = refresh(&client, &a.pattern).await?;
            if a.json {
                let at = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis());
                for s in &shown.locks {
                    outln!("{{\"at_ms\":{at},{}", &s.to_json()[1..]);
                }
            } else {
                out!("{}", render(&a, &shown, screen));
            }
            if a.once {
                return Ok(0);
            }
            tokio::select! {
                () = tokio::time::sleep(a.interval) => {}
                _ = tokio::signal::ctrl_c() => return Ok(0),
            }
        }
    })
}

/// One refresh: the locks that match, and how many more did.
struct Shown {
    locks: Vec<Status>,
    more: usize,
}

async fn refresh(client: &Client, pattern: &str) -> Result<Shown, Failure> {
    let glob = pattern.contains(['*', '?', '[']);
    let names = if glob {
        scan(client, pattern).await?
    } else {
        vec![pattern.to_owned()]
    };
    let mut locks = Vec::new();
    let mut more = 0;
    for name in names.iter().filter(|n| !glob || !is_companion_key(n)) {
        let s = read(client, name).await?;
        // A key that holds no lock, or (found by the pattern) is gone now.
        let no_lock = s.kind().starts_with("not a lock");
        if no_lock || (glob && s.state() == "free" && s.kind() == "none") {
            continue;
        }
        if locks.len() == MAX_SHOWN {
            more += 1;
        } else {
            locks.push(s);
        }
    }
    Ok(Shown { locks, more })
}

/// Every key matching `pattern` on every master, sorted.
async fn scan(client: &Client, pattern: &str) -> Result<Vec<String>, Failure> {
    let failed = |e: keylatch::Error| Failure::client(&e, format!("SCAN: {e}"));
    let mut found = BTreeSet::new();
    for key in one_key_per_master(client) {
        let conn = client.connection_for_key(&key).await.map_err(failed)?;
        let mut cursor = b"0".to_vec();
        for _ in 0..MAX_PAGES {
            let page = Cmd::new("SCAN")
                .arg(&cursor[..])
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000);
            let (next, keys) = scan_page(conn.send(page).await.map_err(failed)?)
                .ok_or_else(|| Failure::software("SCAN: an answer that is no page"))?;
            found.extend(keys);
            if next == b"0" {
                break;
            }
            cursor = next;
        }
    }
    Ok(found.into_iter().collect())
}

/// A SCAN reply's cursor and keys.
fn scan_page(frame: Frame) -> Option<(Vec<u8>, Vec<String>)> {
    let Frame::Array(mut parts) = frame.into_value() else {
        return None;
    };
    if parts.len() != 2 {
        return None;
    }
    let keys = match parts.pop()?.into_value() {
        Frame::Array(keys) => keys
            .iter()
            .filter_map(|k| {
                k.as_bytes()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
            })
            .collect(),
        _ => return None,
    };
    let cursor = parts.pop()?.as_bytes()?.to_vec();
    Some((cursor, keys))
}

/// A key served by each master (standalone: any key): `{n}` for the first
/// `n` whose slot that master serves.
fn one_key_per_master(client: &Client) -> Vec<String> {
    if !client.is_cluster() {
        return vec!["keylatch-watch".to_owned()];
    }
    let mut keys = Vec::new();
    for shard in client.shards() {
        let key = (0..200_000u32).map(|n| format!("{{{n}}}")).find(|k| {
            client
                .master_for_slot(Client::slot_of(k.as_str()))
                .as_deref()
                == Some(shard.master.as_str())
        });
        keys.extend(key);
    }
    keys
}

/// The screen: a header, then each lock as `status` prints it. On a
/// terminal it is drawn from the top of a cleared screen.
fn render(a: &WatchArgs, shown: &Shown, screen: bool) -> String {
    let mut out = String::new();
    if screen {
        out.push_str("\x1b[H\x1b[2J");
    }
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    out.push_str(&format!(
        "keylatch watch {} — {} lock{}{} — {h:02}:{m:02}:{s:02} UTC (every {:?}; Ctrl-C to stop)\n\n",
        a.pattern,
        shown.locks.len(),
        if shown.locks.len() == 1 { "" } else { "s" },
        if shown.more > 0 {
            format!(" (and {} more not shown)", shown.more)
        } else {
            String::new()
        },
        a.interval
    ));
    for s in &shown.locks {
        out.push_str(&s.to_text());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(v: &[&str]) -> Result<WatchArgs, String> {
        parse(Argv::new(v.iter().map(|s| (*s).to_owned()))).map_err(|f| f.message)
    }

    #[test]
    fn arguments() {
        let a = parse_strs(&["orders:*", "--interval", "250ms", "--json", "--once"]).unwrap();
        assert_eq!(a.pattern, "orders:*");
        assert_eq!(a.interval, Duration::from_millis(250));
        assert!(a.json && a.once);
        for bad in [
            &[][..],
            &["a", "b"],
            &["a", "--interval", "1ms"],
            &["a", "--what"],
        ] {
            assert!(parse_strs(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_scan_page_is_read_or_refused() {
        let page = Frame::Array(vec![
            Frame::Bulk("17".into()),
            Frame::Array(vec![Frame::Bulk("a".into()), Frame::Bulk("b".into())]),
        ]);
        assert_eq!(
            scan_page(page),
            Some((b"17".to_vec(), vec!["a".to_owned(), "b".to_owned()]))
        );
        assert_eq!(scan_page(Frame::Integer(1)), None);
        assert_eq!(scan_page(Frame::Array(vec![Frame::Integer(0)])), None);
    }
}
