//! Reading one item (a scalar line, a length header) at an offset.
//!
//! Shared by the resumable scan ([`crate::decode`]) and the tree builder ([`crate::build`]), so
//! the two cannot disagree on what is valid. Offsets are absolute indexes into the buffer.

use std::ops::Range;

use crate::{Limits, ProtocolError};

/// A length header (`$`, `*`, ...) holds at most a sign and 19 digits.
pub(crate) const LEN_LINE_MAX: usize = 20;

/// A complete scalar value; byte payloads are ranges into the buffer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Value {
    Simple,
    Error,
    Bulk,
    BigNumber,
    Verbatim([u8; 3]),
    Integer(i64),
    Double(f64),
    Boolean(bool),
    Null,
}

#[derive(Debug, PartialEq)]
pub(crate) enum Item {
    /// More bytes are needed; the search for the line's end continues at `resume`.
    Incomplete { resume: usize },
    /// A scalar ending at `end` (exclusive, after its CRLF).
    Scalar {
        value: Value,
        payload: Range<usize>,
        end: usize,
    },
    /// A length-prefixed body (`$`, `!`, `=` by `kind`) of `len` bytes starting at `body`.
    Body { kind: u8, body: usize, len: usize },
    /// An aggregate header (`kind` is its type byte) announcing `count` elements (two per
    /// pair for maps and attributes); the first element starts at `end`.
    Aggregate { kind: u8, count: usize, end: usize },
}

pub(crate) enum Line {
    /// The index of the `\r` of a complete CRLF.
    Cr(usize),
    /// No terminator yet; resume searching here.
    Partial(usize),
}

/// Reads the item starting at `start`. `from` (> `start`) is where an earlier call stopped
/// searching for the end of this item's line, so a partial line is never searched twice.
pub(crate) fn parse_item(
    data: &[u8],
    start: usize,
    from: usize,
    limits: &Limits,
) -> Result<Item, ProtocolError> {
    let Some(&ty) = data.get(start) else {
        return Ok(Item::Incomplete { resume: from });
    };
    let content = start + 1;
    match ty {
        b'+' | b'-' | b':' | b',' | b'#' | b'(' => {
            let cr = match find_crlf(data, content, from, limits.max_line_len)? {
                Line::Cr(cr) => cr,
                Line::Partial(resume) => return Ok(Item::Incomplete { resume }),
            };
            let text = data.get(content..cr).unwrap_or_default();
            let value = match ty {
                b'+' => Value::Simple,
                b'-' => Value::Error,
                b':' => Value::Integer(parse_int(text).map_err(|e| match e {
                    IntError::Invalid => ProtocolError::InvalidInteger,
                    IntError::Overflow => ProtocolError::IntegerOverflow,
                })?),
                b',' => Value::Double(parse_double(text)?),
                b'#' => Value::Boolean(match text {
                    b"t" => true,
                    b"f" => false,
                    _ => return Err(ProtocolError::InvalidBoolean),
                }),
                _ => {
                    let digits = text.strip_prefix(b"-").unwrap_or(text);
                    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                        return Err(ProtocolError::InvalidBigNumber);
                    }
                    Value::BigNumber
                }
            };
            Ok(Item::Scalar {
                value,
                payload: content..cr,
                end: cr + 2,
            })
        }
        b'_' => match (data.get(content), data.get(content + 1)) {
            (None, _) => Ok(Item::Incomplete { resume: content }),
            (Some(b'\r'), None) => Ok(Item::Incomplete { resume: content }),
            (Some(b'\r'), Some(b'\n')) => Ok(Item::Scalar {
                value: Value::Null,
                payload: 0..0,
                end: content + 2,
            }),
            _ => Err(ProtocolError::MissingCrlf),
        },
        b'$' | b'!' | b'=' | b'*' | b'%' | b'~' | b'>' | b'|' => {
            header(data, ty, content, from, limits)
        }
        b';' | b'.' => Err(ProtocolError::StreamedUnsupported(ty)),
        _ => Err(ProtocolError::InvalidType(ty)),
    }
}

fn header(
    data: &[u8],
    ty: u8,
    content: usize,
    from: usize,
    limits: &Limits,
) -> Result<Item, ProtocolError> {
    let cr = match find_crlf(data, content, from, LEN_LINE_MAX)? {
        Line::Cr(cr) => cr,
        Line::Partial(resume) => return Ok(Item::Incomplete { resume }),
    };
    let text = data.get(content..cr).unwrap_or_default();
    let end = cr + 2;
    if text == b"?" && !matches!(ty, b'!' | b'=') {
        return Err(ProtocolError::StreamedUnsupported(ty));
    }
    if text.first() == Some(&b'+') {
        return Err(ProtocolError::InvalidLength);
    }
    let n = parse_int(text).map_err(|e| match e {
        IntError::Invalid => ProtocolError::InvalidLength,
        IntError::Overflow => ProtocolError::IntegerOverflow,
    })?;
    if n == -1 && matches!(ty, b'$' | b'*') {
        return Ok(Item::Scalar {
            value: Value::Null,
            payload: end..end,
            end,
        });
    }
    if n < 0 {
        return Err(ProtocolError::NegativeLength(n));
    }
    // Only a 32-bit target can fail here, and there the length is too long anyway.
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    match ty {
        b'$' | b'!' | b'=' => {
            if n > limits.max_bulk_len {
                return Err(ProtocolError::BulkTooLong {
                    len: n,
                    max: limits.max_bulk_len,
                });
            }
            if ty == b'=' && n < 4 {
                return Err(ProtocolError::InvalidVerbatim);
            }
            Ok(Item::Body {
                kind: ty,
                body: end,
                len: n,
            })
        }
        _ => {
            let count = if matches!(ty, b'%' | b'|') {
                n.saturating_mul(2)
            } else {
                n
            };
            if count > limits.max_aggregate_len {
                return Err(ProtocolError::AggregateTooLong {
                    len: count,
                    max: limits.max_aggregate_len,
                });
            }
            Ok(Item::Aggregate {
                kind: ty,
                count,
                end,
            })
        }
    }
}

