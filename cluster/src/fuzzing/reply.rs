//! The `from_reply` target (every [`FromReply`] conversion) and the
//! `topology` target (the `CLUSTER SHARDS`/`SLOTS` parsers) on arbitrary
//! frames: two targets, as the parsers' 16,384-slot tables cost each input
//! far more than the conversions do.

use std::fmt::Debug;

use bytes::Bytes;
use keylatch_resp::Frame;

use super::{encoded, frames, known};
use crate::error::{Error, Result};
use crate::reply::{check, FromReply};
use crate::slot::SLOT_COUNT;
use crate::topology::{split_addr, Topology, NO_NODE};

/// Converts every frame of `data` ([`frames`]) with every [`FromReply`]
/// impl (scalars, strings, options, lists, pairs, nested). Never panics;
/// asserts
/// that each `Ok` agrees with the frame (an `i64` from a bulk is its text
/// parsed, a `String` is its bytes as UTF-8, a list has the frame's
/// length, …), that conversions the frame's shape allows succeed, that
/// failures are [`Error::UnexpectedReply`] with a bounded message (or the
/// server error an element carried), and that a parsed topology's table
/// names only shards it has.
pub fn check_from_reply(data: &[u8]) {
    for frame in frames(data) {
        conversions(&frame);
    }
}

/// Parses every frame of `data` ([`frames`]) as a `CLUSTER SHARDS` reply
/// (as a TLS client for every other frame) and a `CLUSTER SLOTS` reply.
/// Never panics; asserts that failures are typed with a bounded message
/// and that a parsed topology's table names only shards it has.
pub fn check_topology(data: &[u8]) {
    for (i, frame) in frames(data).into_iter().enumerate() {
        topology(&frame, i % 2 == 1);
    }
}

fn conversions(frame: &Frame) {
    let same = Frame::from_reply(frame.clone()).map(|f| encoded(&f));
    assert_eq!(same.ok(), Some(encoded(frame)));
    assert!(<()>::from_reply(frame.clone()).is_ok());
    match check(frame.clone()) {
        Err(Error::Server(e)) => {
            assert!(frame.is_error(), "{frame}");
            if let Frame::Error(line) = frame {
                assert_eq!(e.as_bytes(), &line[..]);
            }
        }
        Err(e) => panic!("{frame} checked into {e:?}"),
        Ok(f) => {
            assert!(!frame.is_error(), "{frame}");
            assert_eq!(encoded(&f), encoded(frame));
        }
    }
    integers(frame);
    float(frame);
    boolean(frame);
    strings(frame);
    optional::<i64>(frame);
    optional::<Bytes>(frame);
    optional::<String>(frame);
    list::<Frame>(frame);
    list::<i64>(frame);
    list::<u64>(frame);
    list::<bool>(frame);
    list::<Bytes>(frame);
    list::<String>(frame);
    list::<Option<Bytes>>(frame);
    list::<Vec<i64>>(frame);
    list::<Vec<(String, Frame)>>(frame);
    pairs::<Bytes, i64>(frame);
    pairs::<String, Frame>(frame);
    pairs::<String, Vec<Bytes>>(frame);
    pairs::<Frame, Frame>(frame);
}

/// A failed conversion: a typed error, never a panic, with a message cut
/// to a bounded length whatever the frame's size.
fn failed(frame: &Frame, e: &Error) {
    match e {
        Error::UnexpectedReply(s) => assert!(s.len() <= 200, "{} bytes", s.len()),
        // An element of an aggregate was an error reply.
        Error::Server(_) => assert!(has_error(frame), "{frame}: {e:?}"),
        other => panic!("{frame}: {other:?}"),
    }
}

/// Whether an error reply may sit in the frame (an unknown variant may
/// hold one).
fn has_error(frame: &Frame) -> bool {
    if frame.is_error() || !known(frame) {
        return true;
    }
    match frame {
        Frame::Array(v) | Frame::Set(v) | Frame::Push(v) => v.iter().any(has_error),
        Frame::Map(p) => p.iter().any(|(k, v)| has_error(k) || has_error(v)),
        _ => false,
    }
}

/// The frame's text, if string-like and UTF-8.
fn text(frame: &Frame) -> Option<&str> {
    std::str::from_utf8(frame.as_bytes()?).ok()
}

/// For a frame of a variant the checks do not know: the conversion to `T`
/// may fail only with a typed error. True when that was the whole check.
fn opaque<T: FromReply>(frame: &Frame) -> bool {
    if known(frame) {
        return false;
    }
    if let Err(e) = T::from_reply(frame.clone()) {
        failed(frame, &e);
    }
    true
}

