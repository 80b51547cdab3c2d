//! Results and their text tables.

use std::fmt::Write as _;
use std::time::Duration;

use super::{Histogram, Scenario};

/// What one client did in one scenario (both halves merged).
///
/// ```
/// use std::time::Duration;
/// use keylatch_cli::bench::{Histogram, Scenario, ScenarioResult};
/// let r = ScenarioResult {
///     scenario: Scenario::Distinct,
///     client: "keylatch".into(),
///     ops: 5000,
///     elapsed: Duration::from_secs(2),
///     cpu: Some(Duration::from_millis(500)),
///     latency: Histogram::new(),
/// };
/// assert_eq!(r.rate(), 2500.0);
/// assert_eq!(r.cpu_per_op(), Some(Duration::from_micros(100)));
/// ```
#[derive(Clone, Debug)]
pub struct ScenarioResult {
    /// Which scenario.
    pub scenario: Scenario,
    /// The client's label.
    pub client: String,
    /// Operations completed: pairs in a and b, acquisitions in c.
    pub ops: u64,
    /// Wall time the operations took.
    pub elapsed: Duration,
    /// Process CPU time over that span (`None` without `/proc`).
    pub cpu: Option<Duration>,
    /// Latencies: a pair in a and b, a handoff in c.
    pub latency: Histogram,
}

impl ScenarioResult {
    /// Operations per second.
    ///
    /// ```
    /// use std::time::Duration;
    /// use keylatch_cli::bench::{Histogram, Scenario, ScenarioResult};
    /// let r = ScenarioResult {
    ///     scenario: Scenario::Uncontended, client: "k".into(), ops: 300,
    ///     elapsed: Duration::from_millis(1500), cpu: None, latency: Histogram::new(),
    /// };
    /// assert_eq!(r.rate(), 200.0);
    /// // No time elapsed: 0, not a division by zero.
    /// assert_eq!(ScenarioResult { elapsed: Duration::ZERO, ..r }.rate(), 0.0);
    /// ```
    pub fn rate(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.ops as f64 / s
        } else {
            0.0
        }
    }

    /// Process CPU per operation (`None` without a CPU reading or operations).
    ///
    /// ```
    /// use std::time::Duration;
    /// use keylatch_cli::bench::{Histogram, Scenario, ScenarioResult};
    /// let r = ScenarioResult {
    ///     scenario: Scenario::Contended, client: "k".into(), ops: 4,
    ///     elapsed: Duration::from_secs(1), cpu: Some(Duration::from_millis(2)),
    ///     latency: Histogram::new(),
    /// };
    /// assert_eq!(r.cpu_per_op(), Some(Duration::from_micros(500)));
    /// // No CPU reading (no `/proc`), or no operations: nothing per operation.
    /// assert_eq!(ScenarioResult { cpu: None, ..r.clone() }.cpu_per_op(), None);
    /// assert_eq!(ScenarioResult { ops: 0, ..r }.cpu_per_op(), None);
    /// ```
    pub fn cpu_per_op(&self) -> Option<Duration> {
        let ops = u32::try_from(self.ops).ok().filter(|n| *n > 0)?;
        Some(self.cpu? / ops)
    }

    /// Adds another run of the same scenario and client (the second half).
    ///
    /// ```
    /// use std::time::Duration;
    /// use keylatch_cli::bench::{Histogram, Scenario, ScenarioResult};
    /// let half = ScenarioResult {
    ///     scenario: Scenario::Uncontended, client: "k".into(), ops: 10,
    ///     elapsed: Duration::from_secs(1), cpu: None, latency: Histogram::new(),
    /// };
    /// let mut whole = half.clone();
    /// whole.absorb(&half);
    /// assert_eq!((whole.ops, whole.elapsed), (20, Duration::from_secs(2)));
    /// ```
    pub fn absorb(&mut self, other: &ScenarioResult) {
        self.ops += other.ops;
        self.elapsed += other.elapsed;
        self.cpu = self.cpu.zip(other.cpu).map(|(a, b)| a + b);
        self.latency.merge(&other.latency);
    }

    /// What `ops` counts, for table headers.
    fn unit(&self) -> &'static str {
        match self.scenario {
            Scenario::Uncontended | Scenario::Distinct => "pairs",
            Scenario::Contended => "acq",
        }
    }
}

/// `850ns`, `45.2µs`, `1.23ms`, `2.50s`: three significant digits or so.
///
/// ```
/// use std::time::Duration;
/// use keylatch_cli::bench::format_duration;
/// assert_eq!(format_duration(Duration::from_nanos(45_200)), "45.2µs");
/// assert_eq!(format_duration(Duration::from_micros(1234)), "1.23ms");
/// assert_eq!(format_duration(Duration::from_millis(2500)), "2.50s");
/// ```
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_secs_f64() * 1e9;
    if ns < 1e3 {
        format!("{ns:.0}ns")
    } else if ns < 1e6 {
        format!("{:.1}µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2}ms", ns / 1e6)
    } else {
        format!("{:.2}s", ns / 1e9)
    }
}

fn rate_text(r: f64) -> String {
    format!("{r:.0}/s")
}

/// What a scenario's latency column means.
fn scenario_note(s: Scenario) -> &'static str {
    match s {
        Scenario::Uncontended => "one task, one free lock; latency = acquire + release",
        Scenario::Distinct => {
            "tasks on distinct locks over one client; latency = acquire + release under load"
        }
        Scenario::Contended => {
            "contenders on one lock, hold 0, think time after release; \
             latency = handoff (release → a waiting contender holds it)"
        }
    }
}

