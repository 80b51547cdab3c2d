//! Fuzzing entry points (cargo feature `fuzzing`, off by default; hidden).
//!
//! Each `check_*` function takes arbitrary bytes, runs them through parsers
//! of server replies that live above the decoder, and asserts properties
//! (no panic, and what the parse promises). The libFuzzer targets in the
//! repository's `fuzz/` workspace call them, and this crate's unit tests
//! replay the committed corpus (`fuzz/corpus/<target>/`) and a bounded
//! fixed-seed run of mutations through them, so CI runs the same checks.
//!
//! - [`frames`]: the frames an input stands for, decoded (RESP) or built
//!   from a small byte code that reaches every variant quickly.
//! - [`check_from_reply`]: every [`FromReply`](crate::FromReply)
//!   conversion; [`check_topology`]: the topology parsers (`CLUSTER
//!   SHARDS`/`SLOTS`).
//! - [`check_server_error`]: error lines, their kinds, retry classes,
//!   `MOVED`/`ASK` redirects.
//! - [`check_push`]: push frames (invalidations) and pub/sub classification.
//! - [`corpus`], [`mutations`]: what the unit tests use to replay.
//!
//! Not an API: it may change with any release.

mod push;
mod reply;
mod server_error;

use std::path::Path;

use bytes::{Bytes, BytesMut};
use keylatch_resp::{Decoder, Frame, Limits};

pub use push::check_push;
pub use reply::{check_from_reply, check_topology};
pub use server_error::check_server_error;

/// The type bytes a RESP frame starts with: an input starting with one is
/// decoded, any other input is read as byte code ([`frames`]).
const RESP_TYPES: &[u8] = b"+-:$*_,#(=%~>!|";

/// Words that parsers above the decoder look for, so that byte code reaches
/// them in one byte.
const WORDS: &[&[u8]] = &[
    b"message",
    b"pmessage",
    b"smessage",
    b"subscribe",
    b"psubscribe",
    b"ssubscribe",
    b"unsubscribe",
    b"punsubscribe",
    b"sunsubscribe",
    b"pong",
    b"PONG",
    b"invalidate",
    b"OK",
    b"1",
    b"0",
    b"-1",
    b"-2",
    b"16383",
    b"16384",
    b"9223372036854775807",
    b"-9223372036854775808",
    b"18446744073709551615",
    b"2.5",
    b"inf",
    b"nan",
    b"MOVED 3999 127.0.0.1:6381",
    b"ASK 16383 [::1]:7001",
    b"ERR unknown command 'X'",
    b"slots",
    b"nodes",
    b"ip",
    b"endpoint",
    b"port",
    b"tls-port",
    b"role",
    b"master",
    b"replica",
    b"health",
    b"online",
    b"fail",
    b"?",
    b"",
    b"127.0.0.1",
    b"::1",
    b"\xff\xfe",
    "\u{e9}t\u{e9}".as_bytes(),
];

/// Integers the parsers treat specially (verdicts, slot bounds, ports).
const INTEGERS: &[i64] = &[
    0,
    1,
    -1,
    -2,
    2,
    3,
    16383,
    16384,
    65535,
    65536,
    i64::MAX,
    i64::MIN,
];

/// The frames `data` stands for.
///
/// Input starting with a RESP type byte is decoded (small limits; decoding
/// stops at the first error or incomplete frame), so corpus files can be
/// written by hand as RESP. Any other input is byte code: each op byte
/// picks a variant and reads what it needs from the bytes after it, so
/// every input gives frames and mutations move between shapes. At most 16
/// frames, nested at most 6 deep, at most 8 elements per aggregate.
pub fn frames(data: &[u8]) -> Vec<Frame> {
    match data.first() {
        None => Vec::new(),
        Some(b) if RESP_TYPES.contains(b) => decoded(data),
        Some(_) => {
            let mut code = Code { data, at: 1 };
            let mut out = Vec::new();
            while out.len() < 16 {
                match code.frame(0) {
                    Some(f) => out.push(f),
                    None => break,
                }
            }
            out
        }
    }
}

fn decoded(data: &[u8]) -> Vec<Frame> {
    let mut decoder = Decoder::new(Limits {
        max_bulk_len: 1 << 16,
        max_aggregate_len: 1 << 12,
        max_depth: 16,
        max_frame_items: 1 << 14,
        ..Limits::default()
    });
    let mut buf = BytesMut::from(data);
    let mut out = Vec::new();
    while let Ok(Some(frame)) = decoder.decode(&mut buf) {
        out.push(frame);
    }
    out
}

/// The byte-code reader of [`frames`].
struct Code<'a> {
    data: &'a [u8],
    at: usize,
}

