//! One watched hold's entry in the lease engine's schedule, kept small: a
//! million holds carry one each.

use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::hold::{instant, nanos, Hold};
use super::tuning::TOKEN_EVERY;

/// An instant as nanoseconds past the hold module's base: 8 bytes where an
/// `Instant` takes 16, and there are four in an entry and one in each heap
/// item, a million times over at the scale the engine is built for.
pub(super) type Tick = u64;

/// No instant: an `Option<Tick>` would take twice the room.
pub(super) const NO_TICK: Tick = Tick::MAX;

/// No slot: the end of a chain of entries of one name.
pub(super) const NO_SLOT: u32 = u32::MAX;

/// A lock name's hash, as the engine indexes its entries by it: 32 bits,
/// as names of one hash share a chain and are told apart by the name
/// itself, so a rare collision costs a comparison, and a million entries
/// and index slots each save 4 bytes or more.
pub(super) type NameHash = u32;

/// `name` hashed with this process's key (names chosen to collide cannot
/// be foreseen).
pub(super) fn name_hash(name: &str) -> NameHash {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    let h = KEYS.get_or_init(RandomState::new).hash_one(name);
    // The high half folded in: SipHash's bits are all good, but this keeps
    // both halves' entropy whatever the hasher.
    (h ^ (h >> 32)) as NameHash
}

/// A call about this hold is in flight.
pub(super) const BUSY: u8 = 1;
/// Invalidated while a call was in flight: that call may have been
/// answered before the change, so check again after it.
pub(super) const RECHECK: u8 = 2;
/// This hold's fencing counter needs no refresh outside the actor's
/// window: a renewal of the hold refreshed its idle expiry (its first
/// renewal does), or the hold's acquire made the counter (set when the
/// entry is made, `Hold::counter_made`).
pub(super) const COUNTER_FRESH: u8 = 4;
/// Its look is for a loss or tracked read (may not wait for the task's
/// sleep floor) rather than a renewal or check.
pub(super) const LOOK_URGENT: u8 = 8;
/// The flag byte's top bits: renewals judged by owner alone since the hold
/// was last judged by its token (see [`TOKEN_EVERY`]).
const OWNER_TURNS: u8 = 0x70;
const OWNER_SHIFT: u8 = 4;

/// The task's bookkeeping for one hold (the hold's own state is its atomics).
///
/// Kept small (64 bytes): instants as [`Tick`]s, the lease as nanoseconds,
/// the name as a 32-bit hash, four flags in a byte, no generations (a heap
/// item is live while its time is the entry's), and the entries of one
/// name chained through `next_same` rather than listed in a vector of their
/// own.
pub(super) struct Entry {
    pub(super) hold: Weak<Hold>,
    /// The lock's name, hashed ([`name_hash`]): the entry is found by it,
    /// even once the hold is gone.
    pub(super) name: NameHash,
    /// The hold's epoch when it was handed over: a hold that ended (and was
    /// perhaps revived, which hands it over again) no longer matches.
    pub(super) epoch: u32,
    next_renew: Tick,
    /// Look at it at `early()` without waiting for the grid: a call failed,
    /// or an invalidation asks for a check now.
    pub(super) off_grid: bool,
    /// A tracked read was made (or is in flight).
    pub(super) tracked: bool,
    /// The hold is within the tracking budget: it gets tracked reads.
    pub(super) pushed: bool,
    since: Tick,
    /// Its live look: when ([`NO_TICK`]: none). A heap item of this slot
    /// at this time is the live one.
    pub(super) look: Tick,
    /// [`BUSY`], [`RECHECK`], [`COUNTER_FRESH`], [`LOOK_URGENT`] and the
    /// owner-turn count in one byte keep the entry at 64 bytes.
    flags: u8,
    /// Its live item in its grid's queue: the early time it was queued at
    /// ([`NO_TICK`]: none).
    pub(super) queued: Tick,
    /// The next entry of the same name ([`NO_SLOT`]: the last).
    pub(super) next_same: u32,
    /// The grid it counts in: the lease it is renewed with, in nanoseconds
    /// ([`NO_TICK`]: none).
    grid: u64,
}

impl Entry {
    pub(super) fn new(hold: &Arc<Hold>, since: Instant) -> Self {
        let name = name_hash(hold.key.name());
        Self {
            hold: Arc::downgrade(hold),
            name,
            epoch: hold.epoch(),
            next_renew: nanos(since + hold.lease() / 3),
            off_grid: false,
            tracked: false,
            pushed: false,
            // Started apart per name, so a round's token reads spread.
            flags: ((name % u32::from(TOKEN_EVERY)) as u8) << OWNER_SHIFT,
            since: nanos(since),
            look: NO_TICK,
            queued: NO_TICK,
            next_same: NO_SLOT,
            grid: NO_TICK,
        }
    }

    /// When the hold is next due for renewal.
    pub(super) fn next_renew(&self) -> Instant {
        instant(self.next_renew)
    }

    pub(super) fn set_next_renew(&mut self, at: Instant) {
        self.next_renew = nanos(at);
    }

    /// When it was handed over.
    pub(super) fn since(&self) -> Instant {
        instant(self.since)
    }

    /// The lease of the grid it counts in, if any.
    pub(super) fn grid(&self) -> Option<Duration> {
        (self.grid != NO_TICK).then(|| Duration::from_nanos(self.grid))
    }

    pub(super) fn set_grid(&mut self, lease: Option<Duration>) -> Option<Duration> {
        let old = self.grid();
        self.grid = lease.map_or(NO_TICK, |l| {
            u64::try_from(l.as_nanos()).unwrap_or(NO_TICK - 1)
        });
        old
    }

    /// The hold, while it is the one handed over and still worth watching.
    pub(super) fn live(&self) -> Option<Arc<Hold>> {
        let h = self.hold.upgrade()?;
        (h.epoch() == self.epoch && h.is_active()).then_some(h)
    }

    pub(super) fn is(&self, hold: &Arc<Hold>, epoch: u32) -> bool {
        self.epoch == epoch && Weak::as_ptr(&self.hold) == Arc::as_ptr(hold)
    }

    /// Whether `flag` (one of [`BUSY`], [`RECHECK`], [`COUNTER_FRESH`],
    /// [`LOOK_URGENT`]) is set.
    pub(super) fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// Whether this renewal may judge the hold by owner alone, counted:
    /// every [`TOKEN_EVERY`]-th is judged by its token instead.
    pub(super) fn owner_turn(&mut self) -> bool {
        let n = (self.flags & OWNER_TURNS) >> OWNER_SHIFT;
        self.flags &= !OWNER_TURNS;
        if n + 1 >= TOKEN_EVERY {
            return false;
        }
        self.flags |= (n + 1) << OWNER_SHIFT;
        true
    }

    /// The hold was judged by its token: the count starts again.
    pub(super) fn token_judged(&mut self) {
        self.flags &= !OWNER_TURNS;
    }

    pub(super) fn set(&mut self, flag: u8, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }
}
