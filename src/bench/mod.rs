//! `keylatch bench`'s measuring kit, public so the comparison binary in
//! `benches/` (redis-rs, rslock) runs the very same scenarios and reports
//! through the very same code as the CLI.
//!
//! Layout:
//! - [`Histogram`] (`histogram.rs`): log-linear latency histogram, ~0.8 %
//!   precision from 1 ns to 60 s; percentiles, merge, CDF buckets.
//! - [`LockClient`] / [`LockHandle`] (`client.rs`): what a lock client must
//!   offer (acquire with a wait, release); implemented here for [`Locks`](keylatch::Locks)
//!   (`keylatch_client.rs`) and in `benches/src/bin/compare.rs` for the others.
//! - `scenarios.rs`: the three scenarios, generic over [`LockClient`].
//! - [`run_suite`] (`suite.rs`): every scenario for every client, clients
//!   alternating, the duration split as [`Plan`] says.
//! - [`table`], [`comparison`] (`report.rs`): aligned text tables.
//! - [`svg`] (`plot.rs`): a hand-written SVG of latency by percentile.
//! - [`contended_timeline`], [`timeline_svg`] (`timeline.rs`): who held the
//!   lock when in a contended run, and who waited meanwhile.
//! - [`Progress`] (`progress.rs`): the progress line on stderr.
//! - [`process_cpu`], [`resident_bytes`] (`cpu.rs`): this process's CPU
//!   time and resident memory from `/proc`.
//! - [`run_scale`] (`scale.rs`): the scale mode (`keylatch bench --holds
//!   N`): N watchdog holds, renewal rounds idle, Redisson's renewal beside.
//!
//! ```no_run
//! use std::time::Duration;
//! use keylatch_cli::bench::{run_suite, table, Plan, Progress};
//! # async fn demo() -> Result<(), keylatch_cli::bench::BenchError> {
//! let locks = keylatch::Locks::connect("redis://127.0.0.1:6379").await?;
//! let plan = Plan::new(Duration::from_secs(3), 64);
//! let progress = Progress::new(plan.duration);
//! let results = run_suite(&[&locks], &plan, &progress).await?;
//! print!("{}", table(&results));
//! # Ok(()) }
//! ```

mod client;
mod cpu;
mod histogram;
mod keylatch_client;
mod plot;
mod progress;
mod report;
mod scale;
mod scale_redisson;
mod scenarios;
mod suite;
mod timeline;

use std::time::Duration;

pub use client::{BenchError, BenchResult, LockClient, LockHandle};
pub use cpu::{process_cpu, resident_bytes};
pub use histogram::{Bucket, Histogram};
pub use plot::svg;
pub use progress::Progress;
pub use report::{comparison, format_duration, table, ScenarioResult};
pub use scale::{run_scale, ScaleOptions, ScaleReport};
pub use suite::{run_suite, Contender};
pub use timeline::{contended_timeline, timeline_svg, Lane, Timeline};

/// The three scenarios, in the order they run.
///
/// ```
/// use keylatch_cli::bench::Scenario;
/// assert_eq!(Scenario::ALL.len(), 3);
/// assert!(Scenario::Uncontended.label().starts_with("a."));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scenario {
    /// a. One task, acquire + release of one free lock, again and again:
    /// the latency of a pair.
    Uncontended,
    /// b. [`Plan::tasks`] tasks, each on its own lock name, over one client:
    /// pairs per second (and their latency under that load).
    Distinct,
    /// c. [`Plan::contenders`] tasks on one lock, hold 0, think
    /// [`Plan::think`]: acquisitions per second and the handoff latency
    /// (a release → another, already waiting contender holds the lock).
    Contended,
}

impl Scenario {
    /// Every scenario, in running order.
    ///
    /// ```
    /// assert_eq!(keylatch_cli::bench::Scenario::ALL[0], keylatch_cli::bench::Scenario::Uncontended);
    /// ```
    pub const ALL: [Scenario; 3] = [
        Scenario::Uncontended,
        Scenario::Distinct,
        Scenario::Contended,
    ];

