//! Semaphores in Redisson's layouts: [`Semaphore`] (`RSemaphore`: one
//! string, the available permits) and [`ExpirableSemaphore`]
//! (`RPermitExpirableSemaphore`: the same string plus a zset of leased
//! permit ids), with their guards: [`SemaphorePermits`] for plain permits
//! (given back on drop), [`PermitGuard`] for the leased ones.
//!
//! Waiting is the locks' (`wake.rs`): subscribe to `redisson_sc:{name}`
//! (every release publishes the new count), try again on a message, a gap,
//! the nearest permit's expiry or the bounded re-check, so a lost message
//! costs at most [`LocksConfig::recheck`](crate::LocksConfig::recheck).
//! A wait on a semaphore that does not exist fails at once
//! ([`LockError::NoSuchSemaphore`]).
//!
//! An acquire whose reply comes after its caller left (dropped, or past
//! its bound) is settled by the connection's late handler: permits it took
//! are given back (plain permits by count; leased ones by their ids), so a
//! cancelled acquire never leaks permits.
//!
//! Leased permits are holds of the lease engine (`PERMITS_LEASE`):
//! one hold per guard, named by its permit ids, renewed by the watchdog
//! (their expiries are server time + lease) while the guard lives without a
//! fixed lease, so a process that dies gives its permits back within one
//! lease; `lost()` fires when a permit is gone or expired.

mod counter;
mod expirable;
mod inspect;
mod permit_guard;
mod permit_id;
mod permits;
mod plain;

pub(crate) use counter::bounded;
pub(crate) use counter::force_keys;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use counter::{integer, renew_reply, sem_reply, SemReply};
pub use counter::{MAX_COUNT, MAX_LEASED_PERMITS};
pub use expirable::ExpirableSemaphore;
pub(crate) use inspect::permits as inspect_permits;
pub use permit_guard::PermitGuard;
pub use permit_id::{BadPermitId, PermitId};
pub use permits::SemaphorePermits;
pub use plain::Semaphore;

#[cfg(test)]
mod tests {
    use super::counter::SemNames;
    use super::*;

    #[test]
    fn permit_ids_are_32_hex_digits_both_ways() {
        let id = PermitId::random();
        let text = id.to_string();
        assert_eq!(text.len(), 32);
        assert_eq!(text.parse::<PermitId>(), Ok(id));
        assert_ne!(PermitId::random(), id);
        assert_eq!("0g".repeat(16).parse::<PermitId>(), Err(BadPermitId));
        assert_eq!("ab".parse::<PermitId>(), Err(BadPermitId));
        assert_eq!("é".repeat(16).parse::<PermitId>(), Err(BadPermitId));
    }

    #[test]
    fn semaphore_names_are_redissons() {
        let n = SemNames::new("jobs");
        assert_eq!(n.channel, "redisson_sc:{jobs}");
        assert_eq!(&*n.timeouts, "{jobs}:timeout");
        let t = SemNames::new("{t}jobs");
        assert_eq!(&*t.timeouts, "{t}jobs:timeout");
        // What the permits' renewal names beside the counter is that zset.
        for name in ["jobs", "{t}jobs"] {
            let made =
                (counter::PERMITS_LEASE.counter)(name, &crate::owner::Owner::given("0a1b,2c3d"));
            assert_eq!(made, &*SemNames::new(name).timeouts);
        }
    }
}
