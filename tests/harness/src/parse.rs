//! Parsing of `redis-cli` output for the cluster helpers.
//!
//! `CLUSTER NODES` is used for ownership and roles rather than `CLUSTER SLOTS`:
//! it is one bulk string with one line per node, which `redis-cli` prints
//! unchanged, while `CLUSTER SLOTS` is a nested array that `redis-cli` flattens
//! to one value per line when stdout is not a terminal.

use crate::slot::SLOTS;

/// One line of `CLUSTER NODES`:
/// `<id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <link> <slot>…`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodeLine {
    pub(crate) id: String,
    pub(crate) port: u16,
    pub(crate) myself: bool,
    pub(crate) master: bool,
    /// `fail`, `fail?`, `handshake` or `noaddr`: the viewer does not (yet)
    /// trust this node.
    pub(crate) troubled: bool,
    pub(crate) flags: String,
    /// The master's id, for a replica.
    pub(crate) master_id: Option<String>,
    /// Owned slot ranges, inclusive.
    pub(crate) slots: Vec<(u16, u16)>,
    /// Slots this node is migrating or importing (`[s->-id]`, `[s-<-id]`);
    /// Redis shows them on the `myself` line only.
    pub(crate) open_slots: Vec<u16>,
}

/// One node's `CLUSTER NODES` reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodesView {
    pub(crate) lines: Vec<NodeLine>,
}

impl NodesView {
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let lines = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(parse_line)
            .collect::<Result<Vec<_>, _>>()?;
        if lines.is_empty() {
            return Err(format!("empty CLUSTER NODES reply: {text:?}"));
        }
        Ok(Self { lines })
    }

    pub(crate) fn node(&self, id: &str) -> Option<&NodeLine> {
        self.lines.iter().find(|l| l.id == id)
    }

    pub(crate) fn myself(&self) -> Option<&NodeLine> {
        self.lines.iter().find(|l| l.myself)
    }

    pub(crate) fn owner(&self, slot: u16) -> Option<&str> {
        self.lines
            .iter()
            .filter(|l| l.master)
            .find(|l| l.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))
            .map(|l| l.id.as_str())
    }

    /// `(first, last, owner id)` for every owned range, sorted, after checking
    /// that masters' ranges cover 0..16384 exactly once. Canonical: Redis
    /// prints each node's slots as maximal ranges, so equal ownership gives
    /// equal lists.
    pub(crate) fn slot_map(&self) -> Result<Vec<(u16, u16, String)>, String> {
        let mut ranges: Vec<(u16, u16, String)> = self
            .lines
            .iter()
            .filter(|l| l.master)
            .flat_map(|l| l.slots.iter().map(move |&(a, b)| (a, b, l.id.clone())))
            .collect();
        ranges.sort();
        let mut next: u32 = 0;
        for (a, b, id) in &ranges {
            match u32::from(*a).cmp(&next) {
                std::cmp::Ordering::Greater => {
                    return Err(format!("slots {next}..{a} have no master"))
                }
                std::cmp::Ordering::Less => {
                    return Err(format!("slot {a} has two masters (one is {id})"))
                }
                std::cmp::Ordering::Equal => next = u32::from(*b) + 1,
            }
        }
        if next != u32::from(SLOTS) {
            return Err(format!("slots {next}..{SLOTS} have no master"));
        }
        Ok(ranges)
    }
}

fn parse_line(line: &str) -> Result<NodeLine, String> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 8 {
        return Err(format!("short CLUSTER NODES line: {line:?}"));
    }
    // `ip:port@cport` with an optional `,hostname`; IPv6 has colons, so split
    // at the last one.
    let addr = fields[1].split(['@', ',']).next().unwrap_or_default();
    let port = addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse::<u16>().ok())
        .ok_or_else(|| format!("bad address in CLUSTER NODES line: {line:?}"))?;
    let flags: Vec<&str> = fields[2].split(',').collect();
    let has = |f: &str| flags.contains(&f);
    let mut slots = Vec::new();
    let mut open_slots = Vec::new();
    for token in &fields[8..] {
        if let Some(inner) = token.strip_prefix('[') {
            // `[slot->-id]` or `[slot-<-id]`.
            let slot = inner
                .split('-')
                .next()
                .and_then(|s| s.parse::<u16>().ok())
                .ok_or_else(|| format!("bad open slot {token:?} in {line:?}"))?;
            open_slots.push(slot);
            continue;
        }
        let range = match token.split_once('-') {
            Some((a, b)) => a.parse().ok().zip(b.parse().ok()),
            None => token.parse().ok().map(|s| (s, s)),
        };
        match range {
            Some((a, b)) if a <= b && b < SLOTS => slots.push((a, b)),
            _ => return Err(format!("bad slot range {token:?} in {line:?}")),
        }
    }
    Ok(NodeLine {
        id: fields[0].to_owned(),
        port,
        myself: has("myself"),
        master: has("master"),
        troubled: has("fail") || has("fail?") || has("handshake") || has("noaddr"),
        flags: fields[2].to_owned(),
        master_id: (fields[3] != "-").then(|| fields[3].to_owned()),
        slots,
        open_slots,
    })
}

/// What `ROLE` says, in `redis-cli`'s flattened plain output: `master` then
/// offsets and replicas, or `slave`, master ip, master port, link state, offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Master,
    Replica { master_port: u16 },
}

pub(crate) fn parse_role(text: &str) -> Result<Role, String> {
    let mut lines = text.lines().map(str::trim);
    match lines.next() {
        Some("master") => Ok(Role::Master),
        Some("slave") => lines
            .nth(1)
            .and_then(|p| p.parse().ok())
            .map(|master_port| Role::Replica { master_port })
            .ok_or_else(|| format!("ROLE reply without master port: {text:?}")),
        _ => Err(format!("unexpected ROLE reply: {text:?}")),
    }
}

