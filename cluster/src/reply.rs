//! Converting reply frames into Rust values.

use bytes::Bytes;
use keylatch_resp::Frame;

use crate::error::{Error, Result, ServerError};

/// A type a reply frame converts into.
///
/// Error replies never reach `from_reply`: they become
/// [`Error::Server`] before conversion. Conversions accept both the RESP2 and
/// the RESP3 shape of a reply (e.g. an array of pairs or a map).
///
/// RESP3 attributes ([`Frame::Attributed`]) are seen through, on the reply and
/// on each element: an `i64` converts from an attributed integer. Only the
/// conversion to [`Frame`] itself keeps them, so a caller who wants them asks
/// for the frame and reads [`Frame::attributes`].
///
/// ```
/// use keylatch_cluster::FromReply;
/// use keylatch_resp::{Attributed, Frame};
/// assert_eq!(i64::from_reply(Frame::Integer(7)).unwrap(), 7);
/// assert_eq!(Option::<i64>::from_reply(Frame::Null).unwrap(), None);
/// let annotated = Frame::Attributed(Box::new(Attributed {
///     attributes: vec![(Frame::Simple("ttl".into()), Frame::Integer(3))],
///     frame: Frame::Integer(7),
/// }));
/// assert_eq!(i64::from_reply(annotated.clone()).unwrap(), 7);
/// assert!(Frame::from_reply(annotated).unwrap().attributes().is_some());
/// ```
pub trait FromReply: Sized {
    /// Converts one (non-error) frame.
    ///
    /// # Errors
    /// [`Error::UnexpectedReply`] when the frame has another shape.
    fn from_reply(frame: Frame) -> Result<Self>;
}

/// Turns an error frame into `Err`, anything else into `Ok` (unchanged,
/// attributes included). An error with attributes is an error: they are
/// dropped with it.
pub(crate) fn check(frame: Frame) -> Result<Frame> {
    match frame {
        Frame::Error(line) => Err(Error::Server(ServerError::parse(line))),
        Frame::Attributed(a) if a.frame.is_error() => check(a.frame),
        f => Ok(f),
    }
}

fn unexpected<T>(want: &str, got: &Frame) -> Result<T> {
    let shown = shown(got);
    Err(Error::UnexpectedReply(format!(
        "expected {want}, got {shown}"
    )))
}

/// A frame as shown in an error message ([`Frame::shown`]).
pub(crate) fn shown(got: &Frame) -> String {
    got.shown()
}

/// The frame as received, RESP3 attributes included.
impl FromReply for Frame {
    fn from_reply(frame: Frame) -> Result<Self> {
        Ok(frame)
    }
}

impl FromReply for () {
    fn from_reply(_: Frame) -> Result<Self> {
        Ok(())
    }
}

impl FromReply for i64 {
    fn from_reply(frame: Frame) -> Result<Self> {
        let frame = frame.into_value();
        match &frame {
            Frame::Integer(i) => Ok(*i),
            Frame::Simple(b) | Frame::Bulk(b) | Frame::BigNumber(b) => std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse().ok())
                .map_or_else(|| unexpected("an integer", &frame), Ok),
            Frame::Boolean(b) => Ok(i64::from(*b)),
            _ => unexpected("an integer", &frame),
        }
    }
}

impl FromReply for u64 {
    fn from_reply(frame: Frame) -> Result<Self> {
        let shown = frame.clone();
        let i = i64::from_reply(frame)?;
        u64::try_from(i).map_or_else(|_| unexpected("a non-negative integer", &shown), Ok)
    }
}

impl FromReply for f64 {
    fn from_reply(frame: Frame) -> Result<Self> {
        let frame = frame.into_value();
        match &frame {
            Frame::Double(d) => Ok(*d),
            #[allow(clippy::cast_precision_loss)]
            Frame::Integer(i) => Ok(*i as f64),
            Frame::Simple(b) | Frame::Bulk(b) => std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse().ok())
                .map_or_else(|| unexpected("a number", &frame), Ok),
            _ => unexpected("a number", &frame),
        }
    }
}