/// Validates a body announced by an [`Item::Body`] once all of it is in `data`; returns the
/// value, its payload range and the end of the body's CRLF.
pub(crate) fn finish_body(
    data: &[u8],
    kind: u8,
    body: usize,
    len: usize,
) -> Result<(Value, Range<usize>, usize), ProtocolError> {
    let text_end = body + len;
    let end = text_end + 2;
    if data.get(text_end..end) != Some(b"\r\n") {
        return Err(ProtocolError::MissingCrlf);
    }
    match kind {
        b'$' => Ok((Value::Bulk, body..text_end, end)),
        b'!' => Ok((Value::Error, body..text_end, end)),
        _ => match data.get(body..body + 4) {
            Some(&[a, b, c, b':']) => Ok((Value::Verbatim([a, b, c]), body + 4..text_end, end)),
            _ => Err(ProtocolError::InvalidVerbatim),
        },
    }
}

/// Finds the CRLF ending the line whose content starts at `line`, searching from `from`.
///
/// The content may be at most `max` bytes: the verdict depends only on bytes up to the
/// limit, so feeding the same input whole or in pieces always gives the same answer.
#[inline]
pub(crate) fn find_crlf(
    data: &[u8],
    line: usize,
    from: usize,
    max: usize,
) -> Result<Line, ProtocolError> {
    // Index of the last place the `\r` may be.
    let last = line.saturating_add(max);
    let stop = data.len().min(last.saturating_add(1));
    let hay = data.get(from..stop).unwrap_or_default();
    match hay.iter().position(|&b| b == b'\r' || b == b'\n') {
        Some(i) => {
            let at = from + i;
            if hay.get(i) == Some(&b'\n') {
                return Err(ProtocolError::MissingCrlf);
            }
            match data.get(at + 1) {
                Some(b'\n') => Ok(Line::Cr(at)),
                Some(_) => Err(ProtocolError::MissingCrlf),
                None => Ok(Line::Partial(at)),
            }
        }
        None if data.len() > last => Err(ProtocolError::LineTooLong { max }),
        None => Ok(Line::Partial(stop.max(from))),
    }
}

pub(crate) enum IntError {
    Invalid,
    Overflow,
}

/// An optional sign and at least one digit, as an `i64` (accumulated negatively for a `-` so
/// that `i64::MIN` parses).
#[inline]
pub(crate) fn parse_int(s: &[u8]) -> Result<i64, IntError> {
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, s),
    };
    if digits.is_empty() {
        return Err(IntError::Invalid);
    }
    let mut v: i64 = 0;
    for &b in digits {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return Err(IntError::Invalid);
        }
        let d = i64::from(d);
        v = v
            .checked_mul(10)
            .and_then(|v| {
                if neg {
                    v.checked_sub(d)
                } else {
                    v.checked_add(d)
                }
            })
            .ok_or(IntError::Overflow)?;
    }
    Ok(v)
}

fn parse_double(s: &[u8]) -> Result<f64, ProtocolError> {
    match s {
        b"inf" | b"+inf" => return Ok(f64::INFINITY),
        b"-inf" => return Ok(f64::NEG_INFINITY),
        b"nan" | b"-nan" => return Ok(f64::NAN),
        _ => {}
    }
    // `str::parse` also takes "infinity" or "NaN" in any case; harmless, so allowed.
    std::str::from_utf8(s)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(ProtocolError::InvalidDouble)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test fails
mod tests {
    use super::*;

    #[test]
    fn ints() {
        assert!(matches!(parse_int(b"0"), Ok(0)));
        assert!(matches!(parse_int(b"+7"), Ok(7)));
        assert!(matches!(parse_int(b"-9223372036854775808"), Ok(i64::MIN)));
        assert!(matches!(parse_int(b"9223372036854775807"), Ok(i64::MAX)));
        assert!(matches!(
            parse_int(b"9223372036854775808"),
            Err(IntError::Overflow)
        ));
        assert!(matches!(parse_int(b""), Err(IntError::Invalid)));
        assert!(matches!(parse_int(b"-"), Err(IntError::Invalid)));
        assert!(matches!(parse_int(b"1 "), Err(IntError::Invalid)));
    }

    #[test]
    fn line_search_resumes_and_limits() {
        let l = |d: &[u8], from, max| find_crlf(d, 1, from, max);
        assert!(matches!(l(b"+ab", 1, 10), Ok(Line::Partial(3))));
        assert!(matches!(l(b"+ab\r", 3, 10), Ok(Line::Partial(3))));
        assert!(matches!(l(b"+ab\r\n", 3, 10), Ok(Line::Cr(3))));
        assert!(matches!(l(b"+ab\r\n", 1, 2), Ok(Line::Cr(3))));
        assert!(matches!(
            l(b"+abc", 1, 2),
            Err(ProtocolError::LineTooLong { max: 2 })
        ));
        assert!(matches!(l(b"+ab", 1, 2), Ok(Line::Partial(3))));
        assert!(matches!(l(b"+a\nb", 1, 9), Err(ProtocolError::MissingCrlf)));
        assert!(matches!(l(b"+a\rb", 1, 9), Err(ProtocolError::MissingCrlf)));
    }
}
