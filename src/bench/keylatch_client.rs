//! keylatch's own [`Locks`] as a benchmark client: holds under the
//! watchdog, waiting through the unlock channel like any application.

use std::time::Duration;

use super::{BenchResult, LockClient, LockHandle};
use keylatch::{Lock, LockGuard, Locks};

impl LockClient for Locks {
    type Handle = Lock;

    fn label(&self) -> &str {
        "keylatch"
    }

    fn handle(&self, name: &str) -> Lock {
        self.lock(name)
    }
}

impl LockHandle for Lock {
    type Held = LockGuard;

    async fn try_acquire(&mut self, wait: Duration) -> BenchResult<Option<LockGuard>> {
        Ok(Lock::try_acquire(self, wait, None).await?)
    }

    async fn release(&mut self, held: LockGuard) -> BenchResult<()> {
        Ok(held.unlock().await?)
    }
}
