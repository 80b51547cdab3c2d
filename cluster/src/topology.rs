//! The cluster's shape: which master owns each slot, and each master's replicas.
//!
//! Parsed from `CLUSTER SHARDS` (Redis 7) or `CLUSTER SLOTS` (older), in the
//! RESP3 or the RESP2 shape, into a flat 16384-entry table of node indices
//! that the router swaps as a whole (an `Arc`) on refresh.

use bytes::Bytes;
use keylatch_resp::Frame;

use crate::error::{Error, Result};
use crate::reply::shown;
use crate::slot::SLOT_COUNT;

/// Marks a slot no master serves.
pub(crate) const NO_NODE: u16 = u16::MAX;

/// One master and its replicas, as `host:port` addresses.
///
/// ```
/// # use keylatch_cluster::Shard;
/// # fn show(s: &Shard) {
/// println!("{} has replicas {:?}", s.master, s.replicas);
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Shard {
    /// The master's address (`host:port`; IPv6 hosts in brackets).
    pub master: String,
    /// The replicas' addresses.
    pub replicas: Vec<String>,
}

/// A parsed topology: shards and the slot → shard table.
#[derive(Clone, Debug)]
pub(crate) struct Topology {
    pub(crate) shards: Vec<Shard>,
    /// Index into `shards` per slot, or [`NO_NODE`].
    pub(crate) slots: Box<[u16]>,
}

impl Topology {
    fn empty() -> Self {
        Self {
            shards: Vec::new(),
            slots: vec![NO_NODE; usize::from(SLOT_COUNT)].into_boxed_slice(),
        }
    }

    /// The shard owning `slot`, if any.
    #[cfg(test)]
    pub(crate) fn shard_of(&self, slot: u16) -> Option<&Shard> {
        let i = *self.slots.get(usize::from(slot))?;
        self.shards.get(usize::from(i))
    }

    /// Index of the shard whose master is `addr`, adding one if unknown.
    pub(crate) fn shard_index(&mut self, addr: &str) -> u16 {
        if let Some(i) = self.shards.iter().position(|s| s.master == addr) {
            return u16::try_from(i).unwrap_or(NO_NODE);
        }
        self.shards.push(Shard {
            master: addr.to_owned(),
            replicas: Vec::new(),
        });
        u16::try_from(self.shards.len() - 1).unwrap_or(NO_NODE)
    }

    fn assign(&mut self, start: i64, end: i64, shard: u16) -> Result<()> {
        let bad = || Error::UnexpectedReply(format!("slot range {start}-{end} out of bounds"));
        let start = usize::try_from(start).map_err(|_| bad())?;
        let end = usize::try_from(end).map_err(|_| bad())?;
        if start > end || end >= usize::from(SLOT_COUNT) {
            return Err(bad());
        }
        for s in &mut self.slots[start..=end] {
            *s = shard;
        }
        Ok(())
    }

    /// Slots that no master serves.
    #[cfg(test)]
    pub(crate) fn uncovered(&self) -> usize {
        self.slots.iter().filter(|&&s| s == NO_NODE).count()
    }

    /// Parses a `CLUSTER SHARDS` reply. `seed_host` replaces unusable
    /// endpoints (`?`, empty), as the Redis docs advise. `tls`: the client
    /// connects with TLS, so a node's `tls-port` is used where it has one
    /// (a node may report both a plaintext `port` and a `tls-port`).
    pub(crate) fn from_shards(reply: Frame, seed_host: &str, tls: bool) -> Result<Self> {
        let mut topo = Self::empty();
        for shard in into_list(reply)? {
            let fields = into_pairs(shard)?;
            let mut ranges = Vec::new();
            let mut master = None;
            let mut replicas = Vec::new();
            for (k, v) in fields {
                match k.as_ref() {
                    b"slots" => {
                        for n in into_list(v)? {
                            ranges.push(int(&n)?);
                        }
                    }
                    b"nodes" => {
                        for node in into_list(v)? {
                            let node = NodeInfo::from_pairs(into_pairs(node)?, seed_host, tls)?;
                            if node.failed {
                                continue;
                            }
                            if node.master {
                                master = Some(node.addr);
                            } else {
                                replicas.push(node.addr);
                            }
                        }
                    }
                    _ => {}
                }
            }
            let Some(master) = master else {
                // A shard whose master failed and has no replacement yet:
                // its slots stay unassigned, so requests get a typed error.
                continue;
            };
            let idx = topo.shard_index(&master);
            topo.shards[usize::from(idx)].replicas = replicas;
            for pair in ranges.chunks(2) {
                if let [start, end] = pair {
                    topo.assign(*start, *end, idx)?;
                }
            }
        }
        Ok(topo)
    }

