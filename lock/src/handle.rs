//! `Handle`: what a [`Lock`](crate::Lock) and its clones share (names, owner,
//! counters) and the lock's script commands, encoded once.
//!
//! An uncontended acquire + release used to build both `EVALSHA` commands
//! argument by argument, twenty encoded arguments per pair. The acquire under
//! the watchdog has the same arguments every time for one handle, so it is
//! built once and shared; the release differs only in its last argument (the
//! hold's fencing token), so its head is built once and copied.

use std::sync::atomic::AtomicU64;
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
    /// Built on first use: a handle made and dropped unused costs nothing.
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
            prepared: OnceLock::new(),
        }
    }

    /// The owner id.
    pub(crate) fn owner(&self) -> &str {
        self.hold.owner()
    }

    fn prepared(&self, inner: &Inner) -> &Prepared {
        self.prepared.get_or_init(|| Prepared {
            acquire_watchdog: Arc::new(acquire_cmd(
                inner,
                &self.names,
                self.owner(),
                &inner.watchdog_ms,
            )),
            release_head: REENTRANT_RELEASE.evalsha_cmd(
                &[
                    &*self.names.key,
                    self.names.channel.as_str(),
                    self.names.token.as_str(),
                ],
                &[
                    "0",
                    inner.watchdog_ms.as_str(),
                    self.owner(),
                    inner.publish_command(),
                ],
            ),
        })
    }

    /// The acquire under the watchdog lease: the same command every time.
    pub(crate) fn acquire_watchdog(&self, inner: &Inner) -> &Arc<Cmd> {
        &self.prepared(inner).acquire_watchdog
    }

    /// The release of the hold with fencing token `token` (`0`: release by
    /// owner, without the token check).
    pub(crate) fn release_cmd(&self, inner: &Inner, token: u64) -> Cmd {
        let mut buf = itoa::Buffer::new();
        let token = buf.format(token);
        // Room for the token (at most 20 digits) and its framing.
        self.prepared(inner)
            .release_head
            .clone_with_room(32)
            .arg(token)
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
