//! Writing a [`Frame`] back to bytes, plus the number formatting shared with [`Cmd`](crate::Cmd).

use std::fmt::{self, Write as _};

use bytes::BytesMut;

use crate::Frame;

impl Frame {
    /// The exact number of bytes [`encode`](Self::encode) writes.
    ///
    /// ```
    /// use keylatch_resp::Frame;
    ///
    /// assert_eq!(Frame::Integer(-12).encoded_len(), b":-12\r\n".len());
    /// ```
    pub fn encoded_len(&self) -> usize {
        match self {
            Self::Simple(s) | Self::Error(s) | Self::BigNumber(s) => {
                if has_line_break(s) {
                    blob_len(s.len())
                } else {
                    s.len() + 3
                }
            }
            Self::Integer(i) => itoa::Buffer::new().format(*i).len() + 3,
            Self::Bulk(b) => blob_len(b.len()),
            Self::Null => 3,
            Self::Array(v) | Self::Set(v) | Self::Push(v) => {
                header_len(v.len()) + v.iter().map(Frame::encoded_len).sum::<usize>()
            }
            Self::Map(pairs) => pairs_len(pairs),
            Self::Double(d) => DoubleText::new(*d).as_bytes().len() + 3,
            Self::Boolean(_) => 4,
            Self::Verbatim { text, .. } => blob_len(text.len() + 4),
            Self::Attributed(a) => pairs_len(&a.attributes) + a.frame.encoded_len(),
        }
    }

    /// Appends the RESP3 encoding of this frame to `dst`, reserving
    /// [`encoded_len`](Self::encoded_len) bytes once.
    ///
    /// Every frame the decoder returns encodes back to an equivalent frame. Text that cannot
    /// sit on one line is written length-prefixed, so the stream stays intact: an `Error`
    /// containing `\r` or `\n` becomes a blob error (`!`), a `Simple` or `BigNumber` containing
    /// one becomes a bulk string. `Null` is written as RESP3 `_\r\n`. An
    /// [`Attributed`](Self::Attributed) frame is written as its attribute (`|<n>` and the
    /// pairs) followed by the frame, as the server sent it.
    ///
    /// ```
    /// use bytes::{Bytes, BytesMut};
    /// use keylatch_resp::Frame;
    ///
    /// let mut out = BytesMut::new();
    /// Frame::Error(Bytes::from_static(b"ERR a\nb")).encode(&mut out);
    /// Frame::Double(f64::INFINITY).encode(&mut out);
    /// assert_eq!(&out[..], b"!7\r\nERR a\nb\r\n,inf\r\n");
    /// ```
    pub fn encode(&self, dst: &mut BytesMut) {
        dst.reserve(self.encoded_len());
        self.write(dst);
    }

    fn write(&self, dst: &mut BytesMut) {
        match self {
            Self::Simple(s) => line_or_blob(dst, b'+', b'$', s),
            Self::Error(s) => line_or_blob(dst, b'-', b'!', s),
            Self::BigNumber(s) => line_or_blob(dst, b'(', b'$', s),
            Self::Integer(i) => line(dst, b':', itoa::Buffer::new().format(*i).as_bytes()),
            Self::Bulk(b) => blob(dst, b'$', b),
            Self::Null => dst.extend_from_slice(b"_\r\n"),
            Self::Array(v) => items(dst, b'*', v),
            Self::Set(v) => items(dst, b'~', v),
            Self::Push(v) => items(dst, b'>', v),
            Self::Map(pairs) => write_pairs(dst, b'%', pairs),
            Self::Double(d) => line(dst, b',', DoubleText::new(*d).as_bytes()),
            Self::Boolean(b) => dst.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            Self::Verbatim { format, text } => {
                header(dst, b'=', text.len() + 4);
                dst.extend_from_slice(format);
                dst.extend_from_slice(b":");
                dst.extend_from_slice(text);
                dst.extend_from_slice(b"\r\n");
            }
            Self::Attributed(a) => {
                write_pairs(dst, b'|', &a.attributes);
                a.frame.write(dst);
            }
        }
    }
}

/// Length of a map or attribute: `<ty><n>\r\n` and the pairs.
fn pairs_len(pairs: &[(Frame, Frame)]) -> usize {
    header_len(pairs.len())
        + pairs
            .iter()
            .map(|(k, v)| k.encoded_len() + v.encoded_len())
            .sum::<usize>()
}

fn write_pairs(dst: &mut BytesMut, ty: u8, pairs: &[(Frame, Frame)]) {
    header(dst, ty, pairs.len());
    for (k, v) in pairs {
        k.write(dst);
        v.write(dst);
    }
}

fn has_line_break(s: &[u8]) -> bool {
    s.iter().any(|&b| b == b'\r' || b == b'\n')
}

fn line_or_blob(dst: &mut BytesMut, line_ty: u8, blob_ty: u8, s: &[u8]) {
    if has_line_break(s) {
        blob(dst, blob_ty, s);
    } else {
        line(dst, line_ty, s);
    }
}

fn line(dst: &mut BytesMut, ty: u8, s: &[u8]) {
    dst.extend_from_slice(&[ty]);
    dst.extend_from_slice(s);
    dst.extend_from_slice(b"\r\n");
}

fn blob(dst: &mut BytesMut, ty: u8, s: &[u8]) {
    header(dst, ty, s.len());
    dst.extend_from_slice(s);
    dst.extend_from_slice(b"\r\n");
}

