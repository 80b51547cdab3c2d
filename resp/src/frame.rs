//! The [`Frame`] type: one decoded RESP2 or RESP3 value.

use std::fmt;

use bytes::Bytes;

use crate::encode::DoubleText;

/// One RESP2 or RESP3 value, as received from a server.
///
/// Byte payloads are [`Bytes`] slices of the read buffer (no copy). A frame the server
/// annotated with RESP3 attributes (`|`) comes wrapped in [`Frame::Attributed`], wherever it
/// sits in the reply; [`value`](Self::value) sees through the wrapper and
/// [`attributes`](Self::attributes) reads what it carries. Streamed types are rejected.
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
    /// A frame preceded on the wire by RESP3 attributes: `|<n>\r\n` then n key/value pairs,
    /// then the frame they annotate. Boxed, so frames without attributes pay nothing (the
    /// enum does not grow). The decoder builds it only when attributes were sent, never nests
    /// it directly (attributes in a row are merged into one list), and uses it for elements
    /// of aggregates too.
    Attributed(Box<Attributed>),
}

/// A frame with the RESP3 attributes that preceded it, the payload of
/// [`Frame::Attributed`].
///
/// ```
/// use bytes::BytesMut;
/// use keylatch_resp::{Attributed, Decoder, Frame};
///
/// let mut buf = BytesMut::from(&b"|1\r\n+ttl\r\n:3\r\n$2\r\nhi\r\n"[..]);
/// let frame = Decoder::default().decode(&mut buf)?.unwrap();
/// let want = Attributed {
///     attributes: vec![(Frame::Simple("ttl".into()), Frame::Integer(3))],
///     frame: Frame::Bulk("hi".into()),
/// };
/// assert_eq!(frame, Frame::Attributed(Box::new(want)));
/// # Ok::<(), keylatch_resp::ProtocolError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Attributed {
    /// The attribute pairs, in wire order (several attributes in a row are merged here).
    pub attributes: Vec<(Frame, Frame)>,
    /// The frame they annotate.
    pub frame: Frame,
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
    /// Sees through [`Attributed`](Self::Attributed).
    pub fn as_bytes(&self) -> Option<&Bytes> {
        match self.value() {
            Self::Simple(b) | Self::Bulk(b) | Self::BigNumber(b) => Some(b),
            Self::Verbatim { text, .. } => Some(text),
            _ => None,
        }
    }

    /// Whether this is an error reply (simple or blob), with or without attributes.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use keylatch_resp::Frame;
    ///
    /// assert!(Frame::Error(Bytes::from_static(b"ERR no")).is_error());
    /// assert!(!Frame::Null.is_error());
    /// ```
    pub fn is_error(&self) -> bool {
        matches!(self.value(), Self::Error(_))
    }

    /// The frame itself, seeing through [`Attributed`](Self::Attributed) wrappers: what to
    /// `match` on when attributes do not matter. Free for a frame without attributes.
    ///
    /// ```
    /// use keylatch_resp::{Attributed, Frame};
    ///
    /// let plain = Frame::Integer(3);
    /// assert_eq!(plain.value(), &Frame::Integer(3));
    /// let annotated = Frame::Attributed(Box::new(Attributed {
    ///     attributes: vec![(Frame::Simple("ttl".into()), Frame::Integer(9))],
    ///     frame: Frame::Integer(3),
    /// }));
    /// assert!(matches!(annotated.value(), Frame::Integer(3)));
    /// ```
    pub fn value(&self) -> &Frame {
        let mut frame = self;
        while let Self::Attributed(a) = frame {
            frame = &a.frame;
        }
        frame
    }

    /// The frame itself, its attributes (at this level) dropped: the owned
    /// [`value`](Self::value). Elements of an aggregate keep theirs.
    ///
    /// ```
    /// use keylatch_resp::{Attributed, Frame};
    ///
    /// let annotated = Frame::Attributed(Box::new(Attributed {
    ///     attributes: vec![(Frame::Simple("ttl".into()), Frame::Integer(9))],
    ///     frame: Frame::Array(vec![Frame::Null]),
    /// }));
    /// assert_eq!(annotated.into_value(), Frame::Array(vec![Frame::Null]));
    /// assert_eq!(Frame::Null.into_value(), Frame::Null);
    /// ```
    pub fn into_value(self) -> Frame {
        let mut frame = self;
        while let Self::Attributed(a) = frame {
            frame = a.frame;
        }
        frame
    }

    /// The attributes that preceded this frame on the wire, or `None` when there were none
    /// (for an element of an aggregate, ask the element).
    ///
    /// ```
    /// use bytes::BytesMut;
    /// use keylatch_resp::{Decoder, Frame};
    ///
    /// let mut buf = BytesMut::from(&b"|1\r\n+ttl\r\n:3\r\n+OK\r\n:1\r\n"[..]);
    /// let mut decoder = Decoder::default();
    /// let ok = decoder.decode(&mut buf)?.unwrap();
    /// assert_eq!(ok.attributes(), Some(&[(Frame::Simple("ttl".into()), Frame::Integer(3))][..]));
    /// assert_eq!(ok, "OK");
    /// let one = decoder.decode(&mut buf)?.unwrap();
    /// assert_eq!(one.attributes(), None);
    /// # Ok::<(), keylatch_resp::ProtocolError>(())
    /// ```
    pub fn attributes(&self) -> Option<&[(Frame, Frame)]> {
        match self {
            Self::Attributed(a) => Some(&a.attributes),
            _ => None,
        }
    }

    /// Splits off the attributes: the frame they annotate and the attributes, or this frame
    /// unchanged and `None`. Undoes one [`Attributed`](Self::Attributed) wrapper (the decoder
    /// never makes more than one in a row).
    ///
    /// ```
    /// use keylatch_resp::{Attributed, Frame};
    ///
    /// let annotated = Frame::Attributed(Box::new(Attributed {
    ///     attributes: vec![(Frame::Simple("ttl".into()), Frame::Integer(9))],
    ///     frame: Frame::Integer(3),
    /// }));
    /// let (frame, attributes) = annotated.into_parts();
    /// assert_eq!(frame, Frame::Integer(3));
    /// assert_eq!(attributes.map(|a| a.len()), Some(1));
    /// assert_eq!(Frame::Null.into_parts(), (Frame::Null, None));
    /// ```
    pub fn into_parts(self) -> (Frame, Option<Vec<(Frame, Frame)>>) {
        match self {
            Self::Attributed(a) => {
                let Attributed { attributes, frame } = *a;
                (frame, Some(attributes))
            }
            frame => (frame, None),
        }
    }

    /// The frame as shown in an error message: its [`Display`](fmt::Display)
    /// text's first 120 bytes, then `…` if it goes on. Rendering stops
    /// there, so a huge reply of the wrong shape (a 512 MiB bulk where an
    /// integer was expected) costs no huge string.
    ///
    /// ```
    /// use keylatch_resp::Frame;
    /// assert_eq!(Frame::Integer(7).shown(), "(integer) 7");
    /// let huge = Frame::Bulk(vec![b'x'; 1 << 20].into());
    /// let text = huge.shown();
    /// assert!(text.len() < 130 && text.ends_with('…'));
    /// ```
    pub fn shown(&self) -> String {
        use fmt::Write as _;
        let mut out = Bounded {
            text: String::with_capacity(SHOWN + '…'.len_utf8()),
            cut: false,
        };
        // An error here only says the text was cut.
        let _ = write!(out, "{self}");
        if out.cut {
            out.text.push('…');
        }
        out.text
    }
}

