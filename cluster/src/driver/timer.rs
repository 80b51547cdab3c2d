//! The connection task's timer: request deadlines, the bound on how long
//! queued callers may wait while the task takes nothing, and the health
//! check's ticks (see `health.rs`), all on one `Sleep`; the sentinels'
//! switch check, and the words for why a connection was lost.

use std::sync::atomic::Ordering;

use keylatch_resp::Cmd;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{Connected, Pending, Request, IDLE_TIMER, WRITE_HIGH_WATER};
use crate::error::Error;
use crate::health::{Check, Health};
use crate::reply_tx::ReplyTx;

impl Connected {
    /// Turns the health check on; its ticks share the deadline timer.
    pub(super) fn watch_health(&mut self, health: Health) {
        let at = health.next_tick();
        if self.timer_at.map_or(true, |t| at < t) {
            self.timer_at = Some(at);
            self.timer.as_mut().reset(at);
        }
        self.health = Some(health);
    }

    /// A health tick (due at or before `now`): a `PING` when idle, the
    /// stalled flag, or an error when the node stopped answering.
    pub(super) fn tick(&mut self, now: Instant) -> Option<Error> {
        let busy = !self.pending.is_empty();
        let health = self.health.as_mut()?;
        if health.next_tick() > now {
            return None;
        }
        let (check, stalled) = health.tick(now, busy);
        if stalled != self.stalled {
            self.stalled = stalled;
            self.shared.stalled.store(stalled, Ordering::Relaxed);
            if stalled {
                tracing::warn!(node = %self.shared.config.addr(), pending = self.pending.len(),
                    "node stalled: requests pending and nothing read for a health interval");
            }
        }
        match check {
            Check::Quiet => None,
            Check::GiveUp => {
                tracing::warn!(node = %self.shared.config.addr(),
                    "health PING unanswered; giving the connection up");
                Some(Error::Timeout)
            }
            Check::Ping => {
                health.pinged(now);
                Cmd::new("PING").encode(&mut self.wbuf);
                // Nobody waits for the reply: it is read and dropped.
                self.pending.push_back(Pending {
                    tx: None,
                    deadline: None,
                    remaining: 1,
                    frames: Vec::new(),
                    rerun: None,
                });
                None
            }
        }
    }

    /// Whether the task has stopped taking requests (in-flight cap or write
    /// buffer high-water mark).
    pub(super) fn blocked(&self) -> bool {
        // Demoted: nothing is taken until the pending replies are in, so
        // queued callers get the same bound.
        self.demoted
            || self.pending.len() >= self.max_in_flight
            || self.wbuf.len() >= WRITE_HIGH_WATER
    }

    /// Starts (or ends) the bound on how long queued callers can wait while
    /// the task takes nothing.
    pub(super) fn note_blocked(&mut self) {
        if !self.blocked() {
            self.blocked_until = None;
            return;
        }
        if self.blocked_until.is_some() {
            return;
        }
        let Some(until) = self
            .blocked_bound
            .and_then(|b| Instant::now().checked_add(b))
        else {
            return;
        };
        self.blocked_until = Some(until);
        if self.timer_at.map_or(true, |at| until < at) {
            self.timer_at = Some(until);
            self.timer.as_mut().reset(until);
        }
    }

    /// The timer fired: tells every caller past its deadline that it timed
    /// out and re-arms for the earliest deadline still waiting. Returns an
    /// error (the connection is given up) when the task has been unable to
    /// take requests for a whole request timeout while callers are queued:
    /// the server is not answering, and they would otherwise wait without
    /// bound.
    pub(super) fn expire(&mut self, rx: &mpsc::Receiver<Request>) -> Option<Error> {
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        for p in &mut self.pending {
            match p.deadline {
                Some(d) if d <= now => {
                    p.tx = p.tx.take().and_then(ReplyTx::time_out);
                }
                Some(d) if p.tx.as_ref().is_some_and(ReplyTx::waiting) => {
                    next = Some(next.map_or(d, |n| n.min(d)));
                }
                _ => {}
            }
        }
        if let Some(until) = self.blocked_until {
            if now >= until && self.blocked() && !rx.is_empty() {
                // Blocked for a whole request timeout with callers queued:
                // the server is not answering. Rebuild; pending callers get
                // Timeout (unknown outcome), queued ones Disconnected.
                tracing::warn!(node = %self.shared.config.addr(), pending = self.pending.len(),
                    "no request taken for a whole request timeout; giving the connection up");
                return Some(Error::Timeout);
            }
            if now >= until {
                // Blocked but nobody queued (or no longer blocked): start
                // the bound again from now.
                self.blocked_until = None;
                self.note_blocked();
                if let Some(u) = self.blocked_until {
                    next = Some(next.map_or(u, |n| n.min(u)));
                }
            } else {
                next = Some(next.map_or(until, |n| n.min(until)));
            }
        }
        if let Some(e) = self.tick(now) {
            return Some(e);
        }
        if let Some(h) = &self.health {
            let at = h.next_tick();
            next = Some(next.map_or(at, |n| n.min(at)));
        }
        self.timer_at = next;
        self.timer
            .as_mut()
            .reset(next.unwrap_or_else(|| now + IDLE_TIMER));
        None
    }
}

impl Connected {
    /// Demotes the connection once the sentinels announced a new master
    /// since it was made (looked at every turn; an idle connection's health
    /// check turns it at least once per interval). A demoted connection
    /// that is also stalled (requests pending, nothing read for an
    /// interval: a paused or unreachable old master) is given up at once:
    /// its pending requests fail as of unknown outcome (never resent), and
    /// waiting out their timeouts would keep every caller off the new
    /// master.
    pub(super) fn check_switch(&mut self) -> Option<Error> {
        if let (Some(at), Some(s)) = (self.sentinel_epoch, &self.shared.config.sentinel) {
            if s.epoch() != at {
                self.demoted = true;
                if self.stalled {
                    return Some(Error::ConnectionClosed);
                }
            }
        }
        None
    }
}

/// Why a connection was given up, in words for the `connection lost` event
/// (the error itself goes beside it).
pub(super) fn why_lost(e: &Error) -> &'static str {
    match e {
        Error::ConnectionClosed => "the server closed the connection",
        Error::Io(_) => "socket error",
        Error::Protocol(_) => "the server sent invalid RESP",
        Error::Timeout => "the node stopped answering",
        Error::UnexpectedReply(_) => "a reply nobody asked for",
        _ => "connection failed",
    }
}
