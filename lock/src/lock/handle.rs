//! `Handle`: what a [`Lock`](crate::Lock) and its clones share (names, owner,
//! counters) and the lock's script commands, encoded once.
//!
//! An uncontended acquire + release used to build both `EVALSHA` commands
//! argument by argument, twenty encoded arguments per pair. The acquire under
//! the watchdog has the same arguments every time for one handle, so a handle
//! in repeated use builds it once and shares it; the release differs only in
//! its last argument (the hold's fencing token), so its head is built once
//! and copied.

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use keylatch_resp::Cmd;

use crate::context::ScriptArgs;
use crate::lease::hold::{instant, nanos, Hold};
use crate::lease::key::{HoldKey, HoldNames};
use crate::lease::Renewal;
use crate::names::LockNames;
use crate::owner::{Owner, OwnerText};

use super::kind::{AcquireCall, LockKind, ReleaseCall};

/// Shared by a lock handle and its clones (one owner).
pub(crate) struct Handle {
    pub(crate) names: LockNames,
    /// What the holds of this lock are: how they are taken, renewed and
    /// waited for.
    pub(crate) kind: &'static LockKind,
    /// The owner id this handle acts as (its text is made on use: see
    /// `owner.rs`).
    owner: Owner,
    /// The cluster slot of the lock's key.
    slot: u16,
    /// A watchdog acquire was made through this handle already.
    used: AtomicBool,
    /// An acquire was sent through this handle already (its finisher is
    /// kept from the second on).
    sent: AtomicBool,
    /// A request of this handle that may have taken the lock ended without
    /// its outcome known here (failed, timed out, cancelled, answered
    /// unreadably; a waiter's leave that failed): from then on its holds
    /// are judged by their fencing token, never by owner alone (see
    /// [`Unsettled`]).
    doubt: AtomicBool,
    /// Acquires of this handle and its clones under way (from the call to
    /// its guard or error; see [`Acquiring`]): a reply counting a re-entry
    /// nobody here knows of is an orphan only when it is the one acquire
    /// under way (another's reply may not have been handled yet).
    acquiring: AtomicU16,
    /// The hold this handle (or a clone) took last: a re-entry whose reply
    /// carries its token joins it. Locked by this handle's callers only,
    /// never by the lease engine.
    current: Mutex<Weak<Hold>>,
    /// What a handle in repeated use (or a waiting one) keeps: boxed, one
    /// pointer in the many handles used once.
    more: OnceLock<Box<More>>,
}

/// The parts of a handle made on its second acquire or first wait.
#[derive(Default)]
struct More {
    prepared: OnceLock<Prepared>,
    /// The acquire finisher standalone requests carry (see `attempt.rs`):
    /// kept from the handle's second acquire on, then shared by every
    /// acquire of this handle.
    late: OnceLock<keylatch_cluster::LateReply>,
    /// Waits of this owner holding a shared place in progress (clones of
    /// the handle waiting at once share one queue entry: only the last to
    /// give up leaves it).
    place_waits: AtomicUsize,
    /// When a try of this handle last found the lock held (`lease::hold`
    /// nanoseconds; 0: never): see [`Handle::recently_contended`].
    contended: AtomicU64,
    /// The owner id's text, for `Lock::owner`'s `&str` (an owner this
    /// client made is kept as a number: see `owner.rs`).
    owner_text: OnceLock<Box<str>>,
}

/// How long a handle counts as contended after a try of it found the lock
/// held: half the pub/sub hub's linger (a second), so the subscriptions
/// its wait made are surely still up.
pub(crate) const CONTENDED_FOR: Duration = Duration::from_millis(500);

struct Prepared {
    acquire_watchdog: Arc<Cmd>,
    release_head: Cmd,
}

/// A hold taken through a handle is named by it (see `hold_key`).
impl HoldNames for Handle {
    fn name(&self) -> &Arc<str> {
        &self.names.key
    }
    fn owner(&self) -> &Owner {
        &self.owner
    }
    fn slot(&self) -> u16 {
        self.slot
    }
    fn renewal(&self) -> &'static Renewal {
        self.kind.lease
    }
    /// By owner alone while the owner is this client's own, its text was
    /// never handed out (`Lock::owner`: another process given it could
    /// take the lock as this owner), and no request of the handle ended
    /// in doubt.
    fn by_owner(&self) -> bool {
        self.owner.given_text().is_none()
            && !self.doubt.load(Ordering::Acquire)
            && self
                .more
                .get()
                .map_or(true, |m| m.owner_text.get().is_none())
    }
}

