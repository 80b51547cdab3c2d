//! Errors of the decoder and of the tokio-util codec.

use std::fmt;
use std::io;

/// The input is not valid RESP, or it breaks one of the configured [`Limits`](crate::Limits).
///
/// Every variant means the byte stream can no longer be trusted: the connection that produced
/// it should be dropped. The decoder forgets its partial state when it returns one.
///
/// ```
/// use bytes::BytesMut;
/// use keylatch_resp::{Decoder, ProtocolError};
///
/// let mut buf = BytesMut::from(&b"@oops\r\n"[..]);
/// let err = Decoder::default().decode(&mut buf).unwrap_err();
/// assert_eq!(err, ProtocolError::InvalidType(b'@'));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A frame started with a byte that is not a RESP2/RESP3 type marker.
    InvalidType(u8),
    /// A length header was empty or held something other than an optional `-` and digits.
    InvalidLength,
    /// A length header was negative (only `$-1` and `*-1` are allowed, as null).
    NegativeLength(i64),
    /// A bulk string, blob error or verbatim string announced more bytes than allowed.
    BulkTooLong {
        /// Announced length in bytes.
        len: usize,
        /// The configured `max_bulk_len`.
        max: usize,
    },
    /// An aggregate announced more elements than allowed (a map or attribute counts two per
    /// pair).
    AggregateTooLong {
        /// Announced number of elements.
        len: usize,
        /// The configured `max_aggregate_len`.
        max: usize,
    },
    /// One frame held more elements, all its aggregates together, than allowed (the tree
    /// built for it would take too much memory: an element costs about 44 bytes).
    FrameTooLarge {
        /// Elements announced so far in the frame.
        items: usize,
        /// The configured `max_frame_items`.
        max: usize,
    },
    /// Aggregates were nested deeper than allowed.
    TooDeep {
        /// The configured `max_depth`.
        max: usize,
    },
    /// A line had no CRLF within the allowed length.
    LineTooLong {
        /// The line limit that applied (`max_line_len`, or 20 for a length header).
        max: usize,
    },
    /// A `\r` not followed by `\n`, a bare `\n`, or a bulk body not followed by CRLF.
    MissingCrlf,
    /// An integer (`:`) held something other than an optional sign and digits.
    InvalidInteger,
    /// An integer or length does not fit in an `i64`.
    IntegerOverflow,
    /// A double (`,`) could not be parsed.
    InvalidDouble,
    /// A boolean (`#`) was neither `t` nor `f`.
    InvalidBoolean,
    /// A big number (`(`) held something other than an optional `-` and digits.
    InvalidBigNumber,
    /// A verbatim string (`=`) was shorter than 4 bytes or had no `:` after its format.
    InvalidVerbatim,
    /// A streamed RESP3 type (`$?`, `*?`, `;`, `.`, ...): no server we talk to sends them.
    StreamedUnsupported(u8),
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidType(b) => write!(f, "invalid RESP type byte 0x{b:02x}"),
            Self::InvalidLength => f.write_str("invalid RESP length"),
            Self::NegativeLength(n) => write!(f, "negative RESP length {n}"),
            Self::BulkTooLong { len, max } => {
                write!(f, "bulk of {len} bytes exceeds the limit of {max}")
            }
            Self::AggregateTooLong { len, max } => {
                write!(f, "aggregate of {len} elements exceeds the limit of {max}")
            }
            Self::FrameTooLarge { items, max } => {
                write!(f, "frame of {items} elements exceeds the limit of {max}")
            }
            Self::TooDeep { max } => write!(f, "RESP nesting deeper than {max}"),
            Self::LineTooLong { max } => write!(f, "no CRLF within {max} bytes"),
            Self::MissingCrlf => f.write_str("expected CRLF"),
            Self::InvalidInteger => f.write_str("invalid RESP integer"),
            Self::IntegerOverflow => f.write_str("RESP integer does not fit in 64 bits"),
            Self::InvalidDouble => f.write_str("invalid RESP double"),
            Self::InvalidBoolean => f.write_str("invalid RESP boolean"),
            Self::InvalidBigNumber => f.write_str("invalid RESP big number"),
            Self::InvalidVerbatim => f.write_str("invalid RESP verbatim string"),
            Self::StreamedUnsupported(b) => {
                write!(
                    f,
                    "streamed RESP3 type '{}' is not supported",
                    b.escape_ascii()
                )
            }
        }
    }
}

impl std::error::Error for ProtocolError {}

/// The error type of [`RespCodec`](crate::RespCodec): corrupt input or an I/O failure.
///
/// ```
/// use keylatch_resp::{CodecError, ProtocolError};
///
/// let err = CodecError::from(ProtocolError::MissingCrlf);
/// assert!(matches!(err, CodecError::Protocol(ProtocolError::MissingCrlf)));
/// assert_eq!(err.to_string(), "protocol error: expected CRLF");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum CodecError {
    /// The peer sent invalid RESP.
    Protocol(ProtocolError),
    /// Reading or writing the underlying stream failed.
    Io(io::Error),
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Protocol(e) => write!(f, "protocol error: {e}"),
            Self::Io(e) => write!(f, "i/o error: {e}"),
        }
    }
}

/// No `source()`: the message already carries the inner error's text, and
/// a chain printer (`anyhow`'s `{:?}`, a CLI walking `source()`) would
/// print it twice. Match on the variant to reach the inner error.
impl std::error::Error for CodecError {}

impl From<io::Error> for CodecError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<ProtocolError> for CodecError {
    fn from(e: ProtocolError) -> Self {
        Self::Protocol(e)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test fails
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn display_and_source() {
        let e = ProtocolError::BulkTooLong { len: 10, max: 5 };
        assert_eq!(e.to_string(), "bulk of 10 bytes exceeds the limit of 5");
        assert_eq!(
            ProtocolError::StreamedUnsupported(b'$').to_string(),
            "streamed RESP3 type '$' is not supported"
        );
        let c = CodecError::from(io::Error::new(io::ErrorKind::UnexpectedEof, "eof"));
        // The message says it all once; no source repeats it.
        assert!(c.source().is_none());
        assert_eq!(c.to_string(), "i/o error: eof");
    }
}
