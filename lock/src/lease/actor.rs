//! The lease engine's task: drains new holds, invalidations and call
//! outcomes into its [`Table`], plans, and sends what is due (each call on
//! its own task, reporting back). Nothing else touches the table.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch_cluster::{Client, Invalidation};
use tokio::sync::mpsc;

use super::calls::{run_batch, track, Batch, Mark};
use super::hold::{nanos, Hold};
use super::shared::{EngineShared, Invalidations};
use super::table::{earliest, Done, Table, Wake, Work};
use super::tuning::{BUSY_LOOK, CALLS_IN_FLIGHT, RENEW_BATCH};

/// What woke the task, besides the clock and new holds.
enum Event {
    /// An invalidation push; `None` once tracking's queue closed.
    Pushed(Option<Invalidation>),
    Done(Back),
}

/// What a call's task hands back.
enum Back {
    /// A renewal or check batch of round `round`, with its call counts.
    Judged {
        done: Done,
        round: u64,
        calls: u64,
        failed: u64,
        error: Option<String>,
    },
    Tracked(Done),
}

/// One renewal round (the batches one planning pass sent), tallied as
/// they come back and logged once, when the last has: one event per
/// round with counts, never one per hold.
struct Round {
    started: Instant,
    batches: usize,
    holds: usize,
    renewed: usize,
    gone: usize,
    unknown: usize,
    calls: u64,
    failed: u64,
    error: Option<String>,
}

impl Round {
    fn log(&self) {
        let took_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if self.failed > 0 {
            tracing::warn!(
                holds = self.holds,
                renewed = self.renewed,
                gone = self.gone,
                unknown = self.unknown,
                calls = self.calls,
                failed_calls = self.failed,
                error = self.error.as_deref().unwrap_or(""),
                took_ms,
                "renew round: calls failed; those holds are asked again"
            );
        } else {
            tracing::debug!(
                holds = self.holds,
                renewed = self.renewed,
                gone = self.gone,
                unknown = self.unknown,
                calls = self.calls,
                failed_calls = 0u64,
                took_ms,
                "renew round"
            );
        }
    }
}

pub(super) struct Actor {
    client: Client,
    shared: Arc<EngineShared>,
    inbox: mpsc::UnboundedReceiver<Arc<Hold>>,
    touched: mpsc::UnboundedReceiver<Arc<str>>,
    invalidations: Option<Invalidations>,
    done_tx: mpsc::UnboundedSender<Back>,
    done_rx: mpsc::UnboundedReceiver<Back>,
    table: Table,
    idle_ms: Arc<str>,
    /// The fencing counters' idle expiry.
    idle: Duration,
    /// The counter window: while open, every renewal refreshes its counter.
    /// It opens every quarter of the idle expiry and stays open half the
    /// longest lease (a renewal interval and its slack), so each held
    /// counter is refreshed at least every half idle expiry; the work is
    /// per hold per few hours, not per hold per round.
    counters: CounterWindow,
    /// Batches planned and not sent yet, with their round: at most
    /// `flight_cap` are out at a time.
    queued: VecDeque<(Batch, u64)>,
    in_flight: usize,
    /// How many may be out: [`CALLS_IN_FLIGHT`] for each master, in all
    /// (see [`flight_cap`]).
    flight_cap: usize,
    /// Rounds with batches still out, by number.
    rounds: HashMap<u64, Round>,
    next_round: u64,
}

impl Actor {
    pub(super) fn new(
        client: Client,
        shared: Arc<EngineShared>,
        inbox: mpsc::UnboundedReceiver<Arc<Hold>>,
        touched: mpsc::UnboundedReceiver<Arc<str>>,
        invalidations: Option<Invalidations>,
        idle_ms: String,
        tracked_holds: usize,
    ) -> Self {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let tracking = shared.tracking;
        Self {
            client,
            shared,
            inbox,
            touched,
            invalidations,
            done_tx,
            done_rx,
            table: Table::new(tracking).track_budget(tracked_holds),
            idle: Duration::from_millis(idle_ms.parse().unwrap_or(0)),
            idle_ms: Arc::from(idle_ms),
            counters: CounterWindow::default(),
            queued: VecDeque::new(),
            in_flight: 0,
            flight_cap: CALLS_IN_FLIGHT,
            rounds: HashMap::new(),
            next_round: 0,
        }
    }

