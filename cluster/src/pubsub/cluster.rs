//! [`ClusterHub`]: the pub/sub hub of a cluster client. One
//! [`NodeSubscriber`] per master in use, opened on first use, and the rule
//! that says which one carries a name:
//!
//! - a shard channel lives on the master of its slot (CRC16 of the channel
//!   with the hash-tag rule, like a key), as the client's router sees it:
//!   [`Router::table`] is the one slot → master map, so a `MOVED` seen by a
//!   command or by a subscription corrects both;
//! - channels and patterns live on one master, chosen once and kept while it
//!   stays a master: a cluster carries every `PUBLISH` to every node, so any
//!   node would do, and one node keeps the choice stable.
//!
//! Names move when that rule gives another answer. A node's task hands the
//! listeners back ([`Notice::Evicted`]) when the node answers `MOVED`, drops
//! shard channels on its own (`sunsubscribe` pushes when its slot left), or
//! when [`ClusterHub::rebalance`] sends it the new topology after the
//! router's slot owners changed. The hub then places them on the owner's
//! node, which subscribes and sends the listeners `Gap`, or parks them until
//! the topology names an owner (see `coordinator.rs` for the retry loop).
//!
//! Every placement and every release happens under one lock, and a dropped
//! `Subscription` closes its inbox before taking it: a listener being moved
//! is either left behind (closed before the move) or released on the node it
//! moved to (its release comes after the move), never lost between two.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::coordinator;
use super::hub::{Control, Link, NodeSubscriber, Notice, Why};
use super::message::SubscriptionKind;
use super::registry::Moving;
use super::subscription::{Inbox, Route, Subscription, NO_HOME};
use super::PubSubConfig;
use crate::error::Result;
use crate::routed::redirect_addr;
use crate::router::{node_config, Router, Table};
use crate::slot::Slot;

/// How long names a node dropped on its own are kept off that node while
/// the topology still names it as their owner (a refresh that asked a node
/// not yet aware of the failover or of the resharding); then they go where
/// the topology says, and a `MOVED` corrects it if it is wrong.
const AVOID_DROPPER: Duration = Duration::from_secs(5);
/// The pause before subscribing again after `CLUSTERDOWN`, `TRYAGAIN` and
/// the like, so a refusing node is not asked in a tight loop.
const RETRY_AFTER: Duration = Duration::from_millis(250);
/// Two `MOVED` for one slot within this long of each other are a ping-pong
/// (source and target of a migration each naming the other), not a move.
const BOUNCE_WINDOW: Duration = Duration::from_secs(2);
/// The first pause after a second `MOVED`; doubles per bounce.
const BOUNCE_PAUSE: Duration = Duration::from_millis(25);
/// The longest pause between two subscribes of a bouncing slot.
const BOUNCE_PAUSE_MAX: Duration = Duration::from_secs(1);

/// What a node may keep after the topology changed.
#[derive(Debug)]
pub(crate) struct Keep {
    table: Arc<Table>,
    addr: String,
    classic: bool,
}

impl Keep {
    /// Shard channels of the slots the node serves; channels and patterns
    /// only on the node chosen for them.
    pub(crate) fn keeps(&self, kind: SubscriptionKind, name: &[u8]) -> bool {
        match kind {
            SubscriptionKind::Shard => {
                self.table.owner(Slot::of(name).get()) == Some(self.addr.as_str())
            }
            SubscriptionKind::Channel | SubscriptionKind::Pattern => self.classic,
        }
    }
}

/// The cluster hub's shared state (see the module docs).
#[derive(Debug)]
pub(crate) struct ClusterHub {
    router: Arc<Router>,
    config: PubSubConfig,
    notices: mpsc::UnboundedSender<Notice>,
    next_listener: AtomicU64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The node subscribers in use; a handful (one per master), so lookups
    /// are linear.
    members: Vec<Member>,
    next_member: u32,
    /// The master carrying channels and patterns.
    classic: Option<String>,
    /// Listeners no node can take yet.
    parked: Vec<Parked>,
    /// Slots that answered `MOVED` lately (a few at a time: linear).
    bounces: Vec<Bounce>,
}

