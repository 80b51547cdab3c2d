//! One master of a `RedLock`: a [`Locks`] given
//! connected, or one connected in the background when first asked, so a
//! master that is down when the RedLock is made counts as a failed master
//! (as it would if it went down later) instead of failing the whole
//! RedLock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use keylatch_cluster::ClientConfig;
use tokio::sync::Notify;

use crate::config::LocksConfig;
use crate::error::{LockError, LockResult};
use crate::locks::Locks;

/// A master: connected, or connecting when asked.
#[derive(Clone, Debug)]
pub(super) enum Master {
    Ready(Locks),
    Later(Arc<Pending>),
}

/// A master not connected yet: at most one attempt in flight, run on a
/// task of its own so an attempt outlives the round that started it (a
/// round waits for it only up to the node timeout; a slow handshake still
/// completes for the next round).
#[derive(Debug)]
pub(super) struct Pending {
    client: ClientConfig,
    config: LocksConfig,
    locks: OnceLock<Locks>,
    connecting: AtomicBool,
    ended: Notify,
    /// Why the last attempt failed, for [`Master::ready`]'s error.
    last_error: Mutex<Option<LockError>>,
}

impl Master {
    /// A master connected later, on first use.
    pub(super) fn later(client: ClientConfig, config: LocksConfig) -> Self {
        Self::Later(Arc::new(Pending {
            client,
            config,
            locks: OnceLock::new(),
            connecting: AtomicBool::new(false),
            ended: Notify::new(),
            last_error: Mutex::new(None),
        }))
    }

    /// The master's `Locks` when it is connected.
    pub(super) fn connected(&self) -> Option<&Locks> {
        match self {
            Self::Ready(l) => Some(l),
            Self::Later(p) => p.locks.get(),
        }
    }

    /// The settings its holds are taken with (its watchdog lease bounds a
    /// RedLock's validity).
    pub(super) fn config(&self) -> &LocksConfig {
        match self {
            Self::Ready(l) => l.config(),
            Self::Later(p) => p.locks.get().map_or(&p.config, Locks::config),
        }
    }

    /// The master's `Locks`, connecting it first if it is not: waits for
    /// the attempt in flight (or starts one) and answers its outcome.
    ///
    /// # Errors
    /// The attempt's connection error.
    ///
    /// # Cancel safety
    /// Cancel safe: the attempt runs on a task of its own and goes on.
    ///
    /// # Panics
    /// Outside a tokio runtime (the attempt is spawned).
    pub(super) async fn ready(&self) -> LockResult<Locks> {
        let p = match self {
            Self::Ready(l) => return Ok(l.clone()),
            Self::Later(p) => p,
        };
        if let Some(l) = p.locks.get() {
            return Ok(l.clone());
        }
        // Registered before the attempt is looked at, so its end cannot
        // slip between the look and the wait.
        let ended = p.ended.notified();
        tokio::pin!(ended);
        ended.as_mut().enable();
        if let Some(l) = p.locks.get() {
            return Ok(l.clone());
        }
        if !p.connecting.swap(true, Ordering::AcqRel) {
            let p = Arc::clone(p);
            tokio::spawn(async move {
                let outcome = Locks::connect_with(p.client.clone(), p.config.clone()).await;
                let error = match outcome {
                    Ok(locks) => {
                        let _ = p.locks.set(locks);
                        None
                    }
                    Err(e) => Some(e),
                };
                if let Ok(mut last) = p.last_error.lock() {
                    *last = error;
                }
                p.connecting.store(false, Ordering::Release);
                p.ended.notify_waiters();
            });
        }
        ended.await;
        if let Some(l) = p.locks.get() {
            return Ok(l.clone());
        }
        let last = p.last_error.lock().ok().and_then(|e| e.clone());
        Err(last.unwrap_or(LockError::Client(keylatch_cluster::Error::Disconnected)))
    }
}
