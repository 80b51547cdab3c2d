//! The lease engine's schedule: the watched holds' entries, found by slot
//! or by lock name, and when each next needs a look, so that a planning
//! pass touches the holds that are due and no others (issue 31: a pass
//! that walked every hold cost O(holds) every few milliseconds).
//!
//! Two kinds of due time, kept apart:
//! - a *look* (`looks`, one min-heap): the hold's loss deadline, max hold
//!   or tracked read, or an off-grid renewal or check. Every entry has one
//!   live look at or before its deadline.
//! - a *grid queue* (one per lease): holds waiting for their lease's next
//!   round, by the time they may be renewed early (next renewal − lease/6).
//!   A round takes every hold whose early time has come, as the walk did.
//!
//! Items are never removed from a heap in place: an entry moved earlier
//! gets a new item, and the old one is skipped when it comes out (lazy
//! deletion). An item is live while its entry's due time is the item's own
//! time: no generation is kept (4 bytes an entry and a heap item each). Two
//! items of one slot and one nanosecond, or a freed slot's item matching
//! its next entry's time to the nanosecond, only make a look at that very
//! time come twice, and a visit is idempotent. A heap with more stale items than live
//! ones is rebuilt, so the cost stays per hold due; a heap at its capacity
//! drops its stale items before it grows, and grows by a quarter. A look that comes too
//! early is harmless: a visit only acts on what is due, and looks again.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};

pub(super) use super::entry::Entry;
use super::entry::{name_hash, NameHash, Tick, LOOK_URGENT, NO_SLOT, NO_TICK};
use super::hold::{instant, nanos};

/// How often every entry is checked for a hold that ended (its last guard
/// left) without coming due: until then its entry and the hold's memory
/// stay, and a fixed lease may not come due for a long time.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Stale items a heap may carry beyond twice its live ones before a
/// rebuild (a small table is never rebuilt).
const STALE_SLACK: usize = 1024;

/// A due time in a heap: which slot (16 bytes with its padding).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Item {
    at: Tick,
    slot: u32,
}

/// The renewal rounds of one lease value.
struct Grid {
    /// The next round.
    next: Instant,
    /// Holds waiting for a round, by their early time.
    queue: BinaryHeap<Reverse<Item>>,
    /// Entries counted in this grid (queued, in flight or off the grid):
    /// the grid ends with the last, as it did when none was seen in a pass.
    members: usize,
}

/// The entries and their due times.
#[derive(Default)]
pub(super) struct Schedule {
    slots: Vec<Option<Entry>>,
    free: Vec<u32>,
    live: usize,
    /// Live entries with `pushed` set.
    pushed: usize,
    /// The first entry of each name hash (the others follow its
    /// `next_same`; a chain may hold another name of the same hash, which
    /// [`named`](Self::named) leaves out).
    names: HashMap<NameHash, u32>,
    looks: BinaryHeap<Reverse<Item>>,
    grids: HashMap<Duration, Grid>,
    /// Where the sweep for ended holds goes on, and when it last ran.
    cursor: usize,
    swept_at: Option<Instant>,
}

