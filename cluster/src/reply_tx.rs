//! `ReplyTx`: where a request's reply goes, and what happens to it when the
//! caller times out, leaves, or the connection fails (the connection task,
//! `driver/`, holds one per pending request).

use keylatch_resp::Frame;
use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::late::LateReply;

/// Where the reply goes.
pub(crate) enum ReplyTx {
    One(oneshot::Sender<Result<Frame>>),
    Many(oneshot::Sender<Result<Vec<Frame>>>),
    /// As `One`, but a reply that comes after the caller timed out or left
    /// goes to the late handler instead of being dropped.
    Settle(oneshot::Sender<Result<Frame>>, LateReply),
    /// A `Settle` whose caller timed out: only the late handler waits.
    Late(LateReply),
    /// As `One`, but written even if the caller left before that (a
    /// release, say, that must go out once asked for). The script the
    /// command runs, if any: written after a reconnect (the server may have
    /// restarted with an empty script cache, and nobody is left to heal a
    /// `NOSCRIPT`), it is loaded first in the same write; a `NOSCRIPT`
    /// answered after the caller left or timed out is healed by the
    /// connection (`driver/rerun.rs`).
    Written(
        oneshot::Sender<Result<Frame>>,
        Option<&'static crate::Script>,
    ),
}

impl std::fmt::Debug for ReplyTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReplyTx::One(_) => "One",
            ReplyTx::Many(_) => "Many",
            ReplyTx::Settle(..) => "Settle",
            ReplyTx::Late(_) => "Late",
            ReplyTx::Written(..) => "Written",
        })
    }
}

impl ReplyTx {
    /// Nobody would hear the reply: a request not yet written is dropped
    /// unsent then (a `Settle` whose caller left is never run).
    pub(crate) fn is_closed(&self) -> bool {
        match self {
            ReplyTx::One(tx) | ReplyTx::Settle(tx, _) => tx.is_closed(),
            ReplyTx::Many(tx) => tx.is_closed(),
            ReplyTx::Late(_) | ReplyTx::Written(..) => false,
        }
    }

    /// A caller is still waiting (its deadline counts).
    pub(crate) fn waiting(&self) -> bool {
        !matches!(self, ReplyTx::Late(_))
    }

    pub(crate) fn fail(self, e: Error) {
        // The caller may be gone; nobody to tell then. A late handler is
        // dropped: the outcome stays unknown.
        match self {
            ReplyTx::One(tx) | ReplyTx::Settle(tx, _) | ReplyTx::Written(tx, _) => {
                drop(tx.send(Err(e)))
            }
            ReplyTx::Many(tx) => drop(tx.send(Err(e))),
            ReplyTx::Late(_) => {}
        }
    }

    /// The caller's deadline passed: it is told, and what still waits for
    /// the reply (a late handler) is returned.
    pub(crate) fn time_out(self) -> Option<ReplyTx> {
        match self {
            ReplyTx::Settle(tx, late) => {
                drop(tx.send(Err(Error::Timeout)));
                Some(ReplyTx::Late(late))
            }
            ReplyTx::Late(late) => Some(ReplyTx::Late(late)),
            other => {
                other.fail(Error::Timeout);
                None
            }
        }
    }
}
