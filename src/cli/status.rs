//! `keylatch status`: what a lock name holds right now, read-only.
//!
//! The library reads it ([`Inspection::read`], each lock type describing its
//! own part); this file only names the type and prints. The type is
//! detected from the data, in Redisson's layouts: a hash whose
//! fields are owners with numeric hold counts is a reentrant lock (fair
//! when `redisson_lock_queue:{NAME}` exists), a hash with a `mode` field is
//! a read-write lock, a plain string is a semaphore or latch (permits or
//! count), and no key means free.

use std::ops::Deref;

use keylatch::lock::{Inspection, QueuedWaiter};
use keylatch::Client;

use super::args::{self, Argv};
use super::{runtime, Failure};

/// `keylatch status --help`.
pub(crate) const USAGE: &str = "\
usage: keylatch status NAME [NAME...] [--json] [--url URL]...

Shows lock NAME: state (free, held, other), the type detected (reentrant,
fair, read-write, semaphore/latch, expirable semaphore, or \"not a lock
(list)\" and the like for a key that is no lock: a list, a string, a hash
with no lock's shape), holders with hold counts, TTL, fair-queue
waiters with their deadlines (server time), keylatch waiters of a
reentrant, fenced or spin lock registered to be woken by name (Redisson's
leave no record), a read-write lock's writer,
readers (each read hold's TTL) and waiting writer, a permit-expirable
semaphore's leased permits with their expiries, and the last fencing token
issued. Several names (a multi-lock's members): each in turn, and --json
prints an array of the objects. Reads only.

  --json     one JSON object: {\"name\",\"state\",\"type\",\"ttl_ms\" (null when
             free, -1 without expiry),\"holders\" {owner: count},\"mode\",
             \"value\",\"waiters\" [{\"owner\",\"deadline_in_ms\",\"client\"}...]
             (head first; null: no deadline; client \"keylatch\": the
             deadline is its liveness, by which a dead one is purged;
             \"redisson\": Redisson's deadline),\"registered_waiters\"
             [{\"owner\",\"deadline_in_ms\",\"client\"}...] (soonest end
             first; the deadline is when the registration ends unless the
             waiter calls again; \"granted\":true and a null deadline:
             a release handed it the lock, not yet taken or given back),\"fencing_token\",\"readers\"
             [{\"owner\",\"count\",\"holds_ttl_ms\"[...]}...],\"writer\"
             {\"owner\",\"count\"} or null,\"writers_waiting\"
             [{\"owner\",\"deadline_in_ms\"}...],\"permits\" [{\"id\",
             \"expires_in_ms\"}...] or null}
  --url URL  server (repeat for cluster seeds); default $KEYLATCH_URL, else
             redis://127.0.0.1:6379; rediss://host:port for TLS (CA from
             $KEYLATCH_TLS_CA or ?ca=FILE, else the system roots)

Exit codes: 0 (whatever the state), 64 usage error, 69 server unreachable,
70 server error.";

/// What was found under a lock name: the library's [`Inspection`], with
/// the words `status` and `unlock --force` print for it.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Status(pub(crate) Inspection);

impl Deref for Status {
    type Target = Inspection;

    fn deref(&self) -> &Inspection {
        &self.0
    }
}

/// Reads everything `status` shows about `name`; a failure exits 69 when
/// the server cannot be reached, else 70.
pub(crate) async fn read(client: &Client, name: &str) -> Result<Status, Failure> {
    Inspection::read(client, name)
        .await
        .map(Status)
        .map_err(|e| Failure::lock(&e, format!("reading lock {name:?}: {e}")))
}

impl Status {
    /// `free` (no key), `held` (a lock hash with holders), `other` (some
    /// other value: a semaphore, a latch, or not a lock at all).
    pub(crate) fn state(&self) -> &'static str {
        match self.redis_type.as_str() {
            "none" => "free",
            "hash" if !self.holders.is_empty() && !self.shapeless => "held",
            _ => "other",
        }
    }

    /// Why a force unlock of this name is refused before asking: it holds
    /// no lock (saying what it holds), or a count nobody holds. `None`
    /// when there is a hold to end (or nothing at all).
    pub(crate) fn refusal(&self) -> Option<String> {
        let name = &self.name;
        match self.redis_type.as_str() {
            "none" | "hash" if !self.shapeless => None,
            "string" if self.permits.is_some() => None,
            "string" if self.is_count() => Some(format!(
                "{name:?} holds a semaphore's or count-down latch's count ({}) with no leased \
                 permits: no holder to free; refused (release permits or count down instead)",
                self.value.as_deref().unwrap_or("")
            )),
            _ => Some(format!(
                "{name:?} holds {}, not a lock; refused (nothing changed)",
                self.what()
            )),
        }
    }

    /// Whether the key is a string holding an integer (Redisson's
    /// semaphore and latch layout).
    fn is_count(&self) -> bool {
        self.value
            .as_deref()
            .is_some_and(|v| v.parse::<i64>().is_ok())
    }

    /// What a key that is no lock holds, in words.
    fn what(&self) -> String {
        match self.redis_type.as_str() {
            "hash" => "a hash that is no lock".to_owned(),
            "string" => "a string that is no lock".to_owned(),
            "zset" => "a sorted set".to_owned(),
            t => format!("a {t}"),
        }
    }

    /// The lock type the data looks like.
    pub(crate) fn kind(&self) -> String {
        match self.redis_type.as_str() {
            "none" if self.permits.is_some() => "expirable semaphore".to_owned(),
            "none" if self.waiters.is_empty() => "none".to_owned(),
            "none" => "fair".to_owned(),
            "hash" if self.shapeless => "not a lock (hash)".to_owned(),
            "hash" if self.mode.is_some() => "read-write".to_owned(),
            "hash" if !self.waiters.is_empty() => "fair".to_owned(),
            "hash" => "reentrant".to_owned(),
            "string" if self.permits.is_some() => "expirable semaphore".to_owned(),
            "string" if self.is_count() => "semaphore/latch".to_owned(),
            other => format!("not a lock ({other})"),
        }
    }

    /// The one-object JSON form (`--json`).
    pub(crate) fn to_json(&self) -> String {
        let mut out = String::with_capacity(256);
        out.push_str("{\"name\":");
        json_string(&mut out, &self.name);
        out.push_str(",\"state\":");
        json_string(&mut out, self.state());
        out.push_str(",\"type\":");
        json_string(&mut out, &self.kind());
        out.push_str(",\"ttl_ms\":");
        json_num(&mut out, self.ttl_ms);
        out.push_str(",\"holders\":{");
        for (i, h) in self.holders.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            json_string(&mut out, &h.owner);
            out.push(':');
            out.push_str(&h.count.to_string());
        }
        out.push_str("},\"mode\":");
        json_opt(&mut out, self.mode.as_deref());
        out.push_str(",\"value\":");
        json_opt(&mut out, self.value.as_deref());
        json_waiter_list(&mut out, "waiters", &self.waiters);
        json_waiter_list(&mut out, "registered_waiters", &self.registered);
        out.push_str(",\"fencing_token\":");
        json_num(&mut out, self.fencing_token);
        self.json_read_write(&mut out);
        self.json_permits(&mut out);
        self.json_writers_waiting(&mut out);
        out.push('}');
        out
    }

    /// `,"readers":[…],"writer":…`: a read-write lock's holders.
    fn json_read_write(&self, out: &mut String) {
        out.push_str(",\"readers\":[");
        for (i, r) in self.readers.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"owner\":");
            json_string(out, &r.owner);
            out.push_str(&format!(",\"count\":{},\"holds_ttl_ms\":[", r.count));
            let ttls: Vec<String> = r.holds_ttl_ms.iter().map(i64::to_string).collect();
            out.push_str(&ttls.join(","));
            out.push_str("]}");
        }
        out.push_str("],\"writer\":");
        match &self.writer {
            Some(w) => {
                out.push_str("{\"owner\":");
                json_string(out, &w.owner);
                out.push_str(&format!(",\"count\":{}}}", w.count));
            }
            None => out.push_str("null"),
        }
    }

    /// `,"permits":[…]` or `null`: a permit-expirable semaphore's leases.
    fn json_permits(&self, out: &mut String) {
        out.push_str(",\"permits\":");
        let Some(permits) = &self.permits else {
            out.push_str("null");
            return;
        };
        out.push('[');
        for (i, p) in permits.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"id\":");
            json_string(out, &p.id);
            out.push_str(",\"expires_in_ms\":");
            json_num(out, p.expires_in_ms);
            out.push('}');
        }
        out.push(']');
    }

    /// `,"writers_waiting":[…]`.
    fn json_writers_waiting(&self, out: &mut String) {
        out.push_str(",\"writers_waiting\":[");
        for (i, w) in self.writers_waiting.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"owner\":");
            json_string(out, &w.owner);
            out.push_str(&format!(",\"deadline_in_ms\":{}}}", w.deadline_in_ms));
        }
        out.push(']');
    }

    /// The human form.
    pub(crate) fn to_text(&self) -> String {
        let mut out = format!("lock {:?}: {}", self.name, self.state());
        if self.redis_type != "none" {
            out.push_str(&format!(" ({})", self.kind()));
        }
        match self.ttl_ms {
            Some(-1) => out.push_str(", no expiry"),
            Some(ms) if ms >= 0 => out.push_str(&format!(", ttl {:.1}s", ms as f64 / 1000.0)),
            _ => {}
        }
        if let Some(m) = &self.mode {
            out.push_str(&format!(", mode {m}"));
        }
        if let Some(v) = &self.value {
            out.push_str(&format!(", value {v}"));
        }
        if self.mode.is_some() {
            self.text_read_write(&mut out);
        } else {
            for h in &self.holders {
                out.push_str(&format!("\n  holder {}  count {}", h.owner, h.count));
            }
        }
        self.text_permits(&mut out);
        for w in &self.writers_waiting {
            out.push_str(&format!(
                "\n  writer waiting {}  (new readers wait; deadline in {:.1} s)",
                w.owner,
                w.deadline_in_ms as f64 / 1000.0
            ));
        }
        self.text_waiters(&mut out);
        if !self.registered.is_empty() {
            out.push_str(&format!(
                "\n  {} waiter(s) to be woken by name:",
                self.registered.len()
            ));
            for w in &self.registered {
                if w.granted {
                    out.push_str(&format!(
                        "\n    {}  granted the lock by a release; its wait takes it or gives it back (keylatch)",
                        w.owner
                    ));
                    continue;
                }
                match w.deadline_in_ms {
                    Some(ms) => out.push_str(&format!(
                        "\n    {}  registered for {:.1} s more (keylatch)",
                        w.owner,
                        ms as f64 / 1000.0
                    )),
                    None => out.push_str(&format!("\n    {}  (keylatch)", w.owner)),
                }
            }
        }
        if let Some(t) = self.fencing_token {
            out.push_str(&format!("\n  last fencing token {t}"));
        }
        out
    }

    /// A read-write lock's writer and readers, each read hold's TTL.
    fn text_read_write(&self, out: &mut String) {
        if let Some(w) = &self.writer {
            out.push_str(&format!("\n  writer {}  count {}", w.owner, w.count));
        }
        for r in &self.readers {
            let ttls: Vec<String> = r
                .holds_ttl_ms
                .iter()
                .map(|t| match t {
                    -2 => "expired".to_owned(),
                    -1 => "no expiry".to_owned(),
                    ms => format!("{:.1}s", *ms as f64 / 1000.0),
                })
                .collect();
            out.push_str(&format!(
                "\n  reader {}  count {}  holds {}",
                r.owner,
                r.count,
                ttls.join(", ")
            ));
        }
    }

    /// A permit-expirable semaphore's leased permits.
    fn text_permits(&self, out: &mut String) {
        let Some(permits) = &self.permits else {
            return;
        };
        out.push_str(&format!("\n  {} leased permit(s):", permits.len()));
        for p in permits {
            match p.expires_in_ms {
                Some(ms) => out.push_str(&format!(
                    "\n    {}  expires in {:.1} s",
                    p.id,
                    ms as f64 / 1000.0
                )),
                None => out.push_str(&format!("\n    {}  no lease", p.id)),
            }
        }
    }

    /// The fair queue, head first.
    fn text_waiters(&self, out: &mut String) {
        if self.waiters.is_empty() {
            return;
        }
        out.push_str(&format!("\n  {} fair-queue waiter(s):", self.waiters.len()));
        for w in &self.waiters {
            let by = if w.keylatch {
                "keylatch, purged if it stops calling"
            } else {
                "Redisson's deadline"
            };
            match w.deadline_in_ms {
                Some(ms) => out.push_str(&format!(
                    "\n    {}  deadline in {:.1} s ({by})",
                    w.owner,
                    ms as f64 / 1000.0
                )),
                None => out.push_str(&format!("\n    {}  no deadline", w.owner)),
            }
        }
    }
}

fn json_opt(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => json_string(out, s),
        None => out.push_str("null"),
    }
}

