//! Unit tests of the registry: pure state, no sockets.

use super::*;
use crate::pubsub::message::SubscriptionKind::{Channel, Pattern, Shard};
use crate::slot::Slot;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};

const LINGER: Duration = Duration::from_secs(1);

struct Noop(AtomicUsize);
impl Wake for Noop {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn inbox() -> Arc<Inbox> {
    Arc::new(Inbox::new(16))
}

fn drain(inbox: &Inbox) -> Vec<Event> {
    let waker = Waker::from(Arc::new(Noop(AtomicUsize::new(0))));
    let mut cx = Context::from_waker(&waker);
    let mut sub_events = Vec::new();
    // Reach the queue the way a Subscription does.
    while let Poll::Ready(Some(e)) = inbox_poll(inbox, &mut cx) {
        sub_events.push(e);
    }
    sub_events
}

fn inbox_poll(inbox: &Inbox, cx: &mut Context<'_>) -> Poll<Option<Event>> {
    inbox.poll_pop(cx)
}

/// A listener as its `Subscription` holds it: the inbox it reads, and the
/// receiver of its caller's confirmation.
type Listener = (Arc<Inbox>, oneshot::Receiver<Result<()>>);

/// Listener `id` joins `name` (a new `Subscription` was made).
fn add(r: &mut Registry, kind: SubscriptionKind, name: &'static str, id: u64) -> Listener {
    let s = inbox();
    let (tx, rx) = oneshot::channel();
    r.add(
        kind,
        Bytes::from_static(name.as_bytes()),
        id,
        Arc::clone(&s),
        tx,
    );
    (s, rx)
}

/// Listener `id` leaves `name` (its `Subscription` was dropped) at `now`.
fn leave(r: &mut Registry, kind: SubscriptionKind, name: &'static str, id: u64, now: Instant) {
    r.remove(kind, Bytes::from_static(name.as_bytes()), id, now);
}

/// A registry lingering [`LINGER`], and the moment the test starts.
fn registry() -> (Registry, Instant) {
    (Registry::new(LINGER), Instant::now())
}

/// A registry lingering [`LINGER`] with one listener on each of `names`,
/// their ids 1, 2, … in order; nothing planned yet.
fn listening<const N: usize>(
    names: [(SubscriptionKind, &'static str); N],
) -> (Registry, [Listener; N]) {
    let mut r = Registry::new(LINGER);
    let mut id = 0;
    let listeners = names.map(|(kind, name)| {
        id += 1;
        add(&mut r, kind, name, id)
    });
    (r, listeners)
}

/// Listener `id` on `name`, made live: its SUBSCRIBE planned at `now` and
/// confirmed by the server.
fn live(
    r: &mut Registry,
    kind: SubscriptionKind,
    name: &'static str,
    id: u64,
    now: Instant,
) -> Listener {
    let listener = add(r, kind, name, id);
    r.plan(now);
    r.confirmed(kind, name.as_bytes());
    listener
}

fn names(p: &Planned) -> Vec<&[u8]> {
    p.names.iter().map(|n| n.as_ref()).collect()
}

fn confirmed_ok(rx: &mut oneshot::Receiver<Result<()>>) -> bool {
    matches!(rx.try_recv(), Ok(Ok(())))
}

#[test]
fn a_name_is_subscribed_once_however_many_listen() {
    let now = Instant::now();
    let (mut r, [(_, mut a), (_, mut b), (_, _c)]) =
        listening([(Channel, "c"), (Channel, "c"), (Channel, "d")]);
    let plan = r.plan(now);
    assert_eq!(plan.len(), 1);
    assert_eq!(plan[0].op, Op::Subscribe);
    assert_eq!(names(&plan[0]), [b"c".as_ref(), b"d"]);
    assert!(r.plan(now).is_empty());
    assert!(!confirmed_ok(&mut a));
    r.confirmed(Channel, b"c");
    assert!(confirmed_ok(&mut a) && confirmed_ok(&mut b));
    // A listener joining a live name is confirmed at once, nothing written.
    let (_, mut late) = add(&mut r, Channel, "c", 4);
    assert!(confirmed_ok(&mut late));
    assert!(r.plan(now).is_empty());
}

#[test]
fn kinds_are_separate_and_shards_go_one_per_command() {
    let (mut r, _listeners) =
        listening([(Channel, "x"), (Pattern, "x"), (Shard, "x"), (Shard, "y")]);
    let plan = r.plan(Instant::now());
    let shape: Vec<_> = plan.iter().map(|p| (p.op, p.kind, p.names.len())).collect();
    assert_eq!(
        shape,
        [
            (Op::Subscribe, Channel, 1),
            (Op::Subscribe, Pattern, 1),
            (Op::Subscribe, Shard, 1),
            (Op::Subscribe, Shard, 1)
        ]
    );
}

#[test]
fn big_batches_are_split() {
    let mut r = Registry::new(LINGER);
    let mut keep = Vec::new();
    for i in 0..(MAX_NAMES_PER_COMMAND * 2 + 5) {
        let (tx, rx) = oneshot::channel();
        r.add(Channel, Bytes::from(format!("c{i}")), i as u64, inbox(), tx);
        keep.push(rx);
    }
    let plan = r.plan(Instant::now());
    let sizes: Vec<_> = plan.iter().map(|p| p.names.len()).collect();
    assert_eq!(sizes, [MAX_NAMES_PER_COMMAND, MAX_NAMES_PER_COMMAND, 5]);
}

#[test]
fn last_listener_leaving_unsubscribes_after_the_linger() {
    let (mut r, t0) = registry();
    let (_, _rx) = live(&mut r, Channel, "c", 1, t0);
    leave(&mut r, Channel, "c", 1, t0);
    assert_eq!(r.next_deadline(), Some(t0 + LINGER));
    assert!(r.plan(t0 + LINGER / 2).is_empty());
    let plan = r.plan(t0 + LINGER);
    assert_eq!(plan.len(), 1);
    assert_eq!(
        (plan[0].op, names(&plan[0])),
        (Op::Unsubscribe, vec![b"c".as_ref()])
    );
    assert_eq!(r.len(), 1);
    r.confirmed(Channel, b"c");
    assert_eq!(r.len(), 0);
    assert_eq!(r.next_deadline(), None);
}

#[test]
fn a_listener_during_the_linger_reuses_the_live_subscription() {
    let (mut r, t0) = registry();
    let (_, _rx) = live(&mut r, Channel, "c", 1, t0);
    leave(&mut r, Channel, "c", 1, t0);
    let (_, mut rx2) = add(&mut r, Channel, "c", 2);
    assert!(confirmed_ok(&mut rx2));
    // The stale deadline passes without an UNSUBSCRIBE.
    assert!(r.plan(t0 + LINGER * 2).is_empty());
    assert!(r.is_live(Channel, b"c"));
    // Leaving again starts a fresh linger from that moment.
    let t1 = t0 + LINGER * 3;
    leave(&mut r, Channel, "c", 2, t1);
    assert!(r.plan(t1 + LINGER / 2).is_empty());
    assert_eq!(r.plan(t1 + LINGER).len(), 1);
}

#[test]
fn resubscribing_behind_an_unconfirmed_unsubscribe_waits_for_both_answers() {
    let mut r = Registry::new(Duration::ZERO);
    let t0 = Instant::now();
    let (_, _rx) = live(&mut r, Channel, "c", 1, t0);
    leave(&mut r, Channel, "c", 1, t0);
    assert_eq!(r.plan(t0)[0].op, Op::Unsubscribe);
    // A new listener while the UNSUBSCRIBE is in flight.
    let (_, mut rx) = add(&mut r, Channel, "c", 2);
    let plan = r.plan(t0);
    assert_eq!(plan[0].op, Op::Subscribe);
    r.confirmed(Channel, b"c"); // the UNSUBSCRIBE's answer
    assert!(!confirmed_ok(&mut rx));
    assert!(!r.is_live(Channel, b"c"));
    r.confirmed(Channel, b"c"); // the SUBSCRIBE's answer
    assert!(confirmed_ok(&mut rx));
    assert!(r.is_live(Channel, b"c"));
}

#[test]
fn a_listener_cancelled_before_the_write_leaves_nothing() {
    let (mut r, t0) = registry();
    let (_, _rx) = add(&mut r, Channel, "c", 1);
    leave(&mut r, Channel, "c", 1, t0);
    assert!(r.plan(t0).is_empty());
    assert_eq!(r.len(), 0);
    // Cancelled after the write: the confirmation comes, then the linger.
    let (_, _rx) = add(&mut r, Channel, "c", 2);
    assert_eq!(r.plan(t0).len(), 1);
    leave(&mut r, Channel, "c", 2, t0);
    r.confirmed(Channel, b"c");
    let plan = r.plan(t0 + LINGER);
    assert_eq!(plan[0].op, Op::Unsubscribe);
    r.confirmed(Channel, b"c");
    assert_eq!(r.len(), 0);
}

#[test]
fn unknown_releases_are_ignored() {
    let (mut r, t0) = registry();
    let (_, _rx) = live(&mut r, Channel, "c", 1, t0);
    leave(&mut r, Channel, "c", 99, t0);
    leave(&mut r, Pattern, "c", 1, t0);
    assert!(r.is_live(Channel, b"c"));
    assert_eq!(r.next_deadline(), None);
}

#[test]
fn reconnect_resubscribes_and_gaps_only_listeners_already_handed_out() {
    let (mut r, t0) = registry();
    let (old, _rx) = add(&mut r, Channel, "c", 1);
    let (_, _rx2) = add(&mut r, Pattern, "idle*", 2);
    r.plan(t0);
    r.confirmed(Channel, b"c");
    r.confirmed(Pattern, b"idle*");
    leave(&mut r, Pattern, "idle*", 2, t0); // lingering
    r.disconnected();
    assert_eq!(r.len(), 1, "lingering names are forgotten");
    // A subscribe arriving while disconnected waits for the reconnect.
    let (new, mut rx3) = add(&mut r, Channel, "c", 3);
    let plan = r.plan(t0);
    assert_eq!(plan.len(), 1);
    assert_eq!(names(&plan[0]), [b"c".as_ref()]);
    r.confirmed(Channel, b"c");
    assert!(confirmed_ok(&mut rx3));
    assert_eq!(drain(&old), [Event::Gap]);
    assert!(drain(&new).is_empty());
}

#[test]
fn refused_subscribe_fails_waiters_and_ends_listeners() {
    let (mut r, t0) = registry();
    let (s, mut rx) = add(&mut r, Channel, "c", 1);
    r.plan(t0);
    let err = Error::from_server_error(b"NOPERM no");
    r.failed(Channel, b"c", Op::Subscribe, &err);
    assert!(matches!(rx.try_recv(), Ok(Err(Error::Server(_)))));
    assert_eq!(r.len(), 0);
    let waker = Waker::from(Arc::new(Noop(AtomicUsize::new(0))));
    assert_eq!(
        inbox_poll(&s, &mut Context::from_waker(&waker)),
        Poll::Ready(None)
    );
}

#[test]
fn server_dropped_shard_channel_is_resubscribed_with_a_gap() {
    let (mut r, t0) = registry();
    let (s, _rx) = live(&mut r, Shard, "s", 1, t0);
    r.server_dropped(Shard, b"s");
    let plan = r.plan(t0);
    assert_eq!((plan[0].op, plan[0].kind), (Op::Subscribe, Shard));
    r.confirmed(Shard, b"s");
    assert_eq!(drain(&s), [Event::Gap]);
}

#[test]
fn delivery_reaches_every_listener_of_the_name_only() {
    let (r, [(a, _ra), (b, _rb), (p, _rp)]) =
        listening([(Channel, "c"), (Channel, "c"), (Pattern, "c")]);
    let ev = Event::Message {
        channel: Bytes::from_static(b"c"),
        pattern: None,
        payload: Bytes::from_static(b"0"),
    };
    r.deliver(Channel, b"c", ev.clone());
    r.deliver(Channel, b"other", ev.clone());
    assert_eq!(drain(&a), std::slice::from_ref(&ev));
    assert_eq!(drain(&b), [ev]);
    assert!(drain(&p).is_empty());
}

#[test]
fn shard_channels_of_one_slot_share_a_command() {
    let (mut r, _listeners) = listening([(Shard, "{a}1"), (Shard, "{b}1"), (Shard, "{a}2")]);
    let plan = r.plan(Instant::now());
    let mut groups: Vec<Vec<&[u8]>> = plan.iter().map(names).collect();
    groups.sort();
    assert_eq!(groups, [vec![b"{a}1".as_ref(), b"{a}2"], vec![b"{b}1"]]);
    for p in &plan {
        assert!(p.names.iter().all(|n| Slot::of(n) == Slot::of(&p.names[0])));
    }
}

/// A name on its way: listener `waiting` still waits for its caller's
/// confirmation (the receiver returned), listener `handed_out` does not.
fn moving(
    kind: SubscriptionKind,
    name: &'static str,
    handed_out: u64,
    waiting: u64,
) -> (Moving, oneshot::Receiver<Result<()>>) {
    let (confirm, rx) = oneshot::channel();
    let name = Bytes::from_static(name.as_bytes());
    let mut m = Moving::new_listener(kind, name, waiting, inbox(), confirm);
    m.listeners.push((handed_out, inbox()));
    (m, rx)
}

#[test]
fn adopted_listeners_get_a_gap_once_live_and_waiters_only_their_confirmation() {
    let mut r = Registry::new(LINGER);
    let (m, mut rx) = moving(Shard, "s", 1, 2);
    let waiter_inbox = Arc::clone(&m.listeners[0].1);
    let s = Arc::clone(&m.listeners[1].1);
    r.adopt(m);
    let plan = r.plan(Instant::now());
    assert_eq!(
        (plan[0].op, names(&plan[0])),
        (Op::Subscribe, vec![b"s".as_ref()])
    );
    assert!(drain(&s).is_empty(), "no Gap before the name is live");
    r.confirmed(Shard, b"s");
    assert!(confirmed_ok(&mut rx));
    assert_eq!(drain(&s), [Event::Gap]);
    assert!(drain(&waiter_inbox).is_empty());
}

#[test]
fn adopting_into_a_live_name_answers_at_once() {
    let (mut r, t0) = registry();
    let (_, _rx) = live(&mut r, Shard, "s", 1, t0);
    let (m, mut rx) = moving(Shard, "s", 2, 3);
    let s = Arc::clone(&m.listeners[1].1);
    r.adopt(m);
    assert!(confirmed_ok(&mut rx));
    assert_eq!(drain(&s), [Event::Gap]);
    assert!(r.plan(t0).is_empty(), "nothing to write");
}

#[test]
fn refused_and_dropped_names_are_handed_back_not_failed() {
    let (mut r, t0) = registry();
    let (s, mut rx) = add(&mut r, Shard, "s", 1);
    r.plan(t0);
    let m = r.refused(Shard, b"s").unwrap();
    assert_eq!((m.listeners.len(), m.waiters.len()), (1, 1));
    assert!(matches!(
        rx.try_recv(),
        Err(oneshot::error::TryRecvError::Empty)
    ));
    assert!(!s.is_closed());
    assert_eq!(r.len(), 0);

    // Dropped by the server: only a live name with no command in flight.
    let (_, _rx) = add(&mut r, Shard, "d", 2);
    r.plan(t0);
    assert!(
        r.dropped(Shard, b"d").is_none(),
        "its SSUBSCRIBE is unanswered"
    );
    r.confirmed(Shard, b"d");
    let m = r.dropped(Shard, b"d").unwrap();
    assert_eq!((m.listeners.len(), m.waiters.len()), (1, 0));
    assert_eq!(r.len(), 0);
    assert!(r.plan(t0).is_empty(), "not subscribed again here");
}

#[test]
fn retain_hands_back_rejected_names_and_unsubscribes_them_after_the_linger() {
    let t0 = Instant::now();
    let (mut r, _listeners) = listening([(Shard, "keep"), (Shard, "go"), (Channel, "c")]);
    r.plan(t0);
    r.confirmed(Shard, b"keep");
    r.confirmed(Shard, b"go");
    // Queued but never written: forgotten at once.
    let (_, _d) = add(&mut r, Shard, "queued", 4);
    let out = r.retain(|kind, name| kind == Shard && name == b"keep", t0);
    let mut moved: Vec<&[u8]> = out.iter().map(|m| m.name.as_ref()).collect();
    moved.sort();
    assert_eq!(moved, [b"c".as_ref(), b"go", b"queued"]);
    assert!(
        r.plan(t0).is_empty(),
        "the queued name is not subscribed here"
    );
    let plan = r.plan(t0 + LINGER);
    let mut unsub: Vec<(SubscriptionKind, &[u8])> =
        plan.iter().map(|p| (p.kind, p.names[0].as_ref())).collect();
    unsub.sort_by_key(|(k, _)| k.index());
    assert_eq!(unsub, [(Channel, b"c".as_ref()), (Shard, b"go")]);
    assert!(plan.iter().all(|p| p.op == Op::Unsubscribe));
    assert!(r.is_live(Shard, b"keep"));
}

#[test]
fn prune_forgets_listeners_and_callers_that_left() {
    let (mut m, _rx) = moving(Shard, "s", 1, 2);
    assert!(!m.prune());
    m.listeners[1].1.close();
    assert!(!m.prune());
    assert_eq!(m.listeners.len(), 1);
    m.listeners[0].1.close();
    let (tx, rx) = oneshot::channel();
    drop(rx);
    m.waiters = vec![(2, tx)];
    assert!(m.prune());
}
