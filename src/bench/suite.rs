//! Every scenario for every client: the order, the time split, the merge.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::scenarios;
use super::{BenchResult, LockClient, Plan, Progress, Scenario, ScenarioResult};

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A [`LockClient`] with its type erased, so clients of different types
/// can be compared in one list. Every [`LockClient`] is one; there is
/// nothing to implement.
///
/// ```no_run
/// use keylatch_cli::bench::Contender;
/// # async fn demo() -> keylatch::LockResult<()> {
/// let locks = keylatch::Locks::connect("redis://127.0.0.1:6379").await?;
/// let clients: Vec<&dyn Contender> = vec![&locks];
/// assert_eq!(clients[0].name(), "keylatch");
/// # Ok(()) }
/// ```
pub trait Contender: Send + Sync {
    /// The client's label.
    fn name(&self) -> &str;

    /// Runs `scenario` for `span` on lock names under `prefix`.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use keylatch_cli::bench::{Contender, Plan, Scenario};
    /// # async fn demo(locks: keylatch::Locks) -> keylatch_cli::bench::BenchResult<()> {
    /// let plan = Plan::new(Duration::from_secs(1), 8);
    /// let r = locks.run(Scenario::Uncontended, &plan, "try".into(), Duration::from_millis(200)).await?;
    /// println!("{} pairs, p50 {:?}", r.ops, r.latency.percentile(50.0));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The client failed, or a scenario task panicked.
    fn run<'a>(
        &'a self,
        scenario: Scenario,
        plan: &'a Plan,
        prefix: String,
        span: Duration,
    ) -> BoxFuture<'a, BenchResult<ScenarioResult>>;
}

impl<C: LockClient> Contender for C {
    fn name(&self) -> &str {
        self.label()
    }

    fn run<'a>(
        &'a self,
        scenario: Scenario,
        plan: &'a Plan,
        prefix: String,
        span: Duration,
    ) -> BoxFuture<'a, BenchResult<ScenarioResult>> {
        Box::pin(async move {
            let run = match scenario {
                Scenario::Uncontended => scenarios::uncontended(self, &prefix, span).await,
                Scenario::Distinct => scenarios::distinct(self, &prefix, plan, span).await,
                Scenario::Contended => scenarios::contended(self, &prefix, plan, span).await,
            }?;
            Ok(ScenarioResult {
                scenario,
                client: self.label().to_owned(),
                ops: run.ops,
                elapsed: run.elapsed,
                cpu: run.cpu,
                latency: run.latency,
            })
        })
    }
}

/// Runs every scenario for every client, in scenario order; returns one
/// result per (scenario, client), in that order.
///
/// Time: each scenario gets [`Plan::budget`], shared equally by the
/// clients. With more than one client each client's share runs as two
/// halves, in order `A B C` then `C B A`, so drift of the machine (another
/// job, thermal limits, a growing server) hits every client alike; the
/// halves are merged. Lock names carry this process's id, the time, the
/// client and the scenario, so runs and clients never share a key.
///
/// Call it inside a task spawned on a multi-thread runtime (the scenarios
/// spawn tasks; a future driven by `block_on` pays a cross-thread wake-up
/// per reply).
///
/// ```no_run
/// use std::time::Duration;
/// use keylatch_cli::bench::{run_suite, Plan, Progress};
/// # async fn demo(locks: keylatch::Locks) -> keylatch_cli::bench::BenchResult<()> {
/// let plan = Plan::new(Duration::from_secs(1), 8);
/// let results = run_suite(&[&locks], &plan, &Progress::new(plan.duration)).await?;
/// assert_eq!(results.len(), 3);
/// # Ok(()) }
/// ```
///
/// # Errors
/// The first client failure (one line); the run stops there.
///
/// # Cancel safety
/// Not cancel safe in the sense of leaving nothing behind: dropped mid-run,
/// the scenario tasks already spawned run to their time budget and their
/// holds end by release or lease; the lock names (under
/// `keylatch:bench:<pid>:…`) are never reused.
pub async fn run_suite(
    clients: &[&dyn Contender],
    plan: &Plan,
    progress: &Progress,
) -> BenchResult<Vec<ScenarioResult>> {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let base = format!("keylatch:bench:{}:{stamp}", std::process::id());
    let halves: u32 = if clients.len() > 1 { 2 } else { 1 };
    let mut results = Vec::new();
    for scenario in Scenario::ALL {
        let span = plan.budget(scenario) / (clients.len().max(1) as u32 * halves);
        let mut merged: Vec<Option<ScenarioResult>> = clients.iter().map(|_| None).collect();
        for half in 0..halves {
            let order: Vec<usize> = if half == 0 {
                (0..clients.len()).collect()
            } else {
                (0..clients.len()).rev().collect()
            };
            for i in order {
                let client = clients[i];
                progress.stage(&format!("{} — {}", scenario.label(), client.name()));
                let prefix = format!("{base}:{}:{}:{half}", client.name(), scenario.slug());
                let run = client.run(scenario, plan, prefix, span).await?;
                match &mut merged[i] {
                    Some(m) => m.absorb(&run),
                    slot => *slot = Some(run),
                }
            }
        }
        results.extend(merged.into_iter().flatten());
    }
    progress.done();
    Ok(results)
}
