//! A hand-written SVG of latency CDFs: no plotting dependency for one chart.

use std::fmt::Write as _;

use super::{Scenario, ScenarioResult};

const WIDTH: f64 = 980.0;
const HEIGHT: f64 = 540.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 680.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 470.0;
/// Colour per scenario; line style per client (solid, dashed, dotted).
const COLOURS: [&str; 3] = ["#1f77b4", "#d62728", "#2ca02c"];
const DASHES: [&str; 4] = ["", "8 4", "2 3", "12 3 2 3"];

/// An SVG image with one latency CDF curve per result (per scenario, and
/// per client when several are compared): x is latency on a log scale
/// with a labelled tick per decade, y is the share of operations at or
/// below it (0–100 %). Colour tells the scenario, line style the client.
/// Results without samples are listed in the legend without a curve.
///
/// ```
/// use std::time::Duration;
/// use keylatch_cli::bench::{svg, Histogram, Scenario, ScenarioResult};
/// let mut latency = Histogram::new();
/// for us in 20..200 {
///     latency.record(Duration::from_micros(us));
/// }
/// let r = ScenarioResult {
///     scenario: Scenario::Uncontended, client: "keylatch".into(), ops: 180,
///     elapsed: Duration::from_secs(1), cpu: None, latency,
/// };
/// let image = svg(&[r], "demo");
/// assert!(image.starts_with("<svg") && image.contains("100µs"));
/// assert_eq!(image.matches("<path").count(), 1);
/// ```
pub fn svg(results: &[ScenarioResult], title: &str) -> String {
    let scale = Scale::around(results);
    let mut out = String::with_capacity(64 * 1024);
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="16">{}</text>"#,
        (LEFT + RIGHT) / 2.0,
        escape(title)
    );
    grid(&mut out, scale);
    axes(&mut out);
    curves(&mut out, scale, results);
    out.push_str("</svg>\n");
    out
}

/// Where a latency and a share go on the chart: x on a log scale over
/// whole decades of µs, `lo` to `hi` (log10), y linear.
#[derive(Clone, Copy)]
struct Scale {
    lo: f64,
    hi: f64,
}

impl Scale {
    /// The x range in whole decades of µs around every sample (1 µs to
    /// 1 ms when there is none).
    fn around(results: &[ScenarioResult]) -> Self {
        let (mut lo, mut hi) = (f64::MAX, f64::MIN);
        for r in results.iter().filter(|r| r.latency.count() > 0) {
            lo = lo.min(micros(r.latency.min()).max(0.1).log10());
            hi = hi.max(micros(r.latency.max()).max(0.1).log10());
        }
        if lo > hi {
            (lo, hi) = (0.0, 3.0);
        }
        let (lo, mut hi) = (lo.floor(), hi.ceil());
        if hi <= lo {
            hi = lo + 1.0;
        }
        Self { lo, hi }
    }

    fn x(self, us: f64) -> f64 {
        LEFT + (us.max(0.1).log10() - self.lo) / (self.hi - self.lo) * (RIGHT - LEFT)
    }

    fn y(share: f64) -> f64 {
        BOTTOM - share * (BOTTOM - TOP)
    }
}

/// Grid: a labelled line per decade, light lines at 2..9 of each, and one
/// per percentile shown.
fn grid(out: &mut String, scale: Scale) {
    let mut decade = scale.lo;
    while decade <= scale.hi {
        let gx = scale.x(10f64.powf(decade));
        let _ = writeln!(
            out,
            r##"<line x1="{gx:.1}" y1="{TOP}" x2="{gx:.1}" y2="{BOTTOM}" stroke="#bbb"/><text x="{gx:.1}" y="{}" text-anchor="middle">{}</text>"##,
            BOTTOM + 18.0,
            decade_label(decade as i32)
        );
        if decade < scale.hi {
            for m in 2..10 {
                let mx = scale.x(f64::from(m) * 10f64.powf(decade));
                let _ = writeln!(
                    out,
                    r##"<line x1="{mx:.1}" y1="{TOP}" x2="{mx:.1}" y2="{BOTTOM}" stroke="#eee"/>"##
                );
            }
        }
        decade += 1.0;
    }
    for pct in [0, 25, 50, 75, 90, 99, 100] {
        let gy = Scale::y(f64::from(pct) / 100.0);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{gy:.1}" x2="{RIGHT}" y2="{gy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{pct} %</text>"##,
            LEFT - 6.0,
            gy + 4.0
        );
    }
}

