//! The [`Frame`] type: one decoded RESP2 or RESP3 value.

use std::fmt;

use bytes::Bytes;

use crate::encode::DoubleText;

/// One RESP2 or RESP3 value, as received from a server.
///
/// Byte payloads are [`Bytes`] slices of the read buffer (no copy). RESP3 attributes (`|`) are
/// never represented: the decoder validates and skips them. Streamed types are rejected.
///
/// ```
/// use bytes::{Bytes, BytesMut};
/// use keylatch_resp::Frame;
///
/// let reply = Frame::Array(vec![Frame::Bulk(Bytes::from_static(b"a")), Frame::Integer(-2)]);
/// let mut out = BytesMut::new();
/// reply.encode(&mut out);
/// assert_eq!(&out[..], b"*2\r\n$1\r\na\r\n:-2\r\n");
/// assert_eq!(reply.to_string(), r#"["a", (integer) -2]"#);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// Simple string: `+OK\r\n`.
    Simple(Bytes),
    /// Error: `-ERR ...\r\n`, or the RESP3 blob error `!<len>\r\n...\r\n`. Holds the text
    /// without the `-`.
    Error(Bytes),
    /// Integer: `:<i64>\r\n`.
    Integer(i64),
    /// Bulk string: `$<len>\r\n<bytes>\r\n`.
    Bulk(Bytes),
    /// Null: RESP2 `$-1\r\n` and `*-1\r\n`, RESP3 `_\r\n`.
    Null,
    /// Array: `*<n>\r\n` then n frames.
    Array(Vec<Frame>),
    /// RESP3 map: `%<n>\r\n` then n key/value pairs, in wire order.
    Map(Vec<(Frame, Frame)>),
    /// RESP3 set: `~<n>\r\n` then n frames, in wire order.
    Set(Vec<Frame>),
    /// RESP3 push (pub/sub messages, invalidations): `><n>\r\n` then n frames.
    Push(Vec<Frame>),
    /// RESP3 double: `,<float>\r\n`, including `inf`, `-inf` and `nan`.
    Double(f64),
    /// RESP3 boolean: `#t\r\n` or `#f\r\n`.
    Boolean(bool),
    /// RESP3 big number: `(<digits>\r\n`, digits with an optional leading `-`.
    BigNumber(Bytes),
    /// RESP3 verbatim string: `=<len>\r\n<fmt>:<text>\r\n`.
    Verbatim {
        /// The three-byte format, such as `txt` or `mkd`.
        format: [u8; 3],
        /// The text after `<fmt>:`.
        text: Bytes,
    },
}

impl Frame {
    /// The payload of a string-like frame: `Simple`, `Bulk`, the text of `Verbatim`, and
    /// `BigNumber`. `None` for every other variant, errors included.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use keylatch_resp::Frame;
    ///
    /// assert_eq!(Frame::Simple(Bytes::from_static(b"OK")).as_bytes().unwrap(), "OK");
    /// assert!(Frame::Integer(1).as_bytes().is_none());
    /// ```
    pub fn as_bytes(&self) -> Option<&Bytes> {
        match self {
            Self::Simple(b) | Self::Bulk(b) | Self::BigNumber(b) => Some(b),
            Self::Verbatim { text, .. } => Some(text),
            _ => None,
        }
    }

    /// Whether this is an error reply (simple or blob).
    ///
    /// ```
    /// use bytes::Bytes;
    /// use keylatch_resp::Frame;
    ///
    /// assert!(Frame::Error(Bytes::from_static(b"ERR no")).is_error());
    /// assert!(!Frame::Null.is_error());
    /// ```
    pub fn is_error(&self) -> bool {
        matches!(self, Self::Error(_))
    }
}

/// One line, in the spirit of `redis-cli`: meant for logs, not for parsing back.
impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Simple(s) => write!(f, "{}", s.escape_ascii()),
            Self::Error(s) => write!(f, "(error) {}", s.escape_ascii()),
            Self::Integer(i) => write!(f, "(integer) {i}"),
            Self::Bulk(b) => write!(f, "\"{}\"", b.escape_ascii()),
            Self::Null => f.write_str("(nil)"),
            Self::Array(v) => list(f, "[", v, "]"),
            Self::Set(v) => list(f, "~{", v, "}"),
            Self::Push(v) => list(f, ">[", v, "]"),
            Self::Map(pairs) => {
                f.write_str("{")?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                f.write_str("}")
            }
            Self::Double(d) => {
                let text = DoubleText::new(*d);
                write!(f, "(double) {}", text.as_bytes().escape_ascii())
            }
            Self::Boolean(b) => write!(f, "({b})"),
            Self::BigNumber(n) => write!(f, "(big number) {}", n.escape_ascii()),
            Self::Verbatim { format, text } => {
                write!(f, "{}:\"{}\"", format.escape_ascii(), text.escape_ascii())
            }
        }
    }
}

fn list(f: &mut fmt::Formatter<'_>, open: &str, items: &[Frame], close: &str) -> fmt::Result {
    f.write_str(open)?;
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{item}")?;
    }
    f.write_str(close)
}

/// `Simple`, `Bulk`, `Verbatim` (its text) and `Error` compare equal to a string with the same
/// bytes; every other variant is unequal to any string.
///
/// ```
/// use bytes::Bytes;
/// use keylatch_resp::Frame;
///
/// assert_eq!(Frame::Bulk(Bytes::from_static(b"v1")), "v1");
/// assert_ne!(Frame::Integer(1), "1");
/// ```
impl PartialEq<&str> for Frame {
    fn eq(&self, other: &&str) -> bool {
        match self {
            Self::Simple(b) | Self::Bulk(b) | Self::Error(b) => b == other.as_bytes(),
            Self::Verbatim { text, .. } => text == other.as_bytes(),
            _ => false,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test fails
mod tests {
    use super::*;

    fn b(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    #[test]
    fn display_is_one_line() {
        let f = Frame::Map(vec![
            (
                Frame::Simple(b("k")),
                Frame::Set(vec![Frame::Boolean(true)]),
            ),
            (Frame::Bulk(b("a\r\n")), Frame::Push(vec![Frame::Null])),
        ]);
        assert_eq!(f.to_string(), r#"{k: ~{(true)}, "a\r\n": >[(nil)]}"#);
        assert_eq!(Frame::Error(b("ERR x")).to_string(), "(error) ERR x");
        assert_eq!(
            Frame::Double(f64::NEG_INFINITY).to_string(),
            "(double) -inf"
        );
        assert_eq!(Frame::BigNumber(b("-12")).to_string(), "(big number) -12");
        let v = Frame::Verbatim {
            format: *b"txt",
            text: b("hi"),
        };
        assert_eq!(v.to_string(), "txt:\"hi\"");
    }

    #[test]
    fn str_equality_and_accessors() {
        assert_eq!(Frame::Simple(b("OK")), "OK");
        assert_eq!(Frame::Error(b("ERR")), "ERR");
        let v = Frame::Verbatim {
            format: *b"txt",
            text: b("hi"),
        };
        assert_eq!(v, "hi");
        assert_eq!(v.as_bytes(), Some(&b("hi")));
        assert_ne!(Frame::Null, "");
        assert_ne!(Frame::BigNumber(b("1")), "1");
        assert_eq!(Frame::BigNumber(b("1")).as_bytes(), Some(&b("1")));
        assert!(Frame::Error(b("E")).as_bytes().is_none());
    }
}
