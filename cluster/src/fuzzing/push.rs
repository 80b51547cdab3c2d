//! The `push` target: out-of-band push frames (client-side-caching
//! invalidations) and the pub/sub hub's classification of what it reads.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use keylatch_resp::Frame;

use super::{frames, known};
use crate::pubsub::{classify, Incoming};
use crate::push::{parse, Invalidation, InvalidationHandler};
use crate::SubscriptionKind;

/// Feeds every frame of `data` ([`frames`]) to the invalidation parser
/// (and an [`InvalidationHandler`]) and to the subscriber connection's
/// classification. Never panics; asserts that a message's channel,
/// pattern and payload are the frame's elements for its tag, that a
/// confirmation names the frame's channel and kind, that frames classified
/// as nothing match none of the shapes, that an invalidation's keys are
/// the frame's string elements, and that the handler is called once per
/// invalidation and never otherwise.
pub fn check_push(data: &[u8]) {
    for frame in frames(data) {
        let inv = invalidation(&frame);
        let class = classify(frame.clone());
        if inv.is_some() {
            assert_eq!(
                class,
                Incoming::Other,
                "an invalidation is no pub/sub traffic"
            );
        }
        classified(&frame, &class);
    }
}

fn invalidation(frame: &Frame) -> Option<Invalidation> {
    let got = parse(frame);
    let shape = match frame {
        Frame::Push(items) => match items.as_slice() {
            [kind, keys] if kind.as_bytes().is_some_and(|k| k == "invalidate") => Some(keys),
            _ => None,
        },
        _ => None,
    };
    match (&got, shape) {
        // Not judged: annotated keys (an unknown variant), parsed or not.
        (_, Some(keys)) if !known(keys) => {}
        (_, None) if !known(frame) => {}
        (Some(Invalidation::All), Some(Frame::Null)) => {}
        (Some(Invalidation::Keys(ks)), Some(Frame::Array(v) | Frame::Set(v))) => {
            let want: Vec<&Bytes> = v.iter().filter_map(Frame::as_bytes).collect();
            assert_eq!(ks.iter().collect::<Vec<_>>(), want);
        }
        (None, None | Some(_)) => {
            assert!(
                !matches!(shape, Some(Frame::Null | Frame::Array(_) | Frame::Set(_))),
                "{frame} is an invalidation"
            );
        }
        (Some(inv), _) => panic!("{frame} parsed as {inv:?}"),
    }
    // The handler sees exactly what the parse found.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handler = {
        let seen = Arc::clone(&seen);
        InvalidationHandler::new(move |inv| {
            if let Ok(mut s) = seen.lock() {
                s.push(inv);
            }
        })
    };
    handler.handle(frame);
    if let Ok(s) = seen.lock() {
        assert_eq!(s.as_slice(), got.as_slice());
    }
    got
}

fn classified(frame: &Frame, class: &Incoming) {
    if !known(frame) {
        // An annotated frame: classified without a panic is all we judge.
        return;
    }
    let items = match frame {
        Frame::Push(v) | Frame::Array(v) => Some(v.as_slice()),
        _ => None,
    };
    let tag = items.and_then(|v| v.first()).and_then(Frame::as_bytes);
    let at = |i: usize| items.and_then(|v| v.get(i)).and_then(Frame::as_bytes);
    let len = items.map_or(0, <[Frame]>::len);
    match class {
        Incoming::Message {
            kind,
            channel,
            pattern,
            payload,
        } => {
            let (want_tag, want_len, first) = match kind {
                SubscriptionKind::Channel => ("message", 3, 1),
                SubscriptionKind::Shard => ("smessage", 3, 1),
                SubscriptionKind::Pattern => ("pmessage", 4, 2),
            };
            assert!(tag.is_some_and(|t| t == want_tag), "{frame}");
            assert_eq!(len, want_len);
            assert_eq!(pattern.as_ref(), (first == 2).then(|| at(1)).flatten());
            assert_eq!(Some(channel), at(first));
            assert_eq!(Some(payload), at(first + 1));
        }
        Incoming::Confirm {
            kind,
            subscribed,
            name,
        } => {
            let command = if *subscribed {
                kind.subscribe_command()
            } else {
                kind.unsubscribe_command()
            };
            let want = command.to_ascii_lowercase();
            assert!(tag.is_some_and(|t| *t == want.as_bytes()), "{frame}");
            assert_eq!(Some(name), at(1));
            let count = items.and_then(|v| v.get(2));
            assert!(count.is_some_and(|c| matches!(c, Frame::Integer(_)) || !known(c)));
        }
        Incoming::Pong => assert!(
            matches!(frame, Frame::Simple(s) if s.eq_ignore_ascii_case(b"PONG"))
                || tag.is_some_and(|t| t == "pong"),
            "{frame}"
        ),
        Incoming::Error(line) => assert!(matches!(frame, Frame::Error(l) if l == line)),
        Incoming::Other => {
            assert!(!frame.is_error());
            assert!(!matches!(frame, Frame::Simple(s) if s.eq_ignore_ascii_case(b"PONG")));
            let strings =
                |r: std::ops::RangeInclusive<usize>| r.into_iter().all(|i| at(i).is_some());
            let known = match tag.map(Bytes::as_ref) {
                Some(b"message" | b"smessage") => len == 3 && strings(1..=2),
                Some(b"pmessage") => len == 4 && strings(1..=3),
                Some(
                    b"subscribe" | b"psubscribe" | b"ssubscribe" | b"unsubscribe" | b"punsubscribe"
                    | b"sunsubscribe",
                ) => {
                    at(1).is_some()
                        && matches!(items.and_then(|v| v.get(2)), Some(Frame::Integer(_)))
                }
                Some(b"pong") => true,
                _ => false,
            };
            assert!(!known, "{frame} was left unclassified");
        }
    }
}