impl Handle {
    /// Whether counts of this owner that no hold here knows of can only be
    /// orphans of this handle's own requests: the owner is this client's
    /// own, its text was never handed out (nobody else acts as it), and a
    /// request of the handle ended in doubt (an acquire whose reply was
    /// lost, a waiter's leave that never went through), and no other
    /// acquire of the handle or a clone is under way (its reply, not yet
    /// handled, may be what counts: see [`Acquiring`]).
    pub(crate) fn may_have_orphans(&self) -> bool {
        self.owner.given_text().is_none()
            && self.doubt.load(Ordering::Acquire)
            && self.acquiring.load(Ordering::Acquire) <= 1
            && self
                .more
                .get()
                .map_or(true, |m| m.owner_text.get().is_none())
    }
}

/// An acquire of a handle under way, counted in the handle until dropped
/// (the guard made, an error returned, or the acquire cancelled): while
/// another is under way, a reply counting an unknown re-entry may be that
/// one's count, not an orphan (see [`Handle::may_have_orphans`]).
pub(crate) struct Acquiring<'a>(Option<&'a Handle>);

impl<'a> Acquiring<'a> {
    pub(crate) fn new(handle: &'a Handle) -> Self {
        // Saturating (a u16 keeps the handle within its size budget): past
        // 65,535 acquires at once the rest go uncounted, the count stays at
        // its top, and no fold is made while it is there.
        let counted = handle
            .acquiring
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_add(1))
            .is_ok();
        Self(counted.then_some(handle))
    }
}

