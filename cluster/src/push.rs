//! Out-of-band RESP3 push frames on a request connection (client-side
//! caching invalidations), handed to a callback that must not block.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use keylatch_resp::Frame;

/// What an `invalidate` push says.
///
/// ```
/// use keylatch_cluster::Invalidation;
/// let keys = Invalidation::Keys(vec![bytes::Bytes::from_static(b"orders")]);
/// assert_ne!(keys, Invalidation::All);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invalidation {
    /// These keys were modified, deleted or expired.
    Keys(Vec<Bytes>),
    /// Everything may have changed (FLUSHALL, the server's tracking table
    /// overflowed, or the connection was re-established and the server
    /// forgot what it tracked: read again to track again).
    All,
}

type Callback = dyn Fn(Invalidation) + Send + Sync;

/// Turns on client-side-caching tracking (`CLIENT TRACKING ON NOLOOP`, RESP3
/// only) on every connection made with it, and receives the invalidations:
/// after a connection reads a key, a change to that key by *another*
/// connection (or its expiry) is pushed here once. The callback runs on the
/// connection task: it must be quick and must not block (send to a channel).
///
/// ```
/// use keylatch_cluster::{ConnectionConfig, InvalidationHandler};
/// let (tx, _rx) = std::sync::mpsc::channel();
/// let handler = InvalidationHandler::new(move |inv| { let _ = tx.send(inv); });
/// let cfg = ConnectionConfig::default().tracking(handler);
/// assert!(cfg.tracking.is_some());
/// ```
#[derive(Clone)]
pub struct InvalidationHandler(Arc<Callback>);

impl InvalidationHandler {
    /// Wraps a callback.
    ///
    /// ```
    /// use keylatch_cluster::InvalidationHandler;
    /// // Quick and non-blocking: hand each invalidation to a channel.
    /// let (tx, _rx) = std::sync::mpsc::channel();
    /// let handler = InvalidationHandler::new(move |inv| { let _ = tx.send(inv); });
    /// // Handlers compare by identity: clones are equal, other handlers are not.
    /// assert_eq!(handler.clone(), handler);
    /// assert_ne!(handler, InvalidationHandler::new(|_| {}));
    /// ```
    pub fn new(f: impl Fn(Invalidation) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// The connection was (re)established: tracking starts from nothing.
    pub(crate) fn reset(&self) {
        (self.0)(Invalidation::All);
    }

    /// Interprets a push frame; calls the callback for invalidations.
    pub(crate) fn handle(&self, frame: &Frame) {
        if let Some(inv) = parse(frame) {
            (self.0)(inv);
        }
    }
}

impl fmt::Debug for InvalidationHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("InvalidationHandler")
    }
}

/// Handlers compare by identity, so configurations stay comparable.
impl PartialEq for InvalidationHandler {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for InvalidationHandler {}

/// The invalidation a push frame carries, if it is one.
pub(crate) fn parse(frame: &Frame) -> Option<Invalidation> {
    // RESP3 attributes, on the push or its elements, are seen through.
    let Frame::Push(items) = frame.value() else {
        return None;
    };
    let [kind, keys] = items.as_slice() else {
        return None;
    };
    if kind.as_bytes().map(|b| b.as_ref()) != Some(&b"invalidate"[..]) {
        return None;
    }
    match keys.value() {
        Frame::Null => Some(Invalidation::All),
        Frame::Array(ks) | Frame::Set(ks) => Some(Invalidation::Keys(
            ks.iter().filter_map(|k| k.as_bytes().cloned()).collect(),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_invalidations_only() {
        let inv = Frame::Push(vec![
            Frame::Bulk(Bytes::from_static(b"invalidate")),
            Frame::Array(vec![Frame::Bulk(Bytes::from_static(b"k"))]),
        ]);
        assert_eq!(
            parse(&inv),
            Some(Invalidation::Keys(vec![Bytes::from_static(b"k")]))
        );
        let all = Frame::Push(vec![
            Frame::Bulk(Bytes::from_static(b"invalidate")),
            Frame::Null,
        ]);
        assert_eq!(parse(&all), Some(Invalidation::All));
        let msg = Frame::Push(vec![
            Frame::Bulk(Bytes::from_static(b"message")),
            Frame::Bulk(Bytes::from_static(b"c")),
        ]);
        assert_eq!(parse(&msg), None);
        assert_eq!(parse(&Frame::Integer(1)), None);
        // RESP3 attributes on the push or its elements change nothing.
        let annotated = |frame| {
            Frame::Attributed(Box::new(keylatch_resp::Attributed {
                attributes: vec![(Frame::Simple(Bytes::from_static(b"a")), Frame::Null)],
                frame,
            }))
        };
        let inv = annotated(Frame::Push(vec![
            annotated(Frame::Bulk(Bytes::from_static(b"invalidate"))),
            annotated(Frame::Null),
        ]));
        assert_eq!(parse(&inv), Some(Invalidation::All));
    }
}
