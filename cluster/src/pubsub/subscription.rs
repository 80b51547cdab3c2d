//! [`Subscription`], the listener's end, and [`Inbox`], its bounded queue.
//!
//! The queue is written by the hub's socket task and read by the listener.
//! Pushing never waits: when a listener's queue holds `capacity` messages,
//! further messages are counted instead of queued, and the count is handed
//! out as [`Event::Lagged`] at the point of the stream where they were lost.
//! Markers (`Gap`, `Lagged`) do not count against the capacity and are
//! coalesced, so a stalled listener holds at most `capacity` messages plus a
//! bounded number of markers.

use std::collections::VecDeque;
use std::fmt;
use std::future::poll_fn;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::cluster::ClusterHub;
use super::hub::Control;
use super::message::{Event, SubscriptionKind};
use crate::error::{Error, Result};

/// [`Inbox::home`] of a listener no node holds (parked, or standalone).
pub(crate) const NO_HOME: u32 = u32::MAX;

/// One listener's queue, shared by the socket task (producer) and the
/// [`Subscription`] (consumer).
#[derive(Debug)]
pub(crate) struct Inbox {
    state: Mutex<Queue>,
    /// In a cluster hub, the id of the node whose task holds this listener,
    /// so a dropped `Subscription` releases it there. Written and read under
    /// the hub's lock; the atomic only makes sharing it legal.
    home: AtomicU32,
}

#[derive(Debug)]
struct Queue {
    events: VecDeque<Event>,
    /// `Event::Message`s in `events` (markers excluded).
    messages: usize,
    capacity: usize,
    /// Messages dropped since the last queued event.
    dropped: u64,
    closed: bool,
    waker: Option<Waker>,
}