/// The last `MOVED` of a slot, and how many came in a row.
#[derive(Debug)]
struct Bounce {
    slot: u16,
    at: Instant,
    count: u32,
}

/// Counts a `MOVED` of `slot` at `now`: 1 for the first within
/// [`BOUNCE_WINDOW`] of the last, more for a ping-pong.
fn bounce(bounces: &mut Vec<Bounce>, slot: u16, now: Instant) -> u32 {
    bounces.retain(|b| now.saturating_duration_since(b.at) < BOUNCE_WINDOW);
    match bounces.iter_mut().find(|b| b.slot == slot) {
        Some(b) => {
            b.count = b.count.saturating_add(1);
            b.at = now;
            b.count
        }
        None => {
            bounces.push(Bounce {
                slot,
                at: now,
                count: 1,
            });
            1
        }
    }
}

/// The pause before subscribing again after the `count`th bounce in a row.
fn bounce_pause(count: u32) -> Duration {
    let doublings = count.saturating_sub(2).min(10);
    BOUNCE_PAUSE
        .saturating_mul(1 << doublings)
        .min(BOUNCE_PAUSE_MAX)
}

#[derive(Debug)]
struct Member {
    /// What listeners' [`Inbox::home`] holds.
    id: u32,
    addr: String,
    node: NodeSubscriber,
}

/// Listeners waiting for a node, and the conditions to place them.
#[derive(Debug)]
struct Parked {
    moving: Moving,
    /// Before `until`, not this node (it dropped them; the topology may be
    /// stale), or no node at all when `None`.
    avoid: Option<String>,
    until: Instant,
}