    /// Parses a `CLUSTER SLOTS` reply.
    pub(crate) fn from_slots(reply: Frame, seed_host: &str) -> Result<Self> {
        let mut topo = Self::empty();
        for range in into_list(reply)? {
            let mut items = into_list(range)?.into_iter();
            let (Some(start), Some(end)) = (items.next(), items.next()) else {
                return Err(Error::UnexpectedReply(
                    "short CLUSTER SLOTS entry".to_owned(),
                ));
            };
            let (start, end) = (int(&start)?, int(&end)?);
            let mut nodes = items.map(|n| slots_node_addr(n, seed_host));
            let Some(master) = nodes.next().transpose()? else {
                continue;
            };
            let replicas = nodes.collect::<Result<Vec<_>>>()?;
            let idx = topo.shard_index(&master);
            let shard = &mut topo.shards[usize::from(idx)];
            for r in replicas {
                if !shard.replicas.contains(&r) {
                    shard.replicas.push(r);
                }
            }
            topo.assign(start, end, idx)?;
        }
        Ok(topo)
    }
}

struct NodeInfo {
    addr: String,
    master: bool,
    failed: bool,
}

impl NodeInfo {
    fn from_pairs(pairs: Vec<(Bytes, Frame)>, seed_host: &str, tls: bool) -> Result<Self> {
        let mut ip = None;
        let mut endpoint = None;
        let mut port = None;
        let mut tls_port = None;
        let mut master = false;
        let mut failed = false;
        for (k, v) in pairs {
            match k.as_ref() {
                b"ip" => ip = text(&v),
                b"endpoint" => endpoint = text(&v),
                b"port" => port = Some(int(&v)?),
                b"tls-port" => tls_port = Some(int(&v)?),
                b"role" => master = text(&v).as_deref() == Some("master"),
                b"health" => failed = text(&v).as_deref() == Some("fail"),
                _ => {}
            }
        }
        let host = [endpoint, ip]
            .into_iter()
            .flatten()
            .find(|h| !h.is_empty() && h != "?")
            .unwrap_or_else(|| seed_host.to_owned());
        let (first, second) = if tls {
            (tls_port, port)
        } else {
            (port, tls_port)
        };
        let port = first
            .or(second)
            .and_then(|p| u16::try_from(p).ok())
            .ok_or_else(|| {
                Error::UnexpectedReply("CLUSTER SHARDS node without a port".to_owned())
            })?;
        Ok(Self {
            addr: join_host_port(&host, port),
            master,
            failed,
        })
    }
}

fn slots_node_addr(node: Frame, seed_host: &str) -> Result<String> {
    let mut parts = into_list(node)?.into_iter();
    let host = parts.next().and_then(|h| text(&h)).unwrap_or_default();
    let port = parts
        .next()
        .map(|p| int(&p))
        .transpose()?
        .and_then(|p| u16::try_from(p).ok())
        .ok_or_else(|| Error::UnexpectedReply("CLUSTER SLOTS node without a port".to_owned()))?;
    let host = if host.is_empty() || host == "?" {
        seed_host.to_owned()
    } else {
        host
    };
    Ok(join_host_port(&host, port))
}

/// `host:port`, with IPv6 hosts in brackets (the form MOVED/ASK use).
pub(crate) fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Splits `host:port` (IPv6 in brackets) as found in MOVED/ASK and topology.
pub(crate) fn split_addr(addr: &str) -> Option<(String, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_owned(), port.parse().ok()?))
}

// Each helper sees through RESP3 attributes (`Frame::Attributed`) on the
// frame it reads, so annotated replies or elements parse as plain ones.

fn into_list(f: Frame) -> Result<Vec<Frame>> {
    match f.into_value() {
        Frame::Array(v) | Frame::Set(v) => Ok(v),
        other => Err(Error::UnexpectedReply(format!(
            "expected an array, got {}",
            shown(&other)
        ))),
    }
}