impl FromReply for bool {
    fn from_reply(frame: Frame) -> Result<Self> {
        let frame = frame.into_value();
        match &frame {
            Frame::Boolean(b) => Ok(*b),
            Frame::Integer(i) => Ok(*i != 0),
            Frame::Simple(_) => Ok(true),
            Frame::Null => Ok(false),
            _ => unexpected("a boolean", &frame),
        }
    }
}

impl FromReply for Bytes {
    fn from_reply(frame: Frame) -> Result<Self> {
        match frame.into_value() {
            Frame::Bulk(b) | Frame::Simple(b) | Frame::BigNumber(b) => Ok(b),
            Frame::Verbatim { text, .. } => Ok(text),
            other => unexpected("a string", &other),
        }
    }
}

impl FromReply for Vec<u8> {
    fn from_reply(frame: Frame) -> Result<Self> {
        Bytes::from_reply(frame).map(Vec::from)
    }
}

impl FromReply for String {
    fn from_reply(frame: Frame) -> Result<Self> {
        if let Frame::Integer(i) = frame.value() {
            return Ok(i.to_string());
        }
        let b = Bytes::from_reply(frame)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| Error::UnexpectedReply("expected UTF-8 text".to_owned()))
    }
}

impl<T: FromReply> FromReply for Option<T> {
    fn from_reply(frame: Frame) -> Result<Self> {
        match frame.value() {
            Frame::Null => Ok(None),
            _ => T::from_reply(frame).map(Some),
        }
    }
}

impl<T: FromReply> FromReply for Vec<T> {
    fn from_reply(frame: Frame) -> Result<Self> {
        match frame.into_value() {
            Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => items
                .into_iter()
                .map(|f| T::from_reply(check(f)?))
                .collect(),
            Frame::Map(pairs) => {
                let mut out = Vec::with_capacity(pairs.len() * 2);
                for (k, v) in pairs {
                    out.push(T::from_reply(check(k)?)?);
                    out.push(T::from_reply(check(v)?)?);
                }
                Ok(out)
            }
            Frame::Null => Ok(Vec::new()),
            other => unexpected("an array", &other),
        }
    }
}