impl Drop for Acquiring<'_> {
    fn drop(&mut self) {
        if let Some(h) = self.0 {
            h.acquiring.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A request of a handle that may take the lock (an acquire, a waiter's
/// leave that gives a grant back), in flight: dropped before
/// [`settled`](Self::settled) (cancelled, failed, answered unreadably) it
/// marks the handle in doubt. Such a request may still run, or may have
/// run, and taken the lock again as this owner behind a hold whose key
/// lapsed; only the fencing counter's newer token would tell.
pub(crate) struct Unsettled<'a>(&'a Handle);

impl<'a> Unsettled<'a> {
    pub(crate) fn new(handle: &'a Handle) -> Self {
        Self(handle)
    }

    /// The outcome is known here (the reply was read, or the request
    /// surely did not run).
    pub(crate) fn settled(self) {
        std::mem::forget(self);
    }
}

impl Drop for Unsettled<'_> {
    fn drop(&mut self) {
        self.0.doubt();
    }
}

impl Handle {
    pub(crate) fn new(name: &str, owner: Owner, kind: &'static LockKind) -> Self {
        let names = (kind.names)(name);
        let slot = keylatch_cluster::Slot::of(names.key.as_bytes()).get();
        Self {
            names,
            kind,
            owner,
            slot,
            used: AtomicBool::new(false),
            sent: AtomicBool::new(false),
            doubt: AtomicBool::new(false),
            acquiring: AtomicU16::new(0),
            current: Mutex::new(Weak::new()),
            more: OnceLock::new(),
        }
    }

    fn more(&self) -> &More {
        self.more.get_or_init(Box::default)
    }

    fn prepared(&self) -> Option<&Prepared> {
        self.more.get().and_then(|m| m.prepared.get())
    }

    /// A try of this handle found the lock held at `now`.
    pub(crate) fn contended(&self, now: Instant) {
        self.more()
            .contended
            .store(nanos(now).max(1), Ordering::Relaxed);
    }

    /// Whether a try of this handle found the lock held within
    /// [`CONTENDED_FOR`]: its next acquire may subscribe before its first
    /// try (the hub still holds the subscriptions), making that try the
    /// registering one. A handle that never waited reads one pointer.
    pub(crate) fn recently_contended(&self) -> bool {
        let Some(more) = self.more.get() else {
            return false;
        };
        match more.contended.load(Ordering::Relaxed) {
            0 => false,
            at => instant(at).elapsed() < CONTENDED_FOR,
        }
    }

    /// Whether this handle (and its clones) holds the lock now, as far as
    /// it knows: an acquire of it is a re-entry.
    pub(crate) fn holds(&self) -> bool {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .upgrade()
            .is_some_and(|h| h.is_active())
    }

    /// A request of this handle that may have taken the lock ended without
    /// its outcome known: its holds are judged by token from now on.
    pub(crate) fn doubt(&self) {
        self.doubt.store(true, Ordering::Release);
    }

    /// Waits of this owner holding a shared place in progress.
    pub(crate) fn place_waits(&self) -> &AtomicUsize {
        &self.more().place_waits
    }

    /// The hold to join for a reply carrying `token`, if this handle has it
    /// and it is not known lost; else `make` builds a new one, which
    /// becomes the current hold. Returns the hold and whether it is new.
    ///
    /// A re-entry whose token is unknown (`0`: the counter was missing when
    /// it ran) joins the current hold whatever its token: the owner held
    /// the lock, and this handle's live hold is the one it re-entered.
    pub(crate) fn hold_for(
        &self,
        token: u64,
        reentry: bool,
        make: impl FnOnce() -> Arc<Hold>,
    ) -> (Arc<Hold>, bool) {
        let mut cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = cur.upgrade() {
            let same = h.token == token || (token == 0 && reentry);
            if same && h.loss.get().is_none() {
                return (h, false);
            }
        }
        let h = make();
        *cur = Arc::downgrade(&h);
        (h, true)
    }

    /// The finisher for an acquire's late reply. The first acquire's is
    /// made for it alone and freed with its request: a handle made per
    /// request (`locks.lock(name)`, then held) keeps none, about 60 bytes
    /// per held lock; from the second acquire on the handle keeps one and
    /// shares it, so a handle in repeated use allocates no more.
    pub(crate) fn late_reply(
        &self,
        make: impl FnOnce() -> keylatch_cluster::LateReply,
    ) -> keylatch_cluster::LateReply {
        if let Some(l) = self.more.get().and_then(|m| m.late.get()) {
            return Arc::clone(l);
        }
        if !self.sent.swap(true, Ordering::Relaxed) {
            return make();
        }
        Arc::clone(self.more().late.get_or_init(make))
    }

    /// The watchdog's key for a new hold of this owner: the handle itself
    /// when the hold's field is the owner id (most kinds), else a key of its
    /// own (a write hold's `<owner>:write`).
    pub(crate) fn hold_key(self: &Arc<Self>) -> HoldKey {
        match (self.kind.field)(&self.owner) {
            None => HoldKey::of(Arc::clone(self) as Arc<dyn HoldNames>),
            Some(field) => HoldKey::new(Arc::clone(&self.names.key), field, self.kind.lease),
        }
    }

    /// The cluster slot of the lock's key.
    pub(crate) fn slot(&self) -> u16 {
        self.slot
    }

    /// The owner id's text.
    pub(crate) fn owner(&self) -> OwnerText<'_> {
        self.owner.text()
    }

    /// The owner id.
    pub(crate) fn owner_id(&self) -> &Owner {
        &self.owner
    }

    /// The owner id's text, kept once asked for (the public
    /// `Lock::owner`; the crate's own uses write it out on use).
    pub(crate) fn owner_str(&self) -> &str {
        match self.owner.given_text() {
            Some(text) => text,
            None => self
                .more()
                .owner_text
                .get_or_init(|| self.owner.to_string().into()),
        }
    }

    /// The hash field this owner's hold is counted in: the owner id, or
    /// `<owner>:write` for a read-write lock's write hold, made on use (not
    /// kept: 16 bytes in every handle).
    pub(crate) fn field(&self) -> Owner {
        (self.kind.field)(&self.owner).unwrap_or_else(|| self.owner.clone())
    }

    /// The acquire under the watchdog lease, the same command every time.
    /// From the handle's second call on it is prepared and shared; before
    /// that `None`: build it with [`acquire_cmd`]. Many handles live for one
    /// acquire and release (`locks.lock(name)` per request), and preparing
    /// theirs would cost about 600 bytes per held lock and the encoding
    /// work, for nothing.
    pub(crate) fn acquire_watchdog(&self, args: &ScriptArgs) -> Option<&Arc<Cmd>> {
        if !self.kind.prepared {
            // Its acquire differs between a try and a wait (whether to
            // queue, or to hold new readers back), and these are for
            // contended use, where a prepared command saves little.
            return None;
        }
        if let Some(p) = self.prepared() {
            return Some(&p.acquire_watchdog);
        }
        if !self.used.swap(true, Ordering::Relaxed) {
            return None;
        }
        // Kept for the handle's life, so trimmed to their exact size (built
        // with room to spare, they took about 360 bytes more per handle).
        let p = self.more().prepared.get_or_init(|| Prepared {
            acquire_watchdog: Arc::new(
                self.acquire_cmd(args, &args.watchdog_ms, false, 0)
                    .clone_with_room(0),
            ),
            release_head: self.release_built(args, None).clone_with_room(0),
        });
        Some(&p.acquire_watchdog)
    }

    /// The release of the hold with fencing token `token` (`0`: release by
    /// owner, without the token check): the prepared head and the token, or
    /// built whole before the handle prepared its commands.
    pub(crate) fn release_cmd(&self, args: &ScriptArgs, token: u64) -> Cmd {
        let mut buf = itoa::Buffer::new();
        let token = buf.format(token);
        match self.prepared() {
            // Room for the token (at most 20 digits) and its framing.
            Some(p) => p.release_head.clone_with_room(32).arg(token),
            None => self.release_built(args, Some(token)),
        }
    }

    /// The release built whole (`None`: its head, without the token).
    fn release_built(&self, args: &ScriptArgs, token: Option<&str>) -> Cmd {
        (self.kind.release_cmd)(&ReleaseCall {
            args,
            names: &self.names,
            owner: &self.owner(),
            token,
        })
    }

    /// The acquire script's command for one lease (`lease_ms`); when it
    /// cannot take the lock and `join` is set, a fair lock's joins the
    /// queue, a write lock's holds new readers back, and an RLock hash's
    /// registers its owner to be woken by name (the caller waits).
    pub(crate) fn acquire_cmd(
        &self,
        args: &ScriptArgs,
        lease_ms: &str,
        join: bool,
        tag: u16,
    ) -> Cmd {
        (self.kind.acquire_cmd)(&AcquireCall {
            args,
            names: &self.names,
            owner: &self.owner(),
            lease_ms,
            join,
            tag,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    fn args(publish: &'static str) -> ScriptArgs {
        ScriptArgs {
            watchdog_ms: "30000".into(),
            token_ttl_ms: "600000".into(),
            publish,
            fair_waiter_ms: "5000".into(),
            fair_allowance_ms: "300000".into(),
            grant_ms: "30000".into(),
        }
    }

    fn wire(cmd: &Cmd) -> BytesMut {
        let mut out = BytesMut::new();
        cmd.encode(&mut out);
        out
    }

    /// A re-entry count nobody here knows of is taken for an orphan only
    /// in doubt and with no other acquire of the handle under way: a
    /// clone's acquire whose reply is not handled yet may own that count.
    #[test]
    fn orphans_are_suspected_only_in_doubt_and_with_one_acquire_under_way() {
        let client = Arc::new("client".to_owned());
        let h = Handle::new(
            "orders",
            Owner::made(&client, 7),
            &crate::types::reentrant::REENTRANT,
        );
        let first = Acquiring::new(&h);
        assert!(!h.may_have_orphans(), "no request ended in doubt");
        h.doubt();
        assert!(h.may_have_orphans());
        let second = Acquiring::new(&h);
        assert!(!h.may_have_orphans(), "another acquire is under way");
        drop(first);
        assert!(h.may_have_orphans());
        drop(second);
        assert!(h.may_have_orphans());
        // Nobody else may act as a given owner: never an orphan of ours.
        let given = Handle::new(
            "orders",
            Owner::given("java:1"),
            &crate::types::reentrant::REENTRANT,
        );
        given.doubt();
        let _one = Acquiring::new(&given);
        assert!(!given.may_have_orphans());
    }

    #[test]
    fn prepared_commands_are_the_built_ones_from_the_second_use() {
        for publish in ["publish", "spublish"] {
            let args = args(publish);
            // An owner id this client made: kept as a number, written out
            // into each command.
            let client = Arc::new("client".to_owned());
            let h = Handle::new(
                "orders",
                Owner::made(&client, 7),
                &crate::types::reentrant::REENTRANT,
            );
            let built_acquire = h.acquire_cmd(&args, &args.watchdog_ms, false, 0);
            let built_release = h.release_built(&args, Some("42"));
            let owner = &b"client:7"[..];
            assert!(built_acquire.args().any(|a| a == owner));
            assert!(built_release.args().any(|a| a == owner));
            // First use: nothing prepared, the release is built whole.
            assert!(h.acquire_watchdog(&args).is_none());
            assert_eq!(wire(&h.release_cmd(&args, 42)), wire(&built_release));
            // Second use: prepared, byte for byte the same commands.
            let prepared = Arc::clone(h.acquire_watchdog(&args).expect("prepared"));
            assert_eq!(wire(&prepared), wire(&built_acquire));
            assert_eq!(prepared.first_key(), Some(&b"orders"[..]));
            assert_eq!(wire(&h.release_cmd(&args, 42)), wire(&built_release));
            let by_owner = h.release_cmd(&args, 0);
            assert_eq!(by_owner.args().last(), Some(&b"0"[..]));
            // The hash and the counter (the waiters by name are an argument).
            assert_eq!(by_owner.keys().count(), 2);
            // And shared from then on.
            let again = h.acquire_watchdog(&args).expect("prepared");
            assert!(Arc::ptr_eq(&prepared, again));
            assert!(again.args().any(|a| a == owner));
            assert_eq!(h.owner_str(), "client:7");
        }
    }
}
