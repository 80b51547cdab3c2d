//! The scale mode (`keylatch bench --holds N`, and `benches/`' `scale`):
//! one client holds N watchdog locks, idles some renewal rounds, releases
//! them, and Redisson's `LockTask` renewal script renews as many locks on
//! Redisson's layout once, so the server's cost per renewed hold is
//! compared in one run.
//!
//! It runs on a server that may be in use: every key it writes is under a
//! prefix of its own run (`keylatch-bench-scale:<run>`), and it deletes
//! them all (the locks, their fencing counters, Redisson's layout) before
//! it returns; nothing is flushed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keylatch::{Client, Cmd, Commands, LockGuard, Locks, Pipeline};

use super::client::BenchError;
use super::cpu::{process_cpu, resident_bytes};
use super::scale_redisson::{redisson_acquire, redisson_round};

/// Keys per cleanup pipeline.
pub(super) const CLEANUP_BATCH: usize = 1000;

/// What a scale run does.
///
/// ```
/// let o = keylatch_cli::bench::ScaleOptions::default();
/// assert_eq!(o.holds, 100_000);
/// assert_eq!(o.watchdog, std::time::Duration::from_secs(3));
/// ```
#[derive(Clone, Debug)]
pub struct ScaleOptions {
    /// Watchdog locks to hold.
    pub holds: usize,
    /// Acquires (and releases) in flight at a time.
    pub inflight: usize,
    /// The watchdog lease: a renewal round runs every third of it.
    pub watchdog: Duration,
    /// Renewal rounds to idle through while holding.
    pub rounds: u32,
}

impl Default for ScaleOptions {
    fn default() -> Self {
        Self {
            holds: 100_000,
            inflight: 256,
            watchdog: Duration::from_secs(3),
            rounds: 3,
        }
    }
}

/// What a scale run measured.
///
/// ```
/// let r = keylatch_cli::bench::ScaleReport::default();
/// assert_eq!(r.server_us_per_hold(), None);
/// assert!(r.to_string().contains("acquire"));
/// ```
#[derive(Clone, Debug, Default)]
pub struct ScaleReport {
    /// Locks held at the end of the acquire phase.
    pub held: usize,
    /// Acquires that failed or found the lock taken.
    pub failed: usize,
    /// The first failure's message.
    pub first_error: Option<String>,
    /// How long acquiring took.
    pub acquire: Duration,
    /// Resident memory per hold while held, and what stayed after the
    /// release (bytes over the start; `None` without `/proc`).
    pub bytes_per_hold: Option<(u64, u64)>,
    /// The server's CPU time while acquiring (standalone only, as
    /// `server_cpu`): the acquires' scripts, and the renewal rounds and
    /// tracked reads that ran meanwhile.
    pub acquire_server_cpu: Option<Duration>,
    /// Redisson's acquire (`tryLockInnerAsync`, one call per lock) of as
    /// many new locks: server CPU per acquire, in µs (standalone only).
    pub redisson_acquire_us: Option<f64>,
    /// Renewal rounds done while idle, and the time idled.
    pub rounds: u64,
    /// The idle window's length.
    pub idle: Duration,
    /// Renewal calls (script calls) made while idle.
    pub calls: u64,
    /// Holds those calls renewed (from [`Locks::stats`]'s
    /// `renewed_holds`); zero when not counted, and then `held × rounds`
    /// stands in for it.
    ///
    /// [`Locks::stats`]: keylatch::Locks::stats
    pub renewed: u64,
    /// The server's CPU time while idle (standalone only: in a cluster one
    /// `INFO` answers for one node).
    pub server_cpu: Option<Duration>,
    /// This process's CPU time while idle.
    pub client_cpu: Option<Duration>,
    /// Holds lost while idle.
    pub lost: usize,
    /// Losses by reason, over the whole run (from [`Locks::stats`]): a
    /// key gone (a failover, an outside delete) reads apart from a lease
    /// that ran out before a renewal landed.
    ///
    /// [`Locks::stats`]: keylatch::Locks::stats
    pub losses: Vec<(keylatch::LossReason, u64)>,
    /// Renewal calls that failed or answered something unreadable, over
    /// the whole run.
    pub renewal_failures: u64,
    /// Redisson's renewal: server CPU per renewed hold, in µs (standalone
    /// only, as `server_cpu`).
    pub redisson_us: Option<f64>,
    /// How long the last renewal round took (its calls' planning to its
    /// last reply), the longest over the whole run (acquiring included),
    /// and the interval rounds start at (a third of the watchdog): a round
    /// that takes longer than its interval falls behind, and its last
    /// holds expire.
    pub round_took: Option<(Duration, Duration, Duration)>,
}

