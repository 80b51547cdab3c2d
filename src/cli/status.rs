//! `keylatch status`: what a lock name holds right now, read-only.
//!
//! The type is detected from the data, in Redisson's layouts: a hash whose
//! fields are owners with numeric hold counts is a reentrant lock (fair
//! when `redisson_lock_queue:{NAME}` exists), a hash with a `mode` field is
//! a read-write lock, a plain string is a semaphore or latch (permits or
//! count), and no key means free.

use bytes::Bytes;
use keylatch::{Client, Cmd, Commands, Frame};

use super::args::{self, Argv};
use super::{runtime, Failure};

/// `keylatch status --help`.
pub(crate) const USAGE: &str = "\
usage: keylatch status NAME [NAME...] [--json] [--url URL]...

Shows lock NAME: state (free, held, other), the type detected (reentrant,
fair, read-write, semaphore/latch, expirable semaphore, or \"not a lock
(list)\" and the like for a key that is no lock: a list, a string, a hash
with no lock's shape), holders with hold counts, TTL, fair-queue
waiters with their deadlines (server time), a read-write lock's writer,
readers (each read hold's TTL) and waiting writer, a permit-expirable
semaphore's leased permits with their expiries, and the last fencing token
issued. Several names (a multi-lock's members): each in turn, and --json
prints an array of the objects. Reads only.

  --json     one JSON object: {\"name\",\"state\",\"type\",\"ttl_ms\" (null when
             free, -1 without expiry),\"holders\" {owner: count},\"mode\",
             \"value\",\"waiters\" [{\"owner\",\"deadline_in_ms\",\"client\"}...]
             (head first; null: no deadline; client \"keylatch\": the
             deadline is its liveness, by which a dead one is purged;
             \"redisson\": Redisson's deadline),\"fencing_token\",\"readers\"
             [{\"owner\",\"count\",\"holds_ttl_ms\"[...]}...],\"writer\"
             {\"owner\",\"count\"} or null,\"writers_waiting\"
             [{\"owner\",\"deadline_in_ms\"}...],\"permits\" [{\"id\",
             \"expires_in_ms\"}...] or null}
  --url URL  server (repeat for cluster seeds); default $KEYLATCH_URL, else
             redis://127.0.0.1:6379; rediss://host:port for TLS (CA from
             $KEYLATCH_TLS_CA or ?ca=FILE, else the system roots)

Exit codes: 0 (whatever the state), 2 usage error or server unreachable.";

/// What was found under a lock name.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Status {
    pub(crate) name: String,
    /// The Redis type of the key (`none` when free).
    pub(crate) redis_type: String,
    /// PTTL in ms: `None` when missing, -1 without expiry.
    pub(crate) ttl_ms: Option<i64>,
    /// Owner → hold count, in the server's order.
    pub(crate) holders: Vec<(String, i64)>,
    /// A read-write lock's `mode` (`read` / `write`).
    pub(crate) mode: Option<String>,
    /// A string key's value (a semaphore's permits, a latch's count).
    pub(crate) value: Option<String>,
    /// Fair-queue waiters, head first.
    pub(crate) waiters: Vec<Waiter>,
    /// The last fencing token issued for this name.
    pub(crate) fencing_token: Option<u64>,
    /// A read-write lock's readers with their read holds.
    pub(crate) readers: Vec<Reader>,
    /// A read-write lock's writer (owner, write count).
    pub(crate) writer: Option<(String, i64)>,
    /// Writers waiting for a read-write lock (owner, ms until their entry
    /// runs out unless renewed): new keylatch readers wait behind them.
    pub(crate) writers_waiting: Vec<(String, i64)>,
    /// A permit-expirable semaphore's leased permits (`{NAME}:timeout`):
    /// id (hex) and ms until it expires (server time; `None`: no lease).
    pub(crate) permits: Option<Vec<(String, Option<i64>)>>,
    /// A hash with a field that no lock has (a value that is no count, a
    /// `mode` that is neither read nor write): an application's hash.
    pub(crate) shapeless: bool,
}

/// One reader of a read-write lock.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reader {
    pub(crate) owner: String,
    pub(crate) count: i64,
    /// PTTL of each read hold's key `{NAME}:<owner>:rwlock_timeout:<i>`,
    /// i = 1..count (-2: expired, the count is stale; -1: no expiry).
    pub(crate) holds_ttl_ms: Vec<i64>,
}

/// One fair-queue waiter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Waiter {
    pub(crate) owner: String,
    /// When it is purged if it does not call again, in ms from the server's
    /// now (negative: past, purged at the next acquire or release); `None`
    /// when it has none. A keylatch waiter's is its liveness record
    /// (`keylatch_fair_alive:{NAME}`, which keylatch's scripts judge it by;
    /// its Redisson deadline is kept an allowance per place ahead, for
    /// Java waiters' arithmetic); any other's is its Redisson deadline
    /// (`redisson_lock_timeout:{NAME}`).
    pub(crate) deadline_in_ms: Option<i64>,
    /// Whether it is a keylatch waiter (it has a liveness record).
    pub(crate) keylatch: bool,
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
        match self.ttl_ms {
            Some(t) => out.push_str(&t.to_string()),
            None => out.push_str("null"),
        }
        out.push_str(",\"holders\":{");
        for (i, (owner, count)) in self.holders.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            json_string(&mut out, owner);
            out.push(':');
            out.push_str(&count.to_string());
        }
        out.push_str("},\"mode\":");
        json_opt(&mut out, self.mode.as_deref());
        out.push_str(",\"value\":");
        json_opt(&mut out, self.value.as_deref());
        out.push_str(",\"waiters\":[");
        for (i, w) in self.waiters.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"owner\":");
            json_string(&mut out, &w.owner);
            out.push_str(",\"deadline_in_ms\":");
            match w.deadline_in_ms {
                Some(ms) => out.push_str(&ms.to_string()),
                None => out.push_str("null"),
            }
            out.push_str(",\"client\":");
            json_string(&mut out, if w.keylatch { "keylatch" } else { "redisson" });
            out.push('}');
        }
        out.push_str("],\"fencing_token\":");
        match self.fencing_token {
            Some(t) => out.push_str(&t.to_string()),
            None => out.push_str("null"),
        }
        out.push_str(",\"readers\":[");
        for (i, r) in self.readers.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"owner\":");
            json_string(&mut out, &r.owner);
            out.push_str(&format!(",\"count\":{},\"holds_ttl_ms\":[", r.count));
            let ttls: Vec<String> = r.holds_ttl_ms.iter().map(i64::to_string).collect();
            out.push_str(&ttls.join(","));
            out.push_str("]}");
        }
        out.push_str("],\"writer\":");
        match &self.writer {
            Some((owner, count)) => {
                out.push_str("{\"owner\":");
                json_string(&mut out, owner);
                out.push_str(&format!(",\"count\":{count}}}"));
            }
            None => out.push_str("null"),
        }
        out.push_str(",\"permits\":");
        match &self.permits {
            Some(p) => {
                out.push('[');
                for (i, (id, left)) in p.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str("{\"id\":");
                    json_string(&mut out, id);
                    out.push_str(",\"expires_in_ms\":");
                    match left {
                        Some(ms) => out.push_str(&ms.to_string()),
                        None => out.push_str("null"),
                    }
                    out.push('}');
                }
                out.push(']');
            }
            None => out.push_str("null"),
        }
        out.push_str(",\"writers_waiting\":[");
        for (i, (owner, left)) in self.writers_waiting.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"owner\":");
            json_string(&mut out, owner);
            out.push_str(&format!(",\"deadline_in_ms\":{left}}}"));
        }
        out.push(']');
        out.push('}');
        out
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
            if let Some((owner, count)) = &self.writer {
                out.push_str(&format!("\n  writer {owner}  count {count}"));
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
        } else {
            for (owner, count) in &self.holders {
                out.push_str(&format!("\n  holder {owner}  count {count}"));
            }
        }
        if let Some(p) = &self.permits {
            out.push_str(&format!("\n  {} leased permit(s):", p.len()));
            for (id, left) in p {
                match left {
                    Some(ms) => out.push_str(&format!(
                        "\n    {id}  expires in {:.1} s",
                        *ms as f64 / 1000.0
                    )),
                    None => out.push_str(&format!("\n    {id}  no lease")),
                }
            }
        }
        for (owner, left) in &self.writers_waiting {
            out.push_str(&format!(
                "\n  writer waiting {owner}  (new readers wait; deadline in {:.1} s)",
                *left as f64 / 1000.0
            ));
        }
        if !self.waiters.is_empty() {
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
        if let Some(t) = self.fencing_token {
            out.push_str(&format!("\n  last fencing token {t}"));
        }
        out
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

/// `{name}:suffix`, or `name:suffix` when the name has a `{` (Redisson's
/// naming of a read-write lock's per-hold keys, as in the lock crate).
pub(crate) fn suffixed(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

/// `prefix:{name}`, or `prefix:name` when the name carries its own hash tag:
/// Redisson's naming of a lock's companion keys (as in the lock crate).
pub(crate) fn companion(prefix: &str, name: &str) -> String {
    if keylatch::cluster::hash_tag(name.as_bytes()).len() < name.len() {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

fn text(f: &Frame) -> Option<String> {
    f.as_bytes()
        .map(|b: &Bytes| String::from_utf8_lossy(b).into_owned())
}

/// Sends one command; error replies become errors.
async fn ask(client: &Client, cmd: Cmd) -> Result<Frame, String> {
    match client.send(cmd).await.map(Frame::into_value) {
        Ok(Frame::Error(e)) => Err(String::from_utf8_lossy(&e).into_owned()),
        Ok(f) => Ok(f),
        Err(e) => Err(e.to_string()),
    }
}

/// Each queued owner with the deadline it is judged by, relative to the
/// server's clock: a keylatch waiter's liveness record, else its Redisson
/// deadline (server time, or a Java client's).
async fn waiters(client: &Client, name: &str, owners: Vec<String>) -> Result<Vec<Waiter>, String> {
    let now_ms = server_now_ms(client).await?;
    let timeouts = companion("redisson_lock_timeout", name);
    let alive = companion("keylatch_fair_alive", name);
    let mut out = Vec::with_capacity(owners.len());
    for owner in owners {
        let liveness = zscore(client, &alive, &owner).await?;
        let score = match liveness {
            Some(d) => Some(d),
            None => zscore(client, &timeouts, &owner).await?,
        };
        let deadline_in_ms = score.zip(now_ms).map(|(d, now)| d as i64 - now);
        out.push(Waiter {
            owner,
            deadline_in_ms,
            keylatch: liveness.is_some(),
        });
    }
    Ok(out)
}

/// `ZSCORE key member`, `None` when absent (or the key is no zset).
async fn zscore(client: &Client, key: &str, member: &str) -> Result<Option<f64>, String> {
    let cmd = Cmd::new("ZSCORE").key(key).arg(member);
    // RESP3 answers a double, RESP2 a bulk string.
    Ok(match ask(client, cmd).await {
        Ok(Frame::Double(d)) => Some(d),
        Ok(other) => text(&other).and_then(|t| t.parse::<f64>().ok()),
        Err(e) if e.contains("WRONGTYPE") => None,
        Err(e) => return Err(e),
    })
}

/// Reads everything `status` shows about `name`.
pub(crate) async fn read(client: &Client, name: &str) -> Result<Status, String> {
    let mut st = Status {
        name: name.to_owned(),
        ..Status::default()
    };
    st.redis_type =
        text(&ask(client, Cmd::new("TYPE").key(name)).await?).unwrap_or_else(|| "none".to_owned());
    match st.redis_type.as_str() {
        "hash" => {
            let pairs: Vec<(Frame, Frame)> =
                match ask(client, Cmd::new("HGETALL").key(name)).await? {
                    Frame::Map(m) => m,
                    Frame::Array(items) => {
                        let mut it = items.into_iter();
                        let mut pairs = Vec::new();
                        while let (Some(k), Some(v)) = (it.next(), it.next()) {
                            pairs.push((k, v));
                        }
                        pairs
                    }
                    other => return Err(format!("unexpected HGETALL reply: {other}")),
                };
            for (k, v) in pairs {
                let (Some(k), v) = (text(&k), text(&v)) else {
                    continue;
                };
                if k == "mode" {
                    st.shapeless |= !matches!(v.as_deref(), Some("read" | "write"));
                    st.mode = v;
                } else if let Some(n) = v.as_deref().and_then(|v| v.parse::<i64>().ok()) {
                    st.holders.push((k, n));
                } else {
                    st.shapeless = true;
                }
            }
        }
        "string" => st.value = text(&ask(client, Cmd::new("GET").key(name)).await?),
        _ => {}
    }
    st.ttl_ms = match ask(client, Cmd::new("PTTL").key(name)).await? {
        Frame::Integer(-2) => None,
        Frame::Integer(ms) => Some(ms),
        other => return Err(format!("unexpected PTTL reply: {other}")),
    };
    let queue = companion("redisson_lock_queue", name);
    if let Frame::Array(items) = ask(
        client,
        Cmd::new("LRANGE").key(queue.as_str()).arg(0).arg(-1),
    )
    .await?
    {
        let owners: Vec<String> = items.iter().filter_map(text).collect();
        if !owners.is_empty() {
            st.waiters = waiters(client, name, owners).await?;
        }
    }
    if st.mode.is_some() && !st.shapeless {
        read_write(client, &mut st).await?;
    }
    st.permits = permits(client, name).await?;
    st.writers_waiting = writers_waiting(client, name).await?;
    let token = companion("redisson_lock_token", name);
    st.fencing_token = ask(client, Cmd::new("GET").key(token.as_str()))
        .await
        .ok()
        .and_then(|f| text(&f))
        .and_then(|t| t.parse().ok());
    Ok(st)
}

/// The server's clock in ms (scores in keylatch's zsets are server time).
async fn server_now_ms(client: &Client) -> Result<Option<i64>, String> {
    Ok(match ask(client, Cmd::new("TIME")).await? {
        Frame::Array(parts) => {
            let num = |f: Option<&Frame>| f.and_then(text).and_then(|t| t.parse::<i64>().ok());
            match (num(parts.first()), num(parts.get(1))) {
                (Some(s), Some(us)) => Some(s * 1000 + us / 1000),
                _ => None,
            }
        }
        _ => None,
    })
}

/// The members and scores of zset `key` (at most 1,000), or `None` when
/// it is not a zset.
async fn zset(client: &Client, key: &str) -> Result<Option<Vec<(Bytes, f64)>>, String> {
    if text(&ask(client, Cmd::new("TYPE").key(key)).await?).as_deref() != Some("zset") {
        return Ok(None);
    }
    let reply = ask(
        client,
        Cmd::new("ZRANGE")
            .key(key)
            .arg(0)
            .arg(999)
            .arg("WITHSCORES"),
    )
    .await?;
    // RESP3: [[member, score]...]; RESP2: [member, score, ...].
    let mut pairs: Vec<(Frame, Frame)> = Vec::new();
    if let Frame::Array(items) = reply {
        if items.iter().all(|f| matches!(f, Frame::Array(_))) {
            for f in items {
                if let Frame::Array(mut p) = f {
                    if p.len() == 2 {
                        let s = p.pop().unwrap_or(Frame::Null);
                        let m = p.pop().unwrap_or(Frame::Null);
                        pairs.push((m, s));
                    }
                }
            }
        } else {
            let mut it = items.into_iter();
            while let (Some(m), Some(s)) = (it.next(), it.next()) {
                pairs.push((m, s));
            }
        }
    }
    Ok(Some(
        pairs
            .into_iter()
            .filter_map(|(m, s)| {
                let score = match s {
                    Frame::Double(d) => Some(d),
                    other => text(&other).and_then(|t| t.parse::<f64>().ok()),
                };
                Some((m.as_bytes()?.clone(), score?))
            })
            .collect(),
    ))
}

/// A permit-expirable semaphore's leased permits, when `{NAME}:timeout`
/// is a zset: each raw id shown in hex, with its expiry from now.
async fn permits(
    client: &Client,
    name: &str,
) -> Result<Option<Vec<(String, Option<i64>)>>, String> {
    let Some(members) = zset(client, &suffixed(name, "timeout")).await? else {
        return Ok(None);
    };
    let now = server_now_ms(client).await?;
    Ok(Some(
        members
            .into_iter()
            .map(|(id, score)| {
                let hex = id.iter().map(|x| format!("{x:02x}")).collect();
                // Redisson's "no lease" score.
                let left = Some(score)
                    .filter(|d| *d < 922_337_203_685_477.0)
                    .zip(now)
                    .map(|(d, now)| d as i64 - now);
                (hex, left)
            })
            .collect(),
    ))
}

/// Writers waiting for a read-write lock (`{NAME}:rwlock_writers_waiting`)
/// with their deadlines from now; expired entries are left out.
async fn writers_waiting(client: &Client, name: &str) -> Result<Vec<(String, i64)>, String> {
    let Some(members) = zset(client, &suffixed(name, "rwlock_writers_waiting")).await? else {
        return Ok(Vec::new());
    };
    let now = server_now_ms(client).await?.unwrap_or(0);
    Ok(members
        .into_iter()
        .map(|(owner, score)| {
            (
                String::from_utf8_lossy(&owner).into_owned(),
                score as i64 - now,
            )
        })
        .filter(|(_, left)| *left > 0)
        .collect())
}

/// A read-write lock's holders split into the writer (`<owner>:write`)
/// and readers, each read hold with its key's PTTL.
async fn read_write(client: &Client, st: &mut Status) -> Result<(), String> {
    for (field, count) in &st.holders {
        if let Some(owner) = field.strip_suffix(":write") {
            st.writer = Some((owner.to_owned(), *count));
            continue;
        }
        let mut holds_ttl_ms = Vec::new();
        // Bounded: a count is small in practice, and a corrupt one must not
        // make `status` hang.
        for i in 1..=(*count).clamp(0, 1000) {
            let key = suffixed(&st.name, &format!("{field}:rwlock_timeout:{i}"));
            if let Frame::Integer(t) = ask(client, Cmd::new("PTTL").key(key.as_str())).await? {
                holds_ttl_ms.push(t);
            }
        }
        st.readers.push(Reader {
            owner: field.clone(),
            count: *count,
            holds_ttl_ms,
        });
    }
    Ok(())
}

/// Entry point: parses, reads, prints.
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
            all.push(
                read(&client, name)
                    .await
                    .map_err(|e| Failure::usage(format!("reading lock {name:?}: {e}")))?,
            );
        }
        Ok::<_, Failure>(all)
    })?;
    // Several names (a multi-lock's members): one JSON array, or the text
    // blocks one after the other.
    if json {
        let objects: Vec<String> = all.iter().map(Status::to_json).collect();
        if objects.len() == 1 {
            outln!("{}", objects[0]);
        } else {
            outln!("[{}]", objects.join(","));
        }
    } else {
        let texts: Vec<String> = all.iter().map(Status::to_text).collect();
        outln!("{}", texts.join("\n"));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_user_data() {
        let mut s = String::new();
        json_string(&mut s, "a\"b\\c\nd\u{1}é");
        assert_eq!(s, r#""a\"b\\c\nd\u0001é""#);
    }

    #[test]
    fn json_shape_of_a_held_and_a_free_lock() {
        let held = Status {
            name: "jobs".into(),
            redis_type: "hash".into(),
            ttl_ms: Some(29_000),
            holders: vec![("u:1".into(), 2)],
            fencing_token: Some(7),
            ..Status::default()
        };
        assert_eq!(
            held.to_json(),
            r#"{"name":"jobs","state":"held","type":"reentrant","ttl_ms":29000,"holders":{"u:1":2},"mode":null,"value":null,"waiters":[],"fencing_token":7,"readers":[],"writer":null,"permits":null,"writers_waiting":[]}"#
        );
        let free = Status {
            name: "jobs".into(),
            redis_type: "none".into(),
            ..Status::default()
        };
        assert!(free
            .to_json()
            .contains(r#""state":"free","type":"none","ttl_ms":null"#));
    }

    #[test]
    fn a_read_write_lock_shows_its_writer_readers_and_waiting_writer() {
        let st = Status {
            name: "docs".into(),
            redis_type: "hash".into(),
            ttl_ms: Some(3000),
            holders: vec![("u:1:write".into(), 1), ("u:1".into(), 2)],
            mode: Some("write".into()),
            writer: Some(("u:1".into(), 1)),
            readers: vec![Reader {
                owner: "u:1".into(),
                count: 2,
                holds_ttl_ms: vec![2900, -2],
            }],
            writers_waiting: vec![("u:2".into(), 1500)],
            ..Status::default()
        };
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
        assert_eq!(suffixed("docs", "x"), "{docs}:x");
        assert_eq!(suffixed("{t}docs", "x"), "{t}docs:x");
    }

    #[test]
    fn types_detected_from_the_data() {
        let mut st = Status {
            redis_type: "hash".into(),
            holders: vec![("u:1".into(), 1)],
            ..Status::default()
        };
        assert_eq!(st.kind(), "reentrant");
        st.waiters.push(Waiter {
            owner: "u:2".into(),
            deadline_in_ms: Some(4000),
            keylatch: true,
        });
        assert!(st
            .to_json()
            .contains(r#""waiters":[{"owner":"u:2","deadline_in_ms":4000,"client":"keylatch"}]"#));
        assert_eq!(st.kind(), "fair");
        st.mode = Some("read".into());
        assert_eq!(st.kind(), "read-write");
        st.redis_type = "string".into();
        // A string that is no count is no lock of any kind.
        assert_eq!(
            (st.kind().as_str(), st.state()),
            ("not a lock (string)", "other")
        );
        st.value = Some("3".into());
        assert_eq!(
            (st.kind().as_str(), st.state()),
            ("semaphore/latch", "other")
        );
    }

    #[test]
    fn companion_keys_follow_the_lock_crate() {
        assert_eq!(
            companion("redisson_lock_queue", "x"),
            "redisson_lock_queue:{x}"
        );
        assert_eq!(
            companion("redisson_lock_queue", "{t}x"),
            "redisson_lock_queue:{t}x"
        );
    }
}
