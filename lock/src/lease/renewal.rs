//! What a hold's lease is on the server, as the engine needs it: the
//! scripts that renew (or only check) a batch of holds, and whether the
//! held key may be tracked. Each lock type names its own (`types/`); the
//! engine batches holds that share one and names none.

use std::hash::{Hash, Hasher};

use keylatch_cluster::Script;

use crate::owner::Owner;

/// A lease shape: every hold renewed by it is judged on its own from four
/// strings (key, counter, owner, token), or from two (key, owner) for an
/// [`owner_only`](Self::owner_only) one.
#[derive(Debug)]
pub(crate) struct Renewal {
    /// Renews holds of one slot (`KEYS` = hash, counter pairs).
    pub(crate) slot: &'static Script,
    /// Renews holds of many slots of one node (no `KEYS`).
    pub(crate) node: &'static Script,
    /// Whether holds get a tracked read (a change by anyone else is pushed
    /// at once). Not where every other holder's acquire and release writes
    /// the same key (read holds, leased permits): tracking would turn each
    /// of those into a check of every hold.
    pub(crate) tracked: bool,
    /// What the scripts take beside the hash for a hold of lock `name`
    /// counted in `field`: the fencing counter, the prefix of the hold's own
    /// keys, or the permits' zset. Made for each renewal call rather than
    /// kept by the hold (tens of bytes a hold, a million times over).
    pub(crate) counter: fn(name: &str, field: &Owner) -> String,
    /// A lighter renewal for the holds that may be judged by their owner
    /// alone (see `HoldNames::by_owner`): used for their plain renewals,
    /// never for a check or a round that refreshes the counters. `None`:
    /// these scripts always.
    pub(crate) by_owner: Option<&'static Renewal>,
    /// These scripts take two strings a hold (key, owner: `owner_renew`),
    /// not four, and no idle expiry or flags.
    pub(crate) owner_only: bool,
}

/// A renewal named by its address: the engine's batch key (two holds share
/// a batch when they share the static value, so one script call judges
/// them alike).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RenewalRef(pub(crate) &'static Renewal);

impl PartialEq for RenewalRef {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for RenewalRef {}

impl Hash for RenewalRef {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.0, state);
    }
}