impl ScaleReport {
    /// Acquires per second.
    ///
    /// ```
    /// let r = keylatch_cli::bench::ScaleReport { held: 10, acquire: std::time::Duration::from_secs(2), ..Default::default() };
    /// assert_eq!(r.acquire_rate(), 5.0);
    /// ```
    pub fn acquire_rate(&self) -> f64 {
        self.held as f64 / self.acquire.as_secs_f64().max(1e-9)
    }

    /// The server's CPU per renewed hold while idle, in µs: over the holds
    /// the engine counted renewed in the window (a round that overran its
    /// interval renews a different number than `held × rounds`).
    ///
    /// ```
    /// use std::time::Duration;
    /// let r = keylatch_cli::bench::ScaleReport {
    ///     held: 1000, rounds: 2, server_cpu: Some(Duration::from_millis(8)), ..Default::default()
    /// };
    /// assert_eq!(r.server_us_per_hold(), Some(4.0));
    /// let counted = keylatch_cli::bench::ScaleReport { renewed: 1600, ..r };
    /// assert_eq!(counted.server_us_per_hold(), Some(5.0));
    /// ```
    pub fn server_us_per_hold(&self) -> Option<f64> {
        self.server_cpu.and_then(|c| self.per_renewed(c))
    }

    /// `cpu` per renewed hold, in µs (`None` when none was renewed).
    fn per_renewed(&self, cpu: Duration) -> Option<f64> {
        let renewed = if self.renewed > 0 {
            self.renewed as f64
        } else {
            self.held as f64 * self.rounds as f64
        };
        (renewed > 0.0).then(|| cpu.as_secs_f64() * 1e6 / renewed)
    }
}

impl ScaleReport {
    /// The acquire phase's lines: the rate, then the server's CPU per
    /// acquire beside Redisson's.
    fn fmt_acquire(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "acquire: {} held, {} failed, in {:.2} s = {:.0} holds/s",
            self.held,
            self.failed,
            self.acquire.as_secs_f64(),
            self.acquire_rate()
        )?;
        if let Some(e) = &self.first_error {
            write!(f, " (first failure: {e})")?;
        }
        writeln!(f)?;
        if let Some(c) = self.acquire_server_cpu {
            let per = c.as_secs_f64() * 1e6 / self.held.max(1) as f64;
            write!(
                f,
                "server CPU while acquiring: {per:.2} µs per acquire ({:.1} % of a core; renewal rounds meanwhile included)",
                c.as_secs_f64() * 100.0 / self.acquire.as_secs_f64().max(1e-9)
            )?;
            if let Some(r) = self.redisson_acquire_us {
                write!(
                    f,
                    "; Redisson's tryLock script on as many new locks {r:.2} µs = {:.2}×",
                    per / r
                )?;
            }
            writeln!(f)?;
        }
        Ok(())
    }

    /// The idle rounds' server CPU line, beside Redisson's renewal.
    fn fmt_renewal_server(&self, f: &mut std::fmt::Formatter<'_>, rounds: f64) -> std::fmt::Result {
        match (self.server_cpu, self.server_us_per_hold()) {
            (Some(c), Some(per)) => {
                write!(
                    f,
                    "server CPU: {:.1} ms per round = {per:.2} µs per renewed hold ({:.1} % of a core)",
                    c.as_secs_f64() * 1e3 / rounds,
                    c.as_secs_f64() * 100.0 / self.idle.as_secs_f64().max(1e-9)
                )?;
                if let Some(r) = self.redisson_us {
                    write!(
                        f,
                        "; Redisson's LockTask renewal {r:.2} µs = {:.2}×",
                        per / r
                    )?;
                }
                writeln!(f)
            }
            _ => writeln!(
                f,
                "server CPU: not measured (a cluster: INFO answers for one node)"
            ),
        }
    }
}

