//! Handing a name's listeners from one node's registry to another's.
//!
//! In a cluster a shard channel lives on the master of its slot. When that
//! changes (a failover, a resharded slot, a `MOVED` answer) the node that had
//! it gives up the listeners and the `subscribe` callers still waiting
//! ([`Moving`]), and the cluster hub hands them to the new owner, whose
//! registry adopts them. Listeners already handed out get a `Gap` once the
//! name is live there: messages published meanwhile reached nobody.

use std::sync::Arc;

use bytes::Bytes;
use tokio::time::Instant;

use super::{Confirm, Entry, Registry, Written};
use crate::pubsub::message::SubscriptionKind;
use crate::pubsub::subscription::Inbox;

/// The listeners of one name on their way to another node.
#[derive(Debug)]
pub(crate) struct Moving {
    pub(crate) kind: SubscriptionKind,
    pub(crate) name: Bytes,
    pub(crate) listeners: Vec<(u64, Arc<Inbox>)>,
    /// `subscribe` callers not answered yet; their listeners are in
    /// `listeners` too.
    pub(crate) waiters: Vec<(u64, Confirm)>,
}

impl Moving {
    /// A new listener whose caller waits for the confirmation.
    pub(crate) fn new_listener(
        kind: SubscriptionKind,
        name: Bytes,
        id: u64,
        inbox: Arc<Inbox>,
        confirm: Confirm,
    ) -> Self {
        Self {
            kind,
            name,
            listeners: vec![(id, inbox)],
            waiters: vec![(id, confirm)],
        }
    }

    /// Forgets listeners whose `Subscription` is gone and callers who gave
    /// up; `true` when nobody is left.
    pub(crate) fn prune(&mut self) -> bool {
        self.listeners.retain(|(_, inbox)| !inbox.is_closed());
        self.waiters.retain(|(_, confirm)| !confirm.is_closed());
        self.listeners.is_empty() && self.waiters.is_empty()
    }

    fn take(kind: SubscriptionKind, name: Bytes, entry: &mut Entry) -> Option<Self> {
        if entry.listeners.is_empty() && entry.waiters.is_empty() {
            return None;
        }
        // Whoever gets them owes the Gap now.
        entry.gap_pending = false;
        Some(Self {
            kind,
            name,
            listeners: entry.listeners.drain().collect(),
            waiters: std::mem::take(&mut entry.waiters),
        })
    }
}

impl Registry {
    /// Adds the listeners and waiters of a name that lived on another node.
    /// If the name is live here already, waiters are confirmed and handed-out
    /// listeners get their `Gap` at once; otherwise both wait for the
    /// subscription, which is queued unless already written.
    pub(crate) fn adopt(&mut self, mut moving: Moving) {
        if moving.prune() {
            return;
        }
        let Moving {
            kind,
            name,
            listeners,
            waiters,
        } = moving;
        let entry = self.entries[kind.index()]
            .entry(name.clone())
            .or_insert_with(Entry::new);
        // Sorted once: a name moving with thousands of listeners is not
        // matched against its waiters one by one.
        let mut waiting: Vec<u64> = waiters.iter().map(|(id, _)| *id).collect();
        waiting.sort_unstable();
        let mut handed_out = Vec::new();
        for (id, inbox) in listeners {
            if waiting.binary_search(&id).is_err() {
                handed_out.push(Arc::clone(&inbox));
            }
            entry.listeners.insert(id, inbox);
        }
        entry.linger_until = None;
        if entry.is_live() {
            for (_, confirm) in waiters {
                let _ = confirm.send(Ok(()));
            }
            for inbox in handed_out {
                inbox.push_gap();
            }
            return;
        }
        entry.waiters.extend(waiters);
        entry.gap_pending |= !handed_out.is_empty();
        if entry.written != Written::Subscribe && !entry.queued {
            entry.queued = true;
            self.pending.push((kind, name));
        }
    }

    /// The server refused to subscribe `name` here (`MOVED`, `CLUSTERDOWN`):
    /// the name is forgotten and its listeners and waiters handed back, for
    /// the hub to try elsewhere or later.
    pub(crate) fn refused(&mut self, kind: SubscriptionKind, name: &[u8]) -> Option<Moving> {
        let (name, mut entry) = self.entries[kind.index()].remove_entry(name)?;
        Moving::take(kind, name, &mut entry)
    }

    /// The server dropped a shard channel on its own (its slot went to
    /// another master): listeners and waiters are handed back instead of
    /// subscribed again here, where a replica of the new owner would accept
    /// the name and keep it off the master.
    pub(crate) fn dropped(&mut self, kind: SubscriptionKind, name: &[u8]) -> Option<Moving> {
        let map = &mut self.entries[kind.index()];
        let entry = map.get_mut(name)?;
        if entry.outstanding > 0 || entry.written != Written::Subscribe {
            // A command of ours is still to be answered; its answer settles it.
            return None;
        }
        let (name, mut entry) = map.remove_entry(name)?;
        Moving::take(kind, name, &mut entry)
    }

    /// Hands back every name `keep` rejects (the topology changed and this
    /// node no longer owns it). A name still subscribed here is unsubscribed
    /// after the linger, like one whose last listener left.
    pub(crate) fn retain(
        &mut self,
        keep: impl Fn(SubscriptionKind, &[u8]) -> bool,
        now: Instant,
    ) -> Vec<Moving> {
        let mut out = Vec::new();
        for kind in SubscriptionKind::ALL {
            let map = &mut self.entries[kind.index()];
            let mut dead = Vec::new();
            for (name, entry) in map.iter_mut() {
                if keep(kind, name) {
                    continue;
                }
                let Some(moving) = Moving::take(kind, name.clone(), entry) else {
                    continue;
                };
                out.push(moving);
                if entry.written == Written::Subscribe {
                    let until = now + self.linger;
                    entry.linger_until = Some(until);
                    self.lingering.push_back((until, kind, name.clone()));
                } else {
                    entry.queued = false;
                    if entry.is_dead() {
                        dead.push(name.clone());
                    }
                }
            }
            for name in dead {
                map.remove(&name);
            }
        }
        out
    }
}
