//! The refcounted registry: which names this node's connection is subscribed
//! to, who listens to each, and what must be written next. Pure state, no
//! I/O: the socket task feeds it requests, confirmations and time, and writes
//! what [`Registry::plan`] returns.
//!
//! Each name's server-side state follows from the commands written for it:
//! `written` is what the last one asked for, `outstanding` how many have not
//! been confirmed. The subscription is live exactly when the last written
//! command was a subscribe and every command has been confirmed. Counting,
//! rather than a single in-flight flag, keeps `UNSUBSCRIBE x` followed by a
//! quick `SUBSCRIBE x` correct: the first confirmation does not make `x` look
//! live while the server has yet to see the second command.
//!
//! `handoff.rs` moves a name's listeners between the registries of two nodes
//! (a cluster hub following a shard channel to its slot's new master).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::hub::Control;
use super::message::{Event, SubscriptionKind};
use super::subscription::Inbox;
use crate::error::{Error, Result};
use crate::slot::Slot;

mod handoff;

pub(crate) use handoff::Moving;

/// Names per SUBSCRIBE/PSUBSCRIBE command: thousands of requests queued at
/// once go out as a few commands (in one write) rather than one huge one.
pub(crate) const MAX_NAMES_PER_COMMAND: usize = 1024;

/// Where a `subscribe()` caller waits for the server's confirmation.
pub(crate) type Confirm = oneshot::Sender<Result<()>>;

/// Subscribe or unsubscribe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Subscribe,
    Unsubscribe,
}

/// One command to write: `op` for `names` of one kind.
#[derive(Debug, PartialEq)]
pub(crate) struct Planned {
    pub(crate) op: Op,
    pub(crate) kind: SubscriptionKind,
    pub(crate) names: Vec<Bytes>,
}

/// What the last command written for a name asked the server for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Written {
    Nothing,
    Subscribe,
    Unsubscribe,
}

#[derive(Debug)]
struct Entry {
    listeners: HashMap<u64, Arc<Inbox>>,
    /// Listeners whose `subscribe()` waits for the subscription to be live.
    waiters: Vec<(u64, Confirm)>,
    written: Written,
    /// Commands written for this name and not yet confirmed.
    outstanding: u32,
    /// Listed in `Registry::pending`: the next plan subscribes it.
    queued: bool,
    /// Set when the last listener left a live or subscribing name: the
    /// instant its UNSUBSCRIBE is due.
    linger_until: Option<Instant>,
    /// Listeners already handed out get a `Gap` when the subscription is live
    /// again (after a reconnect, or after the server dropped it).
    gap_pending: bool,
}

impl Entry {
    fn new() -> Self {
        Self {
            listeners: HashMap::new(),
            waiters: Vec::new(),
            written: Written::Nothing,
            outstanding: 0,
            queued: false,
            linger_until: None,
            gap_pending: false,
        }
    }

    fn is_live(&self) -> bool {
        self.written == Written::Subscribe && self.outstanding == 0
    }

    /// Nothing listens, nothing is queued or unconfirmed: forget the name.
    fn is_dead(&self) -> bool {
        self.listeners.is_empty()
            && !self.queued
            && self.outstanding == 0
            && self.written != Written::Subscribe
    }
}

/// Every name of one node's subscriber connection.
#[derive(Debug)]
pub(crate) struct Registry {
    entries: [HashMap<Bytes, Entry>; 3],
    /// Names to subscribe at the next plan (stale items are skipped there).
    pending: Vec<(SubscriptionKind, Bytes)>,
    /// Linger deadlines in the order they were set; the linger is constant,
    /// so this is also deadline order. Stale items are skipped when popped.
    lingering: VecDeque<(Instant, SubscriptionKind, Bytes)>,
    linger: Duration,
}

impl Registry {
    pub(crate) fn new(linger: Duration) -> Self {
        Self {
            entries: Default::default(),
            pending: Vec::new(),
            lingering: VecDeque::new(),
            linger,
        }
    }

    /// Applies a request from a handle or a [`Subscription`](crate::Subscription).
    pub(crate) fn apply(&mut self, control: Control, now: Instant) {
        match control {
            Control::Subscribe {
                kind,
                name,
                id,
                inbox,
                confirm,
            } => self.add(kind, name, id, inbox, confirm),
            Control::Release { kind, name, id } => self.remove(kind, name, id, now),
            Control::Adopt(moving) => self.adopt(moving),
            // Needs the task's link to the cluster hub: handled there.
            Control::Retain(_) => {}
        }
    }