impl std::fmt::Display for ScaleReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.fmt_acquire(f)?;
        if let Some((held, after)) = self.bytes_per_hold {
            writeln!(
                f,
                "client memory: {held} B per hold while held, {after} B per former hold after the release"
            )?;
        }
        let rounds = self.rounds.max(1) as f64;
        write!(
            f,
            "idle: {} rounds in {:.1} s, {} renewal calls ({:.0} per round), {} holds renewed, {} lost",
            self.rounds,
            self.idle.as_secs_f64(),
            self.calls,
            self.calls as f64 / rounds,
            self.renewed,
            self.lost
        )?;
        if !self.losses.is_empty() {
            let by: Vec<String> = self
                .losses
                .iter()
                .map(|(why, n)| format!("{why:?} {n}"))
                .collect();
            write!(f, " (by reason: {})", by.join(", "))?;
        }
        if self.renewal_failures > 0 {
            write!(f, ", {} renewal calls failed", self.renewal_failures)?;
        }
        if let Some(c) = self.client_cpu {
            write!(
                f,
                ", client CPU {:.1} ms per round",
                c.as_secs_f64() * 1e3 / rounds
            )?;
            if let Some(per) = self.per_renewed(c) {
                write!(f, " = {per:.2} µs per renewed hold")?;
            }
        }
        writeln!(f)?;
        if let Some((last, longest, every)) = self.round_took {
            writeln!(
                f,
                "a round took {:.0} ms (the last), {:.0} ms at most, of its {:.0} ms interval",
                last.as_secs_f64() * 1e3,
                longest.as_secs_f64() * 1e3,
                every.as_secs_f64() * 1e3
            )?;
        }
        self.fmt_renewal_server(f, rounds)
    }
}

/// Runs the scale mode through `locks` (built as the caller's users build
/// theirs, with `opts.watchdog` as its watchdog lease), with `admin` for
/// `INFO` and cleanup (it may be `locks.client()`).
///
/// ```no_run
/// use keylatch_cli::bench::{run_scale, ScaleOptions};
/// # async fn demo() -> Result<(), keylatch_cli::bench::BenchError> {
/// let opts = ScaleOptions { holds: 10_000, ..ScaleOptions::default() };
/// let config = keylatch::LocksConfig::default().watchdog_timeout(opts.watchdog);
/// let url = keylatch::ClientConfig::from_url("redis://127.0.0.1:6379")?;
/// let locks = keylatch::Locks::connect_with(url, config).await?;
/// let report = run_scale(&locks, locks.client(), &opts).await?;
/// print!("{report}");
/// # Ok(()) }
/// ```
///
/// # Errors
/// A server call outside the measured acquires failed (`INFO`, loading
/// Redisson's script, the layout or the cleanup). Failed acquires are
/// counted in the report, not returned.
///
/// # Cancel safety
/// Not cancel safe: dropped midway, the run's keys stay on the server
/// (under its own prefix; the locks expire with their lease, the counters
/// with their idle expiry, Redisson's layout with its lease).
pub async fn run_scale(
    locks: &Locks,
    admin: &Client,
    opts: &ScaleOptions,
) -> Result<ScaleReport, BenchError> {
    let prefix = format!("keylatch-bench-scale:{}", run_id());
    let standalone = !admin.is_cluster();
    let mut report = ScaleReport::default();
    let rss0 = resident_bytes();

    // 1. Acquire.
    let a0 = server_cpu(admin, standalone).await?;
    let t0 = Instant::now();
    let (guards, failed, first_error) = acquire_all(locks, &prefix, opts).await;
    report.acquire = t0.elapsed();
    let a1 = server_cpu(admin, standalone).await?;
    report.acquire_server_cpu = a1.zip(a0).map(|(b, a)| b.saturating_sub(a));
    report.held = guards.len();
    report.failed = failed;
    report.first_error = first_error;
    let rss1 = resident_bytes();

    // 2. Idle: from just after a round, so the window holds whole rounds.
    let r = locks.renewal_rounds();
    let give_up = Instant::now() + opts.watchdog * 4;
    while locks.renewal_rounds() == r && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (c0, r0) = (locks.renewal_calls(), locks.renewal_rounds());
    let n0 = locks.stats().renewed_holds;
    let s0 = server_cpu(admin, standalone).await?;
    let p0 = process_cpu();
    let i0 = Instant::now();
    tokio::time::sleep(opts.watchdog / 3 * opts.rounds).await;
    let s1 = server_cpu(admin, standalone).await?;
    report.client_cpu = process_cpu().zip(p0).map(|(b, a)| b.saturating_sub(a));
    report.idle = i0.elapsed();
    report.server_cpu = s1.zip(s0).map(|(b, a)| b.saturating_sub(a));
    report.calls = locks.renewal_calls() - c0;
    report.renewed = locks.stats().renewed_holds - n0;
    report.rounds = locks.renewal_rounds() - r0;
    report.lost = guards.iter().filter(|g| g.is_lost()).count();
    let stats = locks.stats();
    report.losses = stats.losses.into_iter().filter(|l| l.1 > 0).collect();
    report.renewal_failures = stats.renewal_failures;
    report.round_took = Some((
        stats.last_renewal_round,
        stats.longest_renewal_round,
        opts.watchdog / 3,
    ));

    // 3. Release, then what stays of the process's memory.
    let n = guards.len().max(1) as u64;
    release_all(guards, opts.inflight).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss2 = resident_bytes();
    report.bytes_per_hold = match (rss0, rss1, rss2) {
        (Some(a), Some(b), Some(c)) => Some((b.saturating_sub(a) / n, c.saturating_sub(a) / n)),
        _ => None,
    };
    let counters = (0..opts.holds).map(|i| format!("redisson_lock_token:{{{prefix}:{i}}}"));
    delete(admin, counters).await?;

    // Redisson's acquire and renewal on as many locks, on its layout.
    if standalone {
        report.redisson_acquire_us = Some(redisson_acquire(admin, &prefix, opts).await?);
        report.redisson_us = Some(redisson_round(admin, &prefix, opts).await?);
    }
    Ok(report)
}

