//! Seeded property tests: a tiny xorshift generator instead of a property-testing crate.

use bytes::{Bytes, BytesMut};

use super::{decode_pieces, decode_whole};
use crate::{Attributed, Decoder, Frame, Limits, ProtocolError};

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn bytes(&mut self, max: usize, alphabet: &[u8]) -> Bytes {
        let len = self.below(max + 1);
        (0..len)
            .map(|_| alphabet[self.below(alphabet.len())])
            .collect()
    }
}

const TEXT: &[u8] = b"abcXYZ 019:-_+$*%~>|!=,#(";
const BINARY: &[u8] = b"ab\r\n\0\xff$*:_";

/// A random frame that survives an encode/decode round trip unchanged (no NaN, no line
/// breaks in simple strings), sometimes with attributes.
fn frame(rng: &mut Rng, depth: usize) -> Frame {
    if depth < 4 && rng.below(8) == 0 {
        let n = rng.below(3);
        let attributes: Vec<(Frame, Frame)> = (0..n)
            .map(|_| (frame(rng, depth + 1), frame(rng, depth + 1)))
            .collect();
        // Never an attributed frame directly inside: the decoder merges attributes in a row.
        return Frame::Attributed(Box::new(Attributed {
            attributes,
            frame: plain(rng, depth),
        }));
    }
    plain(rng, depth)
}

/// A random frame without attributes at its top (its elements may have some).
fn plain(rng: &mut Rng, depth: usize) -> Frame {
    let kinds = if depth >= 4 { 9 } else { 13 };
    match rng.below(kinds) {
        0 => Frame::Simple(rng.bytes(12, TEXT)),
        1 => {
            let alphabet = if rng.below(2) == 0 { TEXT } else { BINARY };
            Frame::Error(rng.bytes(12, alphabet))
        }
        2 => Frame::Integer(match rng.below(4) {
            0 => i64::MIN,
            1 => i64::MAX,
            _ => rng.next() as i64 >> rng.below(64),
        }),
        3 => Frame::Bulk(rng.bytes(20, BINARY)),
        4 => Frame::Null,
        5 => Frame::Double(match rng.below(6) {
            0 => f64::INFINITY,
            1 => f64::NEG_INFINITY,
            2 => f64::from_bits(rng.next() & !(0x7ff_u64 << 52)) * 1e300,
            _ => (rng.next() as i64 >> rng.below(64)) as f64 / (1_u64 << rng.below(40)) as f64,
        }),
        6 => Frame::Boolean(rng.below(2) == 0),
        7 => {
            let mut n = if rng.below(2) == 0 {
                b"-".to_vec()
            } else {
                Vec::new()
            };
            n.extend(rng.bytes(30, b"0123456789"));
            if n.len() < 2 {
                n.push(b'7');
            }
            Frame::BigNumber(n.into())
        }
        8 => Frame::Verbatim {
            format: [b"txt", b"mkd", b"a:b"][rng.below(3)].to_owned(),
            text: rng.bytes(16, BINARY),
        },
        k => {
            let n = rng.below(4);
            if k == 9 {
                Frame::Map(
                    (0..n)
                        .map(|_| (frame(rng, depth + 1), frame(rng, depth + 1)))
                        .collect(),
                )
            } else {
                let items: Vec<Frame> = (0..n).map(|_| frame(rng, depth + 1)).collect();
                match k {
                    10 => Frame::Array(items),
                    11 => Frame::Set(items),
                    _ => Frame::Push(items),
                }
            }
        }
    }
}

fn encode(f: &Frame) -> Vec<u8> {
    let mut out = BytesMut::new();
    f.encode(&mut out);
    assert_eq!(out.len(), f.encoded_len());
    out.to_vec()
}

#[test]
fn round_trip() {
    let mut rng = Rng::new(0x5eed_0001);
    for _ in 0..500 {
        let f = frame(&mut rng, 0);
        let bytes = encode(&f);
        let (frames, e, rest) = decode_whole(&bytes, Limits::default());
        assert_eq!(e, None, "{f:?}");
        assert_eq!(frames, [f]);
        assert_eq!(rest, 0);
    }
}

#[test]
fn split_at_every_offset() {
    let mut rng = Rng::new(0x5eed_0002);
    for _ in 0..300 {
        let f = frame(&mut rng, 0);
        let bytes = encode(&f);
        for cut in 0..=bytes.len() {
            let (frames, e, rest) = decode_pieces(&bytes, &[cut], Limits::default());
            assert_eq!((e, rest), (None, 0));
            assert_eq!(frames, std::slice::from_ref(&f), "cut at {cut}");
        }
    }
}

