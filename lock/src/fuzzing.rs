//! Fuzzing entry point (cargo feature `fuzzing`, off by default; hidden):
//! the lock layer's reading of script replies, on arbitrary frames.
//!
//! The libFuzzer target `lock_reply` in the repository's `fuzz/` calls
//! [`check_lock_reply`]; this crate's unit tests replay the committed
//! corpus (`fuzz/corpus/lock_reply/`) and a bounded fixed-seed run of
//! mutations through it. Not an API: it may change with any release.

use keylatch_cluster::fuzzing::{frames, known};
use keylatch_cluster::{Error, ServerErrorKind};
use keylatch_resp::Frame;

use crate::error::LockError;
use crate::lease::{found, verdicts};
use crate::lock::retriable;
use crate::reply::{acquire_reply, parse_pair, waiter_held, AcquireReply};
use crate::types::multilock::{multi_reply, MultiReply};
use crate::types::semaphore::{integer, renew_reply, sem_reply, SemReply};

/// Reads every frame of `data` ([`frames`]) as each script reply the lock
/// layer parses: an acquire's `{holds, value}` (reentrant, fair, fenced,
/// read-write, RedLock members), a multi-lock's `{1, holds, token, …}` /
/// `{0, i, pttl}`, a semaphore's `{status, hint}`, counts, a permit
/// renewal, the lease engine's verdicts and tracked reads, and the release
/// retry decision for error replies. Never panics; asserts that a
/// malformed reply is a [`LockError::Protocol`] (or an unknown verdict),
/// never a hold: a lock is taken only from a well-formed reply with at
/// least one hold, a multi-lock only with one such pair per member, a
/// semaphore's permits only with status 1.
pub fn check_lock_reply(data: &[u8]) {
    for frame in frames(data) {
        acquire(&frame);
        // One member, and as many as a taken reply of this length has.
        let len = match &frame {
            Frame::Array(v) => v.len(),
            _ => 0,
        };
        multi(&frame, 1);
        if len > 4 {
            multi(&frame, (len - 1) / 2);
        }
        semaphore(&frame);
        lease(&frame);
        release(&frame);
    }
}

/// Whether the frame and everything in it are of variants the checks
/// know; for others (RESP3 attributes) only consistency is checked.
fn plain(frame: &Frame) -> bool {
    known(frame)
        && match frame {
            Frame::Array(v) | Frame::Set(v) | Frame::Push(v) => v.iter().all(plain),
            Frame::Map(p) => p.iter().all(|(k, v)| plain(k) && plain(v)),
            _ => true,
        }
}

