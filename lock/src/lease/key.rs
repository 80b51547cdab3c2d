//! `HoldKey`: a hold's lock name and owner, with the key's slot worked out
//! once (comparing two keys of one handle costs two pointer checks).
//!
//! No hash is kept: no map is keyed by it (the lease engine indexes its
//! entries by the name alone). A hold's key is one pointer to its lock
//! handle where it can be: a million holds each carried 40 bytes of names
//! their handles already had.

use std::sync::Arc;

use keylatch_cluster::Slot;

use super::renewal::Renewal;
use crate::owner::Owner;

/// What names a hold: a lock handle (whose hold is counted under its owner
/// id), or a [`Named`] key of its own.
pub(crate) trait HoldNames: Send + Sync {
    /// The lock's key (the user's lock name).
    fn name(&self) -> &Arc<str>;
    /// The hash field the hold is counted in (the owner id).
    fn owner(&self) -> &Owner;
    /// The cluster slot of the lock's key.
    fn slot(&self) -> u16;
    /// How the hold is renewed and judged (the lock kind's renewal).
    fn renewal(&self) -> &'static Renewal;
    /// Whether a renewal may judge the hold by its owner alone, without
    /// reading its fencing counter: no request this process does not know
    /// the outcome of, and no other process, can have taken the lock again
    /// as this owner behind the hold (a *replaced* hold, which only the
    /// counter's newer token tells apart). Read at each renewal planned:
    /// it may turn false while the hold lives, never back.
    fn by_owner(&self) -> bool {
        false
    }
}

/// A hold's identity: the lock's key and the owner id, with the key's
/// cluster slot worked out once.
///
/// One pointer to what names it: most holds point at the lock handle they
/// were taken through (which the guard keeps anyway), so a hold carries no
/// copy of the names; a hold whose field is not its handle's owner id (a
/// write hold, a semaphore's permits) gets a [`Named`] key of its own.
#[derive(Clone)]
pub(crate) struct HoldKey(Arc<dyn HoldNames>);

/// A key of its own: a name, a field, the slot and the renewal.
struct Named {
    name: Arc<str>,
    owner: Owner,
    slot: u16,
    renewal: &'static Renewal,
}

impl HoldNames for Named {
    fn name(&self) -> &Arc<str> {
        &self.name
    }
    fn owner(&self) -> &Owner {
        &self.owner
    }
    fn slot(&self) -> u16 {
        self.slot
    }
    fn renewal(&self) -> &'static Renewal {
        self.renewal
    }
}

impl HoldKey {
    pub(crate) fn new(name: Arc<str>, owner: Owner, renewal: &'static Renewal) -> Self {
        let slot = Slot::of(name.as_bytes()).get();
        Self(Arc::new(Named {
            name,
            owner,
            slot,
            renewal,
        }))
    }

    /// A key that is `names` itself (a lock handle).
    pub(crate) fn of(names: Arc<dyn HoldNames>) -> Self {
        Self(names)
    }

    /// The lock's key (the user's lock name).
    pub(crate) fn name(&self) -> &Arc<str> {
        self.0.name()
    }

    /// The owner id.
    pub(crate) fn owner(&self) -> &Owner {
        self.0.owner()
    }

    /// The cluster slot of the lock's key.
    pub(crate) fn slot(&self) -> u16 {
        self.0.slot()
    }

    /// How the hold is renewed and judged.
    pub(crate) fn renewal(&self) -> &'static Renewal {
        self.0.renewal()
    }

    /// Whether a renewal may judge the hold by its owner alone (see
    /// [`HoldNames::by_owner`]).
    pub(crate) fn by_owner(&self) -> bool {
        self.0.by_owner()
    }
}

impl std::fmt::Debug for HoldKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldKey")
            .field("name", self.name())
            .field("owner", self.owner())
            .finish()
    }
}

impl PartialEq for HoldKey {
    fn eq(&self, other: &Self) -> bool {
        // Keys from one handle share their names and client id: pointer
        // checks settle the usual case without comparing bytes.
        let (a, b) = (self.name(), other.name());
        (Arc::ptr_eq(a, b) || a == b) && self.owner() == other.owner()
    }
}

impl Eq for HoldKey {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::HASH_LEASE as HASH;
    use keylatch_cluster::Slot;

    #[test]
    fn equal_names_and_owners_are_one_key_whatever_their_strings() {
        let a = HoldKey::new(Arc::from("orders"), Owner::given("c:1"), &HASH);
        let b = HoldKey::new(Arc::from("orders"), Owner::given("c:1"), &HASH);
        assert_eq!(a, b);
        assert_ne!(
            a,
            HoldKey::new(Arc::from("orders"), Owner::given("c:2"), &HASH)
        );
        assert_ne!(
            a,
            HoldKey::new(Arc::from("other"), Owner::given("c:1"), &HASH)
        );
        assert_eq!(a.slot(), Slot::of(b"orders").get());
    }

    #[test]
    fn an_owner_this_client_made_and_its_text_given_are_one_key() {
        // `lock_with_owner(name, lock.owner())`: another handle of the same
        // owner, its id given as text.
        let client = Arc::new("c".to_owned());
        let made = HoldKey::new(Arc::from("orders"), Owner::made(&client, 1), &HASH);
        let given = HoldKey::new(Arc::from("orders"), Owner::given("c:1"), &HASH);
        assert_eq!(made, given);
        assert_eq!(given, made);
        assert_ne!(
            made,
            HoldKey::new(Arc::from("orders"), Owner::made(&client, 2), &HASH)
        );
        assert_eq!(made.owner().to_string(), "c:1");
    }
}
