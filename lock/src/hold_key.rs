//! `HoldKey`: a hold's lock name and owner, with the key's slot worked out
//! once (comparing two keys of one handle costs two pointer checks).
//!
//! No hash is kept: no map is keyed by it (the lease engine indexes its
//! entries by the name alone), and a million holds each carried 8 bytes.

use std::sync::Arc;

use keylatch_cluster::Slot;

/// A hold's identity: the lock's key and the owner id, with the key's
/// cluster slot worked out once.
#[derive(Clone, Debug)]
pub(crate) struct HoldKey {
    name: Arc<str>,
    owner: Arc<str>,
    slot: u16,
}

impl HoldKey {
    pub(crate) fn new(name: Arc<str>, owner: Arc<str>) -> Self {
        let slot = Slot::of(name.as_bytes()).get();
        Self { name, owner, slot }
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
        (Arc::ptr_eq(&self.name, &other.name) || self.name == other.name)
            && (Arc::ptr_eq(&self.owner, &other.owner) || self.owner == other.owner)
    }
}

impl Eq for HoldKey {}

#[cfg(test)]
mod tests {
    use super::*;
    use keylatch_cluster::Slot;

    #[test]
    fn equal_names_and_owners_are_one_key_whatever_their_strings() {
        let a = HoldKey::new(Arc::from("orders"), Arc::from("c:1"));
        let b = HoldKey::new(Arc::from("orders"), Arc::from("c:1"));
        assert_eq!(a, b);
        assert_ne!(a, HoldKey::new(Arc::from("orders"), Arc::from("c:2")));
        assert_ne!(a, HoldKey::new(Arc::from("other"), Arc::from("c:1")));
        assert_eq!(a.slot(), Slot::of(b"orders").get());
    }
}
