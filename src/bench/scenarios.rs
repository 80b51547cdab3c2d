//! The three scenarios, generic over [`LockClient`]. Each runs for a given
//! span and returns what it counted; the suite decides spans and order.

use std::time::{Duration, Instant};

use super::{process_cpu, BenchError, BenchResult, Histogram, LockClient, LockHandle, Plan};

/// What one run of one scenario by one client counted.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) ops: u64,
    pub(crate) elapsed: Duration,
    pub(crate) cpu: Option<Duration>,
    pub(crate) latency: Histogram,
}

/// Pairs a warm-up does before timing starts: connections, script caches
/// and subscriptions are settled before the first sample.
const WARM_UP_PAIRS: usize = 50;

/// How long a contender waits per attempt in scenario c before it checks
/// the clock again (it loops; nothing is lost).
const CONTEND_WAIT: Duration = Duration::from_secs(1);

/// `start + span`, or an error for a span no clock can reach.
fn deadline(start: Instant, span: Duration) -> BenchResult<Instant> {
    start
        .checked_add(span)
        .ok_or_else(|| BenchError::new(format!("a scenario span of {span:?} is too long")))
}

/// CPU used between two readings, when both exist.
fn cpu_since(before: Option<Duration>) -> Option<Duration> {
    Some(process_cpu()?.saturating_sub(before?))
}

async fn pair<H: LockHandle>(h: &mut H, what: &str) -> BenchResult<()> {
    match h.try_acquire(Duration::ZERO).await? {
        Some(held) => h.release(held).await,
        None => Err(BenchError::new(format!(
            "{what}: a lock nobody else uses was busy"
        ))),
    }
}

/// a. Sequential acquire + release of one free lock, one task.
pub(crate) async fn uncontended<C: LockClient>(
    client: &C,
    name: &str,
    span: Duration,
) -> BenchResult<Run> {
    let mut h = client.handle(name);
    for _ in 0..WARM_UP_PAIRS {
        pair(&mut h, name).await?;
    }
    let mut latency = Histogram::new();
    let cpu0 = process_cpu();
    let t0 = Instant::now();
    let deadline = deadline(t0, span)?;
    let mut ops = 0;
    loop {
        let t = Instant::now();
        if t >= deadline {
            break;
        }
        pair(&mut h, name).await?;
        latency.record(t.elapsed());
        ops += 1;
    }
    Ok(Run {
        ops,
        elapsed: t0.elapsed(),
        cpu: cpu_since(cpu0),
        latency,
    })
}

