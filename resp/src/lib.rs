//! RESP2 and RESP3 for keylatch: frames, a zero-copy incremental decoder and a command
//! encoder. This crate knows nothing of sockets or tasks.
//!
//! Layout:
//!
//! - `frame`: [`Frame`], one decoded value, with `Display` for logs, and [`Attributed`], a frame
//!   with the RESP3 attributes sent before it.
//! - `encode`: writing a [`Frame`] back to bytes (for test servers and round trips).
//! - `decode`: the resumable scan of [`Decoder`], and its [`Limits`].
//! - `item`: reading one line or length header; shared by the scan and the builder.
//! - `build`: turning the bytes of one validated frame into a [`Frame`] tree by slicing.
//! - `cmd`: [`Cmd`], a command with pre-encoded arguments and recorded keys, and [`ToArg`].
//! - `codec`: [`RespCodec`], the tokio-util `Decoder`/`Encoder`.
//! - `error`: [`ProtocolError`] and [`CodecError`].
//!
//! ```
//! use bytes::BytesMut;
//! use keylatch_resp::{Cmd, Decoder, Frame};
//!
//! let mut out = BytesMut::new();
//! Cmd::new("GET").key("lock:a").encode(&mut out);
//! assert_eq!(&out[..], b"*2\r\n$3\r\nGET\r\n$6\r\nlock:a\r\n");
//!
//! let mut decoder = Decoder::default();
//! let mut input = BytesMut::from(&b"$5\r\ntoken\r\n"[..]);
//! assert_eq!(decoder.decode(&mut input)?, Some(Frame::Bulk("token".into())));
//! # Ok::<(), keylatch_resp::ProtocolError>(())
//! ```
#![forbid(unsafe_code)]

mod build;
mod cmd;
mod cmd_debug;
mod codec;
mod decode;
mod encode;
mod error;
mod frame;
mod item;

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test fails
mod tests;

pub use cmd::{Cmd, ToArg};
pub use codec::RespCodec;
pub use decode::{Decoder, Limits, RESERVE_STEP};
pub use error::{CodecError, ProtocolError};
pub use frame::{Attributed, Frame};
