//! The connection task's health check: is the node still answering?
//!
//! A node can die without a word: a paused process, a host that crashed, a
//! network partition. The socket then stays open and nothing arrives, and
//! each request would only time out on its own. The task ticks once per
//! health interval and decides here, from counters it bumps as it reads and
//! takes requests (no clock read per request):
//!
//! - idle since the last tick (nothing pending, read or taken): send a
//!   `PING`, so a dead idle connection is found before a caller meets it;
//! - a `PING` unanswered (nothing read since it went out) for the ping
//!   bound: give the connection up, so it reconnects (and callers get
//!   [`Disconnected`](crate::Error::Disconnected), which routers retry
//!   elsewhere, instead of timeouts);
//! - requests pending across a whole interval with nothing read: stalled.
//!   The connection is kept (a slow script is not a dead node), but a
//!   cluster router reloads the topology, so a master that was replaced is
//!   routed around.

use std::time::Duration;

use tokio::time::Instant;

use crate::clock::later;

/// The shortest health interval honoured.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// What the task does after a tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// Nothing to do.
    Quiet,
    /// Idle: send a `PING` and call [`Health::pinged`].
    Ping,
    /// A `PING` went unanswered: give the connection up.
    GiveUp,
}

/// Counters and the tick schedule of one connected socket.
#[derive(Debug)]
pub(crate) struct Health {
    interval: Duration,
    /// How long a `PING` may go unanswered.
    ping_bound: Duration,
    next_tick: Instant,
    reads: u64,
    taken: u64,
    reads_at_tick: u64,
    taken_at_tick: u64,
    busy_at_tick: bool,
    /// The outstanding `PING`: when it went out, and the read count then.
    ping: Option<(Instant, u64)>,
}

impl Health {
    pub(crate) fn new(interval: Duration, ping_bound: Duration, now: Instant) -> Self {
        // A zero interval would PING an idle server without pause.
        let interval = interval.max(MIN_INTERVAL);
        Self {
            interval,
            ping_bound: ping_bound.max(interval),
            next_tick: later(now, interval),
            reads: 0,
            taken: 0,
            reads_at_tick: 0,
            taken_at_tick: 0,
            busy_at_tick: false,
            ping: None,
        }
    }

    /// The socket delivered bytes.
    pub(crate) fn read(&mut self) {
        self.reads = self.reads.wrapping_add(1);
    }

    /// A request was taken for writing.
    pub(crate) fn took(&mut self) {
        self.taken = self.taken.wrapping_add(1);
    }

    /// When the next tick is due.
    pub(crate) fn next_tick(&self) -> Instant {
        self.next_tick
    }

    /// A `PING` was queued now.
    pub(crate) fn pinged(&mut self, now: Instant) {
        self.ping = Some((now, self.reads));
    }

    /// The tick at `now`, with `busy` = requests pending. Returns what to do
    /// and whether the connection is stalled (requests pending since the
    /// last tick, nothing read in between).
    pub(crate) fn tick(&mut self, now: Instant, busy: bool) -> (Check, bool) {
        let read_since = self.reads != self.reads_at_tick;
        let took_since = self.taken != self.taken_at_tick;
        let mut check = Check::Quiet;
        if let Some((sent, reads_then)) = self.ping {
            if self.reads != reads_then {
                self.ping = None;
            } else if now.saturating_duration_since(sent) >= self.ping_bound {
                check = Check::GiveUp;
            }
        }
        let stalled = busy && self.busy_at_tick && !read_since;
        if check == Check::Quiet && !busy && !read_since && !took_since && self.ping.is_none() {
            check = Check::Ping;
        }
        self.reads_at_tick = self.reads;
        self.taken_at_tick = self.taken;
        self.busy_at_tick = busy;
        self.next_tick = later(now, self.interval);
        (check, stalled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn idle_pings_then_gives_up_when_unanswered() {
        let t0 = Instant::now();
        let mut h = Health::new(S, 3 * S, t0);
        assert_eq!(h.tick(t0 + S, false), (Check::Ping, false));
        h.pinged(t0 + S);
        // The PING is pending and nothing comes back.
        assert_eq!(h.tick(t0 + 2 * S, true), (Check::Quiet, false));
        assert_eq!(h.tick(t0 + 3 * S, true), (Check::Quiet, true));
        assert_eq!(h.tick(t0 + 4 * S, true), (Check::GiveUp, true));
    }

    #[test]
    fn an_answered_ping_and_traffic_keep_it_quiet() {
        let t0 = Instant::now();
        let mut h = Health::new(S, 3 * S, t0);
        assert_eq!(h.tick(t0 + S, false).0, Check::Ping);
        h.pinged(t0 + S);
        h.read();
        // Answered, idle again: the next PING waits a tick of silence.
        assert_eq!(h.tick(t0 + 2 * S, false), (Check::Quiet, false));
        assert_eq!(h.tick(t0 + 3 * S, false), (Check::Ping, false));
        h.pinged(t0 + 3 * S);
        h.read();
        // Busy, but replies keep coming: never stalled, no PING.
        for i in 4..10 {
            h.took();
            h.read();
            assert_eq!(h.tick(t0 + i * S, true), (Check::Quiet, false));
        }
    }

    #[test]
    fn busy_with_nothing_read_is_stalled_until_a_read() {
        let t0 = Instant::now();
        let mut h = Health::new(S, 3 * S, t0);
        h.took();
        assert_eq!(h.tick(t0 + S, true), (Check::Quiet, false));
        assert_eq!(h.tick(t0 + 2 * S, true), (Check::Quiet, true));
        // Stalled is not given up without a PING (a slow script).
        assert_eq!(h.tick(t0 + 10 * S, true), (Check::Quiet, true));
        h.read();
        assert_eq!(h.tick(t0 + 11 * S, true), (Check::Quiet, false));
    }
}
