//! The `server_error` target: error lines, their kinds and redirects.

use bytes::Bytes;
use keylatch_resp::Frame;

use crate::error::{Error, RetryClass, ServerError, ServerErrorKind};
use crate::reply::check;
use crate::routed::redirect_addr;
use crate::topology::{join_host_port, split_addr};

/// Parses `data` as an error line (`Error::from_server_error`, as an error
/// frame through the reply check, inside `Error::Routing`), then builds
/// well-formed `MOVED`/`ASK` lines from it. Never panics; asserts that the
/// kind is the first word's (or `UnknownCommand` for an `ERR unknown
/// (sub)command` line), that the retry class and the predicates agree with
/// it, that a redirect has a slot below 16384 and is the line's second and
/// third words, that every well-formed redirect parses back to the slot
/// and address it was built from (and out-of-range slots to none), and
/// that the router's address handling (`split_addr`, `redirect_addr`)
/// gives back the host and port.
pub fn check_server_error(data: &[u8]) {
    let e = Error::from_server_error(data);
    let Some(se) = e.as_server_error() else {
        panic!("not a server error: {e:?}");
    };
    classified(data, se);
    let kind = se.kind();
    assert_eq!(e.server_kind(), Some(kind));
    assert!(!e.is_unknown_outcome() && !e.is_connection_error());
    assert_eq!(
        e.is_redirect(),
        matches!(kind, ServerErrorKind::Moved | ServerErrorKind::Ask)
    );
    assert_eq!(e.is_redirect(), kind.retry_class() == RetryClass::Redirect);
    assert_eq!(e.to_string(), format!("server error: {}", se.message()));
    match check(Frame::Error(Bytes::copy_from_slice(data))) {
        Err(Error::Server(again)) => assert_eq!(&again, se),
        other => panic!("error frame checked into {other:?}"),
    }
    let routed = Error::Routing {
        slot: None,
        tried: Vec::new(),
        last: Box::new(e.clone()),
    };
    assert_eq!(routed.server_kind(), Some(kind));
    assert_eq!(routed.is_redirect(), e.is_redirect());
    redirect(data, se);
    well_formed(data);
}

fn classified(data: &[u8], se: &ServerError) {
    let code_end = data.iter().position(|&b| b == b' ').unwrap_or(data.len());
    let code = &data[..code_end];
    assert_eq!(se.as_bytes(), data);
    assert_eq!(se.code(), std::str::from_utf8(code).unwrap_or(""));
    assert_eq!(se.message(), String::from_utf8_lossy(data));
    let by_code = ServerErrorKind::from_code(code);
    if by_code == ServerErrorKind::Other {
        let unknown = [&b"ERR unknown command"[..], b"ERR unknown subcommand"]
            .iter()
            .any(|p| data.len() >= p.len() && data[..p.len()].eq_ignore_ascii_case(p));
        let want = if unknown {
            ServerErrorKind::UnknownCommand
        } else {
            ServerErrorKind::Other
        };
        assert_eq!(se.kind(), want);
    } else {
        assert_eq!(se.kind(), by_code);
    }
}

/// What `redirect()` makes of an arbitrary line.
fn redirect(data: &[u8], se: &ServerError) {
    let words = std::str::from_utf8(data).ok().map(|t| {
        let mut w = t.split(' ');
        (w.next(), w.next(), w.next())
    });
    match se.redirect() {
        Some((slot, addr)) => {
            assert!(slot < 16384, "slot {slot}");
            assert!(matches!(
                se.kind(),
                ServerErrorKind::Moved | ServerErrorKind::Ask
            ));
            let Some((_, Some(s), Some(a))) = words else {
                panic!("redirect from {data:?}");
            };
            assert_eq!(s.parse::<u16>().ok(), Some(slot));
            assert_eq!(a, addr);
            // The router's address: the redirecting node's host when the
            // line has none, else the line's.
            let to = redirect_addr(addr, "10.0.0.5:7000");
            match split_addr(addr) {
                Some((host, port)) if host.is_empty() => {
                    assert_eq!(to, format!("10.0.0.5:{port}"));
                }
                _ => assert_eq!(to, addr),
            }
        }
        None => {
            if matches!(se.kind(), ServerErrorKind::Moved | ServerErrorKind::Ask) {
                // No redirect: the slot or the address is missing or bad.
                let parsed = words.and_then(|(_, s, a)| Some((s?.parse::<u16>().ok()?, a?)));
                assert!(
                    parsed.map_or(true, |(s, _)| s >= 16384),
                    "{data:?} should redirect"
                );
            }
        }
    }
}

/// `MOVED`/`ASK` lines built from the input: a slot from its first two
/// bytes, a port from the next two, a host from the rest (letters, digits,
/// `.-_:`; colons make it IPv6, in brackets).
fn well_formed(data: &[u8]) {
    let Some((&[a, b, c, d], rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let slot = u16::from_le_bytes([a, b]) % 16384;
    let port = u16::from_le_bytes([c, d]);
    let host: String = rest
        .iter()
        .filter(|b| b.is_ascii_alphanumeric() || b".-_:".contains(b))
        .map(|&b| char::from(b))
        .collect();
    let addr = join_host_port(&host, port);
    assert_eq!(split_addr(&addr), Some((host.clone(), port)));
    for word in ["MOVED", "ASK"] {
        let line = format!("{word} {slot} {addr}");
        let e = ServerError::parse(Bytes::from(line.clone()));
        assert_eq!(e.redirect(), Some((slot, addr.as_str())), "{line}");
        assert!(Error::from_server_error(line.as_bytes()).is_redirect());
        let to = redirect_addr(&addr, "[::1]:7000");
        if host.is_empty() {
            assert_eq!(to, format!("[::1]:{port}"));
        } else {
            assert_eq!(to, addr);
        }
        // The same slot past the table, or not a number: no redirect.
        let out = u32::from(slot) + 16384 * (1 + u32::from(a % 3));
        let bad = ServerError::parse(Bytes::from(format!("{word} {out} {addr}")));
        assert_eq!(bad.redirect(), None);
        let bad = ServerError::parse(Bytes::from(format!("{word} x{slot} {addr}")));
        assert_eq!(bad.redirect(), None);
    }
}
