//! The cluster hub's coordinator: the task that keeps names on the right
//! masters. It wakes for
//!
//! - a node's [`Notice`]: listeners handed back are placed at once (several
//!   queued notices are handled in one turn);
//! - a change of the router's slot owners, whoever caused it (a refresh, a
//!   `MOVED` met by a command or by SSUBSCRIBE): the hub rebalances;
//! - while something is parked or a node connection is down, a retry timer
//!   with backoff: it asks the router for a fresh topology in the background
//!   (so a dead master's replica is found once promoted, without any command
//!   being sent) and tries the parked listeners again.
//!
//! It never waits on the network itself, so a slow refresh cannot hold up
//! placements. It holds the hub weakly and ends with it.

use std::sync::Weak;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::cluster::ClusterHub;
use super::hub::Notice;
use crate::backoff::Backoff;

/// First retry delay; about the router's minimum time between refreshes.
const RETRY_MIN: Duration = Duration::from_millis(100);
/// Longest retry delay while something stays wrong.
const RETRY_MAX: Duration = Duration::from_secs(2);

/// Runs until the hub is dropped.
pub(crate) async fn run(
    hub: Weak<ClusterHub>,
    mut notices: mpsc::UnboundedReceiver<Notice>,
    mut owners: watch::Receiver<u64>,
) {
    let mut backoff = Backoff::new(RETRY_MIN, RETRY_MAX);
    let mut retry_at: Option<Instant> = None;
    let mut watching = true;
    loop {
        // Upgraded only between waits: the coordinator must not keep the hub
        // (and with it every node connection) alive.
        match hub.upgrade() {
            None => return,
            Some(h) if h.needs_attention() => {
                retry_at.get_or_insert_with(|| Instant::now() + backoff.next_delay());
            }
            Some(_) => {
                retry_at = None;
                backoff.reset();
            }
        }
        let retry = async {
            match retry_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            notice = notices.recv() => {
                let (Some(notice), Some(h)) = (notice, hub.upgrade()) else { return };
                h.handle(notice);
                while let Ok(notice) = notices.try_recv() {
                    h.handle(notice);
                }
            }
            changed = owners.changed(), if watching => {
                // Err: the router is gone, which the hub's own reference
                // rules out; stop watching rather than spin.
                watching = changed.is_ok();
                let Some(h) = hub.upgrade() else { return };
                tracing::debug!("pub/sub: slot owners changed; moving shard channels");
                h.rebalance();
            }
            () = retry => {
                retry_at = None;
                let Some(h) = hub.upgrade() else { return };
                tracing::debug!("pub/sub: a node is down or names are parked; refreshing and placing them again");
                h.refresh_soon();
                h.retry_parked();
            }
        }
    }
}
