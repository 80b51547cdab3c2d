//! A waiter's place on the server, given up however its wait ends without
//! the lock: a fair lock's place in the queue, or a writer's entry among a
//! read-write lock's waiting writers. Awaited when the wait runs out,
//! spawned when the future is dropped or fails; if that call is lost too,
//! the place's own deadline (server time) ends it within its span.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use keylatch_cluster::Commands;
use keylatch_resp::Frame;

use crate::error::LockResult;

use super::base::Lock;
use super::handle::Unsettled;
use super::kind::{Place, Waiting};

/// A kind's place, named by its static value.
type PlaceRef = &'static Place;

/// Gives a waiter's place up unless [`keep`](Self::keep) was called (the
/// acquire that took the lock took the place away itself). Clones of one
/// handle waiting at once share their owner's place in a fair queue: only
/// the last of them to give up leaves it.
pub(crate) struct Departure {
    place: Option<(Lock, PlaceRef)>,
    /// The wait's tag when a release may grant it the lock: its leave
    /// gives back a grant it never took (`lua/waiter_leave.lua`).
    tag: u16,
}

impl Departure {
    /// `place` is given up by `lock`'s owner when this ends; `None` holds
    /// no place (nothing to give up).
    pub(crate) fn new(lock: &Lock, place: Option<PlaceRef>) -> Self {
        if place.is_some_and(|p| p.shared) {
            lock.handle.place_waits().fetch_add(1, Ordering::AcqRel);
        }
        Self {
            place: place.map(|p| (lock.clone(), p)),
            tag: 0,
        }
    }

    /// The wait is tagged `tag` (see `Inner::grant_tag`).
    pub(crate) fn tag(&mut self, tag: u16) {
        self.tag = tag;
    }

    /// The lock was taken: the place went with it.
    pub(crate) fn keep(&mut self) {
        if let Some((lock, place)) = self.place.take() {
            let _ = last_out(&lock, place);
        }
    }

    /// This waiter's place, if it is the last of its owner to give it up.
    fn take(&mut self) -> Option<(Lock, PlaceRef)> {
        let (lock, place) = self.place.take()?;
        last_out(&lock, place).then_some((lock, place))
    }

    /// Gives the place up now (the wait ran out). A tagged wait (a release
    /// may have granted it the lock) holds its owner's acquires back until
    /// the leave is answered, and if this call is dropped before that, the
    /// leave is sent again in the background, so a grant is never left
    /// with a wait that is over. (A second leave of that tag finds its own
    /// entry gone; on a free lock it publishes `0`, one extra wake. Other
    /// places are not sent again: a second leave could take out the
    /// owner's next wait's place, and their deadlines end them anyway.)
    pub(crate) async fn now(mut self) {
        if let Some((lock, place)) = self.take() {
            let tag = self.tag;
            // Declared before `unanswered`, so dropped after it: the
            // background leave's own ticket is taken before this one goes.
            let _ticket = (tag != 0).then(|| lock.inner.leaves.ticket(&lock.handle.owner()));
            let mut unanswered = Unanswered((tag != 0).then(|| (lock.clone(), place, tag)));
            match leave(&lock, place, tag).await {
                Ok(_) => unanswered.0 = None,
                // A tagged wait's leave may owe a grant back: `unanswered`
                // sends it again in the background until it is answered.
                Err(e) if tag != 0 => {
                    tracing::debug!(lock = %lock.name(), error = %e, place = place.label,
                        "giving up a waiter's place failed; sent again in the background");
                }
                Err(e) => {
                    tracing::debug!(lock = %lock.name(), error = %e, place = place.label,
                        "giving up a waiter's place failed; its deadline ends it");
                }
            }
        }
    }
}

impl Drop for Departure {
    fn drop(&mut self) {
        if let Some((lock, place)) = self.take() {
            spawn_leave(lock, place, self.tag);
        }
    }
}

/// A tagged wait's leave [`Departure::now`] sent and has no answer to yet:
/// sent again in the background if that call is dropped.
struct Unanswered(Option<(Lock, PlaceRef, u16)>);

impl Drop for Unanswered {
    fn drop(&mut self) {
        if let Some((lock, place, tag)) = self.0.take() {
            spawn_leave(lock, place, tag);
        }
    }
}