fn items(dst: &mut BytesMut, ty: u8, v: &[Frame]) {
    header(dst, ty, v.len());
    for f in v {
        f.write(dst);
    }
}

fn header(dst: &mut BytesMut, ty: u8, n: usize) {
    line(dst, ty, itoa::Buffer::new().format(n).as_bytes());
}

/// Length of `<ty><n>\r\n`.
pub(crate) fn header_len(n: usize) -> usize {
    dec_len(n) + 3
}

/// Length of `<ty><n>\r\n<n bytes>\r\n`.
fn blob_len(n: usize) -> usize {
    header_len(n) + n + 2
}

/// Number of decimal digits of `n`.
pub(crate) fn dec_len(mut n: usize) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

/// A double formatted on the stack: the shortest text that parses back to the same value,
/// plain decimal for ordinary magnitudes and exponent form outside them (so `1e300` does not
/// become 301 digits). Non-finite values use the RESP3 spellings `inf`, `-inf`, `nan`.
pub(crate) struct DoubleText {
    buf: [u8; 32],
    len: usize,
}

impl DoubleText {
    pub(crate) fn new(d: f64) -> Self {
        let mut t = Self {
            buf: [0; 32],
            len: 0,
        };
        let special: Option<&str> = if d.is_nan() {
            Some("nan")
        } else if d == f64::INFINITY {
            Some("inf")
        } else if d == f64::NEG_INFINITY {
            Some("-inf")
        } else {
            None
        };
        let plain = d == 0.0 || (1e-4..1e16).contains(&d.abs());
        let ok = match special {
            Some(s) => t.write_str(s).is_ok(),
            None if plain => write!(t, "{d}").is_ok(),
            None => false,
        };
        if !ok {
            // `{:e}` of an f64 is at most 24 bytes ("-2.2250738585072014e-308"), so this fits.
            t.len = 0;
            let _ = write!(t, "{d:e}");
        }
        t
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }
}

impl fmt::Write for DoubleText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let dst = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test fails
mod tests {
    use super::*;
    use bytes::Bytes;

    fn enc(f: &Frame) -> Vec<u8> {
        let mut out = BytesMut::new();
        f.encode(&mut out);
        assert_eq!(out.len(), f.encoded_len(), "encoded_len of {f:?}");
        out.to_vec()
    }

    fn b(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    #[test]
    fn every_variant() {
        let cases: Vec<(Frame, &[u8])> = vec![
            (Frame::Simple(b("OK")), b"+OK\r\n"),
            (Frame::Simple(b("a\r\nb")), b"$4\r\na\r\nb\r\n"),
            (Frame::Error(b("ERR x")), b"-ERR x\r\n"),
            (Frame::Error(b("E\rx")), b"!3\r\nE\rx\r\n"),
            (Frame::Integer(i64::MIN), b":-9223372036854775808\r\n"),
            (Frame::Bulk(b("")), b"$0\r\n\r\n"),
            (Frame::Null, b"_\r\n"),
            (Frame::Array(vec![]), b"*0\r\n"),
            (
                Frame::Map(vec![(Frame::Simple(b("k")), Frame::Integer(1))]),
                b"%1\r\n+k\r\n:1\r\n",
            ),
            (Frame::Set(vec![Frame::Boolean(false)]), b"~1\r\n#f\r\n"),
            (Frame::Push(vec![Frame::Boolean(true)]), b">1\r\n#t\r\n"),
            (Frame::Double(1.5), b",1.5\r\n"),
            (Frame::Double(f64::NAN), b",nan\r\n"),
            (Frame::BigNumber(b("-123")), b"(-123\r\n"),
            (
                Frame::Verbatim {
                    format: *b"txt",
                    text: b("hi"),
                },
                b"=6\r\ntxt:hi\r\n",
            ),
            (
                Frame::Attributed(Box::new(crate::Attributed {
                    attributes: vec![(Frame::Simple(b("ttl")), Frame::Integer(3))],
                    frame: Frame::Array(vec![Frame::Null]),
                })),
                b"|1\r\n+ttl\r\n:3\r\n*1\r\n_\r\n",
            ),
        ];
        for (frame, want) in cases {
            assert_eq!(enc(&frame), want, "{frame:?}");
        }
    }

    #[test]
    fn doubles_are_short_and_exact() {
        for (d, want) in [
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (0.1, "0.1"),
            (1e300, "1e300"),
            (-1.5e-7, "-1.5e-7"),
            (1e15, "1000000000000000"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (-f64::MAX, "-1.7976931348623157e308"),
        ] {
            let t = DoubleText::new(d);
            assert_eq!(t.as_bytes(), want.as_bytes());
            let back: f64 = want.parse().unwrap();
            assert_eq!(back.to_bits(), d.to_bits());
        }
    }

    #[test]
    fn encode_reserves_once() {
        let f = Frame::Array((0..100).map(Frame::Integer).collect());
        let mut out = BytesMut::new();
        f.encode(&mut out);
        assert_eq!(out.capacity(), f.encoded_len());
    }

    #[test]
    fn decimal_lengths() {
        for n in [0, 9, 10, 99, 100, 12345, usize::MAX] {
            assert_eq!(dec_len(n), n.to_string().len());
        }
    }
}
