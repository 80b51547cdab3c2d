//! [`Client::pipeline`](crate::Client::pipeline)'s two paths: one
//! connection's batch with `NOSCRIPT` healed per script (standalone, and
//! each master's part in a cluster), and a cluster pipeline split per
//! master, run concurrently, its redirected or transient entries retried
//! alone through the router.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use keylatch_resp::{Cmd, Frame};

use crate::connection::Connection;
use crate::error::{Error, Result, ServerErrorKind};
use crate::pipeline::Pipeline;
use crate::router::{command_slot, seed_addr, Router};
use crate::script::Script;

/// A pipeline entry: the command, and the script it runs (for `NOSCRIPT`).
type Entry = (Cmd, Option<&'static Script>);

/// Sends entries to one connection in one write; heals `NOSCRIPT` by loading
/// each missing script once and resending only the failed entries, in order.
pub(crate) async fn run_group(conn: &Connection, entries: &[Entry]) -> Vec<Result<Frame>> {
    if entries.is_empty() {
        return Vec::new();
    }
    let batch: Pipeline = entries.iter().map(|(c, _)| c.clone()).collect();
    let mut out = match conn.pipeline(batch).await {
        Ok(r) => r,
        Err(e) => return vec![Err(e); entries.len()],
    };
    let failed: Vec<usize> = out
        .iter()
        .enumerate()
        .filter(|(j, r)| {
            entries[*j].1.is_some()
                && matches!(r, Err(e) if e.server_kind() == Some(ServerErrorKind::NoScript))
        })
        .map(|(j, _)| j)
        .collect();
    if failed.is_empty() {
        return out;
    }
    let mut scripts: Vec<&'static Script> = Vec::new();
    for &j in &failed {
        if let Some(s) = entries[j].1 {
            if !scripts.iter().any(|k| k.sha1() == s.sha1()) {
                scripts.push(s);
            }
        }
    }
    let mut batch = Pipeline::with_capacity(scripts.len() + failed.len());
    let node = conn.config().addr();
    for s in &scripts {
        s.log_reload(Some(&node));
        batch.add(s.load_cmd());
    }
    for &j in &failed {
        batch.add(entries[j].0.clone());
    }
    match conn.pipeline(batch).await {
        Ok(replies) => {
            for (k, reply) in replies.into_iter().skip(scripts.len()).enumerate() {
                if let Some(&j) = failed.get(k) {
                    out[j] = reply;
                }
            }
        }
        Err(e) => {
            for &j in &failed {
                out[j] = Err(e.clone());
            }
        }
    }
    out
}

/// Splits a pipeline per master, runs the parts concurrently, retries alone
/// the entries that met a redirect or a transient error, and restores order.
pub(crate) async fn cluster_pipeline(
    router: &Arc<Router>,
    entries: Vec<Entry>,
) -> Vec<Result<Frame>> {
    let n = entries.len();
    let mut results: Vec<Option<Result<Frame>>> = vec![None; n];
    let (groups, mut retry) = group_by_master(router, &entries, &mut results).await;
    let parts = join_all(groups.iter().map(|(conn, idx)| {
        let part: Vec<Entry> = idx.iter().map(|&i| entries[i].clone()).collect();
        async move { run_group(conn, &part).await }
    }))
    .await;
    for ((_, idx), replies) in groups.iter().zip(parts) {
        for (&i, reply) in idx.iter().zip(replies) {
            if worth_retrying_alone(&reply) {
                retry.push(i);
            } else {
                results[i] = Some(reply);
            }
        }
    }
    if !retry.is_empty() {
        router.refresh_soon();
        let retried = join_all(retry.iter().map(|&i| {
            let (cmd, script) = entries[i].clone();
            let router = Arc::clone(router);
            async move { router.send(cmd, script).await }
        }))
        .await;
        for (&i, r) in retry.iter().zip(retried) {
            results[i] = Some(r);
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or(Err(Error::ConnectionClosed)))
        .collect()
}

/// Groups entry indices by the master serving their slot (one group per
/// address). An entry whose keys span slots gets its error in `results`;
/// one whose slot has no reachable master is returned apart, to be retried
/// alone through the router.
async fn group_by_master(
    router: &Arc<Router>,
    entries: &[Entry],
    results: &mut [Option<Result<Frame>>],
) -> (Vec<(Connection, Vec<usize>)>, Vec<usize>) {
    let mut groups: Vec<(Connection, Vec<usize>)> = Vec::new();
    let mut addrs: Vec<String> = Vec::new();
    let mut retry: Vec<usize> = Vec::new();
    let mut resolved: HashMap<Option<u16>, Option<usize>> = HashMap::new();
    for (i, (cmd, _)) in entries.iter().enumerate() {
        let slot = match command_slot(cmd) {
            Ok(s) => s,
            Err(e) => {
                results[i] = Some(Err(e));
                continue;
            }
        };
        // One lookup per distinct slot: an unserved slot or a dead node
        // costs one refresh or connect attempt per pipeline, not per entry.
        let group = match resolved.get(&slot) {
            Some(g) => *g,
            None => {
                let g = match router.connection_for_slot(slot).await {
                    Ok(conn) => {
                        let addr = seed_addr(conn.config());
                        Some(match addrs.iter().position(|a| *a == addr) {
                            Some(g) => g,
                            None => {
                                addrs.push(addr);
                                groups.push((conn, Vec::new()));
                                groups.len() - 1
                            }
                        })
                    }
                    Err(_) => None,
                };
                resolved.insert(slot, g);
                g
            }
        };
        match group {
            Some(g) => groups[g].1.push(i),
            None => retry.push(i),
        }
    }
    (groups, retry)
}

/// Whether an entry's reply is one the router retries (a redirect, a
/// transient cluster state, a request not sent): such entries go again
/// alone, through the router.
fn worth_retrying_alone(reply: &Result<Frame>) -> bool {
    match reply {
        Err(Error::Disconnected) => true,
        Err(e) => matches!(
            e.server_kind(),
            Some(
                ServerErrorKind::Moved
                    | ServerErrorKind::Ask
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::Loading
                    | ServerErrorKind::MasterDown
            )
        ),
        Ok(_) => false,
    }
}

/// Polls futures concurrently and returns their outputs in order.
async fn join_all<F: Future>(futs: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut pending: Vec<Pin<Box<F>>> = futs.into_iter().map(Box::pin).collect();
    let mut done: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut all = true;
        for (f, slot) in pending.iter_mut().zip(done.iter_mut()) {
            if slot.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *slot = Some(v),
                    Poll::Pending => all = false,
                }
            }
        }
        if all {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    done.into_iter().flatten().collect()
}
