//! Redisson's side of the scale mode (`scale.rs`): its acquire and its
//! chunked watchdog renewal, run the way Redisson runs them on as many
//! locks of its own layout, so the server's cost per lock is compared in
//! the same run. Every key is under the run's prefix and deleted after.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use keylatch::{Client, Cmd, Commands, Pipeline};

use super::client::BenchError;
use super::scale::{delete, server_cpu, ScaleOptions, CLEANUP_BATCH};

/// Redisson's chunked watchdog renewal (`LockTask`): for each lock, if its
/// owner still holds it, PEXPIRE it to the lease; 1 renewed, 0 gone.
const REDISSON_RENEW: &str = "local result = {} \
for i = 1, #KEYS, 1 do \
  if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then \
    redis.call('pexpire', KEYS[i], ARGV[1]); table.insert(result, 1); \
  else table.insert(result, 0); end; \
end; return result;";

/// Redisson's `RLock.tryLockInnerAsync` script, verbatim: KEYS[1] the lock
/// name; ARGV[1] lease in milliseconds, ARGV[2] owner id. nil when
/// acquired, else the lock's PTTL.
const REDISSON_LOCK: &str = "if ((redis.call('exists', KEYS[1]) == 0) or \
(redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); \
return nil; end; return redis.call('pttl', KEYS[1]);";

/// Locks per Redisson renewal call (its default chunk).
const REDISSON_CHUNK: usize = 100;

/// Redisson's acquire script on `opts.holds` new lock names, one call per
/// lock as Redisson makes them, `opts.inflight` at a time: the server CPU
/// per acquire in µs. Its keys are deleted after.
pub(super) async fn redisson_acquire(
    admin: &Client,
    prefix: &str,
    opts: &ScaleOptions,
) -> Result<f64, BenchError> {
    let owner = "9c1a3f2e-0000-4000-8000-000000000000:1";
    let lease_ms = opts.watchdog.as_millis().to_string();
    let prefix: Arc<str> = Arc::from(format!("{prefix}:a"));
    let fail = |what: &str, e: keylatch::Error| BenchError::new(format!("{what}: {e}"));
    let sha = admin
        .script_load(REDISSON_LOCK)
        .await
        .map_err(|e| fail("loading Redisson's lock script", e))?;
    let next = Arc::new(AtomicUsize::new(0));
    let s0 = server_cpu(admin, true).await?;
    let mut tasks = Vec::new();
    for _ in 0..opts.inflight.max(1) {
        let (admin, next, sha, lease_ms, prefix) = (
            admin.clone(),
            Arc::clone(&next),
            sha.clone(),
            lease_ms.clone(),
            Arc::clone(&prefix),
        );
        let holds = opts.holds;
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= holds {
                    break Ok(());
                }
                let key = format!("{prefix}:{i}");
                admin
                    .evalsha(&sha, [key], [lease_ms.clone(), owner.to_owned()])
                    .await?;
            }
        }));
    }
    for t in tasks {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(fail("Redisson's acquire", e)),
            Err(e) => return Err(BenchError::new(format!("Redisson's acquire: {e}"))),
        }
    }
    let s1 = server_cpu(admin, true).await?;
    delete(admin, (0..opts.holds).map(|i| format!("{prefix}:{i}"))).await?;
    let used = s1
        .zip(s0)
        .map_or(Duration::ZERO, |(b, a)| b.saturating_sub(a));
    Ok(used.as_secs_f64() * 1e6 / opts.holds.max(1) as f64)
}

/// Redisson's layout for as many locks (a chunk of 100 per hash tag, so a
/// cluster takes each call on one node), renewed once by its chunked
/// script, `opts.inflight` calls at a time; the server CPU per renewed hold
/// in µs. Its keys are deleted after.
pub(super) async fn redisson_round(
    admin: &Client,
    prefix: &str,
    opts: &ScaleOptions,
) -> Result<f64, BenchError> {
    let owner = "9c1a3f2e-0000-4000-8000-000000000000:1";
    let lease_ms = opts.watchdog.as_millis().to_string();
    let prefix: Arc<str> = Arc::from(prefix);
    let key = move |i: usize| format!("{prefix}:r:{{{}}}:{i}", i / REDISSON_CHUNK);
    let fail = |what: &str, e: keylatch::Error| BenchError::new(format!("{what}: {e}"));
    for start in (0..opts.holds).step_by(CLEANUP_BATCH) {
        let p: Pipeline = (start..(start + CLEANUP_BATCH).min(opts.holds))
            .flat_map(|i| {
                let k = key(i);
                [
                    Cmd::new("HSET").key(k.as_str()).arg(owner).arg(1),
                    Cmd::new("PEXPIRE").key(k.as_str()).arg(lease_ms.as_str()),
                ]
            })
            .collect();
        admin
            .pipeline(p)
            .await
            .map_err(|e| fail("Redisson's layout", e))?;
    }
    let sha = admin
        .script_load(REDISSON_RENEW)
        .await
        .map_err(|e| fail("loading Redisson's script", e))?;
    let chunks: Arc<Vec<usize>> = Arc::new((0..opts.holds).step_by(REDISSON_CHUNK).collect());
    let next = Arc::new(AtomicUsize::new(0));
    let s0 = server_cpu(admin, true).await?;
    let mut tasks = Vec::new();
    for _ in 0..opts.inflight.min(chunks.len()).max(1) {
        let (admin, next, chunks, sha, lease_ms) = (
            admin.clone(),
            Arc::clone(&next),
            Arc::clone(&chunks),
            sha.clone(),
            lease_ms.clone(),
        );
        let (holds, key) = (opts.holds, key.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let c = next.fetch_add(1, Ordering::Relaxed);
                let Some(&start) = chunks.get(c) else {
                    break Ok(());
                };
                let end = (start + REDISSON_CHUNK).min(holds);
                let keys: Vec<String> = (start..end).map(&key).collect();
                let mut args = vec![lease_ms.clone()];
                args.extend((start..end).map(|_| owner.to_owned()));
                admin.evalsha(&sha, keys, args).await?;
            }
        }));
    }
    for t in tasks {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(fail("Redisson's renewal", e)),
            Err(e) => return Err(BenchError::new(format!("Redisson's renewal: {e}"))),
        }
    }
    let s1 = server_cpu(admin, true).await?;
    delete(admin, (0..opts.holds).map(&key)).await?;
    let used = s1
        .zip(s0)
        .map_or(Duration::ZERO, |(b, a)| b.saturating_sub(a));
    Ok(used.as_secs_f64() * 1e6 / opts.holds.max(1) as f64)
}
