//! Reading the lock scripts' replies: the `{a, b}` pair most of them
//! answer, and an acquire's.

use keylatch_resp::Frame;

use crate::error::{LockError, LockResult};

/// What an acquire script's `{holds, value}` reply says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// Taken or re-entered (`holds` > 0): the hold count and the token
    /// (a fenced lock's fencing value); `made`: a first hold whose call
    /// made the fencing counter (`{1, token, 1}`), which then lives its
    /// whole idle expiry from now.
    Taken { holds: i64, value: i64, made: bool },
    /// Held by another owner (`holds` 0); the PTTL in milliseconds, and
    /// the fencing counter's value when the try was a waiter's (`{0, pttl,
    /// counter, tag}`; else 0): a grant with a token not above it was made
    /// before the try ran.
    Held(i64, i64),
    /// A non-reentrant lock this owner holds already (`holds` < 0, not -2).
    NotReentrant,
    /// A read-write lock's reader asked for the write (`holds` -2).
    UpgradeRefused,
}

/// Reads an acquire script's reply; any other shape is
/// [`LockError::Protocol`].
pub(crate) fn acquire_reply(frame: &Frame) -> LockResult<AcquireReply> {
    if let Some((pttl, counter, _)) = waiter_held(frame) {
        return Ok(AcquireReply::Held(pttl, counter));
    }
    if let Some(value) = made_counter(frame) {
        return Ok(AcquireReply::Taken {
            holds: 1,
            value,
            made: true,
        });
    }
    let (holds, value) = parse_pair(frame)?;
    Ok(match holds {
        -2 => AcquireReply::UpgradeRefused,
        h if h < 0 => AcquireReply::NotReentrant,
        0 => AcquireReply::Held(value, 0),
        // A hold's token (or read session) is never negative (0: a kind
        // with no token): a reply saying so is no hold to hand out.
        _ if value < 0 => return Err(LockError::Protocol(frame.shown())),
        _ => AcquireReply::Taken {
            holds,
            value,
            made: false,
        },
    })
}

/// A first hold whose call made the fencing counter, `[1, token, 1]`: the
/// token.
fn made_counter(frame: &Frame) -> Option<i64> {
    let Frame::Array(items) = frame.value() else {
        return None;
    };
    let [a, b, c] = items.as_slice() else {
        return None;
    };
    match (a.value(), b.value(), c.value()) {
        // A made counter's first token is the server's clock: never below 1.
        (Frame::Integer(1), Frame::Integer(token @ 1..), Frame::Integer(1)) => Some(*token),
        _ => None,
    }
}

/// A waiter's try that found the lock held, `[0, pttl, counter, tag]`:
/// the PTTL, the fencing counter it saw and the tag it registered with.
pub(crate) fn waiter_held(frame: &Frame) -> Option<(i64, i64, i64)> {
    let Frame::Array(items) = frame.value() else {
        return None;
    };
    let [a, b, c, d] = items.as_slice() else {
        return None;
    };
    match (a.value(), b.value(), c.value(), d.value()) {
        (Frame::Integer(0), Frame::Integer(b), Frame::Integer(c), Frame::Integer(d)) => {
            Some((*b, *c, *d))
        }
        _ => None,
    }
}

/// `[a, b]`, two integers (RESP3 attributes seen through, as everywhere a
/// reply is read).
pub(crate) fn parse_pair(frame: &Frame) -> LockResult<(i64, i64)> {
    match frame.value() {
        Frame::Array(items) => match items.as_slice() {
            [a, b] => match (a.value(), b.value()) {
                (Frame::Integer(a), Frame::Integer(b)) => Ok((*a, *b)),
                _ => Err(LockError::Protocol(frame.shown())),
            },
            _ => Err(LockError::Protocol(frame.shown())),
        },
        other => Err(LockError::Protocol(other.shown())),
    }
}
