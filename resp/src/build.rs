//! Building the [`Frame`] tree from the bytes of one validated frame.
//!
//! The scan has already checked every byte and every limit, so nothing here should fail; it
//! still returns errors rather than trusting that, and never panics. Recursion depth is
//! bounded by `max_depth` (at most 512), and every `Vec` is sized by the smaller of the
//! announced count and what the bytes present could hold, so a hostile count cannot make it
//! allocate.

use std::ops::Range;

use bytes::Bytes;

use crate::item::{finish_body, parse_item, Item, Value};
use crate::{Attributed, Frame, Limits, ProtocolError};

/// The smallest element, `_\r\n`, takes this many bytes.
const MIN_ELEMENT: usize = 3;

/// Builds the frame that `src` holds exactly.
pub(crate) fn frame(src: &Bytes, limits: &Limits) -> Result<Frame, ProtocolError> {
    let mut pos = 0;
    let frame = node(src, &mut pos, 0, limits)?;
    if pos != src.len() {
        return Err(ProtocolError::MissingCrlf);
    }
    Ok(frame)
}

/// A frame for a scalar `value` whose bytes lie at `payload` in `src`.
pub(crate) fn bytes_frame(
    src: &Bytes,
    value: Value,
    payload: Range<usize>,
) -> Result<Frame, ProtocolError> {
    if payload.start > payload.end || payload.end > src.len() {
        return Err(ProtocolError::InvalidLength);
    }
    let bytes = || src.slice(payload.clone());
    Ok(match value {
        Value::Simple => Frame::Simple(bytes()),
        Value::Error => Frame::Error(bytes()),
        Value::Bulk => Frame::Bulk(bytes()),
        Value::BigNumber => Frame::BigNumber(bytes()),
        Value::Verbatim(format) => Frame::Verbatim {
            format,
            text: bytes(),
        },
        Value::Integer(i) => Frame::Integer(i),
        Value::Double(d) => Frame::Double(d),
        Value::Boolean(b) => Frame::Boolean(b),
        Value::Null => Frame::Null,
    })
}

/// Builds the frame at `*pos`, wrapped in [`Frame::Attributed`] with the attributes before it
/// if there are any (several in a row make one list), and advances `*pos` past it. `depth`
/// is the number of aggregates enclosing it.
fn node(
    src: &Bytes,
    pos: &mut usize,
    depth: usize,
    limits: &Limits,
) -> Result<Frame, ProtocolError> {
    // Allocated only when an attribute comes: a frame without attributes is built as if
    // attributes did not exist.
    let mut attributes: Option<Vec<(Frame, Frame)>> = None;
    let frame = loop {
        let start = *pos;
        match parse_item(src, start, start + 1, limits)? {
            Item::Incomplete { .. } => return Err(ProtocolError::MissingCrlf),
            Item::Scalar {
                value,
                payload,
                end,
            } => {
                *pos = end;
                break bytes_frame(src, value, payload)?;
            }
            Item::Body { kind, body, len } => {
                let (value, payload, end) = finish_body(src, kind, body, len)?;
                *pos = end;
                break bytes_frame(src, value, payload)?;
            }
            Item::Aggregate { kind, count, end } => {
                if depth >= limits.max_depth {
                    return Err(ProtocolError::TooDeep {
                        max: limits.max_depth,
                    });
                }
                *pos = end;
                let room = src.len().saturating_sub(end) / MIN_ELEMENT;
                match kind {
                    b'|' => {
                        let pairs = count / 2;
                        let list = attributes
                            .get_or_insert_with(|| Vec::with_capacity(pairs.min(room / 2)));
                        for _ in 0..pairs {
                            let k = node(src, pos, depth + 1, limits)?;
                            let v = node(src, pos, depth + 1, limits)?;
                            list.push((k, v));
                        }
                    }
                    b'%' => {
                        let pairs = count / 2;
                        let mut map = Vec::with_capacity(pairs.min(room / 2));
                        for _ in 0..pairs {
                            let k = node(src, pos, depth + 1, limits)?;
                            let v = node(src, pos, depth + 1, limits)?;
                            map.push((k, v));
                        }
                        break Frame::Map(map);
                    }
                    _ => {
                        let mut items = Vec::with_capacity(count.min(room));
                        for _ in 0..count {
                            items.push(node(src, pos, depth + 1, limits)?);
                        }
                        break match kind {
                            b'~' => Frame::Set(items),
                            b'>' => Frame::Push(items),
                            _ => Frame::Array(items),
                        };
                    }
                }
            }
        }
    };
    Ok(match attributes {
        None => frame,
        Some(attributes) => Frame::Attributed(Box::new(Attributed { attributes, frame })),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test fails
mod tests {
    use super::*;

    #[test]
    fn errors_instead_of_panics_on_unvalidated_input() {
        let limits = Limits::default();
        for input in [
            &b"*3\r\n:1\r\n"[..],
            b"*1\r\n:1\r\n:2\r\n",
            b"%2147483647\r\n+a\r\n",
            b"$5\r\nab\r\n",
            b"|1\r\n+a\r\n",
        ] {
            assert!(
                frame(&Bytes::from_static(input), &limits).is_err(),
                "{input:?}"
            );
        }
        assert!(bytes_frame(&Bytes::new(), Value::Bulk, 0..4).is_err());
    }

    #[test]
    fn capacity_is_bounded_by_bytes_present() {
        // Only reachable with a limit the scan would have enforced; the builder must still
        // not trust the count.
        let limits = Limits {
            max_aggregate_len: usize::MAX,
            ..Limits::default()
        };
        let src = Bytes::from_static(b"*1000000000000\r\n:1\r\n");
        assert_eq!(frame(&src, &limits), Err(ProtocolError::MissingCrlf));
    }
}
