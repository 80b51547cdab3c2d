//! Decoder throughput and allocations per reply.
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin decode [-- --mib 64]
//! ```
//!
//! Each case encodes a stream of frames (about `--mib` MiB), then decodes it
//! (a) from one buffer holding everything and (b) fed in 16 KiB pieces the way
//! socket reads arrive. Only the decoding is timed. A counting global
//! allocator reports allocations per frame during decoding.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use keylatch_resp::{Decoder, Limits};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: delegates every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

struct Case {
    name: &'static str,
    one: Vec<u8>,
}

fn bulk(n: usize) -> Vec<u8> {
    let mut v = format!("${n}\r\n").into_bytes();
    v.extend((0..n).map(|i| b'a' + (i % 26) as u8));
    v.extend_from_slice(b"\r\n");
    v
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "small: +OK",
            one: b"+OK\r\n".to_vec(),
        },
        Case {
            name: "small: :integer",
            one: b":1234567\r\n".to_vec(),
        },
        Case {
            name: "small: 16 B bulk",
            one: bulk(16),
        },
        Case {
            name: "small: nil bulk",
            one: b"$-1\r\n".to_vec(),
        },
        Case {
            name: "bulk 1 KiB",
            one: bulk(1024),
        },
        Case {
            name: "bulk 64 KiB",
            one: bulk(64 * 1024),
        },
        Case {
            name: "bulk 1 MiB",
            one: bulk(1024 * 1024),
        },
        Case {
            name: "nested arrays (3 levels)",
            one: b"*3\r\n*2\r\n$5\r\nhello\r\n:1\r\n%1\r\n+k\r\n*2\r\n:1\r\n:2\r\n#t\r\n".to_vec(),
        },
    ]
}

fn decode_all(buf: &mut BytesMut, dec: &mut Decoder) -> u64 {
    let mut n = 0;
    while let Some(f) = dec.decode(buf).expect("valid input") {
        std::hint::black_box(&f);
        n += 1;
    }
    n
}

fn main() {
    let mut mib = 64usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--mib" {
            mib = args.next().and_then(|v| v.parse().ok()).expect("--mib N");
        }
    }
    println!(
        "{:<26} {:>10} {:>12} {:>12} {:>12} {:>12}",
        "case", "frames", "whole MB/s", "whole Mfr/s", "16K MB/s", "allocs/frame"
    );
    let mut worst_bulk_rate = f64::MAX;
    for case in cases() {
        let reps = ((mib << 20) / case.one.len()).max(8);
        let mut input = Vec::with_capacity(reps * case.one.len());
        for _ in 0..reps {
            input.extend_from_slice(&case.one);
        }
        let bytes = input.len() as f64;

        // (a) whole buffer; best of 3 to dodge noise.
        let mut best = Duration::MAX;
        let mut allocs_per_frame = 0.0;
        for _ in 0..3 {
            let mut buf = BytesMut::from(&input[..]);
            let mut dec = Decoder::new(Limits::default());
            let a0 = ALLOCS.load(Ordering::Relaxed);
            let t = Instant::now();
            let n = decode_all(&mut buf, &mut dec);
            let el = t.elapsed();
            let a1 = ALLOCS.load(Ordering::Relaxed);
            assert_eq!(n as usize, reps);
            best = best.min(el);
            allocs_per_frame = (a1 - a0) as f64 / n as f64;
        }
        // (b) socket-like 16 KiB pieces (includes the copy into the buffer,
        // which a socket read does anyway).
        let mut best_chunked = Duration::MAX;
        for _ in 0..3 {
            let mut buf = BytesMut::with_capacity(64 * 1024);
            let mut dec = Decoder::new(Limits::default());
            let t = Instant::now();
            let mut n = 0;
            for piece in input.chunks(16 * 1024) {
                let need = dec.needed();
                if need > buf.capacity() - buf.len() {
                    buf.reserve(need);
                }
                buf.extend_from_slice(piece);
                n += decode_all(&mut buf, &mut dec);
            }
            assert_eq!(n as usize, reps);
            best_chunked = best_chunked.min(t.elapsed());
        }
        let mbs = bytes / best.as_secs_f64() / 1e6;
        let mbs_chunked = bytes / best_chunked.as_secs_f64() / 1e6;
        if case.name.starts_with("bulk") {
            worst_bulk_rate = worst_bulk_rate.min(mbs_chunked);
        }
        println!(
            "{:<26} {:>10} {:>12.0} {:>12.2} {:>12.0} {:>12.3}",
            case.name,
            reps,
            mbs,
            reps as f64 / best.as_secs_f64() / 1e6,
            mbs_chunked,
            allocs_per_frame
        );
    }
    println!("slowest bulk case, 16 KiB pieces: {worst_bulk_rate:.0} MB/s");
}