/// A RESP3 map or a RESP2 flat array of pairs, keys as bytes.
fn into_pairs(f: Frame) -> Result<Vec<(Bytes, Frame)>> {
    let pairs: Vec<(Frame, Frame)> = match f.into_value() {
        Frame::Map(m) => m,
        Frame::Array(v) if v.len() % 2 == 0 => {
            let mut it = v.into_iter();
            let mut out = Vec::new();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                out.push((k, v));
            }
            out
        }
        other => {
            return Err(Error::UnexpectedReply(format!(
                "expected a map, got {}",
                shown(&other)
            )))
        }
    };
    pairs
        .into_iter()
        .map(|(k, v)| match k.into_value() {
            Frame::Bulk(b) | Frame::Simple(b) => Ok((b, v)),
            other => Err(Error::UnexpectedReply(format!("map key {}", shown(&other)))),
        })
        .collect()
}

fn int(f: &Frame) -> Result<i64> {
    let f = f.value();
    match f {
        Frame::Integer(i) => Ok(*i),
        Frame::Bulk(b) | Frame::Simple(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                Error::UnexpectedReply(format!("expected an integer, got {}", shown(f)))
            }),
        other => Err(Error::UnexpectedReply(format!(
            "expected an integer, got {}",
            shown(other)
        ))),
    }
}