#[test]
fn concatenations_split_at_every_offset() {
    let mut rng = Rng::new(0x5eed_0003);
    for _ in 0..40 {
        let frames: Vec<Frame> = (0..1 + rng.below(6)).map(|_| frame(&mut rng, 0)).collect();
        let bytes: Vec<u8> = frames.iter().flat_map(encode).collect();
        for cut in 0..=bytes.len() {
            let (got, e, rest) = decode_pieces(&bytes, &[cut], Limits::default());
            assert_eq!((e, rest), (None, 0));
            assert_eq!(got, frames, "cut at {cut}");
        }
    }
}

#[test]
fn random_chunking() {
    let mut rng = Rng::new(0x5eed_0004);
    for _ in 0..100 {
        let frames: Vec<Frame> = (0..1 + rng.below(8)).map(|_| frame(&mut rng, 0)).collect();
        let bytes: Vec<u8> = frames.iter().flat_map(encode).collect();
        let mut cuts = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            at += 1 + rng.below(7);
            cuts.push(at);
        }
        let (got, e, rest) = decode_pieces(&bytes, &cuts, Limits::default());
        assert_eq!((e, rest), (None, 0));
        assert_eq!(got, frames);
    }
}

#[test]
fn nan_round_trips() {
    for text in [&b",nan\r\n"[..], b"*1\r\n,nan\r\n"] {
        let (frames, e, _) = decode_whole(text, Limits::default());
        assert_eq!(e, None);
        let d = match &frames[..] {
            [Frame::Double(d)] => *d,
            [Frame::Array(v)] => match &v[..] {
                [Frame::Double(d)] => *d,
                _ => panic!("{v:?}"),
            },
            _ => panic!("{frames:?}"),
        };
        assert!(d.is_nan());
        assert_eq!(encode(&Frame::Double(d)), b",nan\r\n");
    }
}

/// Mutated and random input: never a panic, and the same verdict whole or in pieces.
#[test]
fn garbage_is_judged_the_same_whole_or_chunked() {
    let mut rng = Rng::new(0x5eed_0005);
    let tiny = Limits {
        max_bulk_len: 16,
        max_aggregate_len: 6,
        max_depth: 3,
        max_line_len: 10,
        max_frame_items: 20,
    };
    for round in 0..3000 {
        let mut bytes: Vec<u8> = (0..1 + rng.below(4))
            .flat_map(|_| encode(&frame(&mut rng, 0)))
            .collect();
        match round % 3 {
            0 => {
                for _ in 0..1 + rng.below(3) {
                    let i = rng.below(bytes.len());
                    let alphabet = b"\r\n?-:$*%|;.0123456789x";
                    bytes[i] = alphabet[rng.below(alphabet.len())];
                }
            }
            1 => bytes.truncate(rng.below(bytes.len() + 1)),
            _ => {
                let alphabet = b"\r\n+-:$*%~>|_,#(=!?;.-0123456789abtf";
                bytes = (0..rng.below(40))
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect()
            }
        }
        for limits in [Limits::default(), tiny] {
            let whole = decode_whole(&bytes, limits);
            let mut cuts = Vec::new();
            let mut at = 0;
            while at < bytes.len() {
                at += 1 + rng.below(5);
                cuts.push(at);
            }
            let chunked = decode_pieces(&bytes, &cuts, limits);
            assert_frames_eq(&whole, &chunked, &bytes);
            let bytewise: Vec<usize> = (1..bytes.len()).collect();
            assert_frames_eq(&whole, &decode_pieces(&bytes, &bytewise, limits), &bytes);
        }
    }
}

type Outcome = (Vec<Frame>, Option<ProtocolError>, usize);

fn assert_frames_eq(a: &Outcome, b: &Outcome, input: &[u8]) {
    // NaN != NaN, so compare encodings.
    let enc = |o: &Outcome| o.0.iter().map(encode).collect::<Vec<_>>();
    assert_eq!(enc(a), enc(b), "{:?}", input.escape_ascii().to_string());
    assert_eq!(a.1, b.1, "{:?}", input.escape_ascii().to_string());
    if a.1.is_none() {
        // After an error the two buffers hold different amounts of unfed input.
        assert_eq!(a.2, b.2, "{:?}", input.escape_ascii().to_string());
    }
}

#[test]
fn the_decoder_is_reusable_after_many_frames() {
    let mut rng = Rng::new(0x5eed_0006);
    let mut dec = Decoder::default();
    let mut buf = BytesMut::new();
    for _ in 0..200 {
        let f = frame(&mut rng, 0);
        buf.extend_from_slice(&encode(&f));
        assert_eq!(dec.decode(&mut buf), Ok(Some(f)));
        assert!(buf.is_empty());
    }
}