    pub(super) async fn run(mut self) {
        loop {
            // Until the real wake time is known, any hold handed over from
            // here on must wake the task (set before draining, so a hold
            // pushed just after the drain is not left unseen).
            self.shared.planned_wake.store(0, Ordering::Release);
            let Some(drained) = self.take_new_holds() else {
                return;
            };
            self.take_overflow();
            while let Ok(name) = self.touched.try_recv() {
                self.table.touched(&name);
            }
            let now = Instant::now();
            let (work, wake) = self.plan(now, drained);
            self.send(work);
            let sleep = sleep_for(&wake);
            self.shared
                .planned_wake
                .store(nanos(Instant::now() + sleep), Ordering::Release);
            let inv = self.invalidations.as_mut();
            let pushed = async move {
                match inv {
                    Some(inv) => Some(inv.rx.recv().await),
                    None => std::future::pending().await,
                }
            };
            let done_rx = &mut self.done_rx;
            let event = tokio::select! {
                () = tokio::time::sleep(sleep) => None,
                () = self.shared.wake.notified() => None,
                inv = pushed => Some(Event::Pushed(inv.flatten())),
                Some(done) = done_rx.recv() => Some(Event::Done(done)),
            };
            match event {
                Some(Event::Pushed(Some(inv))) => self.table.invalidated(&inv),
                Some(Event::Pushed(None)) => self.invalidations = None,
                Some(Event::Done(back)) => self.take_back(back),
                None => {}
            }
            // Whatever else is ready, at once.
            while let Ok(back) = self.done_rx.try_recv() {
                self.take_back(back);
            }
            self.pump();
        }
    }

    /// A call's outcome into the table, and into its round's tally.
    fn take_back(&mut self, back: Back) {
        match back {
            Back::Tracked(done) => self.table.apply(done),
            Back::Judged {
                done,
                round,
                calls,
                failed,
                error,
            } => {
                self.in_flight = self.in_flight.saturating_sub(1);
                let finished = match self.rounds.get_mut(&round) {
                    Some(r) => {
                        if let Done::Judged {
                            lease, verdicts, ..
                        } = &done
                        {
                            r.holds += verdicts.len();
                            for v in verdicts {
                                match v {
                                    1 if !lease.is_zero() => r.renewed += 1,
                                    1 => {}
                                    0 => r.gone += 1,
                                    _ => r.unknown += 1,
                                }
                            }
                        }
                        r.calls += calls;
                        r.failed += failed;
                        if r.error.is_none() {
                            r.error = error;
                        }
                        r.batches -= 1;
                        r.batches == 0
                    }
                    None => false,
                };
                if let Done::Judged {
                    lease, verdicts, ..
                } = &done
                {
                    if !lease.is_zero() {
                        let renewed = verdicts.iter().filter(|&&v| v == 1).count();
                        self.shared
                            .renewed_holds
                            .fetch_add(renewed as u64, Ordering::Relaxed);
                    }
                }
                self.table.apply(done);
                if finished {
                    if let Some(r) = self.rounds.remove(&round) {
                        let took =
                            u64::try_from(r.started.elapsed().as_micros()).unwrap_or(u64::MAX);
                        self.shared.round_last_us.store(took, Ordering::Relaxed);
                        self.shared
                            .round_longest_us
                            .fetch_max(took, Ordering::Relaxed);
                        #[cfg(feature = "metrics")]
                        metrics::histogram!("keylatch_renewal_round_seconds")
                            .record(r.started.elapsed().as_secs_f64());
                        r.log();
                    }
                }
            }
        }
    }

    /// Moves handed-over holds into the table; how many came. `None` once
    /// every engine handle is gone: the task ends.
    fn take_new_holds(&mut self) -> Option<usize> {
        let mut n = 0;
        loop {
            match self.inbox.try_recv() {
                Ok(hold) => {
                    n += 1;
                    self.table.insert(hold);
                }
                Err(mpsc::error::TryRecvError::Empty) => return Some(n),
                Err(mpsc::error::TryRecvError::Disconnected) => return None,
            }
        }
    }

