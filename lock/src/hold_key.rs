//! `HoldKey`: how the watchdog names a hold, (lock name, owner), hashed once
//! per lock handle.
//!
//! Every acquire and release looks its hold up in the watchdog's map three or
//! four times. Hashing both strings with SipHash each time was 4 % of the
//! client's instructions per lock pair under callgrind, so the hash is
//! computed when the handle is made and the map only passes it through.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};
use std::sync::{Arc, OnceLock};

use keylatch_cluster::Slot;

/// A hold's identity: the lock's key and the owner id, with their hash and
/// the key's cluster slot worked out once.
#[derive(Clone, Debug)]
pub(crate) struct HoldKey {
    name: Arc<str>,
    owner: Arc<str>,
    hash: u64,
    slot: u16,
}

impl HoldKey {
    pub(crate) fn new(name: Arc<str>, owner: Arc<str>) -> Self {
        // Keyed per process, as std's maps are, so names chosen to collide
        // cannot degrade the map.
        static KEYS: OnceLock<RandomState> = OnceLock::new();
        let hash = KEYS
            .get_or_init(RandomState::new)
            .hash_one((&*name, &*owner));
        let slot = Slot::of(name.as_bytes()).get();
        Self {
            name,
            owner,
            hash,
            slot,
        }
    }

    /// The lock's key (the user's lock name).
    pub(crate) fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// The owner id.
    pub(crate) fn owner(&self) -> &Arc<str> {
        &self.owner
    }

    /// The cluster slot of the lock's key.
    pub(crate) fn slot(&self) -> u16 {
        self.slot
    }
}

impl PartialEq for HoldKey {
    fn eq(&self, other: &Self) -> bool {
        // Keys from one handle share their strings: a pointer check settles
        // the usual case without comparing bytes.
        self.hash == other.hash
            && (Arc::ptr_eq(&self.name, &other.name) || self.name == other.name)
            && (Arc::ptr_eq(&self.owner, &other.owner) || self.owner == other.owner)
    }
}

impl Eq for HoldKey {}

impl Hash for HoldKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// Hands a precomputed hash through unchanged.
#[derive(Default)]
pub(crate) struct PassThrough(u64);

impl Hasher for PassThrough {
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is meant to reach here; anything else still gets
        // a usable (if weak) hash rather than a constant.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by holds, hashing each key no more than once in its life.
pub(crate) type HoldMap<V> = HashMap<HoldKey, V, BuildHasherDefault<PassThrough>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_holds_match_whatever_their_allocation() {
        let a = HoldKey::new(Arc::from("orders"), Arc::from("c:1"));
        let b = HoldKey::new(Arc::from("orders"), Arc::from("c:1"));
        let other_owner = HoldKey::new(Arc::from("orders"), Arc::from("c:2"));
        let other_name = HoldKey::new(Arc::from("orders2"), Arc::from("c:1"));
        assert_eq!(a, b);
        assert_ne!(a, other_owner);
        assert_ne!(a, other_name);
        // ("ab", "c") and ("a", "bc") must not be one hold.
        let x = HoldKey::new(Arc::from("ab"), Arc::from("c"));
        let y = HoldKey::new(Arc::from("a"), Arc::from("bc"));
        assert_ne!(x, y);

        let mut map: HoldMap<u32> = HoldMap::default();
        map.insert(a.clone(), 1);
        map.insert(other_owner.clone(), 2);
        assert_eq!(map.get(&b), Some(&1));
        assert_eq!(map.get(&other_owner), Some(&2));
        assert_eq!(map.get(&other_name), None);
        assert_eq!(a.slot(), Slot::of(b"orders").get());
    }

    #[test]
    fn many_holds_spread_over_the_map() {
        let mut map: HoldMap<usize> = HoldMap::default();
        for i in 0..10_000 {
            map.insert(
                HoldKey::new(Arc::from(format!("lock:{i}")), Arc::from("o")),
                i,
            );
        }
        for i in (0..10_000).step_by(97) {
            let k = HoldKey::new(Arc::from(format!("lock:{i}")), Arc::from("o"));
            assert_eq!(map.get(&k), Some(&i));
        }
        let hashes: std::collections::HashSet<u64> = map.keys().map(|k| k.hash).collect();
        assert_eq!(hashes.len(), 10_000, "distinct names, distinct hashes");
    }
}
