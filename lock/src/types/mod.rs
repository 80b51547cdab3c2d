//! One file or folder per lock type. Each defines what the type is on the
//! server (a `LockKind` for the types taken like a lock, its own calls for
//! the counts) and imports only the layers below: the handle and guard
//! (`lock/`), the context, the engine.

pub(crate) mod fair;
pub(crate) mod fenced;
pub(crate) mod latch;
pub(crate) mod leader;
pub(crate) mod losses;
pub(crate) mod multilock;
pub(crate) mod reentrant;
pub(crate) mod rwlock;
pub(crate) mod semaphore;
pub(crate) mod spin;
