//! The seam every lock type plugs in at: a [`LockKind`] value, one `static`
//! in the type's own file (`types/`), that says what the type is on the
//! server. The handle, the acquire path, the waits and the lease engine
//! read it and name no type.
//!
//! Adding a type that is taken and released like a lock: a `static
//! LockKind` in its own file (its names, its scripts' commands, its lease,
//! its token rule, how it waits), its Lua in `lock/lua/`, and one
//! constructor line in `locks.rs`.

use keylatch_cluster::Script;
use keylatch_resp::Cmd;

use crate::context::ScriptArgs;
use crate::lease::Renewal;
use crate::names::LockNames;
use crate::owner::Owner;

/// What one lock type is on the server, and how its holders wait.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LockKind {
    /// Its name in logs and `Debug` output ("reentrant", "fair", …).
    pub(crate) label: &'static str,
    /// The key and channel names of a lock `name` of this type.
    pub(crate) names: fn(&str) -> LockNames,
    /// The hash field an owner's hold is counted in when it is not the
    /// owner id (most types: `None`, the handle's own id); a write hold's
    /// is `<owner>:write`.
    pub(crate) field: fn(&Owner) -> Option<Owner>,
    /// The script taking a hold.
    pub(crate) acquire: &'static Script,
    /// Its command for one attempt.
    pub(crate) acquire_cmd: fn(&AcquireCall<'_>) -> Cmd,
    /// Whether the acquire under the watchdog is the same command every
    /// time, so a handle in repeated use prepares it once (not for types
    /// whose acquire differs between a try and a wait).
    pub(crate) prepared: bool,
    /// The script dropping one hold.
    pub(crate) release: &'static Script,
    /// Its command; without a token, the head every release of the owner
    /// shares (the token is then the last argument).
    pub(crate) release_cmd: fn(&ReleaseCall<'_>) -> Cmd,
    /// How the lease engine renews and checks the holds.
    pub(crate) lease: &'static Renewal,
    /// What an acquire's second number is, and what names a hold.
    pub(crate) tokens: Tokens,
    /// How a holder-to-be waits.
    pub(crate) waiting: Waiting,
    /// A multi-lock takes its members in this order first (then by slot and
    /// name): writes before plain locks before reads, so a multi-lock over
    /// both sides of a read-write lock cannot wait on itself.
    pub(crate) multi_rank: u8,
    /// Whether a multi-lock may take it with others of its slot in one
    /// call (`multi_acquire.lua`: the plain RLock hash with its counter).
    pub(crate) batchable: bool,
}

/// One acquire attempt's parts.
pub(crate) struct AcquireCall<'a> {
    pub(crate) args: &'a ScriptArgs,
    pub(crate) names: &'a LockNames,
    pub(crate) owner: &'a str,
    pub(crate) lease_ms: &'a str,
    /// When it cannot take the lock: join the server's queue, hold new
    /// readers back, or register to be woken by name (the caller waits).
    pub(crate) join: bool,
    /// With `join`, a registration by name: the wait's tag (1..=1023) when
    /// a release may grant it the lock, 0 when it is only woken (see
    /// `lua/lib/grant_waiter.lua`).
    pub(crate) tag: u16,
}

/// One release's parts.
pub(crate) struct ReleaseCall<'a> {
    pub(crate) args: &'a ScriptArgs,
    pub(crate) names: &'a LockNames,
    pub(crate) owner: &'a str,
    /// The hold's fencing token (`"0"`: by owner); `None` builds the head.
    pub(crate) token: Option<&'a str>,
}

/// What the value in an acquire's `{holds, value}` reply is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tokens {
    /// The hold's fencing token, which names the hold: renewals and
    /// releases check it, and a re-entry joins the hold of the same token.
    PerHold,
    /// A token of each acquire's own (a re-entry's too, from one counter):
    /// shown to the caller, while the hold is named and released by owner.
    PerAcquire,
    /// No fencing token; the hold is released by owner (an owner unique to
    /// one acquire names it).
    ByOwner,
    /// A session's generation, which names the hold but is no fencing
    /// token: the caller is shown none.
    Session,
}

impl Tokens {
    /// The token naming the hold of an acquire that answered `value`.
    pub(crate) fn hold_token(self, value: u64) -> u64 {
        match self {
            Tokens::PerAcquire => 0,
            _ => value,
        }
    }

    /// The token a release of that hold names when nobody holds its guard
    /// (an acquire settled late): `0`, by owner, where the hold is not
    /// named by its token.
    pub(crate) fn release_token(self, value: u64) -> u64 {
        match self {
            Tokens::PerAcquire | Tokens::ByOwner => 0,
            _ => value,
        }
    }

    /// The fencing token the guard shows.
    pub(crate) fn shown(self, value: u64, hold_token: u64, fencing: bool) -> Option<u64> {
        match self {
            Tokens::PerAcquire => Some(value),
            Tokens::Session => None,
            _ => (fencing && hold_token > 0).then_some(hold_token),
        }
    }
}

/// How a holder-to-be waits once a try failed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Waiting {
    /// In this process's queue for the name, then on the lock's channel:
    /// one local contender goes back to the server per release. With a
    /// place, each try holds it (a writer's marker holding new readers
    /// back), and it is given up however the wait ends without the lock.
    Turn(Option<&'static Place>),
    /// In the server's queue, which is the order (no local queue: it would
    /// let a later process overtake), woken on the waiter's own channel.
    /// Every try keeps the place; it is given up however the wait ends
    /// without the lock.
    Queue {
        place: &'static Place,
        /// The waiter's own channel.
        channel: fn(&LockNames, &str) -> String,
    },
    /// No pub/sub and no local queue: tries again after a capped
    /// exponential backoff with jitter (`backoff.rs`).
    Backoff,
}

/// A waiter's place on the server, and how it is given up.
#[derive(Debug)]
pub(crate) struct Place {
    /// Its name in logs.
    pub(crate) label: &'static str,
    /// The script giving it up; answers 1 when the owner had the place.
    pub(crate) leave: &'static Script,
    /// Its command for this owner.
    pub(crate) leave_cmd: fn(&ScriptArgs, &LockNames, &str, u16) -> Cmd,
    /// Clones of one handle waiting at once share it (one entry per
    /// owner): only the last of them to give up leaves it.
    pub(crate) shared: bool,
    /// A release wakes the one waiter it takes out of the place by name,
    /// publishing the owner id on the channel named as its registry key
    /// (`keylatch_lock_waiters:{name}`), and tells the lock's channel `"00"` rather than `"0"`
    /// (the RLock hash's waiters, `rlock_hash.rs`): a waiter holding such a
    /// place listens on both and wakes for its own name or a plain `"0"`.
    pub(crate) by_name: bool,
}

/// The owner id itself: the field most types count a hold in (the
/// handle's own id, shared: no copy per handle).
pub(crate) fn owner_field(_: &Owner) -> Option<Owner> {
    None
}
