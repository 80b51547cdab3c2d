//! [`RespCodec`]: the [`Decoder`] and the encoders behind tokio-util's `Framed*` types.

use bytes::BytesMut;
use tokio_util::codec;

use crate::{Cmd, CodecError, Decoder, Frame, Limits};

/// A tokio-util codec that reads [`Frame`]s and writes [`Cmd`]s (clients) or [`Frame`]s
/// (test servers).
///
/// ```
/// use bytes::BytesMut;
/// use keylatch_resp::{Cmd, Frame, RespCodec};
/// use tokio_util::codec::{Decoder as _, Encoder as _};
///
/// let mut codec = RespCodec::default();
/// let mut out = BytesMut::new();
/// codec.encode(&Cmd::new("PING"), &mut out)?;
/// assert_eq!(&out[..], b"*1\r\n$4\r\nPING\r\n");
///
/// let mut input = BytesMut::from(&b"+PONG\r\n"[..]);
/// assert_eq!(codec.decode(&mut input)?, Some(Frame::Simple("PONG".into())));
/// # Ok::<(), keylatch_resp::CodecError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct RespCodec {
    decoder: Decoder,
}

impl RespCodec {
    /// A codec whose decoder enforces `limits`.
    ///
    /// ```
    /// use keylatch_resp::{Limits, RespCodec};
    ///
    /// let codec = RespCodec::new(Limits { max_bulk_len: 1 << 20, ..Limits::default() });
    /// # let _ = codec;
    /// ```
    pub fn new(limits: Limits) -> Self {
        Self {
            decoder: Decoder::new(limits),
        }
    }

    /// The decoder, to ask how many bytes it [`needed`](Decoder::needed).
    ///
    /// ```
    /// use keylatch_resp::RespCodec;
    ///
    /// assert_eq!(RespCodec::default().decoder().needed(), 0);
    /// ```
    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }

    /// The decoder, mutably, to [`reset`](Decoder::reset) it.
    ///
    /// ```
    /// use keylatch_resp::RespCodec;
    ///
    /// RespCodec::default().decoder_mut().reset();
    /// ```
    pub fn decoder_mut(&mut self) -> &mut Decoder {
        &mut self.decoder
    }
}

impl codec::Decoder for RespCodec {
    type Item = Frame;
    type Error = CodecError;

    /// See [`Decoder::decode`].
    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, CodecError> {
        Ok(self.decoder.decode(src)?)
    }
}

impl codec::Encoder<&Cmd> for RespCodec {
    type Error = CodecError;

    /// See [`Cmd::encode`]; never fails.
    fn encode(&mut self, cmd: &Cmd, dst: &mut BytesMut) -> Result<(), CodecError> {
        cmd.encode(dst);
        Ok(())
    }
}

impl codec::Encoder<&Frame> for RespCodec {
    type Error = CodecError;

    /// See [`Frame::encode`]; never fails.
    fn encode(&mut self, frame: &Frame, dst: &mut BytesMut) -> Result<(), CodecError> {
        frame.encode(dst);
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test fails
mod tests {
    use super::*;
    use crate::ProtocolError;
    use tokio_util::codec::{Decoder as _, Encoder as _};

    #[test]
    fn decodes_a_stream_through_the_trait() {
        let mut codec = RespCodec::default();
        let mut src = BytesMut::new();
        let mut got = Vec::new();
        for chunk in b"+OK\r\n:1\r\n*2\r\n$1\r\na\r\n_\r\n".chunks(3) {
            src.extend_from_slice(chunk);
            while let Some(f) = codec.decode(&mut src).unwrap() {
                got.push(f);
            }
        }
        assert_eq!(
            got,
            [
                Frame::Simple("OK".into()),
                Frame::Integer(1),
                Frame::Array(vec![Frame::Bulk("a".into()), Frame::Null]),
            ]
        );
        assert_eq!(codec.decode_eof(&mut src).unwrap(), None);
    }

    #[test]
    fn eof_inside_a_frame_and_corrupt_input_are_errors() {
        let mut codec = RespCodec::default();
        let mut src = BytesMut::from(&b"$5\r\nab"[..]);
        assert!(matches!(codec.decode_eof(&mut src), Err(CodecError::Io(_))));

        let mut codec = RespCodec::default();
        let mut src = BytesMut::from(&b"?\r\n"[..]);
        assert!(matches!(
            codec.decode(&mut src),
            Err(CodecError::Protocol(ProtocolError::InvalidType(b'?')))
        ));
    }

    #[test]
    fn encoders() {
        let mut codec = RespCodec::new(Limits::default());
        let mut dst = BytesMut::new();
        codec.encode(&Cmd::new("GET").key("k"), &mut dst).unwrap();
        codec.encode(&Frame::Integer(3), &mut dst).unwrap();
        assert_eq!(&dst[..], b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n:3\r\n");
    }
}