/// Key/value pairs from a RESP3 map or a flat RESP2 array.
impl<K: FromReply, V: FromReply> FromReply for Vec<(K, V)> {
    fn from_reply(frame: Frame) -> Result<Self> {
        match frame.into_value() {
            Frame::Map(pairs) => pairs
                .into_iter()
                .map(|(k, v)| Ok((K::from_reply(check(k)?)?, V::from_reply(check(v)?)?)))
                .collect(),
            Frame::Array(items) if items.len() % 2 == 0 => {
                let mut out = Vec::with_capacity(items.len() / 2);
                let mut it = items.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    out.push((K::from_reply(check(k)?)?, V::from_reply(check(v)?)?));
                }
                Ok(out)
            }
            Frame::Null => Ok(Vec::new()),
            other => unexpected("a map", &other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &'static str) -> Frame {
        Frame::Bulk(Bytes::from_static(s.as_bytes()))
    }

    #[test]
    fn scalars() {
        assert_eq!(i64::from_reply(bulk("-12")).unwrap(), -12);
        assert!(i64::from_reply(bulk("x")).is_err());
        assert!(u64::from_reply(Frame::Integer(-1)).is_err());
        assert!(bool::from_reply(Frame::Integer(1)).unwrap());
        assert!(!bool::from_reply(Frame::Null).unwrap());
        assert_eq!(String::from_reply(bulk("hi")).unwrap(), "hi");
        assert_eq!(f64::from_reply(Frame::Double(1.5)).unwrap(), 1.5);
        assert_eq!(Option::<Bytes>::from_reply(Frame::Null).unwrap(), None);
    }

    #[test]
    fn maps_in_both_protocols() {
        let resp2 = Frame::Array(vec![bulk("a"), bulk("1"), bulk("b"), bulk("2")]);
        let resp3 = Frame::Map(vec![
            (bulk("a"), Frame::Integer(1)),
            (bulk("b"), Frame::Integer(2)),
        ]);
        let want = vec![("a".to_owned(), 1i64), ("b".to_owned(), 2)];
        assert_eq!(Vec::<(String, i64)>::from_reply(resp2).unwrap(), want);
        assert_eq!(Vec::<(String, i64)>::from_reply(resp3).unwrap(), want);
    }

    fn annotated(frame: Frame) -> Frame {
        Frame::Attributed(Box::new(keylatch_resp::Attributed {
            attributes: vec![(bulk("ttl"), Frame::Integer(3))],
            frame,
        }))
    }

    #[test]
    fn attributes_are_seen_through_except_by_frame() {
        assert_eq!(i64::from_reply(annotated(Frame::Integer(7))).unwrap(), 7);
        assert_eq!(u64::from_reply(annotated(bulk("8"))).unwrap(), 8);
        assert_eq!(f64::from_reply(annotated(Frame::Double(0.5))).unwrap(), 0.5);
        assert!(bool::from_reply(annotated(Frame::Boolean(true))).unwrap());
        assert_eq!(
            String::from_reply(annotated(Frame::Integer(4))).unwrap(),
            "4"
        );
        assert_eq!(String::from_reply(annotated(bulk("s"))).unwrap(), "s");
        assert_eq!(
            Option::<i64>::from_reply(annotated(Frame::Null)).unwrap(),
            None
        );
        // On the reply and on its elements.
        let list = annotated(Frame::Array(vec![
            annotated(Frame::Integer(1)),
            Frame::Integer(2),
        ]));
        assert_eq!(Vec::<i64>::from_reply(list.clone()).unwrap(), [1, 2]);
        let frames = Vec::<Frame>::from_reply(list.clone()).unwrap();
        assert_eq!(frames[0], annotated(Frame::Integer(1)));
        let map = annotated(Frame::Map(vec![(
            annotated(bulk("a")),
            annotated(bulk("1")),
        )]));
        assert_eq!(
            Vec::<(String, i64)>::from_reply(map).unwrap(),
            [("a".to_owned(), 1)]
        );
        // The frame itself keeps them.
        assert_eq!(Frame::from_reply(list.clone()).unwrap(), list);
        // An error with attributes is an error.
        let err = annotated(Frame::Error(Bytes::from_static(b"NOSCRIPT x")));
        assert!(matches!(check(err.clone()), Err(Error::Server(_))));
        assert!(matches!(
            Vec::<i64>::from_reply(Frame::Array(vec![err])),
            Err(Error::Server(_))
        ));
        assert_eq!(
            check(annotated(Frame::Null)).unwrap(),
            annotated(Frame::Null)
        );
    }

    #[test]
    fn a_huge_reply_of_the_wrong_shape_is_shown_cut() {
        let huge = Frame::Bulk(Bytes::from(vec![b'x'; 1 << 20]));
        let Err(Error::UnexpectedReply(m)) = i64::from_reply(huge) else {
            panic!("not an integer");
        };
        assert!(m.len() < 200 && m.ends_with('…'), "{m}");
        // Exactly as long as shown: whole, no ellipsis; one more byte: cut.
        let fits = Frame::Simple(Bytes::from(vec![b'y'; 120]));
        assert_eq!(shown(&fits), "y".repeat(120));
        let over = Frame::Simple(Bytes::from(vec![b'y'; 121]));
        assert_eq!(shown(&over), format!("{}…", "y".repeat(120)));
        assert_eq!(shown(&Frame::Integer(-2)), "(integer) -2");
    }

    #[test]
    fn nested_errors_surface() {
        let f = Frame::Array(vec![
            Frame::Integer(1),
            Frame::Error(Bytes::from_static(b"ERR x")),
        ]);
        assert!(matches!(Vec::<i64>::from_reply(f), Err(Error::Server(_))));
    }
}