/// Acquires `opts.holds` locks, `opts.inflight` at a time: (guards,
/// failures, the first failure's message).
async fn acquire_all(
    locks: &Locks,
    prefix: &str,
    opts: &ScaleOptions,
) -> (Vec<LockGuard>, usize, Option<String>) {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..opts.inflight.max(1) {
        let (locks, next, prefix, holds) = (
            locks.clone(),
            Arc::clone(&next),
            prefix.to_owned(),
            opts.holds,
        );
        tasks.push(tokio::spawn(async move {
            let (mut got, mut failed, mut first) = (Vec::new(), 0usize, None);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= holds {
                    break (got, failed, first);
                }
                match locks
                    .lock(&format!("{prefix}:{i}"))
                    .try_acquire_now(None)
                    .await
                {
                    Ok(Some(g)) => got.push(g),
                    Ok(None) => {
                        failed += 1;
                        first.get_or_insert_with(|| "the lock was taken".to_owned());
                    }
                    Err(e) => {
                        failed += 1;
                        first.get_or_insert_with(|| e.to_string());
                    }
                }
            }
        }));
    }
    let (mut guards, mut failed, mut first) = (Vec::with_capacity(opts.holds), 0, None);
    for t in tasks {
        match t.await {
            Ok((g, f, e)) => {
                guards.extend(g);
                failed += f;
                if first.is_none() {
                    first = e;
                }
            }
            Err(e) => {
                first.get_or_insert_with(|| format!("an acquire task failed: {e}"));
            }
        }
    }
    (guards, failed, first)
}

/// Unlocks every guard, `inflight` at a time (a failed unlock leaves the
/// lock to its lease).
async fn release_all(guards: Vec<LockGuard>, inflight: usize) {
    let queue = Arc::new(Mutex::new(guards));
    let mut tasks = Vec::new();
    for _ in 0..inflight.max(1) {
        let queue = Arc::clone(&queue);
        tasks.push(tokio::spawn(async move {
            loop {
                let g = match queue.lock() {
                    Ok(mut q) => q.pop(),
                    Err(_) => None,
                };
                match g {
                    Some(g) => {
                        let _ = g.unlock().await;
                    }
                    None => break,
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// Deletes `keys`, in pipelines.
pub(super) async fn delete(
    admin: &Client,
    keys: impl Iterator<Item = String>,
) -> Result<(), BenchError> {
    let keys: Vec<String> = keys.collect();
    for chunk in keys.chunks(CLEANUP_BATCH) {
        let p: Pipeline = chunk
            .iter()
            .map(|k| Cmd::new("DEL").key(k.as_str()))
            .collect();
        admin
            .pipeline(p)
            .await
            .map_err(|e| BenchError::new(format!("cleanup: {e}")))?;
    }
    Ok(())
}

/// A prefix no other run shares: this process and the clock's nanoseconds.
fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{:x}{nanos:08x}", std::process::id())
}

/// The server's CPU time so far (`INFO cpu`: used_cpu_sys + used_cpu_user);
/// `None` in a cluster, where one `INFO` answers for one node.
pub(super) async fn server_cpu(
    admin: &Client,
    standalone: bool,
) -> Result<Option<Duration>, BenchError> {
    if !standalone {
        return Ok(None);
    }
    let info = admin
        .info(Some("cpu"))
        .await
        .map_err(|e| BenchError::new(format!("INFO cpu: {e}")))?;
    let field = |name: &str| -> f64 {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    Ok(Some(Duration::from_secs_f64(
        field("used_cpu_sys:") + field("used_cpu_user:"),
    )))
}