/// Renders `rows` as an aligned table, one line per cell of `rows[0]`'s
/// width (the header), right-aligned except the first `left` columns.
fn render(rows: &[Vec<String>], left: usize) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let w = widths[c];
            if c > 0 {
                line.push_str("  ");
            }
            if c < left {
                let _ = write!(line, "{cell:<w$}");
            } else {
                let _ = write!(line, "{cell:>w$}");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// One line per result: operations, rate, latency percentiles, CPU per
/// operation, with a note per scenario saying what was measured.
///
/// ```
/// use std::time::Duration;
/// use keylatch_cli::bench::{table, Histogram, Scenario, ScenarioResult};
/// let mut latency = Histogram::new();
/// latency.record(Duration::from_micros(80));
/// let r = ScenarioResult {
///     scenario: Scenario::Uncontended, client: "keylatch".into(), ops: 1,
///     elapsed: Duration::from_millis(1), cpu: None, latency,
/// };
/// let text = table(&[r]);
/// assert!(text.contains("a. uncontended pair") && text.contains("80.0µs"));
/// ```
pub fn table(results: &[ScenarioResult]) -> String {
    let mut rows = vec![[
        "scenario", "client", "ops", "ops/s", "p50", "p90", "p99", "max", "CPU/op",
    ]
    .map(String::from)
    .to_vec()];
    for r in results {
        let h = &r.latency;
        rows.push(vec![
            r.scenario.label().to_owned(),
            r.client.clone(),
            format!("{} {}", r.ops, r.unit()),
            rate_text(r.rate()),
            format_duration(h.percentile(50.0)),
            format_duration(h.percentile(90.0)),
            format_duration(h.percentile(99.0)),
            format_duration(h.max()),
            r.cpu_per_op().map_or("-".to_owned(), format_duration),
        ]);
    }
    let mut out = render(&rows, 2);
    let mut seen = Vec::new();
    for r in results {
        if !seen.contains(&r.scenario) {
            seen.push(r.scenario);
            let _ = writeln!(
                out,
                "  {}: {}",
                r.scenario.label(),
                scenario_note(r.scenario)
            );
        }
    }
    out
}

/// One metric per line and one column per client, then a ratio column
/// `first/other` for every other client (the first client is the one
/// compared: keylatch). Each line says whether lower or higher is better.
///
/// ```
/// use std::time::Duration;
/// use keylatch_cli::bench::{comparison, Histogram, Scenario, ScenarioResult};
/// let r = |client: &str, ops| ScenarioResult {
///     scenario: Scenario::Distinct, client: client.into(), ops,
///     elapsed: Duration::from_secs(1), cpu: None, latency: Histogram::new(),
/// };
/// let text = comparison(&[r("keylatch", 3000), r("other", 1000)]);
/// assert!(text.contains("keylatch/other"));
/// assert!(text.contains("3.00"));
/// ```
pub fn comparison(results: &[ScenarioResult]) -> String {
    let mut clients: Vec<&str> = Vec::new();
    for r in results {
        if !clients.contains(&r.client.as_str()) {
            clients.push(&r.client);
        }
    }
    let Some((&first, others)) = clients.split_first() else {
        return String::new();
    };
    let mut header = vec!["metric (better)".to_owned()];
    header.extend(clients.iter().map(|c| (*c).to_owned()));
    header.extend(others.iter().map(|o| format!("{first}/{o}")));
    let mut rows = vec![header];
    for (scenario, label, value) in METRICS {
        let of = |client: &str| {
            results
                .iter()
                .find(|r| r.scenario == scenario && r.client == client)
                .and_then(value)
        };
        if clients.iter().all(|c| of(c).is_none()) {
            continue;
        }
        let mut row = vec![label.to_owned()];
        row.extend(clients.iter().map(|c| of(c).map_or("-".to_owned(), number)));
        let mine = of(first);
        row.extend(others.iter().map(|o| match (mine, of(o)) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
            _ => "-".to_owned(),
        }));
        rows.push(row);
    }
    let mut out = render(&rows, 1);
    out.push_str(
        "ratios are keylatch/other: for (lower) rows below 1 means keylatch is better, \
         for (higher) rows above 1 means keylatch is better\n",
    );
    out
}

/// A percentile in µs, when there are samples.
fn p_us(r: &ScenarioResult, p: f64) -> Option<f64> {
    (r.latency.count() > 0).then(|| r.latency.percentile(p).as_secs_f64() * 1e6)
}

type Metric = (Scenario, &'static str, fn(&ScenarioResult) -> Option<f64>);

/// The comparison's lines: scenario, label (with the better direction), value.
const METRICS: [Metric; 8] = [
    (Scenario::Uncontended, "a. pair p50 µs (lower)", |r| {
        p_us(r, 50.0)
    }),
    (Scenario::Uncontended, "a. pair p99 µs (lower)", |r| {
        p_us(r, 99.0)
    }),
    (Scenario::Distinct, "b. pairs/s (higher)", |r| {
        Some(r.rate())
    }),
    (Scenario::Distinct, "b. pair p99 µs (lower)", |r| {
        p_us(r, 99.0)
    }),
    (Scenario::Distinct, "b. CPU µs/pair (lower)", |r| {
        r.cpu_per_op().map(|d| d.as_secs_f64() * 1e6)
    }),
    (Scenario::Contended, "c. acquisitions/s (higher)", |r| {
        Some(r.rate())
    }),
    (Scenario::Contended, "c. handoff p50 µs (lower)", |r| {
        p_us(r, 50.0)
    }),
    (Scenario::Contended, "c. handoff p99 µs (lower)", |r| {
        p_us(r, 99.0)
    }),
];

/// Three significant figures, without an exponent.
fn number(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}
