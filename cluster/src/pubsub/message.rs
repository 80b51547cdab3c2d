//! What listeners receive ([`Event`]), and how frames read on a subscriber
//! connection are classified ([`classify`]).
//!
//! RESP2 sends pub/sub traffic as plain arrays (`*3 message ch payload`);
//! RESP3 sends the same elements in push frames (`>3 message ch payload`).
//! Both shapes are accepted whatever the connection negotiated: the element
//! layout is identical, and a subscriber connection never receives an
//! ordinary array reply (it sends nothing but (un)subscribe commands and PING).

use bytes::Bytes;
use keylatch_resp::Frame;

/// The three kinds of subscription Redis has.
///
/// ```
/// use keylatch_cluster::SubscriptionKind;
/// assert_ne!(SubscriptionKind::Channel, SubscriptionKind::Shard);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SubscriptionKind {
    /// `SUBSCRIBE channel`: messages published with `PUBLISH`.
    Channel,
    /// `PSUBSCRIBE pattern`: messages on every channel matching a glob pattern.
    Pattern,
    /// `SSUBSCRIBE shardchannel` (Redis 7): messages published with
    /// `SPUBLISH`, which a cluster keeps on the shard owning the channel's slot.
    Shard,
}

impl SubscriptionKind {
    /// Every kind, in [`index`](Self::index) order.
    pub(crate) const ALL: [Self; 3] = [Self::Channel, Self::Pattern, Self::Shard];

    /// A dense index for per-kind tables.
    pub(crate) fn index(self) -> usize {
        match self {
            Self::Channel => 0,
            Self::Pattern => 1,
            Self::Shard => 2,
        }
    }

    pub(crate) fn subscribe_command(self) -> &'static str {
        match self {
            Self::Channel => "SUBSCRIBE",
            Self::Pattern => "PSUBSCRIBE",
            Self::Shard => "SSUBSCRIBE",
        }
    }

    pub(crate) fn unsubscribe_command(self) -> &'static str {
        match self {
            Self::Channel => "UNSUBSCRIBE",
            Self::Pattern => "PUNSUBSCRIBE",
            Self::Shard => "SUNSUBSCRIBE",
        }
    }
}

/// One thing a [`Subscription`](crate::Subscription) yields.
///
/// ```
/// use keylatch_cluster::Event;
/// fn handle(event: Event) {
///     match event {
///         Event::Message { channel, payload, .. } => println!("{channel:?}: {payload:?}"),
///         // Messages may have been lost: re-read whatever state they announce.
///         Event::Gap => {}
///         Event::Lagged(n) => eprintln!("{n} messages dropped: this listener is too slow"),
///         // `Event` is non-exhaustive: later versions may add kinds.
///         _ => {}
///     }
/// }
/// # handle(Event::Gap);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A published message.
    Message {
        /// The channel it was published on.
        channel: Bytes,
        /// For pattern subscriptions, the pattern that matched; `None` otherwise.
        pattern: Option<Bytes>,
        /// The message body.
        payload: Bytes,
    },
    /// The hub lost its connection and has subscribed again: messages
    /// published meanwhile are lost. Delivered once the subscription is live
    /// again, so state re-read after receiving it cannot miss a later message.
    Gap,
    /// This listener's queue was full and this many messages were dropped for
    /// it (other listeners of the channel were not affected). Delivered in the
    /// stream where the messages would have been.
    Lagged(u64),
}

/// A frame read on the subscriber connection, classified.
#[derive(Debug, PartialEq)]
pub(crate) enum Incoming {
    /// `message`, `pmessage` or `smessage`.
    Message {
        kind: SubscriptionKind,
        channel: Bytes,
        pattern: Option<Bytes>,
        payload: Bytes,
    },
    /// A (p|s)(un)subscribe confirmation for one name. Unsubscribe
    /// confirmations can also come unasked (a cluster node drops shard
    /// channels of a slot it no longer owns).
    Confirm {
        kind: SubscriptionKind,
        subscribed: bool,
        name: Bytes,
    },
    /// The reply to PING: `+PONG`, or `["pong", ""]` in RESP2 subscriber mode.
    Pong,
    /// An error reply (without the leading `-`).
    Error(Bytes),
    /// Anything else (e.g. a RESP3 client-side-caching invalidation); ignored.
    Other,
}