/// The value of `field` in an `INFO`-style `name:value` reply.
pub(crate) fn info_field<'a>(text: &'a str, field: &str) -> Option<&'a str> {
    text.lines()
        .filter_map(|l| l.trim().split_once(':'))
        .find(|(name, _)| *name == field)
        .map(|(_, value)| value)
}

/// An array of bulk strings as `redis-cli --no-raw` prints it:
/// `(empty array)`, or lines `N) "escaped"` (indices right-aligned). Used for
/// key names, which in plain mode would be ambiguous when they hold newlines.
pub(crate) fn parse_quoted_array(text: &str) -> Result<Vec<String>, String> {
    let trimmed = text.trim();
    if trimmed.starts_with("(empty") {
        return Ok(Vec::new());
    }
    if trimmed.starts_with("(error)") {
        return Err(trimmed.to_owned());
    }
    trimmed
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let item = line
                .trim_start()
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .strip_prefix(") ")
                .ok_or_else(|| format!("not an array item: {line:?}"))?;
            unquote(item).ok_or_else(|| format!("not a quoted string: {item:?}"))
        })
        .collect()
}

/// Reverses redis-cli's `sdscatrepr` quoting: `"…"` with `\\ \" \n \r \t \a \b`
/// and `\xHH`. `None` for anything else, including non-UTF-8 contents.
fn unquote(item: &str) -> Option<String> {
    let inner = item.strip_prefix('"')?.strip_suffix('"')?;
    let mut bytes = Vec::with_capacity(inner.len());
    let mut rest = inner.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        if b != b'\\' {
            bytes.push(b);
            continue;
        }
        let (&esc, tail) = rest.split_first()?;
        rest = tail;
        match esc {
            b'\\' | b'"' => bytes.push(esc),
            b'n' => bytes.push(b'\n'),
            b'r' => bytes.push(b'\r'),
            b't' => bytes.push(b'\t'),
            b'a' => bytes.push(0x07),
            b'b' => bytes.push(0x08),
            b'x' => {
                let hex = rest.get(..2)?;
                rest = &rest[2..];
                bytes.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            }
            _ => return None,
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "\
a86b 127.0.0.1:21006@31006 slave 8f24 0 1795312611354 2 connected
8f24 127.0.0.1:21002@31002 master - 0 1795312611555 2 connected 5461-10922
c77f 127.0.0.1:21004@31004 slave,fail? 5d75 0 1795312611354 3 connected
5d75 127.0.0.1:21003@31003 master - 0 1795312611354 3 connected 10923-16382 16383
9e06 127.0.0.1:21001@31001,host.example myself,master - 0 1795312611000 1 connected 0-5460 [77->-8f24] [78-<-5d75]
";

    #[test]
    fn parses_cluster_nodes() {
        let view = NodesView::parse(NODES).unwrap();
        assert_eq!(view.lines.len(), 5);
        let me = view.myself().unwrap();
        assert_eq!(me.id, "9e06");
        assert_eq!(me.port, 21001);
        assert!(me.master && !me.troubled);
        assert_eq!(me.slots, vec![(0, 5460)]);
        assert_eq!(me.open_slots, vec![77, 78]);
        let replica = view.node("c77f").unwrap();
        assert!(!replica.master && replica.troubled);
        assert_eq!(replica.master_id.as_deref(), Some("5d75"));
        assert_eq!(view.owner(16383), Some("5d75"));
        assert_eq!(view.owner(5461), Some("8f24"));
        let map = view.slot_map().unwrap();
        assert_eq!(map.len(), 4);
        assert_eq!(map[0], (0, 5460, "9e06".to_owned()));
    }

    #[test]
    fn slot_map_rejects_gaps_and_overlaps() {
        let gap = "a 127.0.0.1:1@2 master - 0 0 1 connected 0-100\n";
        assert!(NodesView::parse(gap).unwrap().slot_map().is_err());
        let overlap = "a 127.0.0.1:1@2 master - 0 0 1 connected 0-16383\n\
                       b 127.0.0.1:3@4 master - 0 0 2 connected 5\n";
        assert!(NodesView::parse(overlap).unwrap().slot_map().is_err());
    }

    #[test]
    fn parses_role() {
        assert_eq!(
            parse_role("master\n0\n127.0.0.1\n21005\n0\n").unwrap(),
            Role::Master
        );
        assert_eq!(
            parse_role("slave\n127.0.0.1\n21003\nconnected\n0\n").unwrap(),
            Role::Replica { master_port: 21003 }
        );
        assert!(parse_role("ERR unknown command\n").is_err());
    }

    #[test]
    fn parses_info_fields() {
        let info = "# Replication\r\nrole:slave\r\nmaster_link_status:up\r\n";
        assert_eq!(info_field(info, "master_link_status"), Some("up"));
        assert_eq!(info_field(info, "missing"), None);
    }

    #[test]
    fn parses_quoted_arrays() {
        assert!(parse_quoted_array("(empty array)\n").unwrap().is_empty());
        let out = "1) \"{a}k1\"\n2) \"x\\ny \\\"q\\\" \\\\ \\xc3\\xa9\\t\\x01{a}\"\n";
        assert_eq!(
            parse_quoted_array(out).unwrap(),
            vec!["{a}k1".to_owned(), "x\ny \"q\" \\ é\t\u{1}{a}".to_owned()]
        );
        let padded = " 9) \"a\"\n10) \"b\"\n";
        assert_eq!(parse_quoted_array(padded).unwrap(), vec!["a", "b"]);
        assert!(parse_quoted_array("(error) ERR nope").is_err());
    }
}