/// The integers of a plain array of integers only.
fn ints(frame: &Frame) -> Option<Vec<i64>> {
    match frame {
        Frame::Array(v) => v
            .iter()
            .map(|f| match f {
                Frame::Integer(i) => Some(*i),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

fn protocol(e: &LockError) {
    assert!(matches!(e, LockError::Protocol(_)), "{e:?}");
}

fn acquire(frame: &Frame) {
    let pair = parse_pair(frame);
    match &pair {
        Ok((a, b)) if plain(frame) => assert_eq!(ints(frame), Some(vec![*a, *b])),
        Ok(_) => {}
        Err(e) => {
            protocol(e);
            assert!(ints(frame).map_or(true, |v| v.len() != 2), "{frame}");
        }
    }
    if let Some((pttl, counter, _)) = waiter_held(frame) {
        assert_eq!(
            acquire_reply(frame).ok(),
            Some(AcquireReply::Held(pttl, counter)),
            "{frame}"
        );
        return;
    }
    match (acquire_reply(frame), pair) {
        (
            Ok(AcquireReply::Taken {
                holds,
                value,
                made: false,
            }),
            Ok((h, v)),
        ) => {
            assert!(holds >= 1 && holds == h && value == v);
        }
        (
            Ok(AcquireReply::Taken {
                holds: 1,
                value,
                made: true,
            }),
            Err(_),
        ) => {
            // `[1, token, 1]` seen through attributes.
            let Frame::Array(items) = frame.value() else {
                panic!("{frame}: made from no array");
            };
            let three: Vec<_> = items.iter().map(|f| f.value().clone()).collect();
            assert_eq!(
                three,
                [Frame::Integer(1), Frame::Integer(value), Frame::Integer(1)],
                "{frame}"
            );
        }
        (Ok(AcquireReply::Held(pttl, 0)), Ok((0, v))) => assert_eq!(pttl, v),
        (Ok(AcquireReply::NotReentrant), Ok((h, _))) => assert!(h < 0 && h != -2),
        (Ok(AcquireReply::UpgradeRefused), Ok((-2, _))) => {}
        (Err(e), Err(_)) => protocol(&e),
        // A hold with a negative token (or read session) is no hold.
        (Err(e), Ok((h, v))) if h >= 1 && v < 0 => protocol(&e),
        (got, pair) => panic!("{frame}: {got:?} from the pair {pair:?}"),
    }
}

fn multi(frame: &Frame, members: usize) {
    let shape = plain(frame).then(|| ints(frame)).flatten();
    match multi_reply(frame, members) {
        Ok(MultiReply::Taken(pairs)) => {
            assert_eq!(pairs.len(), members);
            assert!(pairs.iter().all(|&(holds, _)| holds >= 1), "{frame}");
            if let Some(v) = shape {
                let flat: Vec<i64> = pairs.iter().flat_map(|&(h, t)| [h, t]).collect();
                assert_eq!(v[0], 1);
                assert_eq!(v[1..], flat[..]);
            } else {
                assert!(!plain(frame), "{frame}");
            }
        }
        Ok(MultiReply::Busy { member, pttl }) => {
            assert!(member < members);
            if let Some(v) = shape {
                assert!(v.len() >= 3 && v[0] != 1 && v[2] == pttl, "{frame}");
            } else if plain(frame) {
                // Extra elements past the three read may be anything.
                let Frame::Array(items) = frame else {
                    panic!("{frame}: busy from no array");
                };
                assert!(matches!(items.get(2), Some(Frame::Integer(p)) if *p == pttl));
            }
        }
        Err(e) => {
            protocol(&e);
            if let Some(v) = shape {
                let taken =
                    v.len() == 1 + 2 * members && v[0] == 1 && v[1..].chunks(2).all(|p| p[0] >= 1);
                assert!(!taken, "{frame} is a well-formed taken reply");
                let busy = v.len() >= 3
                    && v[0] != 1
                    && usize::try_from(v[1].max(1) - 1).is_ok_and(|m| m < members);
                assert!(!busy, "{frame} is a well-formed busy reply");
            }
        }
    }
}

fn semaphore(frame: &Frame) {
    match (sem_reply(frame), parse_pair(frame)) {
        (Ok(SemReply::Got), Ok((1, _)))
        | (Ok(SemReply::Missing), Ok((-1, _)))
        | (Ok(SemReply::WrongType), Ok((-3, _))) => {}
        (Ok(SemReply::Short(hint)), Ok((s, h))) => {
            assert!(s != 1 && s != -1 && s != -3 && hint == h)
        }
        (Err(e), Err(_)) => protocol(&e),
        (got, pair) => panic!("{frame}: {got:?} from the pair {pair:?}"),
    }
    match integer(frame) {
        Ok(n) => assert!(!plain(frame) || *frame == Frame::Integer(n), "{frame}"),
        Err(e) => {
            protocol(&e);
            assert!(!matches!(frame, Frame::Integer(_)));
        }
    }
    let first = match frame {
        Frame::Array(v) => v.first(),
        _ => None,
    };
    match renew_reply(frame.clone()) {
        Ok(stands) => {
            if plain(frame) {
                let want = Frame::Integer(i64::from(stands));
                assert_eq!(first, Some(&want), "{frame}");
            }
        }
        Err(e) => {
            protocol(&e);
            assert!(
                !matches!(first, Some(Frame::Integer(0 | 1))),
                "{frame} is a well-formed renewal"
            );
        }
    }
}

fn lease(frame: &Frame) {
    let len = match frame {
        Frame::Array(v) => v.len(),
        _ => 0,
    };
    for n in [0, 1, 2, len] {
        match verdicts(Ok(frame.clone()), n) {
            Some(v) => {
                assert_eq!(v.len(), n);
                if plain(frame) {
                    assert_eq!(ints(frame), Some(v));
                }
            }
            None => assert!(ints(frame).map_or(true, |v| v.len() != n), "{frame}"),
        }
        assert_eq!(verdicts(Err(Error::Timeout), n), None);
    }
    match found(Some(&Ok(frame.clone()))) {
        Some(held) => {
            if plain(frame) {
                assert!(
                    matches!(frame, Frame::Integer(i) if (*i == 1) == held),
                    "{frame}"
                );
            }
        }
        None => assert!(!matches!(frame, Frame::Integer(_))),
    }
    assert_eq!(found(Some(&Err(Error::ConnectionClosed))), None);
    let wrong = Error::from_server_error(
        b"WRONGTYPE Operation against a key holding the wrong kind of value",
    );
    assert_eq!(found(Some(&Err(wrong))), Some(false));
    assert_eq!(
        found(Some(&Err(Error::from_server_error(b"ERR busy")))),
        None
    );
    assert_eq!(found(None), None);
}

/// A release answered with this error is sent again only when it surely
/// did not run: the kinds that refuse a command before it runs.
fn release(frame: &Frame) {
    let Frame::Error(line) = frame else {
        return;
    };
    let e = Error::from_server_error(line);
    let again = matches!(
        e.server_kind(),
        Some(
            ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::Loading
                | ServerErrorKind::MasterDown
                | ServerErrorKind::Moved
                | ServerErrorKind::Ask
                | ServerErrorKind::Busy
        )
    );
    assert_eq!(retriable(&e), again, "{e}");
    let routed = Error::Routing {
        slot: None,
        tried: Vec::new(),
        last: Box::new(e),
    };
    assert_eq!(retriable(&routed), again);
    for unknown in [Error::Timeout, Error::ConnectionClosed] {
        assert!(!retriable(&unknown));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test fails
mod tests {
    use std::path::Path;

    use keylatch_cluster::fuzzing::{corpus, mutations};

    use super::*;

    /// Every committed input, then 20,000 fixed-seed mutations of them.
    #[test]
    fn lock_reply_corpus_and_mutations() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/lock_reply");
        let corpus = corpus(&dir).unwrap();
        assert!(
            corpus.len() >= 10,
            "{}: {} inputs",
            dir.display(),
            corpus.len()
        );
        for input in &corpus {
            check_lock_reply(input);
        }
        mutations(&corpus, 0x6b65_796c_6174_6368, 20_000, check_lock_reply);
    }

    #[test]
    fn a_malformed_reply_is_never_a_hold() {
        let f = |v: Vec<Frame>| Frame::Array(v);
        let i = Frame::Integer;
        for bad in [
            f(vec![i(1)]),
            f(vec![i(1), Frame::Null]),
            f(vec![i(1), i(2), i(3)]),
            f(vec![Frame::Bulk("1".into()), i(2)]),
            Frame::Integer(1),
            Frame::Simple("OK".into()),
        ] {
            assert!(
                matches!(acquire_reply(&bad), Err(LockError::Protocol(_))),
                "{bad}"
            );
            assert!(
                matches!(sem_reply(&bad), Err(LockError::Protocol(_))),
                "{bad}"
            );
        }
    }
}