impl Schedule {
    /// Entries watched.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.live
    }

    /// Live entries within the tracking budget.
    pub(super) fn pushed(&self) -> usize {
        self.pushed
    }

    /// Slots allocated (live or free).
    #[cfg(test)]
    pub(super) fn slots_len(&self) -> usize {
        self.slots.len()
    }

    pub(super) fn add(&mut self, mut e: Entry) -> u32 {
        let name = e.name;
        // Slots are u32 in the heaps: 4 billion holds is far past anything
        // one process holds.
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                u32::try_from(self.slots.len() - 1).unwrap_or(NO_SLOT - 1)
            }
        };
        // Chained in front of the name's first entry.
        e.next_same = self.names.insert(name, slot).unwrap_or(NO_SLOT);
        self.slots[slot as usize] = Some(e);
        self.live += 1;
        if self.slots[slot as usize].as_ref().is_some_and(|e| e.pushed) {
            self.pushed += 1;
        }
        slot
    }

    /// Drops an entry; its heap items become stale.
    pub(super) fn remove(&mut self, slot: u32) {
        let Some(e) = self.slots.get_mut(slot as usize).and_then(Option::take) else {
            return;
        };
        self.live -= 1;
        if e.pushed {
            self.pushed -= 1;
        }
        self.free.push(slot);
        if let Some(lease) = e.grid() {
            self.leave(lease);
        }
        self.unchain(e.name, slot, e.next_same);
    }

    /// Takes `slot` (whose successor is `next`) out of its name's chain.
    fn unchain(&mut self, name: NameHash, slot: u32, next: u32) {
        let Some(&head) = self.names.get(&name) else {
            return;
        };
        if head == slot {
            if next == NO_SLOT {
                self.names.remove(&name);
            } else {
                self.names.insert(name, next);
            }
            return;
        }
        // Chains are short (one entry per hold of this name in this
        // process), and bounded by the slots in any case.
        let mut at = head;
        for _ in 0..self.slots.len() {
            let Some(e) = self.get_mut(at) else {
                return;
            };
            if e.next_same == slot {
                e.next_same = next;
                return;
            }
            at = e.next_same;
        }
    }

    pub(super) fn get(&self, slot: u32) -> Option<&Entry> {
        self.slots.get(slot as usize).and_then(Option::as_ref)
    }

    pub(super) fn get_mut(&mut self, slot: u32) -> Option<&mut Entry> {
        self.slots.get_mut(slot as usize).and_then(Option::as_mut)
    }

    /// The slots of lock `name`'s entries (an entry whose hold is gone
    /// counts: it may be of this name, and a visit drops it).
    pub(super) fn named(&self, name: &str) -> Vec<u32> {
        self.chain(name)
            .filter(|&s| {
                self.get(s)
                    .and_then(|e| e.hold.upgrade())
                    .map_or(true, |h| &**h.key.name() == name)
            })
            .collect()
    }

    /// The first of lock `name`'s entries that `pick` accepts.
    pub(super) fn find_named(&self, name: &str, pick: impl Fn(&Entry) -> bool) -> Option<u32> {
        self.chain(name).find(|&s| self.get(s).is_some_and(&pick))
    }

    /// Lock `name`'s slots, following the chain (bounded by the slots).
    fn chain<'a>(&'a self, name: &str) -> impl Iterator<Item = u32> + 'a {
        let mut at = self.names.get(&name_hash(name)).copied().unwrap_or(NO_SLOT);
        std::iter::from_fn(move || {
            let slot = at;
            at = self.get(slot)?.next_same;
            Some(slot)
        })
        .take(self.slots.len())
    }

    /// Every slot in use (an invalidation of everything).
    pub(super) fn all(&self) -> Vec<u32> {
        (0..self.slots.len())
            .filter(|&s| self.slots[s].is_some())
            .filter_map(|s| u32::try_from(s).ok())
            .collect()
    }

    /// Look at `slot` by `at`: unless it already has a look no later.
    pub(super) fn look(&mut self, slot: u32, at: Instant, urgent: bool) {
        let Some(e) = self.get_mut(slot) else {
            return;
        };
        let at = nanos(at);
        if e.look <= at {
            return;
        }
        e.look = at;
        e.set(LOOK_URGENT, urgent);
        let slots = &self.slots;
        push_item(&mut self.looks, Item { at, slot }, |i| {
            entry_at(slots, i.slot).is_some_and(|e| e.look == i.at)
        });
    }

    /// Counts `slot` in `lease`'s grid (and out of any other); returns that
    /// grid's next round. A lease seen first starts its grid at `now`.
    pub(super) fn join(&mut self, slot: u32, lease: Duration, now: Instant) -> Instant {
        let old = self.get_mut(slot).and_then(|e| {
            let old = e.set_grid(Some(lease));
            if old != Some(lease) {
                // Its item in the old grid's queue (if any) is stale now.
                e.queued = NO_TICK;
            }
            old
        });
        if old != Some(lease) {
            if let Some(old) = old {
                self.leave(old);
            }
            self.grids
                .entry(lease)
                .or_insert_with(|| Grid {
                    next: now,
                    queue: BinaryHeap::new(),
                    members: 0,
                })
                .members += 1;
        }
        self.grids.get(&lease).map_or(now, |g| g.next)
    }

    /// Takes `slot` out of its grid (it is no longer renewed).
    pub(super) fn unjoin(&mut self, slot: u32) {
        let lease = self.get_mut(slot).and_then(|e| {
            e.queued = NO_TICK;
            e.set_grid(None)
        });
        if let Some(lease) = lease {
            self.leave(lease);
        }
    }

    fn leave(&mut self, lease: Duration) {
        if let Some(g) = self.grids.get_mut(&lease) {
            g.members = g.members.saturating_sub(1);
        }
    }

    /// Queues `slot` for its grid's first round at or after `early`
    /// (unless it waits there already, from no later).
    pub(super) fn queue(&mut self, slot: u32, early: Instant) {
        let Some(e) = self.get_mut(slot) else {
            return;
        };
        let Some(lease) = e.grid() else {
            return;
        };
        let early = nanos(early);
        if e.queued <= early {
            return;
        }
        e.queued = early;
        if let Some(g) = self.grids.get_mut(&lease) {
            let slots = &self.slots;
            let item = Item { at: early, slot };
            push_item(&mut g.queue, item, |i| {
                entry_at(slots, i.slot).is_some_and(|e| e.queued == i.at)
            });
        }
    }

    /// Its item in its grid's queue is stale: it is renewed off the grid.
    pub(super) fn dequeue(&mut self, slot: u32) {
        if let Some(e) = self.get_mut(slot) {
            e.queued = NO_TICK;
        }
    }

    /// The next round of `lease`'s grid, if it has one.
    pub(super) fn round(&self, lease: Duration) -> Option<Instant> {
        self.grids.get(&lease).map(|g| g.next)
    }

    /// The slots due at `now`: every live look by then, and in each grid
    /// whose round has come, every hold queued with an early time by then.
    /// (A slot may come twice; a visit is idempotent.)
    pub(super) fn take_due(&mut self, now: Instant) -> Vec<u32> {
        let mut due = Vec::new();
        let slots = &mut self.slots;
        let now = nanos(now);
        for g in self.grids.values_mut().filter(|g| now >= nanos(g.next)) {
            while let Some(Reverse(i)) = g.queue.peek().copied() {
                if i.at > now {
                    break;
                }
                g.queue.pop();
                if let Some(e) = slots.get_mut(i.slot as usize).and_then(Option::as_mut) {
                    if e.queued == i.at {
                        e.queued = NO_TICK;
                        due.push(i.slot);
                    }
                }
            }
        }
        while let Some(Reverse(i)) = self.looks.peek().copied() {
            if i.at > now {
                break;
            }
            self.looks.pop();
            if let Some(e) = slots.get_mut(i.slot as usize).and_then(Option::as_mut) {
                if e.look == i.at {
                    e.look = NO_TICK;
                    due.push(i.slot);
                }
            }
        }
        due
    }

    /// After a pass: rounds that came move one interval on (a task that
    /// slept past one starts again from now rather than firing twice),
    /// grids without members end. Returns the next round.
    pub(super) fn advance(&mut self, now: Instant) -> Option<Instant> {
        self.grids.retain(|_, g| g.members > 0);
        let mut next: Option<Instant> = None;
        for (lease, g) in &mut self.grids {
            let interval = *lease / 3;
            if now >= g.next {
                g.next += interval;
                if g.next <= now {
                    g.next = now + interval;
                }
            }
            next = Some(next.map_or(g.next, |n| n.min(g.next)));
        }
        next
    }

    /// The first live look, and whether it is urgent (stale items on top
    /// are dropped on the way).
    pub(super) fn next_look(&mut self) -> Option<(Instant, bool)> {
        while let Some(Reverse(i)) = self.looks.peek().copied() {
            match self.slots.get(i.slot as usize).and_then(Option::as_ref) {
                Some(e) if e.look == i.at => {
                    return Some((instant(i.at), e.has(LOOK_URGENT)));
                }
                _ => {
                    self.looks.pop();
                }
            }
        }
        None
    }

    /// Drops entries whose hold ended or was lost elsewhere, a slice per
    /// pass so that every entry is checked about once per [`SWEEP_EVERY`]
    /// (their due times would find them too, but perhaps much later).
    /// Returns how many entries it checked.
    pub(super) fn sweep(&mut self, now: Instant) -> usize {
        let last = *self.swept_at.get_or_insert(now);
        let elapsed = now.saturating_duration_since(last);
        let n = self.slots.len();
        // The share of the slots this much time owes, rounded down: the
        // rest carries over (`swept_at` moves only by what was paid).
        let owed = (n as u128 * elapsed.as_nanos() / SWEEP_EVERY.as_nanos()).min(n as u128);
        let budget = usize::try_from(owed).unwrap_or(n);
        if budget == 0 {
            return 0;
        }
        self.swept_at = Some(now);
        for _ in 0..budget {
            if self.cursor >= n {
                self.cursor = 0;
            }
            let slot = self.cursor;
            self.cursor += 1;
            let ended = self.slots[slot]
                .as_ref()
                .is_some_and(|e| e.live().is_none());
            if ended {
                self.remove(u32::try_from(slot).unwrap_or(u32::MAX));
            }
        }
        budget
    }

    #[cfg(test)]
    pub(super) fn looks_len(&self) -> usize {
        self.looks.len()
    }

    /// Rebuilds a heap that carries more stale items than live ones.
    pub(super) fn compact(&mut self) {
        if self.looks.len() > 2 * self.live + STALE_SLACK {
            let live = self.slots.iter().enumerate().filter_map(|(s, e)| {
                let e = e.as_ref()?;
                let at = e.look;
                if at == NO_TICK {
                    return None;
                }
                let slot = u32::try_from(s).ok()?;
                Some(Reverse(Item { at, slot }))
            });
            self.looks = live.collect();
        }
        let bloated: Vec<Duration> = self
            .grids
            .iter()
            .filter(|(_, g)| g.queue.len() > 2 * g.members + STALE_SLACK)
            .map(|(lease, _)| *lease)
            .collect();
        for lease in bloated {
            let live = self.slots.iter().enumerate().filter_map(|(s, e)| {
                let e = e.as_ref()?;
                let at = e.queued;
                if at == NO_TICK || e.grid() != Some(lease) {
                    return None;
                }
                let slot = u32::try_from(s).ok()?;
                Some(Reverse(Item { at, slot }))
            });
            let queue = live.collect();
            if let Some(g) = self.grids.get_mut(&lease) {
                g.queue = queue;
            }
        }
        self.give_back();
    }

    /// Once most holds are gone, the tables shrink to what is left: a
    /// process that held a million and holds a thousand now keeps no
    /// million-slot table. Trailing free slots are cut (a stale heap item
    /// naming one finds nothing there, or an entry due at another time), and every
    /// container gives its spare capacity back to the allocator.
    fn give_back(&mut self) {
        if self.slots.len() <= STALE_SLACK || self.live >= self.slots.len() / 4 {
            return;
        }
        while matches!(self.slots.last(), Some(None)) {
            self.slots.pop();
        }
        let n = self.slots.len();
        self.free.retain(|&s| (s as usize) < n);
        self.slots.shrink_to_fit();
        self.free.shrink_to_fit();
        self.names.shrink_to_fit();
        if self.live == 0 {
            // Every item left is stale.
            self.looks = BinaryHeap::new();
            for g in self.grids.values_mut() {
                g.queue = BinaryHeap::new();
            }
        } else {
            self.looks.shrink_to_fit();
            for g in self.grids.values_mut() {
                g.queue.shrink_to_fit();
            }
        }
    }
}