/// Sends `lock`'s leave of `place` (wait `tag`) in the background. A
/// tagged wait may have been granted the lock just now: until this leave
/// gives the grant back, the owner's next acquire waits (`Leaves`).
fn spawn_leave(lock: Lock, place: PlaceRef, tag: u16) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        if tag != 0 {
            lock.handle.doubt();
        }
        return;
    };
    let ticket = (tag != 0).then(|| lock.inner.leaves.ticket(&lock.handle.owner()));
    // Counted as a background release too: a process that settles before
    // it exits (`keylatch exec` after a signal) must not end with its leave
    // unsent, or the next release grants the lock to a waiter that is gone
    // (held by nobody for a whole lease) or a fair queue keeps a dead head.
    let running = lock.inner.background.ticket();
    rt.spawn(async move {
        let _running = running;
        if tag == 0 {
            let _ = leave(&lock, place, tag).await;
        } else {
            leave_until_answered(&lock, place, tag).await;
        }
        drop(ticket);
    });
}

/// First pause between two sends of a tagged leave that failed.
const LEAVE_RETRY_FIRST: Duration = Duration::from_millis(50);
/// Longest pause between two sends of a tagged leave.
const LEAVE_RETRY_MAX: Duration = Duration::from_secs(1);

/// A tagged wait's leave, sent again after each failure (a cut network, a
/// reconnect, a failover) until it is answered or twice this client's
/// watchdog lease has passed, at least a minute: a grant lasts the
/// releaser's watchdog lease, the default 30 s unless the releasing
/// process set a longer one (such a grant may outlive the retries, and
/// then ends with its lease). Past the bound the handle's holds are judged
/// by token (`doubt`). Sent
/// once, a leave lost to a short outage left a grant nobody held for its
/// whole lease, and the owner's next acquire re-entered it (count 2: its
/// unlock left one count behind, renewed by nobody, and re-entered again by
/// the acquire after: held for as long as the owner kept working).
async fn leave_until_answered(lock: &Lock, place: PlaceRef, tag: u16) {
    let bound = (lock.inner.config.watchdog_timeout * 2).max(Duration::from_secs(60));
    let until = Instant::now() + bound;
    let mut pause = LEAVE_RETRY_FIRST;
    loop {
        match leave(lock, place, tag).await {
            Ok(_) => return,
            Err(e) if Instant::now() + pause < until => {
                tracing::debug!(lock = %lock.name(), error = %e,
                    "a waiter's leave failed; sending it again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(LEAVE_RETRY_MAX);
            }
            Err(e) => {
                tracing::warn!(lock = %lock.name(), error = %e,
                    "a waiter's leave was never answered; a grant it owed back ends with its lease");
                lock.handle.doubt();
                return;
            }
        }
    }
}

/// A try of `lock`'s wait `tag` registered after the wait was over (its
/// reply came late): the registration is taken back, in the background.
pub(crate) fn leave_late(lock: Lock, tag: u16) {
    let Waiting::Turn(Some(place)) = lock.handle.kind.waiting else {
        return;
    };
    if !place.by_name {
        return;
    }
    spawn_leave(lock, place, tag);
}

/// One waiter of `lock`'s owner stops waiting: whether it was the last of
/// them (always, for a place no clone shares).
fn last_out(lock: &Lock, place: PlaceRef) -> bool {
    !place.shared || lock.handle.place_waits().fetch_sub(1, Ordering::AcqRel) == 1
}

/// The place's leave script for this owner (and wait `tag`): `true` when
/// it had the place.
///
/// A tagged leave gives back a grant its wait never took: until it is
/// answered, that grant may be a hold of this owner nobody here knows of
/// (see `Unsettled`).
async fn leave(lock: &Lock, place: PlaceRef, tag: u16) -> LockResult<bool> {
    let (inner, handle) = (&lock.inner, &lock.handle);
    let unsettled = (tag != 0).then(|| Unsettled::new(handle));
    let reply = inner
        .client
        .eval_with(place.leave, || {
            (place.leave_cmd)(&inner.script_args, &handle.names, &handle.owner(), tag)
        })
        .await?;
    if let Some(u) = unsettled {
        u.settled();
    }
    Ok(*reply.value() == Frame::Integer(1))
}