    /// Pushes that did not fit the queue: anything may have changed.
    fn take_overflow(&mut self) {
        let overflowed = self
            .invalidations
            .as_ref()
            .is_some_and(|inv| inv.overflow.swap(false, Ordering::AcqRel));
        if overflowed {
            self.table.invalidated(&Invalidation::All);
        }
    }

    /// One planning pass at `now` over the table: which node or slot each
    /// hold's calls go to, and when to look again.
    fn plan(&mut self, now: Instant, drained: usize) -> (Work, Wake) {
        let cluster = self.client.is_cluster();
        // One call per node needs a script flag (allow-cross-slot-keys)
        // that Redis 6.2 lacks, as it lacks sharded pub/sub: one call
        // per slot there.
        let by_node = self.client.has_sharded_pubsub();
        let client = &self.client;
        let refresh_all = self.counters.open(now, self.idle);
        let (work, mut wake) = self.table.plan(now, refresh_all, |slot| {
            if !cluster {
                return (None, 0);
            }
            if !by_node {
                return (None, slot);
            }
            match client.master_for_slot(slot) {
                Some(node) => (Some(node), 0),
                None => (None, slot),
            }
        });
        if drained > 0 {
            // Holds are arriving: look again by the time the newest
            // could need tracking, so the next ones fall within that
            // look and need no wake-up of their own (a task switch per
            // acquire under load, otherwise). Urgent: not pushed back
            // by the 5 ms floor of renewal wakes.
            wake.urgent = earliest(wake.urgent, now + BUSY_LOOK);
        }
        (work, wake)
    }

    /// Starts the planned calls; each runs on its own and reports back.
    fn send(&mut self, work: Work) {
        let cluster = self.client.is_cluster();
        let mut renewed = false;
        let round = self.next_round;
        let mut batches = 0;
        let mut lanes = Vec::with_capacity(work.groups.len());
        for ((node, _, renewal, lease, refresh), holds) in work.groups {
            self.counters.longest = self.counters.longest.max(lease);
            let mut lane = Vec::with_capacity(holds.len().div_ceil(RENEW_BATCH));
            for (holds, marks) in split(holds) {
                batches += 1;
                renewed |= !lease.is_zero();
                let batch = Batch {
                    renewal,
                    lease,
                    holds,
                    marks,
                    cluster,
                    on_node: node.is_some(),
                    refresh,
                };
                if lease.is_zero() {
                    // A check: an invalidation is waiting on it.
                    self.queued.push_front((batch, round));
                } else {
                    lane.push(batch);
                }
            }
            lanes.push(lane);
        }
        // One group's calls after another's would keep the calls in
        // flight on one node while the others idle: taken in turns, they
        // spread over the nodes the holds are on.
        self.queued
            .extend(interleave(lanes).into_iter().map(|b| (b, round)));
        if cluster && batches > 0 {
            self.flight_cap = flight_cap(self.client.shards().len());
        }
        if batches > 0 {
            self.next_round = self.next_round.wrapping_add(1);
            self.rounds.insert(
                round,
                Round {
                    started: Instant::now(),
                    batches,
                    holds: 0,
                    renewed: 0,
                    gone: 0,
                    unknown: 0,
                    calls: 0,
                    failed: 0,
                    error: None,
                },
            );
        }
        if renewed {
            self.shared.renew_rounds.fetch_add(1, Ordering::Relaxed);
        }
        self.pump();
        for (_, holds) in work.track {
            for chunk in holds.chunks(RENEW_BATCH) {
                let holds = chunk.to_vec();
                let (client, tx) = (self.client.clone(), self.done_tx.clone());
                tokio::spawn(async move {
                    let found = track(&client, &holds).await;
                    let _ = tx.send(Back::Tracked(Done::Tracked { holds, found }));
                });
            }
        }
    }
}

