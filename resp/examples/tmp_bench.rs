use bytes::BytesMut;
use keylatch_resp::{Cmd, Decoder};
use std::time::Instant;
fn main() {
    for input in [&b"+OK\r\n"[..], b"$3\r\nfoo\r\n", b":12\r\n", b"*3\r\n$3\r\nfoo\r\n:1\r\n+OK\r\n"] {
        let mut dec = Decoder::default();
        let mut buf = BytesMut::with_capacity(1 << 16);
        let n = 5_000_000;
        let t = Instant::now();
        let mut k = 0usize;
        for _ in 0..n {
            if buf.capacity() - buf.len() < 64 { buf.reserve(1 << 16); }
            buf.extend_from_slice(input);
            let f = dec.decode(&mut buf).unwrap().unwrap();
            k += std::hint::black_box(&f).encoded_len();
        }
        println!("{:?}: {:.1} ns/frame ({k})", input.escape_ascii().to_string(), t.elapsed().as_nanos() as f64 / n as f64);
    }
    let t = Instant::now();
    let mut out = BytesMut::with_capacity(1<<20);
    for i in 0..5_000_000u64 {
        let c = Cmd::new("SET").key("lock:resource").arg("token-abcdef").arg("PX").arg(30000).arg("NX");
        c.encode(&mut out);
        if out.len() > (1<<19) { out.clear(); }
        std::hint::black_box(i);
    }
    println!("cmd build+encode: {:.1} ns", t.elapsed().as_nanos() as f64 / 5e6);
}