impl ClusterHub {
    /// The hub of a cluster client, sharing its router. Spawns the
    /// coordinator; no connection is opened before the first subscribe.
    pub(crate) fn start(router: Arc<Router>, config: PubSubConfig) -> Arc<Self> {
        let (notices, rx) = mpsc::unbounded_channel();
        let owners = router.watch_owners();
        let hub = Arc::new(Self {
            router,
            config,
            notices,
            next_listener: AtomicU64::new(0),
            state: Mutex::new(State::default()),
        });
        tokio::spawn(coordinator::run(Arc::downgrade(&hub), rx, owners));
        hub
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update leaves the state whole (a push, a retain, a field
        // store), so a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a listener on the node that owns `name` and waits until it is
    /// subscribed there, within `subscribe_timeout` (including a move after
    /// `MOVED`, and a wait for a node that is connecting or for the topology
    /// to name an owner).
    pub(crate) async fn subscribe(
        self: &Arc<Self>,
        kind: SubscriptionKind,
        name: Bytes,
    ) -> Result<Subscription> {
        let id = self.next_listener.fetch_add(1, Ordering::Relaxed);
        let inbox = Arc::new(Inbox::new(self.config.listener_capacity));
        let (confirm, confirmed) = oneshot::channel();
        // Built before the listener is placed: if this future is dropped from
        // here on, the Subscription's Drop releases it wherever it went.
        let subscription = Subscription::new(
            kind,
            name.clone(),
            id,
            Arc::clone(&inbox),
            Route::Cluster(Arc::clone(self)),
        );
        let listener = Moving::new_listener(kind, name, id, Arc::clone(&inbox), confirm);
        self.place_all(None, Instant::now(), vec![listener]);
        let timeout = self.config.subscribe_timeout;
        subscription
            .confirmed(confirmed, timeout, |inbox| self.home_connected(inbox))
            .await
    }

    /// Sends a dropped listener's release to the node holding it now. The
    /// inbox is closed already (see the module docs for why that order).
    pub(crate) fn release(&self, inbox: &Inbox, release: Control) {
        let state = self.lock();
        if let Some(member) = state.members.iter().find(|m| m.id == inbox.home()) {
            member.node.send(release);
        }
    }

    /// Places what a node handed back.
    pub(crate) fn handle(&self, notice: Notice) {
        let Notice::Evicted { from, why, entries } = notice else {
            // Down and Wake only make the coordinator look again.
            return;
        };
        let now = Instant::now();
        match why {
            Why::Moved { slot, addr } => {
                let addr = redirect_addr(&addr, &from);
                let count = bounce(&mut self.lock().bounces, slot, now);
                self.router.refresh_soon();
                if count <= 1 {
                    // A move: the router learns it too (and checks the rest
                    // of the table).
                    self.router.apply_moved(slot, &addr);
                    self.place_all(None, now, entries);
                } else {
                    // A ping-pong (a migration between its two SETSLOT NODE
                    // commands): the table is left alone (each patch would
                    // rebalance every node), the listeners wait, with
                    // backoff, for the refresh to settle who owns the slot.
                    self.place_all(None, now + bounce_pause(count), entries);
                }
            }
            Why::Retained => self.place_all(None, now, entries),
            Why::Dropped => {
                self.router.refresh_soon();
                self.place_all(Some(from), now + AVOID_DROPPER, entries);
            }
            Why::Retry => {
                self.router.refresh_soon();
                self.place_all(None, now + RETRY_AFTER, entries);
            }
        }
    }

    /// After the router's slot owners changed: tells every node what it may
    /// keep (it hands the rest back), lets go of nodes that are no longer
    /// masters, and places what was parked.
    pub(crate) fn rebalance(&self) {
        let table = self.router.table();
        let mut state = self.lock();
        if state
            .classic
            .as_deref()
            .is_some_and(|c| !table.is_master(c))
        {
            state.classic = None;
        }
        let classic = state.classic.clone();
        state.members.retain(|m| {
            let is_classic = classic.as_deref() == Some(m.addr.as_str());
            m.node.send(Control::Retain(Keep {
                table: Arc::clone(&table),
                addr: m.addr.clone(),
                classic: is_classic,
            }));
            // A let-go node's task hands everything back, then ends when it
            // has read its queue (closing the socket unsubscribes the rest).
            is_classic || table.is_master(&m.addr)
        });
        self.place_parked(&mut state, &table);
    }

    /// Tries the parked listeners again (the coordinator's retry timer).
    pub(crate) fn retry_parked(&self) {
        let table = self.router.table();
        let mut state = self.lock();
        self.place_parked(&mut state, &table);
    }

    /// Asks the router for a fresh topology in the background.
    pub(crate) fn refresh_soon(&self) {
        self.router.refresh_soon();
    }

    /// Whether the coordinator should keep retrying: something is parked,
    /// or a node is not connected (maybe a dead master a replica replaces).
    pub(crate) fn needs_attention(&self) -> bool {
        let state = self.lock();
        !state.parked.is_empty() || state.members.iter().any(|m| !m.node.is_connected())
    }

    /// Every node connection in use is up.
    pub(crate) fn is_connected(&self) -> bool {
        self.lock().members.iter().all(|m| m.node.is_connected())
    }

    /// Reconnects of the node connections in use.
    pub(crate) fn reconnects(&self) -> u64 {
        self.lock()
            .members
            .iter()
            .map(|m| m.node.reconnects())
            .sum()
    }

    fn home_connected(&self, inbox: &Inbox) -> bool {
        let state = self.lock();
        let home = state.members.iter().find(|m| m.id == inbox.home());
        home.is_some_and(|m| m.node.is_connected())
    }

    fn place_all(&self, avoid: Option<String>, until: Instant, entries: Vec<Moving>) {
        let table = self.router.table();
        let now = Instant::now();
        let mut state = self.lock();
        let parked_before = state.parked.len();
        for moving in entries {
            let parked = Parked {
                moving,
                avoid: avoid.clone(),
                until,
            };
            self.place(&mut state, &table, parked, now);
        }
        if state.parked.len() > parked_before {
            // The coordinator's retry timer takes it from here.
            let _ = self.notices.send(Notice::Wake);
        }
    }

    fn place_parked(&self, state: &mut State, table: &Table) {
        let now = Instant::now();
        for parked in std::mem::take(&mut state.parked) {
            self.place(state, table, parked, now);
        }
    }

    /// Hands listeners to the node that owns their name, or parks them.
    fn place(&self, state: &mut State, table: &Table, mut parked: Parked, now: Instant) {
        if parked.moving.prune() {
            return;
        }
        let owner = owner(state, table, parked.moving.kind, &parked.moving.name)
            .filter(|o| now >= parked.until || parked.avoid.as_ref().is_some_and(|a| a != o));
        match owner.and_then(|addr| self.member(state, &addr)) {
            Some(member) => {
                for (_, inbox) in &parked.moving.listeners {
                    inbox.set_home(member.id);
                }
                member.node.send(Control::Adopt(parked.moving));
            }
            None => {
                for (_, inbox) in &parked.moving.listeners {
                    if inbox.home() != NO_HOME {
                        // No longer subscribed anywhere: a waiter re-checks
                        // instead of waiting on a message that cannot come
                        // (another Gap follows once it is live again).
                        inbox.set_home(NO_HOME);
                        inbox.push_gap();
                    }
                }
                state.parked.push(parked);
            }
        }
    }

    /// The node subscriber of `addr`, spawned on first use.
    fn member<'s>(&self, state: &'s mut State, addr: &str) -> Option<&'s Member> {
        if let Some(i) = state.members.iter().position(|m| m.addr == addr) {
            return state.members.get(i);
        }
        let connection = node_config(self.router.base(), addr).ok()?;
        let link = Link {
            addr: addr.to_owned(),
            notices: self.notices.clone(),
        };
        let node = NodeSubscriber::spawn_lazy(connection, self.config.clone(), link);
        let id = state.next_member;
        // NO_HOME is never an id; wrapping needs 4 billion nodes first.
        state.next_member = state.next_member.wrapping_add(1) % NO_HOME;
        state.members.push(Member {
            id,
            addr: addr.to_owned(),
            node,
        });
        state.members.last()
    }
}