/// How much of a frame [`Frame::shown`] shows, in bytes.
const SHOWN: usize = 120;

/// Keeps the first [`SHOWN`] bytes (whole chars), then refuses more.
struct Bounded {
    text: String,
    cut: bool,
}

impl fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = SHOWN - self.text.len();
        if s.len() <= room {
            self.text.push_str(s);
            return Ok(());
        }
        let mut end = room;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.text.push_str(&s[..end]);
        self.cut = true;
        // Stops the rest of the frame's formatting.
        Err(fmt::Error)
    }
}

/// One line, in the spirit of `redis-cli`: meant for logs, not for parsing back. Attributes
/// come first, between bars: `|{ttl: (integer) 3}| "v"`.
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
            Self::Map(m) => pairs(f, m),
            Self::Double(d) => {
                let text = DoubleText::new(*d);
                write!(f, "(double) {}", text.as_bytes().escape_ascii())
            }
            Self::Boolean(b) => write!(f, "({b})"),
            Self::BigNumber(n) => write!(f, "(big number) {}", n.escape_ascii()),
            Self::Verbatim { format, text } => {
                write!(f, "{}:\"{}\"", format.escape_ascii(), text.escape_ascii())
            }
            Self::Attributed(a) => {
                f.write_str("|")?;
                pairs(f, &a.attributes)?;
                write!(f, "| {}", a.frame)
            }
        }
    }
}

fn pairs(f: &mut fmt::Formatter<'_>, pairs: &[(Frame, Frame)]) -> fmt::Result {
    f.write_str("{")?;
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{k}: {v}")?;
    }
    f.write_str("}")
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
/// bytes, with or without attributes; every other variant is unequal to any string.
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
        match self.value() {
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

    fn annotated(frame: Frame) -> Frame {
        Frame::Attributed(Box::new(Attributed {
            attributes: vec![(Frame::Simple(b("ttl")), Frame::Integer(3))],
            frame,
        }))
    }

    #[test]
    fn accessors_see_through_attributes() {
        let f = annotated(Frame::Bulk(b("v")));
        assert_eq!(f, "v");
        assert_eq!(f.as_bytes(), Some(&b("v")));
        assert_eq!(f.value(), &Frame::Bulk(b("v")));
        assert_eq!(
            f.attributes(),
            Some(&[(Frame::Simple(b("ttl")), Frame::Integer(3))][..])
        );
        assert!(annotated(Frame::Error(b("ERR x"))).is_error());
        assert!(!annotated(Frame::Null).is_error());
        // Wrappers built by hand may nest: `value` sees through all of them, `into_parts`
        // undoes one.
        let twice = annotated(annotated(Frame::Integer(1)));
        assert_eq!(twice.value(), &Frame::Integer(1));
        let (inner, attributes) = twice.clone().into_parts();
        assert_eq!(inner, annotated(Frame::Integer(1)));
        assert_eq!(attributes.map(|a| a.len()), Some(1));
        assert_eq!(twice.into_value(), Frame::Integer(1));
        // Structural equality still tells them apart.
        assert_ne!(f, Frame::Bulk(b("v")));
    }

    #[test]
    fn display_shows_attributes() {
        let f = Frame::Array(vec![annotated(Frame::Bulk(b("v"))), Frame::Null]);
        assert_eq!(f.to_string(), r#"[|{ttl: (integer) 3}| "v", (nil)]"#);
    }
}