/// A heap holding fewer items than this is never compacted (a pass over it
/// costs more than its room).
const COMPACT_FROM: usize = 1024;

/// Pushes `item`; a heap at its capacity first drops its stale items
/// (`live` false), rather than doubling its room for them (the rebuild in
/// [`Schedule::compact`] waits for twice as many stale items as live ones,
/// and at a million holds a doubled heap is 16 bytes a hold). When few are
/// stale the heap grows by a quarter, not double, so a compaction always
/// pays for itself: it frees a quarter of the heap, or the next one is a
/// quarter of the heap's length away.
fn push_item(heap: &mut BinaryHeap<Reverse<Item>>, item: Item, live: impl Fn(&Item) -> bool) {
    if heap.len() == heap.capacity() && heap.len() >= COMPACT_FROM {
        let before = heap.len();
        heap.retain(|Reverse(i)| live(i));
        if heap.len() > before - before / 4 {
            heap.reserve_exact(before / 4);
        }
    }
    heap.push(Reverse(item));
}

fn entry_at(slots: &[Option<Entry>], slot: u32) -> Option<&Entry> {
    slots.get(slot as usize).and_then(Option::as_ref)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full_heap() -> BinaryHeap<Reverse<Item>> {
        let mut heap = BinaryHeap::with_capacity(COMPACT_FROM);
        let cap = heap.capacity();
        for slot in 0..u32::try_from(cap).unwrap() {
            heap.push(Reverse(Item {
                at: u64::from(slot),
                slot,
            }));
        }
        assert_eq!(heap.len(), heap.capacity());
        heap
    }

    #[test]
    fn a_full_heap_drops_its_stale_items_rather_than_growing() {
        let mut heap = full_heap();
        let cap = heap.capacity();
        // Odd slots are stale: half the heap goes, and the room stays.
        push_item(&mut heap, Item { at: 0, slot: 0 }, |i| i.slot % 2 == 0);
        assert_eq!(heap.len(), cap / 2 + 1);
        assert_eq!(heap.capacity(), cap);
        // The live items are all still there, in order.
        let mut last = 0;
        while let Some(Reverse(i)) = heap.pop() {
            assert!(i.at >= last && (i.slot % 2 == 0));
            last = i.at;
        }
    }

    #[test]
    fn a_full_heap_with_few_stale_items_grows_at_once() {
        let mut heap = full_heap();
        let cap = heap.capacity();
        // One stale item: not worth a pass per push, so the room grows by a
        // quarter (not double: a million items' heap) and the next pushes do
        // not look again.
        push_item(&mut heap, Item { at: 0, slot: 0 }, |i| i.slot != 3);
        assert_eq!(heap.len(), cap);
        let room = heap.capacity();
        assert!(room >= cap + cap / 4 - 1 && room < 2 * cap, "{room}");
        while heap.len() < room {
            push_item(&mut heap, Item { at: 0, slot: 0 }, |_| false);
        }
        assert_eq!(heap.capacity(), room, "no compaction below capacity");
    }
}