/// The master that should carry `name` now.
fn owner(state: &mut State, table: &Table, kind: SubscriptionKind, name: &[u8]) -> Option<String> {
    match kind {
        SubscriptionKind::Shard => table.owner(Slot::of(name).get()).map(str::to_owned),
        SubscriptionKind::Channel | SubscriptionKind::Pattern => {
            if !state.classic.as_deref().is_some_and(|c| table.is_master(c)) {
                state.classic = table.masters().next().map(str::to_owned);
            }
            state.classic.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_moved_within_the_window_is_a_ping_pong() {
        let t0 = Instant::now();
        let mut b = Vec::new();
        assert_eq!(bounce(&mut b, 7, t0), 1);
        assert_eq!(bounce(&mut b, 8, t0), 1);
        assert_eq!(bounce(&mut b, 7, t0 + Duration::from_millis(5)), 2);
        assert_eq!(bounce(&mut b, 7, t0 + Duration::from_millis(10)), 3);
        // Quiet for a window: the next MOVED is a move again.
        assert_eq!(bounce(&mut b, 7, t0 + BOUNCE_WINDOW * 2), 1);
        assert_eq!(b.len(), 1);
        assert_eq!(bounce_pause(2), BOUNCE_PAUSE);
        assert_eq!(bounce_pause(3), BOUNCE_PAUSE * 2);
        assert_eq!(bounce_pause(40), BOUNCE_PAUSE_MAX);
    }
}
