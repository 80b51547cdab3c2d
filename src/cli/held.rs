//! What `exec` holds while its command runs: a lock's guard, leased
//! permits of a permit-expirable semaphore (`--semaphore N`), or (for
//! `elect`) an election's leadership. One shape for the exec flow: the
//! loss signal, the fencing token, the release.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use keylatch::{
    LeaderGuard, LockGuard, LockResult, LossReason, MultiGuard, PermitGuard, RedLockGuard,
};

/// A lock hold, leased permits, a RedLock over independent masters,
/// several locks at once (`exec A B …`, a multi-lock), or the leadership
/// of an election (`elect`).
pub(crate) enum Held {
    Leader(LeaderGuard),
    Lock(LockGuard),
    Multi(MultiGuard),
    Permits(PermitGuard),
    RedLock(RedLockGuard),
}

impl Held {
    /// Resolves when the hold (or a permit) is known lost.
    pub(crate) fn lost(&self) -> Pin<Box<dyn Future<Output = LossReason> + Send>> {
        match self {
            Held::Leader(l) => Box::pin(l.lost()),
            Held::Lock(g) => Box::pin(g.lost()),
            Held::Multi(m) => Box::pin(m.lost()),
            Held::Permits(p) => Box::pin(p.lost()),
            Held::RedLock(r) => Box::pin(r.lost()),
        }
    }

    /// How long the hold lasts by the local clock unless renewed (the
    /// shortest member's for a multi-lock; a RedLock's validity from its
    /// acquire); `None` once lost.
    pub(crate) fn remaining_lease(&self) -> Option<Duration> {
        match self {
            Held::Leader(l) => l.remaining_lease(),
            Held::Lock(g) => g.remaining_lease(),
            Held::Permits(p) => p.remaining_lease(),
            Held::Multi(m) => m
                .guards()
                .iter()
                .map(LockGuard::remaining_lease)
                .min()
                .flatten(),
            // What the acquire's validity left: the time a fixed lease
            // surely holds (a watchdog RedLock's is not extended by its
            // renewals, but exec asks this only of a fixed lease).
            Held::RedLock(r) => Some(r.validity()),
        }
    }

    /// The fencing token, if the hold has one (read holds, permits,
    /// RedLocks and multi-locks, whose members each have their own, have
    /// none).
    pub(crate) fn fencing_token(&self) -> Option<u64> {
        match self {
            Held::Leader(l) => l.fencing_token(),
            Held::Lock(g) => g.fencing_token(),
            Held::Permits(_) | Held::RedLock(_) | Held::Multi(_) => None,
        }
    }

    /// Every name's fencing token, in the order `names` gives them,
    /// comma-separated (for the command's environment): for several names
    /// (a multi-lock), whose members each have their own, one entry per
    /// name, empty for a member without one (a read hold); for one name,
    /// its token. `None` when no name has one.
    pub(crate) fn fencing_tokens(&self, names: &[String]) -> Option<String> {
        let Held::Multi(m) = self else {
            return self.fencing_token().map(|t| t.to_string());
        };
        let tokens: Vec<Option<u64>> = names
            .iter()
            .map(|n| {
                m.guards()
                    .iter()
                    .find(|g| g.lock().name() == n.as_str())
                    .and_then(LockGuard::fencing_token)
            })
            .collect();
        if tokens.iter().all(Option::is_none) {
            return None;
        }
        let text: Vec<String> = tokens
            .iter()
            .map(|t| t.map(|t| t.to_string()).unwrap_or_default())
            .collect();
        Some(text.join(","))
    }

    /// The permits' ids, comma-separated (for the command's environment).
    pub(crate) fn permit_ids(&self) -> Option<String> {
        match self {
            Held::Leader(_) | Held::Lock(_) | Held::RedLock(_) | Held::Multi(_) => None,
            Held::Permits(p) => Some(
                p.ids()
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        }
    }

    /// Releases it (a leader resigns), with the guards' own errors
    /// (`Expired`, `NotOwner`).
    pub(crate) async fn unlock(self) -> LockResult<()> {
        match self {
            Held::Leader(l) => l.resign().await,
            Held::Lock(g) => g.unlock().await,
            Held::Multi(m) => m.unlock().await,
            Held::Permits(p) => p.release().await,
            Held::RedLock(r) => r.unlock().await,
        }
    }
}