/// b. `plan.tasks` tasks, each pairing on its own lock name.
pub(crate) async fn distinct<C: LockClient>(
    client: &C,
    prefix: &str,
    plan: &Plan,
    span: Duration,
) -> BenchResult<Run> {
    let mut handles = Vec::with_capacity(plan.tasks);
    for t in 0..plan.tasks {
        let name = format!("{prefix}:{t}");
        let mut h = client.handle(&name);
        pair(&mut h, &name).await?; // warm: every name's script path once
        handles.push((name, h));
    }
    let cpu0 = process_cpu();
    let t0 = Instant::now();
    let deadline = deadline(t0, span)?;
    let tasks: Vec<_> = handles
        .into_iter()
        .map(|(name, mut h)| {
            tokio::spawn(async move {
                let mut latency = Histogram::new();
                let mut ops = 0u64;
                loop {
                    let t = Instant::now();
                    if t >= deadline {
                        break;
                    }
                    pair(&mut h, &name).await?;
                    latency.record(t.elapsed());
                    ops += 1;
                }
                Ok::<_, BenchError>((ops, latency))
            })
        })
        .collect();
    let mut run = Run {
        ops: 0,
        elapsed: Duration::ZERO,
        cpu: None,
        latency: Histogram::new(),
    };
    let mut first_error = None;
    for task in tasks {
        match task.await {
            Ok(Ok((ops, h))) => {
                run.ops += ops;
                run.latency.merge(&h);
            }
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(e) => {
                first_error.get_or_insert(BenchError::new(format!("a bench task failed: {e}")));
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    run.elapsed = t0.elapsed();
    run.cpu = cpu_since(cpu0);
    Ok(run)
}

/// A contender's log entry in scenario c.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    Waiting,
    Acquired,
    /// Logged as the release starts (at the acquisition: hold 0).
    Released,
    /// The release's reply came.
    Unlocked,
}

/// Scenario c's merged logs: when, which contender, what.
pub(crate) struct ContendedLog {
    pub(crate) start: Instant,
    pub(crate) events: Vec<(Instant, usize, Event)>,
    pub(crate) elapsed: Duration,
    pub(crate) cpu: Option<Duration>,
}

/// c. `plan.contenders` tasks on one lock: acquire (waiting), release at
/// once, think, again. Latency is the handoff: from a release to the next
/// acquisition by another contender that was already waiting when the
/// release began.
pub(crate) async fn contended<C: LockClient>(
    client: &C,
    name: &str,
    plan: &Plan,
    span: Duration,
) -> BenchResult<Run> {
    let log = contended_log(client, name, plan, span).await?;
    let (ops, latency) = handoffs(log.events);
    Ok(Run {
        ops,
        elapsed: log.elapsed,
        cpu: log.cpu,
        latency,
    })
}

/// Scenario c, returning every contender's log.
pub(crate) async fn contended_log<C: LockClient>(
    client: &C,
    name: &str,
    plan: &Plan,
    span: Duration,
) -> BenchResult<ContendedLog> {
    let think = plan.think;
    let mut handles = Vec::with_capacity(plan.contenders);
    for _ in 0..plan.contenders.max(2) {
        handles.push(client.handle(name));
    }
    if let Some(h) = handles.first_mut() {
        pair(h, name).await?;
    }
    let cpu0 = process_cpu();
    let t0 = Instant::now();
    let deadline = deadline(t0, span)?;
    let tasks: Vec<_> = handles
        .into_iter()
        .map(|mut h| {
            tokio::spawn(async move {
                // Each contender logs alone (no shared lock to contend on
                // besides the one measured); the logs are merged afterwards.
                let mut log = Vec::new();
                while Instant::now() < deadline {
                    log.push((Instant::now(), Event::Waiting));
                    let Some(held) = h.try_acquire(CONTEND_WAIT).await? else {
                        continue;
                    };
                    let now = Instant::now();
                    log.push((now, Event::Acquired));
                    log.push((now, Event::Released));
                    h.release(held).await?;
                    log.push((Instant::now(), Event::Unlocked));
                    tokio::time::sleep(think).await;
                }
                Ok::<_, BenchError>(log)
            })
        })
        .collect();
    let mut events = Vec::new();
    let mut first_error = None;
    for (c, task) in tasks.into_iter().enumerate() {
        match task.await {
            Ok(Ok(log)) => events.extend(log.into_iter().map(|(t, e)| (t, c, e))),
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(e) => {
                first_error.get_or_insert(BenchError::new(format!("a contender failed: {e}")));
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    events.sort_by_key(|e| e.0);
    Ok(ContendedLog {
        start: t0,
        events,
        elapsed: t0.elapsed(),
        cpu: cpu_since(cpu0),
    })
}

/// Acquisitions, and the handoff latencies, from the merged logs.
fn handoffs(mut events: Vec<(Instant, usize, Event)>) -> (u64, Histogram) {
    // Stable sort: a contender's Acquired stays before its Released at the
    // same instant.
    events.sort_by_key(|e| e.0);
    let mut waiting_since: Vec<Option<Instant>> = Vec::new();
    let mut last_release: Option<(Instant, usize)> = None;
    let mut latency = Histogram::new();
    let mut acquisitions = 0;
    for (t, c, kind) in events {
        if waiting_since.len() <= c {
            waiting_since.resize(c + 1, None);
        }
        match kind {
            Event::Waiting => waiting_since[c] = Some(t),
            Event::Acquired => {
                acquisitions += 1;
                if let (Some((released, by)), Some(since)) = (last_release, waiting_since[c]) {
                    if by != c && since < released {
                        latency.record(t.duration_since(released));
                    }
                }
                waiting_since[c] = None;
            }
            Event::Released => last_release = Some((t, c)),
            Event::Unlocked => {}
        }
    }
    (acquisitions, latency)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handoff_counts_only_waiters_that_waited_before_the_release() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let events = vec![
            (at(0), 0, Event::Waiting),
            (at(1), 0, Event::Acquired),
            (at(1), 0, Event::Released),
            (at(0), 1, Event::Waiting),
            (at(4), 1, Event::Acquired), // waited since 0, release at 1: 3 ms
            (at(4), 1, Event::Released),
            (at(6), 0, Event::Waiting),  // came after the release at 4
            (at(7), 0, Event::Acquired), // not a handoff
        ];
        let (acquisitions, h) = handoffs(events);
        assert_eq!(acquisitions, 3);
        assert_eq!(h.count(), 1);
        let ms = h.max().as_secs_f64() * 1e3;
        assert!((ms - 3.0).abs() < 0.01, "{ms}");
    }
}