impl Inbox {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(Queue {
                // Allocated on first use: most listeners of lock channels see
                // one message in their life, and there may be tens of thousands.
                events: VecDeque::new(),
                messages: 0,
                capacity: capacity.max(1),
                dropped: 0,
                closed: false,
                waker: None,
            }),
            home: AtomicU32::new(NO_HOME),
        }
    }

    pub(crate) fn home(&self) -> u32 {
        self.home.load(Ordering::Relaxed)
    }

    pub(crate) fn set_home(&self, node: u32) {
        self.home.store(node, Ordering::Relaxed);
    }

    /// Whether the stream has ended: the `Subscription` was dropped, or the
    /// hub ended it. A closed inbox is not worth moving to another node.
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic while holding this lock cannot leave the queue inconsistent
        // (every update is a single push or pop), so poisoning is ignored.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a message, or counts it as dropped when the queue is full.
    /// Returns whether it was queued. Never blocks beyond the queue's lock.
    pub(crate) fn push_message(&self, event: Event) -> bool {
        let waker = {
            let mut q = self.lock();
            if q.closed {
                return false;
            }
            if q.messages >= q.capacity {
                q.dropped += 1;
                return false;
            }
            q.flush_dropped();
            q.events.push_back(event);
            q.messages += 1;
            q.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        true
    }

    /// Queues a [`Event::Gap`]. Gaps are never dropped; trailing markers
    /// (gaps and lag counts after the last message) are merged into one
    /// `Lagged` and one `Gap`, so repeated reconnects against a stalled
    /// listener do not grow its queue.
    pub(crate) fn push_gap(&self) {
        let waker = {
            let mut q = self.lock();
            if q.closed {
                return;
            }
            while let Some(Event::Gap | Event::Lagged(_)) = q.events.back() {
                if let Some(Event::Lagged(n)) = q.events.pop_back() {
                    q.dropped += n;
                }
            }
            q.flush_dropped();
            q.events.push_back(Event::Gap);
            q.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Ends the stream: the listener gets what is queued, then `None`.
    pub(crate) fn close(&self) {
        let waker = {
            let mut q = self.lock();
            q.closed = true;
            q.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    pub(crate) fn poll_pop(&self, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        let mut q = self.lock();
        if let Some(event) = q.pop() {
            return Poll::Ready(Some(event));
        }
        if q.closed {
            return Poll::Ready(None);
        }
        match &q.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => q.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Queue {
    fn flush_dropped(&mut self) {
        if self.dropped > 0 {
            let n = std::mem::take(&mut self.dropped);
            self.events.push_back(Event::Lagged(n));
        }
    }

    fn pop(&mut self) -> Option<Event> {
        match self.events.pop_front() {
            Some(event) => {
                if let Event::Message { .. } = event {
                    self.messages -= 1;
                }
                Some(event)
            }
            // Drops happen only while the queue is full, so by the time it is
            // empty they are the newest thing in the stream.
            None if self.dropped > 0 => Some(Event::Lagged(std::mem::take(&mut self.dropped))),
            None => None,
        }
    }
}

/// One listener on a channel, pattern or shard channel.
///
/// Created by [`PubSub::subscribe`](crate::PubSub::subscribe) and its
/// siblings once the server has confirmed the subscription. Many
/// `Subscription`s to one name share one server-side subscription; dropping
/// the last of them unsubscribes after the hub's linger.
///
/// Dropping never blocks and needs no runtime: it posts a note to the hub's
/// task (a cluster hub's for a moment takes its lock to find the node that
/// holds the listener now).
///
/// ```no_run
/// use keylatch_cluster::{Event, PubSub};
/// # async fn demo() -> keylatch_cluster::Result<()> {
/// let hub = PubSub::connect("redis://127.0.0.1:6379").await?;
/// let mut sub = hub.subscribe("news").await?;
/// while let Some(event) = sub.recv().await {
///     if let Event::Message { payload, .. } = event {
///         println!("{}", String::from_utf8_lossy(&payload));
///     }
/// }
/// # Ok(()) }
/// ```
pub struct Subscription {
    kind: SubscriptionKind,
    name: Bytes,
    id: u64,
    inbox: Arc<Inbox>,
    route: Route,
}

/// Where a dropped [`Subscription`] sends its release.
#[derive(Debug)]
pub(crate) enum Route {
    /// The one node of a standalone hub.
    Node(mpsc::UnboundedSender<Control>),
    /// A cluster hub, which knows the node holding the listener now (it may
    /// have moved since the subscription was made).
    Cluster(Arc<ClusterHub>),
}

impl Subscription {
    pub(crate) fn new(
        kind: SubscriptionKind,
        name: Bytes,
        id: u64,
        inbox: Arc<Inbox>,
        route: Route,
    ) -> Self {
        Self {
            kind,
            name,
            id,
            inbox,
            route,
        }
    }

    /// Hands this new subscription to its caller once the hub has confirmed
    /// it, within `timeout`. Dropped (its listener released) otherwise;
    /// `connected` then tells whether a connection was the reason.
    pub(crate) async fn confirmed(
        self,
        confirmed: oneshot::Receiver<Result<()>>,
        timeout: Duration,
        connected: impl FnOnce(&Inbox) -> bool,
    ) -> Result<Self> {
        match tokio::time::timeout(timeout, confirmed).await {
            Ok(Ok(Ok(()))) => Ok(self),
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(_)) => Err(Error::ConnectionClosed),
            Err(_) if connected(&self.inbox) => Err(Error::Timeout),
            Err(_) => Err(Error::Disconnected),
        }
    }

    /// The next event; `None` when the subscription has ended (the server
    /// refused it when the hub subscribed again after a reconnect, e.g. an
    /// ACL change, or the hub's task is gone).
    ///
    /// ```no_run
    /// # async fn demo(mut sub: keylatch_cluster::Subscription) {
    /// use keylatch_cluster::Event;
    /// match sub.recv().await {
    ///     Some(Event::Message { payload, .. }) => println!("{payload:?}"),
    ///     Some(Event::Gap | Event::Lagged(_)) => { /* re-check state */ }
    ///     Some(_) => { /* a kind added later */ }
    ///     None => { /* no more events: fall back to polling */ }
    /// }
    /// # }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: an event is removed from the queue only when `recv`
    /// returns it.
    pub async fn recv(&mut self) -> Option<Event> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Polls for the next event, as a `Stream::poll_next` would: `Ready(None)`
    /// when the subscription has ended, `Pending` (with `cx`'s waker
    /// registered) when nothing is queued.
    ///
    /// ```no_run
    /// use std::future::poll_fn;
    /// # async fn demo(mut sub: keylatch_cluster::Subscription) {
    /// let event = poll_fn(|cx| sub.poll_recv(cx)).await;
    /// # }
    /// ```
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.inbox.poll_pop(cx)
    }

    /// The channel, pattern or shard channel subscribed to.
    ///
    /// ```no_run
    /// # fn demo(sub: keylatch_cluster::Subscription) {
    /// assert_eq!(&sub.name()[..], b"news");
    /// # }
    /// ```
    pub fn name(&self) -> &Bytes {
        &self.name
    }

    /// What kind of subscription this is.
    ///
    /// ```no_run
    /// # fn demo(sub: keylatch_cluster::Subscription) {
    /// assert_eq!(sub.kind(), keylatch_cluster::SubscriptionKind::Channel);
    /// # }
    /// ```
    pub fn kind(&self) -> SubscriptionKind {
        self.kind
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // Closed first: a cluster hub moving this listener right now sees
        // it is gone and leaves it behind (see `ClusterHub::release`).
        self.inbox.close();
        let release = Control::Release {
            kind: self.kind,
            name: self.name.clone(),
            id: self.id,
        };
        match &self.route {
            // Unbounded channel: the send never waits and never fails while
            // the task runs. If the task is gone there is nothing to release.
            Route::Node(control) => drop(control.send(release)),
            Route::Cluster(hub) => hub.release(&self.inbox, release),
        }
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("kind", &self.kind)
            .field("name", &self.name)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test fails
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn noop_waker() -> Waker {
        Waker::from(Arc::new(Count(AtomicUsize::new(0))))
    }

    fn msg(i: u32) -> Event {
        Event::Message {
            channel: Bytes::from_static(b"c"),
            pattern: None,
            payload: Bytes::from(i.to_string()),
        }
    }

    fn drain(inbox: &Inbox) -> Vec<Event> {
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut out = Vec::new();
        while let Poll::Ready(Some(e)) = inbox.poll_pop(&mut cx) {
            out.push(e);
        }
        out
    }

    #[test]
    fn full_queue_counts_drops_and_reports_them_in_place() {
        let inbox = Inbox::new(3);
        for i in 0..3 {
            assert!(inbox.push_message(msg(i)));
        }
        for i in 3..8 {
            assert!(!inbox.push_message(msg(i)));
        }
        // Reading one makes room: the next message that fits comes after
        // the count of those lost before it.
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert_eq!(inbox.poll_pop(&mut cx), Poll::Ready(Some(msg(0))));
        assert!(inbox.push_message(msg(8)));
        assert_eq!(
            drain(&inbox),
            [msg(1), msg(2), Event::Lagged(5), msg(8)].to_vec()
        );
    }

    #[test]
    fn trailing_drops_are_reported_when_the_queue_empties() {
        let inbox = Inbox::new(1);
        assert!(inbox.push_message(msg(0)));
        assert!(!inbox.push_message(msg(1)));
        assert!(!inbox.push_message(msg(2)));
        assert_eq!(drain(&inbox), [msg(0), Event::Lagged(2)].to_vec());
        assert!(drain(&inbox).is_empty());
    }

    #[test]
    fn gaps_are_never_dropped_and_trailing_markers_merge() {
        let inbox = Inbox::new(1);
        assert!(inbox.push_message(msg(0)));
        assert!(!inbox.push_message(msg(1)));
        inbox.push_gap();
        assert!(!inbox.push_message(msg(2)));
        assert!(!inbox.push_message(msg(3)));
        inbox.push_gap();
        inbox.push_gap();
        assert_eq!(
            drain(&inbox),
            [msg(0), Event::Lagged(3), Event::Gap].to_vec()
        );
    }

    #[test]
    fn close_ends_the_stream_after_what_is_queued() {
        let inbox = Inbox::new(4);
        inbox.push_message(msg(0));
        inbox.close();
        assert!(!inbox.push_message(msg(1)));
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert_eq!(inbox.poll_pop(&mut cx), Poll::Ready(Some(msg(0))));
        assert_eq!(inbox.poll_pop(&mut cx), Poll::Ready(None));
    }

    #[test]
    fn pending_registers_the_waker_and_a_push_wakes_it() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        let mut cx = Context::from_waker(&waker);
        let inbox = Inbox::new(2);
        assert_eq!(inbox.poll_pop(&mut cx), Poll::Pending);
        inbox.push_message(msg(0));
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        // The waker is consumed by the wake: a second push does not wake again.
        inbox.push_message(msg(1));
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }
}