impl Code<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.data.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    /// A length byte (mod 16), then that many bytes (fewer at the end).
    fn payload(&mut self) -> Bytes {
        let n = usize::from(self.byte().unwrap_or(0) % 16);
        let end = self.data.len().min(self.at + n);
        let out = Bytes::copy_from_slice(&self.data[self.at..end]);
        self.at = end;
        out
    }

    /// A word from [`WORDS`] or a payload, as the next byte says.
    fn text(&mut self) -> Bytes {
        let b = self.byte().unwrap_or(0);
        match WORDS.get(usize::from(b)) {
            Some(w) => Bytes::from_static(w),
            None => self.payload(),
        }
    }

    fn integer(&mut self) -> i64 {
        let b = self.byte().unwrap_or(0);
        if let Some(&i) = INTEGERS.get(usize::from(b)) {
            return i;
        }
        if b < 0x80 {
            // Small values, negative ones included: -40 to 75.
            return i64::from(b) - 52;
        }
        let mut raw = [0u8; 8];
        for r in &mut raw {
            *r = self.byte().unwrap_or(0);
        }
        i64::from_le_bytes(raw)
    }

    fn items(&mut self, depth: usize) -> Vec<Frame> {
        let n = self.byte().unwrap_or(0) % 9;
        (0..n).map_while(|_| self.frame(depth + 1)).collect()
    }

    fn frame(&mut self, depth: usize) -> Option<Frame> {
        let op = self.byte()?;
        // Past the depth bound, aggregates become integers.
        let op = if depth >= 6 && matches!(op % 16, 5..=8 | 13) {
            2
        } else {
            op % 16
        };
        Some(match op {
            0 => Frame::Simple(self.text()),
            1 => Frame::Error(self.text()),
            2 | 15 => Frame::Integer(self.integer()),
            3 | 14 => Frame::Bulk(self.text()),
            4 => Frame::Null,
            5 => Frame::Array(self.items(depth)),
            6 => {
                let items = self.items(depth);
                let mut it = items.into_iter();
                let mut pairs = Vec::new();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    pairs.push((k, v));
                }
                Frame::Map(pairs)
            }
            7 => Frame::Set(self.items(depth)),
            8 => Frame::Push(self.items(depth)),
            9 => Frame::Double(match self.byte().unwrap_or(0) % 8 {
                0 => f64::NAN,
                1 => f64::INFINITY,
                2 => f64::NEG_INFINITY,
                3 => -0.0,
                #[allow(clippy::cast_precision_loss)]
                _ => self.integer() as f64 / 4.0,
            }),
            10 => Frame::Boolean(self.byte().unwrap_or(0) % 2 == 1),
            11 => Frame::BigNumber(self.text()),
            12 => Frame::Verbatim {
                format: *b"txt",
                text: self.text(),
            },
            13 => {
                // The next frame behind a RESP3 attribute, as the decoder
                // gives it back (kept or skipped, as the decoder does).
                let inner = self.frame(depth + 1).unwrap_or(Frame::Null);
                let mut buf = BytesMut::from(&b"|1\r\n+ttl\r\n:3\r\n"[..]);
                inner.encode(&mut buf);
                match Decoder::new(Limits::default()).decode(&mut buf) {
                    Ok(Some(f)) => f,
                    _ => inner,
                }
            }
            _ => Frame::Bulk(self.payload()),
        })
    }
}

/// Whether `frame` is of a variant these checks know the conversions of.
/// A frame of any other variant (RESP3 attributes, where the decoder keeps
/// them) is checked for no panic and typed errors only.
pub fn known(frame: &Frame) -> bool {
    // Two matches, so that neither covers every variant whatever the
    // version of `Frame`.
    matches!(
        frame,
        Frame::Simple(_)
            | Frame::Error(_)
            | Frame::Integer(_)
            | Frame::Bulk(_)
            | Frame::Null
            | Frame::Array(_)
            | Frame::Map(_)
            | Frame::Set(_)
            | Frame::Push(_)
            | Frame::Double(_)
            | Frame::Boolean(_)
            | Frame::BigNumber(_)
    ) || matches!(frame, Frame::Verbatim { .. })
}

/// A frame's encoding: frames compared this way, since a NaN double is
/// unequal to itself.
pub(crate) fn encoded(frame: &Frame) -> BytesMut {
    let mut out = BytesMut::new();
    frame.encode(&mut out);
    out
}

/// Every file of a corpus directory, in name order.
///
/// # Errors
/// The directory or a file cannot be read.
pub fn corpus(dir: &Path) -> std::io::Result<Vec<Vec<u8>>> {
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_file() {
            paths.push(path);
        }
    }
    paths.sort();
    paths.into_iter().map(std::fs::read).collect()
}

