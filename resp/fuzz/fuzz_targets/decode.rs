//! Feeds arbitrary bytes to the decoder whole and in chunks, with default and tiny limits.
//!
//! The decoder promises that its verdict depends only on the bytes, not on how they were
//! split, so this asserts more than "no panic": the same frames, the same error (if any) and
//! the same leftover. Every decoded frame must also survive an encode/decode round trip.
#![no_main]

use bytes::BytesMut;
use keylatch_resp::{Decoder, Frame, Limits, ProtocolError};
use libfuzzer_sys::fuzz_target;

struct Outcome {
    frames: Vec<Frame>,
    error: Option<ProtocolError>,
    leftover: usize,
}

/// Decodes `input` fed in pieces of the sizes `sizes` cycles through (all at once if empty).
fn run(input: &[u8], sizes: &[usize], limits: Limits) -> Outcome {
    let mut decoder = Decoder::new(limits);
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    let mut at = 0;
    let mut sizes = sizes.iter().cycle();
    while at < input.len() {
        let n = sizes.next().copied().unwrap_or(input.len()).max(1);
        let end = input.len().min(at + n);
        buf.extend_from_slice(&input[at..end]);
        at = end;
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(error) => {
                    return Outcome {
                        frames,
                        error: Some(error),
                        leftover: 0,
                    }
                }
            }
        }
    }
    Outcome {
        frames,
        error: None,
        leftover: buf.len(),
    }
}

/// Frames compared by their encoding, since a NaN double is unequal to itself.
fn encode(frames: &[Frame]) -> Vec<Vec<u8>> {
    frames
        .iter()
        .map(|f| {
            let mut out = BytesMut::new();
            f.encode(&mut out);
            assert_eq!(out.len(), f.encoded_len());
            out.to_vec()
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, input)) = data.split_first() else {
        return;
    };
    // Chunk sizes from the first byte: two alternating sizes of 1 to 16 bytes.
    let sizes = [usize::from(seed & 0x0f) + 1, usize::from(seed >> 4) + 1];
    let tiny = Limits {
        max_bulk_len: 16,
        max_aggregate_len: 8,
        max_depth: 4,
        max_line_len: 12,
        max_frame_items: 24,
    };
    for limits in [Limits::default(), tiny] {
        let whole = run(input, &[], limits);
        let chunked = run(input, &sizes, limits);
        let bytewise = run(input, &[1], limits);
        for other in [&chunked, &bytewise] {
            assert_eq!(encode(&whole.frames), encode(&other.frames));
            assert_eq!(whole.error, other.error);
            if whole.error.is_none() {
                assert_eq!(whole.leftover, other.leftover);
            }
        }
        for bytes in encode(&whole.frames) {
            let again = run(&bytes, &[], Limits::default());
            assert_eq!(again.error, None);
            assert_eq!(again.leftover, 0);
            assert_eq!(encode(&again.frames), [bytes]);
        }
    }
});
