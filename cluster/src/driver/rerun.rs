//! A script command written "whoever waits" (`ReplyTx::Written`: a lock
//! release, say) whose caller is gone, having left or timed out, and whose
//! reply is `NOSCRIPT`: the server lost its script cache (a restart, a
//! failover, `SCRIPT FLUSH`) and nobody is left to load the script and run
//! the command again. `NOSCRIPT` proves the command did not run, so the
//! connection runs it again itself, after `SCRIPT LOAD` in the same write.
//! A caller still waiting heals it as before (its future loads and runs).

use keylatch_resp::{Cmd, Frame};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{Connected, Payload, Request};
use crate::reply_tx::ReplyTx;
use crate::Script;

/// What a written request keeps to run it again.
pub(super) struct Rerun {
    script: &'static Script,
    payload: Payload,
}

impl Rerun {
    /// The payload of a `Written` single command with its script, kept
    /// (moved, not copied); anything else is dropped.
    pub(super) fn keep(tx: &ReplyTx, payload: Payload) -> Option<Box<Self>> {
        match (tx, payload) {
            (ReplyTx::Written(_, Some(script)), p @ (Payload::One(_) | Payload::Shared(_))) => {
                Some(Box::new(Self { script, payload: p }))
            }
            _ => None,
        }
    }

    /// The request that runs it again: `SCRIPT LOAD`, then the command, a
    /// pipeline (so a second `NOSCRIPT` is never run again), nobody
    /// waiting, no deadline.
    pub(super) fn request(self) -> Request {
        let cmd = match self.payload {
            Payload::One(cmd) => cmd,
            Payload::Shared(cmd) => Cmd::clone(&cmd),
            Payload::Many(mut cmds) => cmds.pop().unwrap_or_else(|| self.script.load_cmd()),
        };
        let (tx, _) = oneshot::channel();
        Request {
            payload: Payload::Many(vec![self.script.load_cmd(), cmd]),
            tx: ReplyTx::Written(tx, None),
            deadline: None,
        }
    }
}

/// Whether a reply is `NOSCRIPT`.
pub(super) fn is_noscript(frame: &Frame) -> bool {
    matches!(frame.value(), Frame::Error(m) if m.starts_with(b"NOSCRIPT"))
}

impl Connected {
    /// Runs a kept `Written` script command again.
    pub(super) fn rerun(&mut self, rerun: Option<Box<Rerun>>) {
        if let Some(r) = rerun {
            tracing::debug!(
                "NOSCRIPT with nobody waiting: loading the script and running the command again"
            );
            self.take(r.request());
        }
    }
}

/// Writes the `Written` requests that met a reconnect unsent, first on the
/// new socket, ahead of anything queued since: they were asked for before
/// it. Past their deadline they are dropped.
pub(super) fn write_unsent(conn: &mut Connected, unsent: &mut Vec<Request>) {
    let now = Instant::now();
    for mut req in unsent.drain(..) {
        if req.deadline.is_some_and(|d| d <= now) {
            continue;
        }
        if let ReplyTx::Written(_, Some(script)) = &req.tx {
            // SCRIPT LOAD, then the command: only the last reply
            // reaches the (gone) caller's slot.
            let load = script.load_cmd();
            req.payload = match req.payload {
                Payload::One(cmd) => Payload::Many(vec![load, cmd]),
                Payload::Shared(cmd) => Payload::Many(vec![load, Cmd::clone(&cmd)]),
                many => many,
            };
        }
        conn.take(req);
    }
}
