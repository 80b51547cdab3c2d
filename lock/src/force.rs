//! Force unlock: ending whatever holds a name, in the way its type means,
//! in one script that judges the type (`force_unlock.lua`). A cross-type
//! operation, so it sits above the types: each type gives the keys and
//! channels the script needs for it.

use keylatch_cluster::Commands;

use crate::context::Inner;
use crate::error::{LockError, LockResult};
use crate::lock::Lock;
use crate::names::LockNames;
use crate::reply::parse_pair;
use crate::scripts::FORCE_UNLOCK;
use crate::shape::{ForceUnlocked, KeyShape};
use crate::types::rwlock::{self, RwLock};
use crate::types::{fair, semaphore};

/// Ends whatever holds `name`, in the way its type means (see
/// `lua/force_unlock.lua`), then has this process's holds on it checked at
/// once (the script's own writes raise no invalidation here).
async fn force_unlock(inner: &Inner, name: &str) -> LockResult<ForceUnlocked> {
    let names = LockNames::new(name);
    let queue = fair::queue_key(name);
    let (permits, sem_channel) = semaphore::force_keys(name);
    let (base, rw_channel) = rwlock::force_keys(name);
    let reply = inner
        .client
        .eval_script(
            &FORCE_UNLOCK,
            &[name, queue.as_str(), permits.as_str(), base.as_str()],
            &[
                inner.publish_command(),
                names.channel().as_str(),
                rw_channel.as_str(),
                sem_channel.as_str(),
            ],
        )
        .await?;
    let out = match parse_pair(&reply)? {
        (0, _) => ForceUnlocked::Free,
        (1, _) => ForceUnlocked::Lock,
        (2, _) => ForceUnlocked::ReadWriteLock,
        (3, n) => ForceUnlocked::Permits(n.max(0).unsigned_abs()),
        (-1, shape) => {
            return Err(LockError::ForceUnlockRefused {
                name: name.to_owned(),
                found: KeyShape::from_code(shape),
            })
        }
        _ => return Err(LockError::Protocol(reply.shown())),
    };
    if out != ForceUnlocked::Free {
        inner.engine.touched(&names.key);
    }
    Ok(out)
}

impl Lock {
    /// Ends the lock whoever holds it and wakes waiters, as
    /// [`Locks::force_unlock`](crate::Locks::force_unlock) does for its
    /// name (which knows the type it finds there). `true` when something
    /// was held. The holder learns of it through [`LockGuard::lost`](crate::LockGuard::lost): at
    /// once when its [`Locks`](crate::Locks) tracks keys
    /// ([`Locks::connect`](crate::Locks::connect)), else at its next
    /// renewal (a fixed lease: when the lease ends).
    ///
    /// ```no_run
    /// # async fn demo(lock: keylatch_lock::Lock) -> keylatch_lock::LockResult<()> {
    /// lock.force_unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::ForceUnlockRefused`](crate::LockError::ForceUnlockRefused)
    /// when the name holds no lock (nothing changes);
    /// [`LockError::Client`](crate::LockError::Client).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn force_unlock(&self) -> LockResult<bool> {
        let out = force_unlock(&self.inner, &self.handle.names.key).await?;
        Ok(out != ForceUnlocked::Free)
    }
}

impl RwLock {
    /// Deletes the lock whatever holds it (readers and writer) and wakes
    /// every waiter. `true` when there was a lock. Holders learn of it
    /// through `lost()` (a writer at once when its `Locks` tracks keys,
    /// readers at their next renewal).
    ///
    /// ```no_run
    /// # async fn demo(locks: keylatch_lock::Locks) -> keylatch_lock::LockResult<()> {
    /// locks.rw_lock("catalogue").force_unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Client`](crate::LockError::Client).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn force_unlock(&self) -> LockResult<bool> {
        self.write().force_unlock().await
    }
}

impl crate::Locks {
    /// See [`Locks::force_unlock`](crate::Locks::force_unlock).
    pub(crate) async fn force_unlock_name(&self, name: &str) -> LockResult<ForceUnlocked> {
        force_unlock(self.context(), name).await
    }
}