fn integers(frame: &Frame) {
    if opaque::<i64>(frame) | opaque::<u64>(frame) {
        return;
    }
    let i = i64::from_reply(frame.clone());
    match (frame, &i) {
        (Frame::Integer(n), Ok(v)) => assert_eq!(n, v),
        (Frame::Boolean(b), Ok(v)) => assert_eq!(i64::from(*b), *v),
        (Frame::Simple(_) | Frame::Bulk(_) | Frame::BigNumber(_), Ok(v)) => {
            assert_eq!(text(frame).and_then(|t| t.parse().ok()), Some(*v));
        }
        (_, Ok(v)) => panic!("{frame} converted to the integer {v}"),
        (Frame::Integer(_) | Frame::Boolean(_), Err(e)) => panic!("{frame}: {e:?}"),
        (Frame::Simple(_) | Frame::Bulk(_) | Frame::BigNumber(_), Err(e)) => {
            assert_eq!(text(frame).and_then(|t| t.parse::<i64>().ok()), None);
            failed(frame, e);
        }
        (_, Err(e)) => failed(frame, e),
    }
    let u = u64::from_reply(frame.clone());
    match (&i, &u) {
        (Ok(i), Ok(u)) => assert_eq!(u64::try_from(*i).ok(), Some(*u)),
        (Ok(i), Err(e)) => {
            assert!(*i < 0, "{i}: {e:?}");
            failed(frame, e);
        }
        (Err(_), Ok(u)) => panic!("{frame}: u64 {u} but no i64"),
        (Err(_), Err(e)) => failed(frame, e),
    }
}

fn float(frame: &Frame) {
    if opaque::<f64>(frame) {
        return;
    }
    match (frame, f64::from_reply(frame.clone())) {
        (Frame::Double(d), Ok(v)) => assert_eq!(d.to_bits(), v.to_bits()),
        #[allow(clippy::cast_precision_loss)]
        (Frame::Integer(n), Ok(v)) => assert_eq!((*n as f64).to_bits(), v.to_bits()),
        (Frame::Simple(_) | Frame::Bulk(_), Ok(v)) => {
            let parsed = text(frame).and_then(|t| t.parse::<f64>().ok());
            assert!(parsed.is_some_and(|p| p.to_bits() == v.to_bits() || p.is_nan() && v.is_nan()));
        }
        (_, Ok(v)) => panic!("{frame} converted to the number {v}"),
        (Frame::Double(_) | Frame::Integer(_), Err(e)) => panic!("{frame}: {e:?}"),
        (_, Err(e)) => failed(frame, &e),
    }
}

fn boolean(frame: &Frame) {
    if opaque::<bool>(frame) {
        return;
    }
    match (frame, bool::from_reply(frame.clone())) {
        (Frame::Boolean(b), Ok(v)) => assert_eq!(*b, v),
        (Frame::Integer(n), Ok(v)) => assert_eq!(*n != 0, v),
        (Frame::Simple(_), Ok(v)) => assert!(v),
        (Frame::Null, Ok(v)) => assert!(!v),
        (_, Ok(v)) => panic!("{frame} converted to {v}"),
        (Frame::Boolean(_) | Frame::Integer(_) | Frame::Simple(_) | Frame::Null, Err(e)) => {
            panic!("{frame}: {e:?}")
        }
        (_, Err(e)) => failed(frame, &e),
    }
}

fn strings(frame: &Frame) {
    if opaque::<Bytes>(frame) | opaque::<Vec<u8>>(frame) | opaque::<String>(frame) {
        return;
    }
    let bytes = Bytes::from_reply(frame.clone());
    match (frame.as_bytes(), &bytes) {
        (Some(want), Ok(got)) => assert_eq!(want, got),
        (None, Ok(got)) => panic!("{frame} converted to the string {got:?}"),
        (Some(_), Err(e)) => panic!("{frame}: {e:?}"),
        (None, Err(e)) => failed(frame, e),
    }
    let vec = Vec::<u8>::from_reply(frame.clone());
    assert_eq!(vec.as_deref().ok(), bytes.as_ref().ok().map(|b| b.as_ref()));
    match (frame, String::from_reply(frame.clone())) {
        (Frame::Integer(n), s) => assert_eq!(s.ok(), Some(n.to_string())),
        // The property the brief names: an Ok string is the bytes as UTF-8.
        (_, Ok(s)) => assert_eq!(Some(s.as_str()), text(frame)),
        (_, Err(e)) => {
            assert_eq!(text(frame), None);
            failed(frame, &e);
        }
    }
}

