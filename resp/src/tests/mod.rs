//! Tests across modules: every type, malformed input, limits, incremental decoding, zero
//! copy, and seeded property tests.

mod decode;
mod props;

use bytes::BytesMut;

use crate::{Decoder, Frame, Limits, ProtocolError};

/// Decodes every frame in `input` at once, stopping at the first error.
fn decode_whole(input: &[u8], limits: Limits) -> (Vec<Frame>, Option<ProtocolError>, usize) {
    let mut dec = Decoder::new(limits);
    let mut buf = BytesMut::from(input);
    let mut frames = Vec::new();
    loop {
        match dec.decode(&mut buf) {
            Ok(Some(f)) => frames.push(f),
            Ok(None) => return (frames, None, buf.len()),
            Err(e) => return (frames, Some(e), buf.len()),
        }
    }
}

/// Decodes `input` fed in the pieces `cuts` delimits, draining frames after every piece.
fn decode_pieces(
    input: &[u8],
    cuts: &[usize],
    limits: Limits,
) -> (Vec<Frame>, Option<ProtocolError>, usize) {
    let mut dec = Decoder::new(limits);
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    let mut at = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        let cut = cut.clamp(at, input.len());
        buf.extend_from_slice(&input[at..cut]);
        at = cut;
        loop {
            match dec.decode(&mut buf) {
                Ok(Some(f)) => frames.push(f),
                Ok(None) => break,
                Err(e) => return (frames, Some(e), buf.len()),
            }
        }
    }
    (frames, None, buf.len())
}

fn one(input: &[u8]) -> Result<Option<Frame>, ProtocolError> {
    Decoder::default().decode(&mut BytesMut::from(input))
}