    /// Adds a listener. If the name is live, `confirm` is answered at once;
    /// otherwise it waits for the confirmation, and the name is queued for
    /// the next plan unless a subscribe for it is already written.
    pub(crate) fn add(
        &mut self,
        kind: SubscriptionKind,
        name: Bytes,
        id: u64,
        inbox: Arc<Inbox>,
        confirm: Confirm,
    ) {
        let entry = self.entries[kind.index()]
            .entry(name.clone())
            .or_insert_with(Entry::new);
        entry.listeners.insert(id, inbox);
        // A listener arriving during the linger keeps the live subscription.
        entry.linger_until = None;
        if entry.is_live() {
            // The caller may have given up already; nothing to tell then.
            let _ = confirm.send(Ok(()));
            return;
        }
        entry.waiters.push((id, confirm));
        if entry.written != Written::Subscribe && !entry.queued {
            entry.queued = true;
            self.pending.push((kind, name));
        }
    }

    /// Removes a listener (its `Subscription` was dropped). The last one
    /// leaving a subscribed name starts the linger; leaving a name whose
    /// subscribe was never written cancels it.
    pub(crate) fn remove(&mut self, kind: SubscriptionKind, name: Bytes, id: u64, now: Instant) {
        let map = &mut self.entries[kind.index()];
        let Some(entry) = map.get_mut(&name) else {
            return;
        };
        if entry.listeners.remove(&id).is_none() {
            // A listener of an entry that was failed and forgotten.
            return;
        }
        entry.waiters.retain(|(w, _)| *w != id);
        if !entry.listeners.is_empty() {
            return;
        }
        if entry.written == Written::Subscribe {
            let until = now + self.linger;
            entry.linger_until = Some(until);
            self.lingering.push_back((until, kind, name));
        } else {
            entry.queued = false;
            if entry.is_dead() {
                map.remove(&name);
            }
        }
    }

    /// The commands to write now: UNSUBSCRIBE for names whose linger ran out
    /// by `now`, then SUBSCRIBE for queued names. Names are batched up to
    /// [`MAX_NAMES_PER_COMMAND`] per command; shard channels only with others
    /// of their slot, because a cluster refuses an SSUBSCRIBE across slots
    /// (`CROSSSLOT`), and a `MOVED` then names the slot of every name.
    pub(crate) fn plan(&mut self, now: Instant) -> Vec<Planned> {
        let mut unsub: [Vec<Bytes>; 3] = Default::default();
        while let Some((until, _, _)) = self.lingering.front() {
            if *until > now {
                break;
            }
            let Some((until, kind, name)) = self.lingering.pop_front() else {
                break;
            };
            let Some(entry) = self.entries[kind.index()].get_mut(&name) else {
                continue;
            };
            if entry.linger_until == Some(until) && entry.listeners.is_empty() {
                entry.linger_until = None;
                entry.written = Written::Unsubscribe;
                entry.outstanding += 1;
                unsub[kind.index()].push(name);
            }
        }
        let mut sub: [Vec<Bytes>; 3] = Default::default();
        for (kind, name) in self.pending.drain(..) {
            let Some(entry) = self.entries[kind.index()].get_mut(&name) else {
                continue;
            };
            if entry.queued {
                entry.queued = false;
                entry.written = Written::Subscribe;
                entry.outstanding += 1;
                sub[kind.index()].push(name);
            }
        }
        let mut out = Vec::new();
        for (op, lists) in [(Op::Unsubscribe, unsub), (Op::Subscribe, sub)] {
            for (kind, mut names) in SubscriptionKind::ALL.into_iter().zip(lists) {
                if kind == SubscriptionKind::Shard {
                    // Stable: names of one slot keep their order.
                    names.sort_by_key(|n| Slot::of(n));
                }
                let mut names = names.into_iter().peekable();
                while let Some(first) = names.next() {
                    let slot = (kind == SubscriptionKind::Shard).then(|| Slot::of(&first));
                    let mut batch = vec![first];
                    while batch.len() < MAX_NAMES_PER_COMMAND {
                        match names.next_if(|n| slot.map_or(true, |s| Slot::of(n) == s)) {
                            Some(n) => batch.push(n),
                            None => break,
                        }
                    }
                    out.push(Planned {
                        op,
                        kind,
                        names: batch,
                    });
                }
            }
        }
        out
    }