fn optional<T: FromReply + PartialEq + Debug>(frame: &Frame) {
    if opaque::<Option<T>>(frame) {
        return;
    }
    let got = Option::<T>::from_reply(frame.clone());
    match frame {
        Frame::Null => assert_eq!(got.ok(), Some(None)),
        _ => {
            let plain = T::from_reply(frame.clone());
            match (got, plain) {
                (Ok(Some(a)), Ok(b)) => assert_eq!(a, b),
                (Err(_), Err(e)) => failed(frame, &e),
                (a, b) => panic!("{frame}: Option gave {a:?}, plain {b:?}"),
            }
        }
    }
}

/// The elements `Vec<T>` converts, if the frame is list-shaped.
fn elements(frame: &Frame) -> Option<Vec<Frame>> {
    match frame {
        Frame::Array(v) | Frame::Set(v) | Frame::Push(v) => Some(v.clone()),
        Frame::Map(p) => Some(p.iter().flat_map(|(k, v)| [k.clone(), v.clone()]).collect()),
        Frame::Null => Some(Vec::new()),
        _ => None,
    }
}

fn list<T: FromReply>(frame: &Frame) {
    if opaque::<Vec<T>>(frame) {
        return;
    }
    let got = Vec::<T>::from_reply(frame.clone());
    let Some(items) = elements(frame) else {
        match got {
            Ok(v) => panic!("{frame} converted to a list of {}", v.len()),
            Err(e) => return failed(frame, &e),
        }
    };
    // Ok exactly when every element (error replies refused) converts.
    let each: Result<Vec<T>> = items
        .into_iter()
        .map(|f| T::from_reply(check(f)?))
        .collect();
    match (got, each) {
        (Ok(v), Ok(w)) => assert_eq!(v.len(), w.len()),
        (Err(e), Err(_)) => failed(frame, &e),
        (Ok(_), Err(e)) => panic!("{frame}: a list although an element failed: {e:?}"),
        (Err(e), Ok(_)) => panic!("{frame}: every element converts, the list not: {e:?}"),
    }
}

fn pairs<K: FromReply, V: FromReply>(frame: &Frame) {
    if opaque::<Vec<(K, V)>>(frame) {
        return;
    }
    let got = Vec::<(K, V)>::from_reply(frame.clone());
    let pairs: Option<Vec<(Frame, Frame)>> = match frame {
        Frame::Map(p) => Some(p.clone()),
        Frame::Array(v) if v.len() % 2 == 0 => {
            Some(v.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect())
        }
        Frame::Null => Some(Vec::new()),
        _ => None,
    };
    let Some(pairs) = pairs else {
        match got {
            Ok(v) => panic!("{frame} converted to {} pairs", v.len()),
            Err(e) => return failed(frame, &e),
        }
    };
    let each: Result<usize> = pairs.into_iter().try_fold(0, |n, (k, v)| {
        K::from_reply(check(k)?)?;
        V::from_reply(check(v)?)?;
        Ok(n + 1)
    });
    match (got, each) {
        (Ok(v), Ok(n)) => assert_eq!(v.len(), n),
        (Err(e), Err(_)) => failed(frame, &e),
        (a, b) => panic!("{frame}: pairs {:?} vs each {:?}", a.map(|v| v.len()), b),
    }
}

/// `CLUSTER SHARDS` (`tls`: which port a node is reached on) and
/// `CLUSTER SLOTS` parsing: a
/// typed error or a table that names only shards it has, each with an
/// address the router can split.
fn topology(frame: &Frame, tls: bool) {
    // Only lists of lists can be topologies: anything else is refused at
    // its first element, and skipping it saves building slot tables.
    if let Frame::Array(v) | Frame::Set(v) = frame {
        if v.first().is_some_and(|f| {
            known(f) && !matches!(f, Frame::Array(_) | Frame::Set(_) | Frame::Map(_))
        }) {
            return;
        }
    } else if known(frame) {
        return;
    }
    let parsed = [
        Topology::from_shards(frame.clone(), "seed", tls),
        Topology::from_slots(frame.clone(), "seed"),
    ];
    for t in parsed {
        match t {
            Ok(t) => {
                assert_eq!(t.slots.len(), usize::from(SLOT_COUNT));
                // With no shard, nothing can have been assigned (and the
                // scan of 16384 slots is most of an input's time).
                let scan = if t.shards.is_empty() {
                    &[][..]
                } else {
                    &t.slots[..]
                };
                for &s in scan {
                    assert!(s == NO_NODE || usize::from(s) < t.shards.len(), "{frame}");
                }
                for shard in t.shards.iter() {
                    for addr in std::iter::once(&shard.master).chain(&shard.replicas) {
                        assert!(split_addr(addr).is_some(), "{frame}: address {addr:?}");
                    }
                }
            }
            Err(e) => failed(frame, &e),
        }
    }
}
