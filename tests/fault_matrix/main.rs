//! The fault matrix (issue 21): each row runs one workload from three
//! client processes against real servers while one disturbance repeats,
//! and one checker ([`history::check`]) judges every row's history.
//!
//! Rows run one at a time (a process-wide lock): they measure, and two at
//! once on two cores would measure each other. Each row prints its figures
//! on stderr (`--nocapture` shows them); `KEYLATCH_FAULT_FULL=1` runs the
//! README's counts (10,000 acquisitions per row) instead of CI's.
//!
//! Control rows prove the checker can see what it looks for: the workload
//! without locks, a restart that loses the data, a failover without
//! replica sync.

mod cli_row;
mod cluster_rows;
mod history;
mod netns;
mod row;
mod sentinel_rows;
mod standalone_rows;
mod worker;

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use keylatch_cluster::{Client, Commands};
use keylatch_resp::{Cmd, Frame};

/// Rows run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

pub(crate) fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The worker processes' entry: the coordinator runs this test binary
/// again with `KL_FM_WORKER` set. In a normal test run it returns at once.
#[test]
fn worker() {
    if let Some(spec) = worker::Spec::from_env() {
        worker::run(spec);
    }
}

/// Names per row: 4 for the short holders, 2 for the long ones.
pub(crate) const NAMES: usize = 4 + worker::LONG_NAMES;

/// Lock names for a row (distinct per row, so rows never share state).
pub(crate) fn names(row: &str) -> Vec<String> {
    (0..NAMES).map(|i| format!("fm:{row}:{i}")).collect()
}

/// Once every worker is gone, no lock may stay held past a lease: waits up
/// to `lease` + 3 s for every name to be free, and panics naming those
/// still held.
pub(crate) fn no_lock_outlives_its_lease(url: &str, names: &[String], lease: Duration) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let client = Client::connect(url).await.expect("client");
        let deadline = Instant::now() + lease + Duration::from_secs(3);
        loop {
            let mut held = Vec::new();
            for n in names {
                match client.send(Cmd::new("EXISTS").key(n.as_str())).await {
                    Ok(Frame::Integer(0)) => {}
                    other => held.push(format!("{n}: {other:?}")),
                }
            }
            if held.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "locks held by nobody past their lease: {held:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}