/// Appends `s` as a JSON string: quotes, backslashes and control characters
/// escaped (owner ids and names are user data).
pub(crate) fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_num<T: ToString>(out: &mut String, n: Option<T>) {
    match n {
        Some(n) => out.push_str(&n.to_string()),
        None => out.push_str("null"),
    }
}

/// Entry point: parses, reads, prints.
/// A status object with `"reached":{"master":…,"sentinel":…}` added when
/// the master was found through sentinels.
fn with_reached(json: String, reached: Option<&(String, String)>) -> String {
    let Some((master, via)) = reached else {
        return json;
    };
    let mut out = json;
    out.pop();
    out.push_str(",\"reached\":{\"master\":");
    json_string(&mut out, master);
    out.push_str(",\"sentinel\":");
    json_string(&mut out, via);
    out.push_str("}}");
    out
}

pub(crate) fn run(mut argv: Argv) -> Result<u8, Failure> {
    let mut names = Vec::new();
    let mut json = false;
    let mut urls = Vec::new();
    while let Some(a) = argv.next() {
        match a.as_str() {
            "--json" => json = true,
            "--url" => urls.push(argv.value("--url")?),
            flag if flag.starts_with('-') => {
                return Err(Failure::usage(format!("status: unknown option {flag:?}")))
            }
            _ => names.push(a),
        }
    }
    if names.is_empty() {
        return Err(Failure::usage("status: missing the lock NAME"));
    }
    let urls = args::urls(urls);
    let cfg = args::client_config(&urls)?;
    let all = runtime()?.block_on(async {
        let client = Client::connect_with(cfg)
            .await
            .map_err(|e| args::connect_failure(&urls, e))?;
        let mut all = Vec::with_capacity(names.len());
        for name in &names {
            all.push(read(&client, name).await?);
        }
        Ok::<_, Failure>((all, client.sentinel_master()))
    })?;
    let (all, reached) = all;
    // Several names (a multi-lock's members): one JSON array, or the text
    // blocks one after the other. Through sentinels, which master was read
    // and which sentinel named it.
    if json {
        let objects: Vec<String> = all
            .iter()
            .map(|s| with_reached(s.to_json(), reached.as_ref()))
            .collect();
        if objects.len() == 1 {
            outln!("{}", objects[0]);
        } else {
            outln!("[{}]", objects.join(","));
        }
    } else {
        if let Some((master, via)) = &reached {
            outln!("master {master} (named by sentinel {via})");
        }
        let texts: Vec<String> = all.iter().map(Status::to_text).collect();
        outln!("{}", texts.join("\n"));
    }
    Ok(0)
}