    /// When the next linger runs out (possibly a stale one: planning then
    /// finds nothing to do).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.lingering.front().map(|(until, _, _)| *until)
    }

    /// The server confirmed a command this registry planned for `name`.
    pub(crate) fn confirmed(&mut self, kind: SubscriptionKind, name: &[u8]) {
        let map = &mut self.entries[kind.index()];
        let Some(entry) = map.get_mut(name) else {
            return;
        };
        entry.outstanding = entry.outstanding.saturating_sub(1);
        if entry.outstanding > 0 {
            return;
        }
        match entry.written {
            Written::Subscribe => {
                let mut waiting: Vec<u64> = Vec::with_capacity(entry.waiters.len());
                for (id, confirm) in entry.waiters.drain(..) {
                    waiting.push(id);
                    let _ = confirm.send(Ok(()));
                }
                if std::mem::take(&mut entry.gap_pending) {
                    waiting.sort_unstable();
                    for (id, inbox) in &entry.listeners {
                        if waiting.binary_search(id).is_err() {
                            inbox.push_gap();
                        }
                    }
                }
            }
            Written::Unsubscribe | Written::Nothing => {
                if entry.is_dead() {
                    map.remove(name);
                }
            }
        }
    }

    /// The server refused a command planned for `name`. A refused subscribe
    /// fails its waiters and ends the streams of its listeners (they cannot
    /// be served); the name is forgotten.
    pub(crate) fn failed(&mut self, kind: SubscriptionKind, name: &[u8], op: Op, err: &Error) {
        let map = &mut self.entries[kind.index()];
        let Some(entry) = map.get_mut(name) else {
            return;
        };
        entry.outstanding = entry.outstanding.saturating_sub(1);
        match op {
            Op::Subscribe => {
                if let Some(entry) = map.remove(name) {
                    for (_, confirm) in entry.waiters {
                        let _ = confirm.send(Err(err.clone()));
                    }
                    for inbox in entry.listeners.values() {
                        inbox.close();
                    }
                }
            }
            Op::Unsubscribe => {
                if entry.outstanding == 0 && entry.written == Written::Unsubscribe {
                    // The server may still send messages for it; with no
                    // entry they are ignored.
                    entry.written = Written::Nothing;
                }
                if entry.is_dead() {
                    map.remove(name);
                }
            }
        }
    }

    /// The server ended a subscription on its own (a cluster node dropping
    /// the shard channels of a slot it gave away). Listeners keep listening:
    /// the name is subscribed again and they get a `Gap` once it is live.
    pub(crate) fn server_dropped(&mut self, kind: SubscriptionKind, name: &[u8]) {
        let map = &mut self.entries[kind.index()];
        let Some(entry) = map.get_mut(name) else {
            return;
        };
        if entry.outstanding > 0 || entry.written != Written::Subscribe {
            // A command of ours is still to be answered; its answer settles it.
            return;
        }
        entry.written = Written::Nothing;
        entry.linger_until = None;
        if entry.listeners.is_empty() {
            map.remove(name);
            return;
        }
        entry.gap_pending = true;
        if !entry.queued {
            entry.queued = true;
            self.pending.push((kind, Bytes::copy_from_slice(name)));
        }
    }

    /// How many names wait to be subscribed (after a reconnect: every name
    /// with listeners).
    pub(crate) fn queued(&self) -> usize {
        self.pending.len()
    }

    /// The connection died: the server forgot every subscription. Names with
    /// listeners are queued to be subscribed again (their listeners get a
    /// `Gap` once live); the rest are forgotten.
    pub(crate) fn disconnected(&mut self) {
        self.pending.clear();
        self.lingering.clear();
        for kind in SubscriptionKind::ALL {
            let pending = &mut self.pending;
            self.entries[kind.index()].retain(|name, entry| {
                entry.written = Written::Nothing;
                entry.outstanding = 0;
                entry.linger_until = None;
                if entry.listeners.is_empty() {
                    return false;
                }
                entry.gap_pending = true;
                entry.queued = true;
                pending.push((kind, name.clone()));
                true
            });
        }
    }

    /// Hands a message to every listener of `name`, never waiting: a full
    /// listener queue counts a drop instead.
    pub(crate) fn deliver(&self, kind: SubscriptionKind, name: &[u8], event: Event) {
        if let Some(entry) = self.entries[kind.index()].get(name) {
            for inbox in entry.listeners.values() {
                inbox.push_message(event.clone());
            }
        }
    }

    /// Ends everything (the task is stopping): waiters fail, streams end.
    pub(crate) fn close_all(&mut self) {
        for map in &mut self.entries {
            for (_, entry) in map.drain() {
                for (_, confirm) in entry.waiters {
                    let _ = confirm.send(Err(Error::ConnectionClosed));
                }
                for inbox in entry.listeners.values() {
                    inbox.close();
                }
            }
        }
        self.pending.clear();
        self.lingering.clear();
    }

    #[cfg(test)]
    fn is_live(&self, kind: SubscriptionKind, name: &[u8]) -> bool {
        self.entries[kind.index()]
            .get(name)
            .is_some_and(Entry::is_live)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.iter().map(HashMap::len).sum()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test fails
mod tests;