impl Actor {
    /// Sends queued batches while fewer than the cap are out;
    /// each runs on its own task and reports back.
    fn pump(&mut self) {
        while self.in_flight < self.flight_cap {
            let Some((batch, round)) = self.queued.pop_front() else {
                return;
            };
            self.in_flight += 1;
            let (client, shared, tx) = (
                self.client.clone(),
                Arc::clone(&self.shared),
                self.done_tx.clone(),
            );
            let idle_ms = Arc::clone(&self.idle_ms);
            tokio::spawn(async move {
                let sent_at = Instant::now();
                let out = run_batch(&client, &batch, &idle_ms).await;
                shared.renew_calls.fetch_add(out.calls, Ordering::Relaxed);
                shared
                    .renew_failures
                    .fetch_add(out.failed, Ordering::Relaxed);
                let _ = tx.send(Back::Judged {
                    done: Done::Judged {
                        lease: batch.lease,
                        sent_at,
                        holds: batch.holds.into_iter().zip(batch.marks).collect(),
                        verdicts: out.verdicts,
                        refresh: batch.refresh,
                    },
                    round,
                    calls: out.calls,
                    failed: out.failed,
                    error: out.error,
                });
                shared.wake.notify_one();
            });
        }
    }
}

/// When renewals refresh every held counter's idle expiry (see
/// [`Actor::counters`]).
#[derive(Default)]
struct CounterWindow {
    /// When the window next opens (`None`: at the first pass).
    next: Option<Instant>,
    /// Open until then.
    until: Option<Instant>,
    /// The longest lease renewed so far.
    longest: Duration,
}

impl CounterWindow {
    /// Whether the window is open at `now`, opening it when due.
    fn open(&mut self, now: Instant, idle: Duration) -> bool {
        let span = self.longest / 2;
        if idle / 4 <= span {
            // Too short an idle expiry for a window: every renewal.
            return true;
        }
        let due = match self.next {
            Some(n) => now >= n,
            None => true,
        };
        if due {
            self.next = Some(now + idle / 4);
            self.until = Some(now + span);
        }
        self.until.is_some_and(|u| now < u)
    }
}

/// How long the task sleeps after a pass: until the next due time, at
/// least 1 ms for a loss deadline (5 ms for renewals: no spinning on
/// near-due rounds), at most 1 s.
fn sleep_for(wake: &Wake) -> Duration {
    let next = match (wake.renew, wake.urgent) {
        (Some(r), Some(u)) => Some(r.min(u)),
        (r, u) => r.or(u),
    };
    // Renewals may wait 5 ms more (no spinning on near-due rounds); a
    // loss deadline may not: with a short lease, 5 ms would outrun
    // the drift allowance (2 ms + 1 %).
    let floor = if next.is_some() && next == wake.urgent {
        Duration::from_millis(1)
    } else {
        Duration::from_millis(5)
    };
    next.map(|t| t.saturating_duration_since(Instant::now()))
        .unwrap_or(Duration::from_secs(1))
        .clamp(floor, Duration::from_secs(1))
}

/// The calls that may be out at once, in all, for `masters` masters: what
/// the cap bounds is the server work queued ahead of an acquire on one
/// connection, and a round's calls take their groups in turns, so with the
/// holds spread over the nodes each gets about [`CALLS_IN_FLIGHT`]. (A
/// million holds over 3 masters sharing the whole client's 8 lost holds to
/// rounds longer than their interval.) Not counted per node: holds
/// crowded on one node can have all of it there.
fn flight_cap(masters: usize) -> usize {
    CALLS_IN_FLIGHT * masters.clamp(1, 64)
}

/// A group's holds as calls of at most [`RENEW_BATCH`], moved rather than
/// copied (a round hands over every hold it renews: a reference count
/// taken and dropped per hold for nothing, otherwise).
fn split<H>(holds: Vec<(H, Mark)>) -> Vec<(Vec<H>, Vec<Mark>)> {
    let mut out = Vec::with_capacity(holds.len().div_ceil(RENEW_BATCH));
    let mut left = holds.len();
    let mut it = holds.into_iter();
    while left > 0 {
        let n = left.min(RENEW_BATCH);
        left -= n;
        out.push(it.by_ref().take(n).unzip());
    }
    out
}

