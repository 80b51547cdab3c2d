use bytes::{Bytes, BytesMut};

use super::{decode_pieces, decode_whole, one};
use crate::{Attributed, Decoder, Frame, Limits, ProtocolError};

fn b(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

fn ok(input: &[u8]) -> Frame {
    let mut buf = BytesMut::from(input);
    let f = Decoder::default()
        .decode(&mut buf)
        .unwrap_or_else(|e| panic!("{:?}: {e}", input.escape_ascii().to_string()))
        .unwrap_or_else(|| panic!("{:?}: incomplete", input.escape_ascii().to_string()));
    assert!(buf.is_empty(), "leftover after {input:?}");
    f
}

fn err(input: &[u8]) -> ProtocolError {
    match one(input) {
        Err(e) => e,
        Ok(f) => panic!("{:?} decoded to {f:?}", input.escape_ascii().to_string()),
    }
}

#[test]
fn resp2_types() {
    assert_eq!(ok(b"+OK\r\n"), Frame::Simple(b("OK")));
    assert_eq!(ok(b"+\r\n"), Frame::Simple(b("")));
    assert_eq!(
        ok(b"-ERR wrong type\r\n"),
        Frame::Error(b("ERR wrong type"))
    );
    assert_eq!(ok(b":0\r\n"), Frame::Integer(0));
    assert_eq!(ok(b":-2\r\n"), Frame::Integer(-2));
    assert_eq!(ok(b":+7\r\n"), Frame::Integer(7));
    assert_eq!(ok(b":-9223372036854775808\r\n"), Frame::Integer(i64::MIN));
    assert_eq!(ok(b"$3\r\nfoo\r\n"), Frame::Bulk(b("foo")));
    assert_eq!(ok(b"$0\r\n\r\n"), Frame::Bulk(b("")));
    assert_eq!(ok(b"$4\r\na\r\nb\r\n"), Frame::Bulk(b("a\r\nb")));
    assert_eq!(ok(b"$-1\r\n"), Frame::Null);
    assert_eq!(ok(b"*-1\r\n"), Frame::Null);
    assert_eq!(ok(b"*0\r\n"), Frame::Array(vec![]));
    assert_eq!(
        ok(b"*3\r\n:1\r\n*2\r\n$1\r\na\r\n$-1\r\n*0\r\n"),
        Frame::Array(vec![
            Frame::Integer(1),
            Frame::Array(vec![Frame::Bulk(b("a")), Frame::Null]),
            Frame::Array(vec![]),
        ])
    );
}

#[test]
fn resp3_types() {
    assert_eq!(ok(b"_\r\n"), Frame::Null);
    assert_eq!(
        ok(b"%2\r\n+a\r\n:1\r\n$1\r\nb\r\n%0\r\n"),
        Frame::Map(vec![
            (Frame::Simple(b("a")), Frame::Integer(1)),
            (Frame::Bulk(b("b")), Frame::Map(vec![])),
        ])
    );
    assert_eq!(
        ok(b"~2\r\n#t\r\n#f\r\n"),
        Frame::Set(vec![Frame::Boolean(true), Frame::Boolean(false)])
    );
    assert_eq!(
        ok(b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"),
        Frame::Push(vec![
            Frame::Bulk(b("message")),
            Frame::Bulk(b("ch")),
            Frame::Bulk(b("hi"))
        ])
    );
    assert_eq!(ok(b",1.5\r\n"), Frame::Double(1.5));
    assert_eq!(ok(b",-0.25e2\r\n"), Frame::Double(-25.0));
    assert_eq!(ok(b",10\r\n"), Frame::Double(10.0));
    assert_eq!(ok(b",inf\r\n"), Frame::Double(f64::INFINITY));
    assert_eq!(ok(b",+inf\r\n"), Frame::Double(f64::INFINITY));
    assert_eq!(ok(b",-inf\r\n"), Frame::Double(f64::NEG_INFINITY));
    assert!(matches!(ok(b",nan\r\n"), Frame::Double(d) if d.is_nan()));
    assert_eq!(ok(b"#t\r\n"), Frame::Boolean(true));
    assert_eq!(ok(b"#f\r\n"), Frame::Boolean(false));
    assert_eq!(
        ok(b"(3492890328409238509324850943850943825024385\r\n"),
        Frame::BigNumber(b("3492890328409238509324850943850943825024385"))
    );
    assert_eq!(ok(b"(-1\r\n"), Frame::BigNumber(b("-1")));
    assert_eq!(
        ok(b"=15\r\ntxt:Some string\r\n"),
        Frame::Verbatim {
            format: *b"txt",
            text: b("Some string")
        }
    );
    assert_eq!(
        ok(b"=4\r\nmkd:\r\n"),
        Frame::Verbatim {
            format: *b"mkd",
            text: b("")
        }
    );
    assert_eq!(
        ok(b"!21\r\nSYNTAX invalid syntax\r\n"),
        Frame::Error(b("SYNTAX invalid syntax"))
    );
    assert_eq!(ok(b"!0\r\n\r\n"), Frame::Error(b("")));
}

/// `frame` annotated with `pairs`, as the decoder builds it.
fn attributed(pairs: Vec<(Frame, Frame)>, frame: Frame) -> Frame {
    Frame::Attributed(Box::new(Attributed {
        attributes: pairs,
        frame,
    }))
}

fn simple(s: &'static str) -> Frame {
    Frame::Simple(b(s))
}

#[test]
fn attributes_are_kept_at_top_level() {
    // Before an aggregate: the example of the RESP3 specification.
    let f = ok(b"|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n");
    assert_eq!(
        f,
        attributed(
            vec![(
                simple("key-popularity"),
                Frame::Map(vec![
                    (Frame::Bulk(b("a")), Frame::Double(0.1923)),
                    (Frame::Bulk(b("b")), Frame::Double(0.0012)),
                ])
            )],
            Frame::Array(vec![Frame::Integer(2039123), Frame::Integer(9543892)])
        )
    );
    assert_eq!(
        f.value(),
        &Frame::Array(vec![Frame::Integer(2039123), Frame::Integer(9543892)])
    );
    assert_eq!(f.attributes().map(<[_]>::len), Some(1));
    // Before scalars: numbers (built without a tree when plain), bytes, null, errors.
    assert_eq!(
        ok(b"|1\r\n+a\r\n+b\r\n:3\r\n"),
        attributed(vec![(simple("a"), simple("b"))], Frame::Integer(3))
    );
    assert_eq!(
        ok(b"|0\r\n$2\r\nhi\r\n"),
        attributed(vec![], Frame::Bulk(b("hi")))
    );
    let e = ok(b"|1\r\n+a\r\n+b\r\n-ERR no\r\n");
    assert!(e.is_error());
    assert_eq!(e, "ERR no");
    assert_eq!(
        ok(b"|1\r\n+a\r\n+b\r\n>1\r\n+p\r\n").value(),
        &Frame::Push(vec![simple("p")])
    );
    // Attributes in a row are merged into one list.
    assert_eq!(
        ok(b"|1\r\n+a\r\n+b\r\n|1\r\n+c\r\n+d\r\n_\r\n"),
        attributed(
            vec![(simple("a"), simple("b")), (simple("c"), simple("d"))],
            Frame::Null
        )
    );
    // An attribute alone is not a frame.
    assert_eq!(one(b"|1\r\n+a\r\n+b\r\n"), Ok(None));
    // A frame without attributes has none, and is what it always was.
    assert_eq!(ok(b":3\r\n").attributes(), None);
    assert_eq!(ok(b"*1\r\n:3\r\n"), Frame::Array(vec![Frame::Integer(3)]));
}

#[test]
fn attributes_are_kept_inside_aggregates() {
    // Inside an array: the attribute annotates the element after it and is not counted.
    assert_eq!(
        ok(b"*2\r\n:1\r\n|1\r\n+ttl\r\n:3600\r\n$1\r\nv\r\n"),
        Frame::Array(vec![
            Frame::Integer(1),
            attributed(
                vec![(simple("ttl"), Frame::Integer(3600))],
                Frame::Bulk(b("v"))
            )
        ])
    );
    // Its values may be aggregates, and an element may be one.
    assert_eq!(
        ok(b"*1\r\n|1\r\n+a\r\n*1\r\n:1\r\n*1\r\n:2\r\n"),
        Frame::Array(vec![attributed(
            vec![(simple("a"), Frame::Array(vec![Frame::Integer(1)]))],
            Frame::Array(vec![Frame::Integer(2)])
        )])
    );
    // On a map key and on a map value.
    assert_eq!(
        ok(b"%1\r\n|1\r\n+x\r\n+y\r\n+k\r\n|1\r\n+z\r\n#t\r\n+v\r\n"),
        Frame::Map(vec![(
            attributed(vec![(simple("x"), simple("y"))], simple("k")),
            attributed(vec![(simple("z"), Frame::Boolean(true))], simple("v"))
        )])
    );
    // Attributes of attributes.
    assert_eq!(
        ok(b"|1\r\n|1\r\n+m\r\n+n\r\n+k\r\n+v\r\n:1\r\n"),
        attributed(
            vec![(
                attributed(vec![(simple("m"), simple("n"))], simple("k")),
                simple("v")
            )],
            Frame::Integer(1)
        )
    );
}

#[test]
fn attributed_frames_decode_the_same_at_every_split() {
    let input: &[u8] = b"|1\r\n+ttl\r\n:3\r\n$5\r\nhello\r\n:1\r\n*2\r\n|1\r\n$1\r\nk\r\n%1\r\n+a\r\n,1.5\r\n-ERR x\r\n|0\r\n_\r\n|2\r\n+a\r\n+b\r\n+c\r\n*0\r\n#t\r\n";
    let (whole, e, rest) = decode_whole(input, Limits::default());
    assert_eq!((e, rest), (None, 0));
    assert_eq!(whole.len(), 4);
    assert_eq!(whole[1], Frame::Integer(1));
    for cut in 0..=input.len() {
        assert_eq!(
            decode_pieces(input, &[cut], Limits::default()),
            (whole.clone(), None, 0),
            "cut at {cut}"
        );
    }
    let bytewise: Vec<usize> = (1..input.len()).collect();
    assert_eq!(
        decode_pieces(input, &bytewise, Limits::default()),
        (whole, None, 0)
    );
}

#[test]
fn attributed_frames_round_trip_through_the_encoder() {
    for input in [
        &b"|1\r\n+ttl\r\n:3\r\n$5\r\nhello\r\n"[..],
        b"|0\r\n_\r\n",
        b"*2\r\n|1\r\n+k\r\n%1\r\n+a\r\n,1.5\r\n-ERR x\r\n:1\r\n",
        b"%1\r\n|1\r\n+x\r\n+y\r\n+k\r\n|1\r\n+z\r\n#t\r\n+v\r\n",
        b"|1\r\n|1\r\n+m\r\n+n\r\n+k\r\n+v\r\n>1\r\n+p\r\n",
    ] {
        let f = ok(input);
        let mut out = BytesMut::new();
        f.encode(&mut out);
        assert_eq!(&out[..], input, "{f}");
        assert_eq!(f.encoded_len(), input.len());
        assert_eq!(ok(&out), f);
    }
    // Attributes in a row come back as one.
    let f = ok(b"|1\r\n+a\r\n+b\r\n|1\r\n+c\r\n+d\r\n:1\r\n");
    let mut out = BytesMut::new();
    f.encode(&mut out);
    assert_eq!(&out[..], b"|2\r\n+a\r\n+b\r\n+c\r\n+d\r\n:1\r\n");
    assert_eq!(ok(&out), f);
}

#[test]
fn attribute_elements_count_toward_the_limits() {
    // tiny(): 4 per aggregate, 12 per frame, depth 3.
    let l = tiny();
    let two = "|2\r\n_\r\n_\r\n_\r\n_\r\n";
    let four = "*4\r\n_\r\n_\r\n_\r\n_\r\n";
    // 4 + 4 (two attributes in a row) + 4 (the array) = 12: at the cap.
    let at_cap = format!("{two}{two}{four}");
    let (frames, e, _) = decode_whole(at_cap.as_bytes(), l);
    assert_eq!((frames.len(), e), (1, None));
    let over = format!("{two}{two}*1\r\n{four}");
    assert_eq!(
        decode_whole(over.as_bytes(), l).1,
        Some(ProtocolError::FrameTooLarge { items: 13, max: 12 })
    );
    // Attributes inside an aggregate: refused at the header that breaks the cap.
    let over = format!("*4\r\n{two}_\r\n{two}_\r\n|1\r\n");
    assert_eq!(
        decode_whole(over.as_bytes(), l).1,
        Some(ProtocolError::FrameTooLarge { items: 14, max: 12 })
    );
    // Aggregate length and depth, as before.
    assert_eq!(
        decode_whole(b"|3\r\n", l).1,
        Some(ProtocolError::AggregateTooLong { len: 6, max: 4 })
    );
    assert_eq!(
        decode_whole(b"*1\r\n|1\r\n*1\r\n*0\r\n", l).1,
        Some(ProtocolError::TooDeep { max: 3 })
    );
    // An attributed element at the deepest level allowed is fine.
    assert_eq!(
        decode_whole(b"*1\r\n*1\r\n|1\r\n+a\r\n+b\r\n*0\r\n", l).0,
        [Frame::Array(vec![Frame::Array(vec![attributed(
            vec![(simple("a"), simple("b"))],
            Frame::Array(vec![])
        )])])]
    );
}

#[test]
fn attributes_do_not_grow_the_frame() {
    // Measured before `Frame::Attributed` existed: 40 bytes on 64-bit targets. The boxed
    // variant keeps it there.
    #[cfg(target_pointer_width = "64")]
    assert_eq!(std::mem::size_of::<Frame>(), 40);
    assert!(std::mem::size_of::<Frame>() <= std::mem::size_of::<(u64, Bytes)>());
}

#[test]
fn an_attributed_bulk_is_not_copied() {
    let mut buf = BytesMut::from(&b"|1\r\n+a\r\n+b\r\n$5\r\nhello\r\n"[..]);
    let base = buf.as_ptr() as usize;
    let f = Decoder::default().decode(&mut buf).unwrap().unwrap();
    let Frame::Bulk(hello) = f.value() else {
        panic!("not a bulk: {f}")
    };
    assert_eq!(hello.as_ptr() as usize, base + 16);
}

#[test]
fn several_frames_in_one_buffer() {
    let (frames, e, rest) = decode_whole(b"+a\r\n:1\r\n*1\r\n_\r\n$1\r\nx", Limits::default());
    assert_eq!(
        frames,
        [
            Frame::Simple(b("a")),
            Frame::Integer(1),
            Frame::Array(vec![Frame::Null])
        ]
    );
    assert_eq!(e, None);
    assert_eq!(rest, 5, "the partial bulk stays in the buffer");
}

fn variant(e: &ProtocolError) -> usize {
    match e {
        ProtocolError::InvalidType(_) => 0,
        ProtocolError::InvalidLength => 1,
        ProtocolError::NegativeLength(_) => 2,
        ProtocolError::BulkTooLong { .. } => 3,
        ProtocolError::AggregateTooLong { .. } => 4,
        ProtocolError::TooDeep { .. } => 5,
        ProtocolError::LineTooLong { .. } => 6,
        ProtocolError::MissingCrlf => 7,
        ProtocolError::InvalidInteger => 8,
        ProtocolError::IntegerOverflow => 9,
        ProtocolError::InvalidDouble => 10,
        ProtocolError::InvalidBoolean => 11,
        ProtocolError::InvalidBigNumber => 12,
        ProtocolError::InvalidVerbatim => 13,
        ProtocolError::StreamedUnsupported(_) => 14,
        ProtocolError::FrameTooLarge { .. } => 15,
    }
}
const VARIANTS: usize = 16;

#[test]
fn malformed_input_table() {
    use ProtocolError as E;
    let deep = "*1\r\n".repeat(65) + ":1\r\n";
    let long_line = format!("+{}\r\n", "a".repeat((64 << 10) + 1));
    let table: Vec<(&[u8], E)> = vec![
        (b"@\r\n", E::InvalidType(b'@')),
        (b"\r\n", E::InvalidType(b'\r')),
        (b"*1\r\nx\r\n", E::InvalidType(b'x')),
        (b"$abc\r\n", E::InvalidLength),
        (b"$\r\n", E::InvalidLength),
        (b"*+1\r\n", E::InvalidLength),
        (b"$-\r\n", E::InvalidLength),
        (b"$1 \r\n", E::InvalidLength),
        (b"$-2\r\n", E::NegativeLength(-2)),
        (b"*-5\r\n", E::NegativeLength(-5)),
        (b"!-1\r\n", E::NegativeLength(-1)),
        (b"~-1\r\n", E::NegativeLength(-1)),
        (b"%-1\r\n", E::NegativeLength(-1)),
        (b">-1\r\n", E::NegativeLength(-1)),
        (b"=-1\r\n", E::NegativeLength(-1)),
        (
            b"$536870913\r\n",
            E::BulkTooLong {
                len: 536870913,
                max: 512 << 20,
            },
        ),
        (
            b"*16777217\r\n",
            E::AggregateTooLong {
                len: 16777217,
                max: 1 << 24,
            },
        ),
        (
            b"*4194305\r\n",
            E::FrameTooLarge {
                items: 4194305,
                max: 1 << 22,
            },
        ),
        (
            b"%8388609\r\n",
            E::AggregateTooLong {
                len: 16777218,
                max: 1 << 24,
            },
        ),
        (deep.as_bytes(), E::TooDeep { max: 64 }),
        (long_line.as_bytes(), E::LineTooLong { max: 64 << 10 }),
        (b"$123456789012345678901\r\n", E::LineTooLong { max: 20 }),
        (b"$3\r\nfooXY", E::MissingCrlf),
        (b"$3\r\nfoo\n\r", E::MissingCrlf),
        (b"+OK\rX", E::MissingCrlf),
        (b"+OK\n", E::MissingCrlf),
        (b"$1\r1\r\n", E::MissingCrlf),
        (b"_x\r\n", E::MissingCrlf),
        (b"_\rx", E::MissingCrlf),
        (b":12a\r\n", E::InvalidInteger),
        (b":\r\n", E::InvalidInteger),
        (b":-\r\n", E::InvalidInteger),
        (b": 1\r\n", E::InvalidInteger),
        (b":9223372036854775808\r\n", E::IntegerOverflow),
        (b":-9223372036854775809\r\n", E::IntegerOverflow),
        (b"$99999999999999999999\r\n", E::IntegerOverflow),
        (b",abc\r\n", E::InvalidDouble),
        (b",\r\n", E::InvalidDouble),
        (b",1.5x\r\n", E::InvalidDouble),
        (b"#x\r\n", E::InvalidBoolean),
        (b"#\r\n", E::InvalidBoolean),
        (b"#tt\r\n", E::InvalidBoolean),
        (b"(12a\r\n", E::InvalidBigNumber),
        (b"(\r\n", E::InvalidBigNumber),
        (b"(-\r\n", E::InvalidBigNumber),
        (b"(+1\r\n", E::InvalidBigNumber),
        (b"=3\r\nabc\r\n", E::InvalidVerbatim),
        (b"=5\r\nabcde\r\n", E::InvalidVerbatim),
        (b"$?\r\n", E::StreamedUnsupported(b'$')),
        (b"*?\r\n", E::StreamedUnsupported(b'*')),
        (b"%?\r\n", E::StreamedUnsupported(b'%')),
        (b";4\r\nabcd\r\n", E::StreamedUnsupported(b';')),
        (b".\r\n", E::StreamedUnsupported(b'.')),
        (b"*2\r\n:1\r\n;0\r\n", E::StreamedUnsupported(b';')),
    ];
    let mut seen = [false; VARIANTS];
    for (input, want) in &table {
        assert_eq!(&err(input), want, "{:?}", input.escape_ascii().to_string());
        seen[variant(want)] = true;
        // The same verdict when the input trickles in byte by byte.
        let cuts: Vec<usize> = (1..input.len()).collect();
        let (_, e, _) = decode_pieces(input, &cuts, Limits::default());
        assert_eq!(
            e.as_ref(),
            Some(want),
            "bytewise {:?}",
            input.escape_ascii().to_string()
        );
    }
    assert!(
        seen.iter().all(|&s| s),
        "every ProtocolError variant is exercised: {seen:?}"
    );
}

#[test]
fn an_error_resets_the_decoder() {
    let mut dec = Decoder::default();
    let mut buf = BytesMut::from(&b"*2\r\n:1\r\n"[..]);
    assert_eq!(dec.decode(&mut buf), Ok(None));
    buf.extend_from_slice(b"@");
    assert!(dec.decode(&mut buf).is_err());
    assert_eq!(buf.len(), 9, "nothing consumed on error");
    buf.clear();
    buf.extend_from_slice(b":5\r\n");
    assert_eq!(dec.decode(&mut buf), Ok(Some(Frame::Integer(5))));
}

fn tiny() -> Limits {
    Limits {
        max_bulk_len: 8,
        max_aggregate_len: 4,
        max_depth: 3,
        max_line_len: 6,
        max_frame_items: 12,
    }
}

#[test]
fn a_frame_may_hold_only_so_many_elements_in_all() {
    // tiny(): 4 per aggregate, 12 per frame.
    let l = tiny();
    let four = "*4\r\n_\r\n_\r\n_\r\n_\r\n";
    let ok = format!("*2\r\n{four}{four}");
    assert_eq!(decode_whole(ok.as_bytes(), l).0.len(), 1, "10 elements");
    let big = format!("*3\r\n{four}{four}{four}");
    assert_eq!(
        decode_whole(big.as_bytes(), l).1,
        Some(ProtocolError::FrameTooLarge { items: 15, max: 12 })
    );
    // The count starts again with every frame.
    let two = format!("{ok}{ok}");
    assert_eq!(decode_whole(two.as_bytes(), l).0.len(), 2);
    assert!(ProtocolError::FrameTooLarge { items: 15, max: 12 }
        .to_string()
        .contains("15 elements"));
}

#[test]
fn a_huge_bulk_header_reserves_room_step_by_step() {
    // 12 bytes announcing 512 MiB: at most one step is reserved before the bytes come.
    let mut decoder = Decoder::default();
    let mut buf = BytesMut::from(&b"$536870912\r\n"[..]);
    assert_eq!(decoder.decode(&mut buf).unwrap(), None);
    assert!(
        buf.capacity() <= crate::RESERVE_STEP + 64,
        "reserved {} bytes for a 12-byte header",
        buf.capacity()
    );
    assert_eq!(decoder.needed(), 536_870_912 + 2);
    // As bytes arrive, room grows with them, never far ahead.
    let chunk = vec![b'x'; 300_000];
    for _ in 0..10 {
        buf.extend_from_slice(&chunk);
        assert_eq!(decoder.decode(&mut buf).unwrap(), None);
        assert!(
            buf.capacity() <= 2 * (buf.len() + crate::RESERVE_STEP),
            "capacity {} for {} bytes",
            buf.capacity(),
            buf.len()
        );
    }
}

#[test]
fn each_limit_is_enforced() {
    let l = tiny();
    let go = |input: &[u8]| decode_whole(input, l);

    assert_eq!(go(b"$8\r\n12345678\r\n").0, [Frame::Bulk(b("12345678"))]);
    assert_eq!(
        go(b"$9\r\n").1,
        Some(ProtocolError::BulkTooLong { len: 9, max: 8 })
    );
    assert_eq!(
        go(b"!9\r\n").1,
        Some(ProtocolError::BulkTooLong { len: 9, max: 8 })
    );
    assert_eq!(
        go(b"=9\r\n").1,
        Some(ProtocolError::BulkTooLong { len: 9, max: 8 })
    );

    assert_eq!(go(b"*4\r\n_\r\n_\r\n_\r\n_\r\n").0.len(), 1);
    assert_eq!(
        go(b"*5\r\n").1,
        Some(ProtocolError::AggregateTooLong { len: 5, max: 4 })
    );
    assert_eq!(
        go(b"~5\r\n").1,
        Some(ProtocolError::AggregateTooLong { len: 5, max: 4 })
    );
    assert_eq!(
        go(b">5\r\n").1,
        Some(ProtocolError::AggregateTooLong { len: 5, max: 4 })
    );
    assert_eq!(go(b"%2\r\n_\r\n_\r\n_\r\n_\r\n").0.len(), 1);
    assert_eq!(
        go(b"%3\r\n").1,
        Some(ProtocolError::AggregateTooLong { len: 6, max: 4 })
    );
    assert_eq!(
        go(b"|3\r\n").1,
        Some(ProtocolError::AggregateTooLong { len: 6, max: 4 })
    );

    assert_eq!(go(b"*1\r\n*1\r\n*0\r\n").0.len(), 1);
    assert_eq!(go(b"*1\r\n*1\r\n*1\r\n_\r\n").0.len(), 1);
    assert_eq!(
        go(b"*1\r\n*1\r\n*1\r\n*0\r\n").1,
        Some(ProtocolError::TooDeep { max: 3 })
    );
    assert_eq!(
        go(b"%1\r\n*1\r\n~1\r\n>1\r\n").1,
        Some(ProtocolError::TooDeep { max: 3 })
    );
    // Attributes nest too.
    assert_eq!(
        go(b"*1\r\n*1\r\n|1\r\n|1\r\n").1,
        Some(ProtocolError::TooDeep { max: 3 })
    );

    assert_eq!(go(b"+123456\r\n").0, [Frame::Simple(b("123456"))]);
    assert_eq!(
        go(b"+1234567\r\n").1,
        Some(ProtocolError::LineTooLong { max: 6 })
    );
    assert_eq!(
        go(b"+1234567").1,
        Some(ProtocolError::LineTooLong { max: 6 })
    );
    assert_eq!(go(b"+123456").1, None, "may still end in CRLF");
    assert_eq!(
        go(b"-1234567").1,
        Some(ProtocolError::LineTooLong { max: 6 })
    );
    assert_eq!(
        go(b":1234567").1,
        Some(ProtocolError::LineTooLong { max: 6 })
    );
    // Length headers have their own fixed bound, not max_line_len.
    assert_eq!(go(b"$0000001\r\nx\r\n").0, [Frame::Bulk(b("x"))]);
}

#[test]
fn depth_is_capped_at_512() {
    let limits = Limits {
        max_depth: usize::MAX,
        ..Limits::default()
    };
    let nested = "*1\r\n".repeat(513) + "_\r\n";
    assert_eq!(
        decode_whole(nested.as_bytes(), limits).1,
        Some(ProtocolError::TooDeep { max: 512 })
    );
    let nested = "*1\r\n".repeat(512) + "_\r\n";
    let (frames, e, _) = decode_whole(nested.as_bytes(), limits);
    assert_eq!((frames.len(), e), (1, None));
}

#[test]
fn hostile_headers_neither_allocate_nor_hang() {
    for input in [
        &b"*2147483647\r\n"[..],
        b"$536870913\r\n",
        b"%9223372036854775807\r\n",
    ] {
        let mut buf = BytesMut::from(input);
        let cap = buf.capacity();
        assert!(Decoder::default().decode(&mut buf).is_err());
        assert_eq!(buf.capacity(), cap);
    }
    // At the frame's element limit (below the aggregate limit) the header is accepted, but
    // only the stack remembers the count.
    let mut dec = Decoder::default();
    let mut buf = BytesMut::from(&b"*4194304\r\n:1\r\n"[..]);
    let cap = buf.capacity();
    assert_eq!(dec.decode(&mut buf), Ok(None));
    assert_eq!(buf.capacity(), cap);
    assert_eq!(dec.needed(), 0);
    // A huge count with garbage after it fails on the garbage.
    assert_eq!(
        one(b"*4194304\r\n:1\r\n@"),
        Err(ProtocolError::InvalidType(b'@'))
    );
    // One over: refused at the header, before any tree.
    assert_eq!(
        one(b"*16777216\r\n:1\r\n"),
        Err(ProtocolError::FrameTooLarge {
            items: 16777216,
            max: 1 << 22
        })
    );
}

#[test]
fn a_big_bulk_is_not_rescanned_and_needed_is_exact() {
    const LEN: usize = 1 << 20;
    let mut input = format!("${LEN}\r\n").into_bytes();
    let header = input.len();
    input.extend(std::iter::repeat(b'x').take(LEN));
    input.extend_from_slice(b"\r\n");

    let mut dec = Decoder::default();
    let mut buf = BytesMut::new();
    let mut chunks = input.chunks(4096);
    let first = chunks.next().unwrap();
    buf.extend_from_slice(first);
    assert_eq!(dec.decode(&mut buf), Ok(None));
    assert_eq!(dec.needed(), input.len() - first.len());
    assert!(
        buf.capacity() >= input.len(),
        "the body's room is reserved at the header"
    );
    let scanned_after_header = dec.scanned;
    assert!(scanned_after_header <= header, "{scanned_after_header}");

    let ptr = buf.as_ptr();
    let mut result = None;
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        assert_eq!(buf.as_ptr(), ptr, "no reallocation while the body arrives");
        match dec.decode(&mut buf).unwrap() {
            Some(f) => result = Some(f),
            None => assert_eq!(dec.needed(), input.len() - buf.len()),
        }
    }
    assert_eq!(
        dec.scanned, scanned_after_header,
        "body bytes are never scanned"
    );
    let Some(Frame::Bulk(body)) = result else {
        panic!("no bulk")
    };
    assert_eq!(body.len(), LEN);
    assert!(buf.is_empty());
    assert_eq!(dec.needed(), 0);
}

#[test]
fn a_partial_line_is_not_rescanned() {
    let text = "y".repeat(60_000);
    let input = format!("*2\r\n+{text}\r\n:1\r\n");
    let mut dec = Decoder::default();
    let mut buf = BytesMut::new();
    let mut got = None;
    for chunk in input.as_bytes().chunks(100) {
        buf.extend_from_slice(chunk);
        if let Some(f) = dec.decode(&mut buf).unwrap() {
            got = Some(f);
        }
    }
    assert!(
        dec.scanned <= input.len(),
        "linear, not quadratic: {}",
        dec.scanned
    );
    let Some(Frame::Array(items)) = got else {
        panic!("no array")
    };
    assert_eq!(items[0].as_bytes().map(|b| b.len()), Some(60_000));
}

#[test]
fn validated_elements_are_not_rescanned() {
    // An array of many small elements arriving byte by byte: each byte is examined once by
    // the scan (the build pass afterwards is separate and single).
    let mut input = b"*1000\r\n".to_vec();
    for i in 0..1000 {
        input.extend_from_slice(format!(":{i}\r\n").as_bytes());
    }
    let mut dec = Decoder::default();
    let mut buf = BytesMut::new();
    let mut frames = 0;
    for &byte in &input {
        buf.extend_from_slice(&[byte]);
        frames += usize::from(dec.decode(&mut buf).unwrap().is_some());
    }
    assert_eq!(frames, 1);
    assert!(
        dec.scanned <= input.len(),
        "{} > {}",
        dec.scanned,
        input.len()
    );
}

#[test]
fn zero_copy_bulk() {
    const LEN: usize = 1 << 20;
    let mut buf = BytesMut::with_capacity(LEN + 64);
    buf.extend_from_slice(format!("${LEN}\r\n").as_bytes());
    buf.extend(std::iter::repeat(b'z').take(LEN));
    buf.extend_from_slice(b"\r\n:7\r\n");
    let base = buf.as_ptr() as usize;
    let range = base..base + buf.capacity();

    let mut dec = Decoder::default();
    let Some(Frame::Bulk(body)) = dec.decode(&mut buf).unwrap() else {
        panic!("not a bulk")
    };
    let start = body.as_ptr() as usize;
    assert!(range.contains(&start) && start + body.len() <= range.end);
    assert_eq!(body.len(), LEN);

    // Also inside an aggregate.
    let mut buf = BytesMut::from(&b"*2\r\n$5\r\nhello\r\n+OK\r\n"[..]);
    let base = buf.as_ptr() as usize;
    let Some(Frame::Array(items)) = dec.decode(&mut buf).unwrap() else {
        panic!("not an array")
    };
    let Frame::Bulk(hello) = &items[0] else {
        panic!("not a bulk")
    };
    assert_eq!(hello.as_ptr() as usize, base + 8);
}