fn text(f: &Frame) -> Option<String> {
    match f.value() {
        Frame::Bulk(b) | Frame::Simple(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Frame::Verbatim { text, .. } => Some(String::from_utf8_lossy(text).into_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Frame {
        Frame::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    fn node_resp3(port: i64, role: &str, health: &str) -> Frame {
        Frame::Map(vec![
            (b("id"), b("abc")),
            (b("port"), Frame::Integer(port)),
            (b("ip"), b("127.0.0.1")),
            (b("endpoint"), b("127.0.0.1")),
            (b("role"), b(role)),
            (b("replication-offset"), Frame::Integer(10)),
            (b("health"), b(health)),
        ])
    }

    #[test]
    fn shards_resp3_and_resp2() {
        let shard_a = Frame::Map(vec![
            (
                b("slots"),
                Frame::Array(vec![Frame::Integer(0), Frame::Integer(5460)]),
            ),
            (
                b("nodes"),
                Frame::Array(vec![
                    node_resp3(7000, "master", "online"),
                    node_resp3(7003, "replica", "online"),
                    node_resp3(7006, "replica", "fail"),
                ]),
            ),
        ]);
        let shard_b = Frame::Map(vec![
            (
                b("slots"),
                Frame::Array(vec![
                    Frame::Integer(5461),
                    Frame::Integer(10000),
                    Frame::Integer(10001),
                    Frame::Integer(16383),
                ]),
            ),
            (
                b("nodes"),
                Frame::Array(vec![node_resp3(7001, "master", "online")]),
            ),
        ]);
        let topo = Topology::from_shards(Frame::Array(vec![shard_a, shard_b]), "h", false).unwrap();
        assert_eq!(topo.uncovered(), 0);
        assert_eq!(topo.shard_of(0).unwrap().master, "127.0.0.1:7000");
        assert_eq!(
            topo.shard_of(5460).unwrap().replicas,
            vec!["127.0.0.1:7003"]
        );
        assert_eq!(topo.shard_of(5461).unwrap().master, "127.0.0.1:7001");
        assert_eq!(topo.shard_of(16383).unwrap().master, "127.0.0.1:7001");

        // The same shard in RESP2's flat-array shape, with an unusable endpoint.
        let flat = |f: Frame| match f {
            Frame::Map(m) => Frame::Array(m.into_iter().flat_map(|(k, v)| [k, v]).collect()),
            other => other,
        };
        let node = Frame::Array(vec![
            b("port"),
            Frame::Integer(7002),
            b("ip"),
            b(""),
            b("endpoint"),
            b("?"),
            b("role"),
            b("master"),
        ]);
        let shard = flat(Frame::Map(vec![
            (b("slots"), Frame::Array(vec![b("0"), b("16383")])),
            (b("nodes"), Frame::Array(vec![node])),
        ]));
        let topo = Topology::from_shards(Frame::Array(vec![shard]), "seed.example", false).unwrap();
        assert_eq!(topo.shard_of(42).unwrap().master, "seed.example:7002");
    }

    #[test]
    fn shards_tls_port_is_used_by_tls_clients() {
        // A node serving both: plaintext 7000, TLS 8000 (`port`/`tls-port`).
        let node = Frame::Map(vec![
            (b("ip"), b("127.0.0.1")),
            (b("port"), Frame::Integer(7000)),
            (b("tls-port"), Frame::Integer(8000)),
            (b("role"), b("master")),
        ]);
        let shard = Frame::Map(vec![
            (
                b("slots"),
                Frame::Array(vec![Frame::Integer(0), Frame::Integer(16383)]),
            ),
            (b("nodes"), Frame::Array(vec![node])),
        ]);
        let reply = Frame::Array(vec![shard]);
        let plain = Topology::from_shards(reply.clone(), "h", false).unwrap();
        assert_eq!(plain.shard_of(0).unwrap().master, "127.0.0.1:7000");
        let tls = Topology::from_shards(reply, "h", true).unwrap();
        assert_eq!(tls.shard_of(0).unwrap().master, "127.0.0.1:8000");
        // A TLS-only node (`--port 0`) reports only `tls-port`.
        let only_tls = Frame::Array(vec![Frame::Map(vec![
            (
                b("slots"),
                Frame::Array(vec![Frame::Integer(0), Frame::Integer(16383)]),
            ),
            (
                b("nodes"),
                Frame::Array(vec![Frame::Map(vec![
                    (b("ip"), b("127.0.0.1")),
                    (b("tls-port"), Frame::Integer(8001)),
                    (b("role"), b("master")),
                ])]),
            ),
        ])]);
        for tls in [false, true] {
            let topo = Topology::from_shards(only_tls.clone(), "h", tls).unwrap();
            assert_eq!(topo.shard_of(1).unwrap().master, "127.0.0.1:8001");
        }
    }

    #[test]
    fn slots_format() {
        let entry = |s: i64, e: i64, ports: &[i64]| {
            let mut v = vec![Frame::Integer(s), Frame::Integer(e)];
            for p in ports {
                v.push(Frame::Array(vec![
                    b("127.0.0.1"),
                    Frame::Integer(*p),
                    b("id"),
                ]));
            }
            Frame::Array(v)
        };
        let reply = Frame::Array(vec![
            entry(0, 8000, &[7000, 7003]),
            entry(8001, 16383, &[7001]),
        ]);
        let topo = Topology::from_slots(reply, "h").unwrap();
        assert_eq!(topo.uncovered(), 0);
        assert_eq!(topo.shard_of(8000).unwrap().master, "127.0.0.1:7000");
        assert_eq!(topo.shard_of(8001).unwrap().master, "127.0.0.1:7001");
        assert_eq!(topo.shards.len(), 2);
        // Partial coverage is reported, not hidden.
        let partial = Topology::from_slots(Frame::Array(vec![entry(0, 99, &[7000])]), "h").unwrap();
        assert_eq!(partial.uncovered(), 16384 - 100);
        // Garbage is a typed error.
        assert!(Topology::from_slots(Frame::Integer(1), "h").is_err());
        assert!(Topology::from_slots(Frame::Array(vec![entry(5, 16384, &[1])]), "h").is_err());
    }

    #[test]
    fn addresses() {
        assert_eq!(join_host_port("::1", 7000), "[::1]:7000");
        assert_eq!(split_addr("[::1]:7000"), Some(("::1".to_owned(), 7000)));
        assert_eq!(
            split_addr("127.0.0.1:6379"),
            Some(("127.0.0.1".to_owned(), 6379))
        );
        assert_eq!(split_addr("nope"), None);
    }

    /// Found by the `from_reply` fuzz target: a reply of the wrong shape
    /// was shown whole in the error, so a huge one made a huge message.
    #[test]
    fn errors_show_a_bounded_part_of_a_huge_reply() {
        let huge = b(&"x".repeat(1 << 16));
        let wrong = [
            Topology::from_slots(huge.clone(), "h"),
            Topology::from_shards(huge.clone(), "h", false),
            Topology::from_shards(
                Frame::Array(vec![Frame::Array(vec![huge.clone()])]),
                "h",
                false,
            ),
            Topology::from_shards(
                Frame::Array(vec![Frame::Array(vec![
                    Frame::Array(vec![huge.clone()]),
                    Frame::Integer(1),
                ])]),
                "h",
                false,
            ),
            Topology::from_slots(
                Frame::Array(vec![Frame::Array(vec![huge.clone(), huge])]),
                "h",
            ),
        ];
        for r in wrong {
            match r {
                Err(Error::UnexpectedReply(m)) => assert!(m.len() < 200, "{} bytes", m.len()),
                other => panic!("{other:?}"),
            }
        }
    }
}