/// Runs `check` on `runs` inputs made from `corpus` by a fixed-seed
/// xorshift: each a corpus entry (or random bytes) with one to four byte
/// flips, insertions, deletions, truncations or splices. Deterministic, so
/// a failure repeats; the input that failed is printed before the panic
/// goes on.
pub fn mutations(corpus: &[Vec<u8>], seed: u64, runs: usize, check: fn(&[u8])) {
    let mut rng = XorShift(seed | 1);
    for _ in 0..runs {
        let input = rng.mutant(corpus);
        let result = std::panic::catch_unwind(|| check(&input));
        if let Err(panic) = result {
            eprintln!("failing input: {:?}", Bytes::from(input));
            std::panic::resume_unwind(panic);
        }
    }
}

/// xorshift64: small, fixed, and good enough to pick mutations.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value below `n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        // The remainder of a u64 by a usize fits a usize.
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }

    fn byte(&mut self) -> u8 {
        self.next().to_le_bytes()[0]
    }

    fn mutant(&mut self, corpus: &[Vec<u8>]) -> Vec<u8> {
        let mut input = if corpus.is_empty() || self.below(8) == 0 {
            let n = self.below(48);
            (0..n).map(|_| self.byte()).collect()
        } else {
            corpus[self.below(corpus.len())].clone()
        };
        for _ in 0..=self.below(4) {
            let len = input.len();
            match self.below(6) {
                0 if len > 0 => {
                    let i = self.below(len);
                    input[i] = self.byte();
                }
                1 => {
                    let i = self.below(len + 1);
                    let b = self.byte();
                    input.insert(i, b);
                }
                2 if len > 0 => {
                    let i = self.below(len);
                    input.remove(i);
                }
                3 if len > 0 => input.truncate(self.below(len)),
                4 if !corpus.is_empty() => {
                    // Splice: the tail of another entry after a prefix.
                    let other = &corpus[self.below(corpus.len())];
                    let cut = self.below(len + 1);
                    let from = self.below(other.len() + 1);
                    input.truncate(cut);
                    input.extend_from_slice(&other[from..]);
                }
                _ if len > 0 => {
                    // Digits and separators are what the text parsers read.
                    let i = self.below(len);
                    input[i] = b"0123456789 :-[]\r\n"[self.below(17)];
                }
                _ => {}
            }
        }
        input
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test fails
mod tests {
    use super::*;

    /// The committed corpus of one target, from the repository's `fuzz/`.
    pub(crate) fn target_corpus(target: &str) -> Vec<Vec<u8>> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fuzz/corpus")
            .join(target);
        let corpus = corpus(&dir).unwrap();
        assert!(
            corpus.len() >= 10,
            "{}: {} inputs",
            dir.display(),
            corpus.len()
        );
        corpus
    }

    /// Every committed input, then 20,000 fixed-seed mutations of them.
    fn replay(target: &str, check: fn(&[u8])) {
        let corpus = target_corpus(target);
        for input in &corpus {
            check(input);
        }
        mutations(&corpus, 0x6b65_796c_6174_6368, 20_000, check);
    }

    #[test]
    fn from_reply_corpus_and_mutations() {
        replay("from_reply", check_from_reply);
    }

    /// Its corpus began as `from_reply`'s, found while the two were one
    /// target.
    #[test]
    fn topology_corpus_and_mutations() {
        replay("topology", check_topology);
    }

    #[test]
    fn server_error_corpus_and_mutations() {
        replay("server_error", check_server_error);
    }

    #[test]
    fn push_corpus_and_mutations() {
        replay("push", check_push);
    }

    #[test]
    fn resp_input_is_decoded_and_byte_code_reaches_every_shape() {
        let f = frames(b"*2\r\n$7\r\nmessage\r\n:1\r\n+OK\r\n*1\r\n");
        assert_eq!(f.len(), 2, "the incomplete third frame is left out");
        assert_eq!(f[1], "OK");
        // Byte code: op 8 (push) of two items: word 1 ("pmessage"), op 2
        // (integer) of INTEGERS[1] (1).
        let f = frames(&[0xff, 8, 2, 3, 1, 2, 1]);
        assert_eq!(
            f,
            [Frame::Push(vec![
                Frame::Bulk(Bytes::from_static(b"pmessage")),
                Frame::Integer(1)
            ])]
        );
        assert!(frames(b"").is_empty());
    }

    #[test]
    fn the_checks_can_fail() {
        // A check that rejects a shape the corpus holds must fail the
        // replay: the replay is not vacuous.
        fn no_push(data: &[u8]) {
            assert!(!frames(data).iter().any(|f| matches!(f, Frame::Push(_))));
        }
        let caught = std::panic::catch_unwind(|| replay("push", no_push));
        assert!(caught.is_err());
    }
}