/// `,"KEY":[…]`: waiters (the fair queue, head first; or the waiters
/// registered to be woken by name, soonest end first).
fn json_waiter_list(out: &mut String, key: &str, waiters: &[QueuedWaiter]) {
    out.push_str(&format!(",\"{key}\":["));
    for (i, w) in waiters.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"owner\":");
        json_string(out, &w.owner);
        out.push_str(",\"deadline_in_ms\":");
        json_num(out, w.deadline_in_ms);
        out.push_str(",\"client\":");
        json_string(out, if w.keylatch { "keylatch" } else { "redisson" });
        if w.granted {
            out.push_str(",\"granted\":true");
        }
        out.push('}');
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;
    use keylatch::lock::{Holder, QueuedWaiter, Reader, WaitingWriter};

    fn status(name: &str, redis_type: &str) -> Status {
        let mut i = Inspection::default();
        i.name = name.into();
        i.redis_type = redis_type.into();
        Status(i)
    }

    #[test]
    fn json_escapes_user_data() {
        let mut s = String::new();
        json_string(&mut s, "a\"b\\c\nd\u{1}é");
        assert_eq!(s, r#""a\"b\\c\nd\u0001é""#);
    }

    #[test]
    fn json_shape_of_a_held_and_a_free_lock() {
        let mut held = status("jobs", "hash");
        held.0.ttl_ms = Some(29_000);
        held.0.holders = vec![Holder::new("u:1", 2)];
        held.0.fencing_token = Some(7);
        assert_eq!(
            held.to_json(),
            r#"{"name":"jobs","state":"held","type":"reentrant","ttl_ms":29000,"holders":{"u:1":2},"mode":null,"value":null,"waiters":[],"registered_waiters":[],"fencing_token":7,"readers":[],"writer":null,"permits":null,"writers_waiting":[]}"#
        );
        let free = status("jobs", "none");
        assert!(free
            .to_json()
            .contains(r#""state":"free","type":"none","ttl_ms":null"#));
    }

    #[test]
    fn a_read_write_lock_shows_its_writer_readers_and_waiting_writer() {
        let mut st = status("docs", "hash");
        st.0.ttl_ms = Some(3000);
        st.0.holders = vec![Holder::new("u:1:write", 1), Holder::new("u:1", 2)];
        st.0.mode = Some("write".into());
        st.0.writer = Some(Holder::new("u:1", 1));
        let mut r = Reader::default();
        r.owner = "u:1".into();
        r.count = 2;
        r.holds_ttl_ms = vec![2900, -2];
        st.0.readers = vec![r];
        let mut w = WaitingWriter::default();
        w.owner = "u:2".into();
        w.deadline_in_ms = 1500;
        st.0.writers_waiting = vec![w];
        assert_eq!(st.kind(), "read-write");
        let json = st.to_json();
        assert!(json.contains(
            r#""readers":[{"owner":"u:1","count":2,"holds_ttl_ms":[2900,-2]}],"writer":{"owner":"u:1","count":1},"permits":null,"writers_waiting":[{"owner":"u:2","deadline_in_ms":1500}]"#
        ), "{json}");
        let text = st.to_text();
        assert!(text.contains("writer u:1  count 1"), "{text}");
        assert!(
            text.contains("reader u:1  count 2  holds 2.9s, expired"),
            "{text}"
        );
        assert!(text.contains("writer waiting u:2"), "{text}");
    }

    #[test]
    fn a_granted_registration_shows_as_a_grant_not_a_deadline() {
        let mut st = status("jobs", "hash");
        st.0.ttl_ms = Some(10_000);
        st.0.holders = vec![Holder::new("w:1", 1)];
        let mut w = QueuedWaiter::default();
        w.owner = "w:1".into();
        w.keylatch = true;
        w.granted = true;
        st.0.registered = vec![w];
        let json = st.to_json();
        assert!(
            json.contains(
                r#""registered_waiters":[{"owner":"w:1","deadline_in_ms":null,"client":"keylatch","granted":true}]"#
            ),
            "{json}"
        );
        let text = st.to_text();
        assert!(
            text.contains("w:1  granted the lock by a release"),
            "{text}"
        );
    }

    #[test]
    fn types_detected_from_the_data() {
        let mut st = status("", "hash");
        st.0.holders = vec![Holder::new("u:1", 1)];
        assert_eq!(st.kind(), "reentrant");
        let mut w = QueuedWaiter::default();
        w.owner = "u:2".into();
        w.deadline_in_ms = Some(4000);
        w.keylatch = true;
        st.0.waiters.push(w);
        assert!(st
            .to_json()
            .contains(r#""waiters":[{"owner":"u:2","deadline_in_ms":4000,"client":"keylatch"}]"#));
        assert_eq!(st.kind(), "fair");
        st.0.mode = Some("read".into());
        assert_eq!(st.kind(), "read-write");
        st.0.redis_type = "string".into();
        // A string that is no count is no lock of any kind.
        assert_eq!(
            (st.kind().as_str(), st.state()),
            ("not a lock (string)", "other")
        );
        st.0.value = Some("3".into());
        assert_eq!(
            (st.kind().as_str(), st.state()),
            ("semaphore/latch", "other")
        );
    }
}
