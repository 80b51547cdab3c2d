//! `Handle`: what a [`Lock`](crate::Lock) and its clones share (names, owner,
//! counters) and the lock's script commands, encoded once.
//!
//! An uncontended acquire + release used to build both `EVALSHA` commands
//! argument by argument, twenty encoded arguments per pair. The acquire under
//! the watchdog has the same arguments every time for one handle, so a handle
//! in repeated use builds it once and shares it; the release differs only in
//! its last argument (the hold's fencing token), so its head is built once
//! and copied.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use keylatch_resp::Cmd;

use crate::hold_key::HoldKey;
use crate::locks::Inner;
use crate::names::LockNames;
use crate::scripts::{REENTRANT_ACQUIRE, REENTRANT_RELEASE};

/// Shared by a lock handle and its clones (one owner).
pub(crate) struct Handle {
    pub(crate) names: LockNames,
    /// The watchdog's key for this owner's hold (name, owner, hash, slot).
    pub(crate) hold: HoldKey,
    /// Holds this owner has through this process, to tell a first acquire
    /// from a re-entry when an outcome is unknown.
    pub(crate) local_holds: AtomicU64,
    /// Acquire attempts of this owner in flight: a cancelled attempt
    /// releases by owner only when it was the only one and no hold exists,
    /// or it could end a clone's fresh hold.
    pub(crate) in_flight: AtomicU64,
    /// A watchdog acquire was made through this handle already.
    used: AtomicBool,
    prepared: OnceLock<Prepared>,
}

struct Prepared {
    acquire_watchdog: Arc<Cmd>,
    release_head: Cmd,
}

impl Handle {
    pub(crate) fn new(name: &str, owner: Arc<str>) -> Self {
        let names = LockNames::new(name);
        let hold = HoldKey::new(Arc::clone(&names.key), owner);
        Self {
            names,
            hold,
            local_holds: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            used: AtomicBool::new(false),
            prepared: OnceLock::new(),
        }
    }

    /// The owner id.
    pub(crate) fn owner(&self) -> &str {
        self.hold.owner()
    }

    /// The prepared commands, made on the handle's second watchdog acquire:
    /// many handles live for one acquire and release (`locks.lock(name)` per
    /// request), and preparing theirs would cost about 600 bytes per held
    /// lock and the encoding work, for nothing.
    fn prepared(&self, inner: &Inner) -> Option<&Prepared> {
        if let Some(p) = self.prepared.get() {
            return Some(p);
        }
        if !self.used.swap(true, Ordering::Relaxed) {
            return None;
        }
        // Kept for the handle's life, so trimmed to their exact size (built
        // with room to spare, they took about 360 bytes more per handle).
        Some(self.prepared.get_or_init(|| {
            Prepared {
                acquire_watchdog: Arc::new(
                    acquire_cmd(inner, &self.names, self.owner(), &inner.watchdog_ms)
                        .clone_with_room(0),
                ),
                release_head: release_cmd(inner, &self.names, self.owner(), None)
                    .clone_with_room(0),
            }
        }))
    }

    /// The acquire under the watchdog lease, the same command every time:
    /// shared once the handle is in repeated use, else `None` (build it with
    /// [`acquire_cmd`]).
    pub(crate) fn acquire_watchdog(&self, inner: &Inner) -> Option<&Arc<Cmd>> {
        self.prepared(inner).map(|p| &p.acquire_watchdog)
    }

    /// The release of the hold with fencing token `token` (`0`: release by
    /// owner, without the token check).
    pub(crate) fn release_cmd(&self, inner: &Inner, token: u64) -> Cmd {
        let mut buf = itoa::Buffer::new();
        let token = buf.format(token);
        match self.prepared.get() {
            // Room for the token (at most 20 digits) and its framing.
            Some(p) => p.release_head.clone_with_room(32).arg(token),
            None => release_cmd(inner, &self.names, self.owner(), Some(token)),
        }
    }
}

/// The release script's command; without `token`, the head every release
/// of this owner shares (the token is the last argument).
fn release_cmd(inner: &Inner, names: &LockNames, owner: &str, token: Option<&str>) -> Cmd {
    let keys = [&*names.key, names.channel.as_str(), names.token.as_str()];
    let head = [
        "0",
        inner.watchdog_ms.as_str(),
        owner,
        inner.publish_command(),
    ];
    match token {
        Some(t) => {
            let [a, b, c, d] = head;
            REENTRANT_RELEASE.evalsha_cmd(&keys, &[a, b, c, d, t])
        }
        None => REENTRANT_RELEASE.evalsha_cmd(&keys, &head),
    }
}

/// The acquire script's command for one lease (`lease_ms`).
pub(crate) fn acquire_cmd(inner: &Inner, names: &LockNames, owner: &str, lease_ms: &str) -> Cmd {
    REENTRANT_ACQUIRE.evalsha_cmd(
        &[&*names.key, names.token.as_str()],
        &[
            lease_ms,
            owner,
            inner.token_ttl_ms.as_str(),
            if inner.config.fencing { "1" } else { "0" },
        ],
    )
}