/// The lanes' items taken in turns: the first of each lane, then the
/// second of each, and so on (each lane's own order kept). A lane leaves
/// the turn once empty, so the cost is the items plus the lanes (a Redis
/// 6.2 cluster plans a lane per slot: thousands, most of one call).
fn interleave<T>(lanes: Vec<Vec<T>>) -> Vec<T> {
    let total = lanes.iter().map(Vec::len).sum();
    let mut turn: VecDeque<_> = lanes.into_iter().map(Vec::into_iter).collect();
    let mut out = Vec::with_capacity(total);
    while let Some(mut lane) = turn.pop_front() {
        if let Some(x) = lane.next() {
            out.push(x);
            turn.push_back(lane);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_window_opens_every_quarter_idle_expiry_for_half_the_longest_lease() {
        let idle = Duration::from_secs(24 * 3600);
        let t0 = Instant::now();
        let mut w = CounterWindow {
            longest: Duration::from_secs(30),
            ..CounterWindow::default()
        };
        assert!(w.open(t0, idle), "opens at the first pass");
        assert!(w.open(t0 + Duration::from_secs(14), idle));
        assert!(
            !w.open(t0 + Duration::from_secs(16), idle),
            "closed after 15 s"
        );
        assert!(!w.open(t0 + Duration::from_secs(6 * 3600 - 1), idle));
        let again = t0 + Duration::from_secs(6 * 3600);
        assert!(
            w.open(again, idle),
            "open again a quarter idle expiry later"
        );
        assert!(!w.open(again + Duration::from_secs(16), idle));
    }

    #[test]
    fn an_idle_expiry_too_short_for_a_window_refreshes_on_every_renewal() {
        let mut w = CounterWindow {
            longest: Duration::from_millis(1500),
            ..CounterWindow::default()
        };
        let t0 = Instant::now();
        for s in 0..10 {
            assert!(w.open(t0 + Duration::from_millis(300 * s), Duration::from_secs(1)));
        }
    }

    #[test]
    fn lanes_are_taken_in_turns_and_keep_their_order() {
        let got = interleave(vec![vec![1, 2, 3], vec![10], vec![], vec![20, 21]]);
        assert_eq!(got, [1, 10, 20, 2, 21, 3]);
        assert!(interleave::<u8>(vec![]).is_empty());
    }

    #[test]
    fn many_short_lanes_and_one_long_one_cost_their_items() {
        // 16,384 per-slot lanes of one call and one of 1,000: every item
        // once, the long lane's tail in its own order.
        let mut lanes: Vec<Vec<u32>> = (0..16_384).map(|i| vec![i]).collect();
        lanes.push((100_000..101_000).collect());
        let got = interleave(lanes);
        assert_eq!(got.len(), 16_384 + 1_000);
        assert_eq!(got[..16_384], (0..16_384).collect::<Vec<_>>()[..]);
        assert_eq!(got[16_384..], (100_000..101_000).collect::<Vec<_>>()[..]);
    }

    #[test]
    fn a_group_splits_into_calls_of_at_most_a_batch_in_its_order() {
        let mark = |i: u32| Mark { epoch: i, slot: i };
        let n = 2 * RENEW_BATCH + 1;
        let holds: Vec<(usize, Mark)> = (0..n).map(|i| (i, mark(i as u32))).collect();
        let calls = split(holds);
        let sizes: Vec<usize> = calls.iter().map(|(h, _)| h.len()).collect();
        assert_eq!(sizes, [RENEW_BATCH, RENEW_BATCH, 1]);
        for (holds, marks) in &calls {
            assert_eq!(holds.len(), marks.len());
            for (h, m) in holds.iter().zip(marks) {
                assert_eq!(*m, mark(*h as u32), "each hold keeps its own mark");
            }
        }
        let order: Vec<usize> = calls.into_iter().flat_map(|(h, _)| h).collect();
        assert_eq!(order, (0..n).collect::<Vec<_>>());
        assert!(split::<usize>(Vec::new()).is_empty());
    }

    #[test]
    fn the_cap_is_per_master() {
        assert_eq!(flight_cap(0), CALLS_IN_FLIGHT);
        assert_eq!(flight_cap(1), CALLS_IN_FLIGHT);
        assert_eq!(flight_cap(3), 3 * CALLS_IN_FLIGHT);
        assert_eq!(flight_cap(1_000), 64 * CALLS_IN_FLIGHT);
    }
}