    /// The name tables and plots use.
    ///
    /// ```
    /// assert_eq!(keylatch_cli::bench::Scenario::Contended.label(), "c. contended handoff");
    /// ```
    pub fn label(self) -> &'static str {
        match self {
            Scenario::Uncontended => "a. uncontended pair",
            Scenario::Distinct => "b. distinct locks",
            Scenario::Contended => "c. contended handoff",
        }
    }

    /// A short name for lock keys.
    fn slug(self) -> &'static str {
        match self {
            Scenario::Uncontended => "seq",
            Scenario::Distinct => "distinct",
            Scenario::Contended => "contended",
        }
    }

    /// The fraction of the total duration this scenario gets: 20 % for the
    /// sequential latency scenario (thousands of samples even on a slow
    /// machine), 40 % each for the two throughput scenarios, whose rates
    /// need the longer window to settle.
    ///
    /// ```
    /// use keylatch_cli::bench::Scenario;
    /// let sum: f64 = Scenario::ALL.iter().map(|s| s.share()).sum();
    /// assert!((sum - 1.0).abs() < 1e-9);
    /// ```
    pub fn share(self) -> f64 {
        match self {
            Scenario::Uncontended => 0.2,
            Scenario::Distinct | Scenario::Contended => 0.4,
        }
    }
}

/// How long and how wide to run.
///
/// ```
/// use std::time::Duration;
/// use keylatch_cli::bench::{Plan, Scenario};
/// let plan = Plan::new(Duration::from_secs(10), 64);
/// assert_eq!(plan.budget(Scenario::Uncontended), Duration::from_secs(2));
/// assert_eq!((plan.contenders, plan.think), (8, Duration::from_millis(1)));
/// ```
#[derive(Clone, Debug)]
pub struct Plan {
    /// The whole run, split among the scenarios by [`Scenario::share`] and
    /// within a scenario equally among the clients.
    pub duration: Duration,
    /// Tasks in scenario b.
    pub tasks: usize,
    /// Contenders in scenario c.
    pub contenders: usize,
    /// Pause after each release in scenario c, so a releaser does not
    /// simply take the lock back.
    pub think: Duration,
}

impl Plan {
    /// A plan with `tasks` tasks for scenario b, 8 contenders and 1 ms of
    /// think time for scenario c (at least one task).
    ///
    /// ```
    /// let plan = keylatch_cli::bench::Plan::new(std::time::Duration::from_secs(1), 0);
    /// assert_eq!(plan.tasks, 1);
    /// ```
    pub fn new(duration: Duration, tasks: usize) -> Self {
        Self {
            duration,
            tasks: tasks.max(1),
            contenders: 8,
            think: Duration::from_millis(1),
        }
    }

    /// The time `scenario` gets in total (shared by the clients compared).
    ///
    /// ```
    /// use std::time::Duration;
    /// use keylatch_cli::bench::{Plan, Scenario};
    /// let plan = Plan::new(Duration::from_secs(5), 8);
    /// assert_eq!(plan.budget(Scenario::Distinct), Duration::from_secs(2));
    /// ```
    pub fn budget(&self, scenario: Scenario) -> Duration {
        self.duration.mul_f64(scenario.share())
    }
}

/// Parses `250ms`, `10s`, `1.5s`, `2m`, `1h`; a bare number means seconds.
/// `None` for anything else (negative, empty, unknown unit, too large).
///
/// ```
/// use std::time::Duration;
/// use keylatch_cli::bench::parse_duration;
/// assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
/// assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
/// assert_eq!(parse_duration("soon"), None);
/// ```
pub fn parse_duration(text: &str) -> Option<Duration> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: f64 = number.parse().ok()?;
    let scale = match unit {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(n * scale).ok()
}