/// Classifies one frame read on a subscriber connection. RESP3 attributes,
/// on the frame or its elements, are seen through (and dropped).
pub(crate) fn classify(frame: Frame) -> Incoming {
    let items = match frame.into_value() {
        Frame::Push(items) | Frame::Array(items) => items,
        Frame::Error(line) => return Incoming::Error(line),
        Frame::Simple(ref s) if s.eq_ignore_ascii_case(b"PONG") => return Incoming::Pong,
        _ => return Incoming::Other,
    };
    let Some(tag) = items.first().and_then(Frame::as_bytes) else {
        return Incoming::Other;
    };
    let bytes_at = |i: usize| items.get(i).and_then(Frame::as_bytes).cloned();
    let message = |kind| match (bytes_at(1), bytes_at(2), items.len()) {
        (Some(channel), Some(payload), 3) => Incoming::Message {
            kind,
            channel,
            pattern: None,
            payload,
        },
        _ => Incoming::Other,
    };
    let confirm = |kind, subscribed| match (bytes_at(1), items.get(2).map(Frame::value)) {
        (Some(name), Some(Frame::Integer(_))) => Incoming::Confirm {
            kind,
            subscribed,
            name,
        },
        _ => Incoming::Other,
    };
    use SubscriptionKind::{Channel, Pattern, Shard};
    match tag.as_ref() {
        b"message" => message(Channel),
        b"smessage" => message(Shard),
        b"pmessage" => match (bytes_at(1), bytes_at(2), bytes_at(3), items.len()) {
            (Some(pattern), Some(channel), Some(payload), 4) => Incoming::Message {
                kind: Pattern,
                channel,
                pattern: Some(pattern),
                payload,
            },
            _ => Incoming::Other,
        },
        b"subscribe" => confirm(Channel, true),
        b"psubscribe" => confirm(Pattern, true),
        b"ssubscribe" => confirm(Shard, true),
        b"unsubscribe" => confirm(Channel, false),
        b"punsubscribe" => confirm(Pattern, false),
        b"sunsubscribe" => confirm(Shard, false),
        b"pong" => Incoming::Pong,
        _ => Incoming::Other,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test fails
mod tests {
    use super::*;

    fn bulk(s: &'static str) -> Frame {
        Frame::Bulk(Bytes::from_static(s.as_bytes()))
    }

    #[test]
    fn messages_in_both_protocols() {
        for wrap in [Frame::Array as fn(Vec<Frame>) -> Frame, Frame::Push] {
            assert_eq!(
                classify(wrap(vec![bulk("message"), bulk("ch"), bulk("hi")])),
                Incoming::Message {
                    kind: SubscriptionKind::Channel,
                    channel: "ch".into(),
                    pattern: None,
                    payload: "hi".into()
                }
            );
            assert_eq!(
                classify(wrap(vec![
                    bulk("pmessage"),
                    bulk("c*"),
                    bulk("ch"),
                    bulk("x")
                ])),
                Incoming::Message {
                    kind: SubscriptionKind::Pattern,
                    channel: "ch".into(),
                    pattern: Some("c*".into()),
                    payload: "x".into()
                }
            );
            assert_eq!(
                classify(wrap(vec![bulk("smessage"), bulk("s"), bulk("")])),
                Incoming::Message {
                    kind: SubscriptionKind::Shard,
                    channel: "s".into(),
                    pattern: None,
                    payload: Bytes::new()
                }
            );
        }
    }

    #[test]
    fn confirmations_pongs_and_errors() {
        let f = Frame::Push(vec![bulk("ssubscribe"), bulk("s1"), Frame::Integer(2)]);
        assert_eq!(
            classify(f),
            Incoming::Confirm {
                kind: SubscriptionKind::Shard,
                subscribed: true,
                name: "s1".into()
            }
        );
        let f = Frame::Array(vec![bulk("punsubscribe"), bulk("p*"), Frame::Integer(0)]);
        assert_eq!(
            classify(f),
            Incoming::Confirm {
                kind: SubscriptionKind::Pattern,
                subscribed: false,
                name: "p*".into()
            }
        );
        assert_eq!(
            classify(Frame::Array(vec![bulk("pong"), bulk("")])),
            Incoming::Pong
        );
        assert_eq!(classify(Frame::Simple("PONG".into())), Incoming::Pong);
        assert_eq!(
            classify(Frame::Error("NOPERM no".into())),
            Incoming::Error("NOPERM no".into())
        );
    }

    fn annotated(frame: Frame) -> Frame {
        Frame::Attributed(Box::new(keylatch_resp::Attributed {
            attributes: vec![(bulk("a"), Frame::Integer(1))],
            frame,
        }))
    }

    #[test]
    fn attributes_are_seen_through() {
        let f = annotated(Frame::Push(vec![
            annotated(bulk("message")),
            annotated(bulk("ch")),
            bulk("hi"),
        ]));
        assert!(matches!(classify(f), Incoming::Message { .. }));
        let f = Frame::Push(vec![
            bulk("subscribe"),
            bulk("c"),
            annotated(Frame::Integer(1)),
        ]);
        assert!(matches!(classify(f), Incoming::Confirm { .. }));
        assert_eq!(
            classify(annotated(Frame::Error("NOPERM no".into()))),
            Incoming::Error("NOPERM no".into())
        );
        assert_eq!(
            classify(annotated(Frame::Simple("PONG".into()))),
            Incoming::Pong
        );
    }

    #[test]
    fn malformed_or_foreign_frames_are_other() {
        // UNSUBSCRIBE with no channels while subscribed to none: null name.
        let f = Frame::Array(vec![bulk("unsubscribe"), Frame::Null, Frame::Integer(0)]);
        assert_eq!(classify(f), Incoming::Other);
        assert_eq!(
            classify(Frame::Push(vec![bulk("message"), bulk("ch")])),
            Incoming::Other
        );
        assert_eq!(
            classify(Frame::Push(vec![bulk("invalidate"), Frame::Null])),
            Incoming::Other
        );
        assert_eq!(classify(Frame::Integer(1)), Incoming::Other);
        assert_eq!(classify(Frame::Array(vec![])), Incoming::Other);
    }
}