/// The plot's frame and the two axis titles.
fn axes(out: &mut String) {
    let _ = writeln!(
        out,
        r#"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="black"/>"#,
        RIGHT - LEFT,
        BOTTOM - TOP
    );
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">latency (log scale)</text>"#,
        (LEFT + RIGHT) / 2.0,
        BOTTOM + 40.0
    );
    let _ = writeln!(
        out,
        r#"<text x="20" y="{}" text-anchor="middle" transform="rotate(-90 20 {})">operations at or below (%)</text>"#,
        (TOP + BOTTOM) / 2.0,
        (TOP + BOTTOM) / 2.0
    );
}

/// One CDF curve per result with samples, and a legend entry for every
/// result: colour per scenario, line style per client (in order of first
/// appearance).
fn curves(out: &mut String, scale: Scale, results: &[ScenarioResult]) {
    let mut clients: Vec<&str> = Vec::new();
    for r in results {
        if !clients.contains(&r.client.as_str()) {
            clients.push(&r.client);
        }
    }
    for (n, r) in results.iter().enumerate() {
        let colour = COLOURS[scenario_index(r.scenario) % COLOURS.len()];
        let client = clients.iter().position(|c| *c == r.client).unwrap_or(0);
        let dash = DASHES[client % DASHES.len()];
        let dash_attr = if dash.is_empty() {
            String::new()
        } else {
            format!(r#" stroke-dasharray="{dash}""#)
        };
        let total = r.latency.count();
        if total > 0 {
            let mut d = String::new();
            for (i, b) in r.latency.buckets().enumerate() {
                let px = scale.x(micros(b.high));
                if i == 0 {
                    let _ = write!(d, "M{px:.1},{:.1}", Scale::y(0.0));
                }
                let _ = write!(
                    d,
                    " L{px:.1},{:.1}",
                    Scale::y(b.cumulative as f64 / total as f64)
                );
            }
            let _ = writeln!(
                out,
                r#"<path class="cdf" d="{d}" fill="none" stroke="{colour}" stroke-width="1.8"{dash_attr}><title>{}</title></path>"#,
                escape(&format!("{} — {}", r.scenario.label(), r.client))
            );
        }
        // Legend entry.
        let ly = TOP + 10.0 + 22.0 * n as f64;
        let _ = writeln!(
            out,
            r#"<line x1="{}" y1="{ly:.1}" x2="{}" y2="{ly:.1}" stroke="{colour}" stroke-width="2.5"{dash_attr}/><text x="{}" y="{:.1}">{}</text>"#,
            RIGHT + 20.0,
            RIGHT + 60.0,
            RIGHT + 68.0,
            ly + 4.0,
            escape(&format!(
                "{} — {}{}",
                r.scenario.label(),
                r.client,
                if total == 0 { " (no samples)" } else { "" }
            ))
        );
    }
}

fn micros(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn scenario_index(s: Scenario) -> usize {
    Scenario::ALL.iter().position(|x| *x == s).unwrap_or(0)
}

/// `10^k` µs as people write it: 100ns, 1µs, 10ms, 1s, 100s.
fn decade_label(k: i32) -> String {
    let (unit, base) = match k {
        i32::MIN..=-1 => ("ns", k + 3),
        0..=2 => ("µs", k),
        3..=5 => ("ms", k - 3),
        _ => ("s", k - 6),
    };
    format!("{}{unit}", 10u64.pow(base.clamp(0, 18) as u32))
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Histogram;
    use std::time::Duration;

    #[test]
    fn decades_read_as_units() {
        let labels: Vec<String> = (-1..=7).map(decade_label).collect();
        assert_eq!(
            labels,
            ["100ns", "1µs", "10µs", "100µs", "1ms", "10ms", "100ms", "1s", "10s"]
        );
    }

    #[test]
    fn one_curve_per_result_with_samples_and_escaped_names() {
        let mk = |scenario, client: &str, us: &[u64]| {
            let mut latency = Histogram::new();
            for v in us {
                latency.record(Duration::from_micros(*v));
            }
            ScenarioResult {
                scenario,
                client: client.into(),
                ops: us.len() as u64,
                elapsed: Duration::from_secs(1),
                cpu: None,
                latency,
            }
        };
        let results = [
            mk(Scenario::Uncontended, "a<b", &[50, 60, 70]),
            mk(Scenario::Distinct, "a<b", &[500, 5000]),
            mk(Scenario::Contended, "a<b", &[]),
        ];
        let image = svg(&results, "t & t");
        assert_eq!(image.matches("<path").count(), 2);
        assert!(image.contains("a&lt;b") && image.contains("t &amp; t"));
        assert!(image.contains("(no samples)"));
        assert!(image.contains(">10µs<") && image.contains(">10ms<"));
        // Nothing at all: still a valid, empty chart.
        assert!(svg(&[], "empty").ends_with("</svg>\n"));
    }
}
