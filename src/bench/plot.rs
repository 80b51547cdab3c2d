//! A hand-written SVG of latency by percentile: no plotting dependency for
//! one chart.

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

/// An SVG image with one latency-by-percentile curve per result (per
/// scenario, and per client when several are compared), drawn the way
/// HdrHistogram's plots are: x is the percentile on a `1/(1−p)` log scale,
/// so each step right is one more nine (0 %, 90 %, 99 %, 99.9 %, 99.99 %,
/// …, as far as the samples reach) and the tail gets as much room as the
/// body; y is the latency on a log scale with a labelled line per decade.
/// The right edge is each curve's max. Colour tells the scenario, line style
/// the client. Results without samples are listed in the legend without a
/// curve.
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
/// assert!(image.contains(">99 %<") && image.contains(">max<"));
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

/// Where a percentile and a latency go on the chart: x is
/// `log10(1/(1−p))` from 0 to `nines` (the max sits at the right edge), y
/// is the latency on a log scale over whole decades of µs, `lo` to `hi`.
#[derive(Clone, Copy)]
struct Scale {
    lo: f64,
    hi: f64,
    /// Nines the x axis shows: enough for the largest sample count (a
    /// percentile past 1 − 1/n says nothing more than the max), at least 3.
    nines: u32,
}

impl Scale {
    /// The latency range in whole decades of µs around every sample (1 µs
    /// to 1 ms when there is none), and the nines the samples reach.
    fn around(results: &[ScenarioResult]) -> Self {
        let (mut lo, mut hi) = (f64::MAX, f64::MIN);
        let mut most = 0u64;
        for r in results.iter().filter(|r| r.latency.count() > 0) {
            lo = lo.min(micros(r.latency.min()).max(0.1).log10());
            hi = hi.max(micros(r.latency.max()).max(0.1).log10());
            most = most.max(r.latency.count());
        }
        if lo > hi {
            (lo, hi) = (0.0, 3.0);
        }
        let (lo, mut hi) = (lo.floor(), hi.ceil());
        if hi <= lo {
            hi = lo + 1.0;
        }
        let nines = (most.max(1) as f64).log10().ceil().clamp(3.0, 7.0) as u32;
        Self { lo, hi, nines }
    }

    /// x of the share `p` (0 to 1) of operations: 1 (and anything past
    /// the last nine) is the right edge.
    fn x(self, p: f64) -> f64 {
        let nines = f64::from(self.nines);
        let at = if p >= 1.0 {
            nines
        } else {
            (1.0 / (1.0 - p)).log10().min(nines)
        };
        LEFT + at / nines * (RIGHT - LEFT)
    }

    fn y(self, us: f64) -> f64 {
        BOTTOM - (us.max(0.1).log10() - self.lo) / (self.hi - self.lo) * (BOTTOM - TOP)
    }
}

/// Grid: a labelled line per decade of latency, light lines at 2..9 of
/// each, and a labelled line per nine of percentile.
fn grid(out: &mut String, scale: Scale) {
    let mut decade = scale.lo;
    while decade <= scale.hi {
        let gy = scale.y(10f64.powf(decade));
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{gy:.1}" x2="{RIGHT}" y2="{gy:.1}" stroke="#bbb"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT - 6.0,
            gy + 4.0,
            decade_label(decade as i32)
        );
        if decade < scale.hi {
            for m in 2..10 {
                let my = scale.y(f64::from(m) * 10f64.powf(decade));
                let _ = writeln!(
                    out,
                    r##"<line x1="{LEFT}" y1="{my:.1}" x2="{RIGHT}" y2="{my:.1}" stroke="#eee"/>"##
                );
            }
        }
        decade += 1.0;
    }
    for nine in 0..=scale.nines {
        let p = 1.0 - 10f64.powi(-(nine as i32));
        let gx = scale.x(p);
        let label = if nine == scale.nines {
            "max".to_owned()
        } else {
            percentile_label(nine)
        };
        let _ = writeln!(
            out,
            r##"<line x1="{gx:.1}" y1="{TOP}" x2="{gx:.1}" y2="{BOTTOM}" stroke="#ddd"/><text x="{gx:.1}" y="{}" text-anchor="middle">{label}</text>"##,
            BOTTOM + 18.0
        );
    }
}

/// `0 %`, `90 %`, `99 %`, `99.9 %`, … for 0, 1, 2, 3 nines.
fn percentile_label(nines: u32) -> String {
    match nines {
        0 => "0 %".to_owned(),
        1 => "90 %".to_owned(),
        n => format!("99.{} %", "9".repeat(n as usize - 2)).replace(". %", " %"),
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
        r#"<text x="{}" y="{}" text-anchor="middle">percentile (1/(1−p) scale: one step per nine)</text>"#,
        (LEFT + RIGHT) / 2.0,
        BOTTOM + 40.0
    );
    let _ = writeln!(
        out,
        r#"<text x="20" y="{}" text-anchor="middle" transform="rotate(-90 20 {})">latency (log scale)</text>"#,
        (TOP + BOTTOM) / 2.0,
        (TOP + BOTTOM) / 2.0
    );
}

/// One latency-by-percentile curve per result with samples, and a legend
/// entry for every result: colour per scenario, line style per client (in
/// order of first appearance). Each bucket is a step: its latency holds
/// from the share below it to the share at it.
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
            let mut below = 0u64;
            for b in r.latency.buckets().filter(|b| b.count > 0) {
                let py = scale.y(micros(b.high));
                let from = scale.x(below as f64 / total as f64);
                let to = scale.x(b.cumulative as f64 / total as f64);
                let step = if below == 0 { 'M' } else { 'L' };
                let _ = write!(d, "{step}{from:.1},{py:.1} L{to:.1},{py:.1} ");
                below = b.cumulative;
            }
            let _ = writeln!(
                out,
                r#"<path class="percentiles" d="{}" fill="none" stroke="{colour}" stroke-width="1.8"{dash_attr}><title>{}</title></path>"#,
                d.trim_end(),
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

/// `text` as SVG text or an attribute value.
pub(super) fn escape(text: &str) -> String {
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
    fn each_nine_gets_the_same_room_and_the_tail_is_readable() {
        // 10,000 samples at 100 µs, then 10 at 10 ms: the slow 0.1 % must
        // show as a step at 99.9 %, not in the last pixels.
        let mut latency = Histogram::new();
        for _ in 0..10_000 {
            latency.record(Duration::from_micros(100));
        }
        for _ in 0..10 {
            latency.record(Duration::from_millis(10));
        }
        let r = ScenarioResult {
            scenario: Scenario::Uncontended,
            client: "k".into(),
            ops: 10_010,
            elapsed: Duration::from_secs(1),
            cpu: None,
            latency,
        };
        let scale = Scale::around(std::slice::from_ref(&r));
        assert_eq!(scale.nines, 5, "10,010 samples reach 99.99 %");
        let xs: Vec<f64> = [0.9, 0.99, 0.999, 0.9999]
            .iter()
            .map(|p| scale.x(*p))
            .collect();
        for w in xs.windows(2) {
            let step = w[1] - w[0];
            assert!(
                (step - (RIGHT - LEFT) / 5.0).abs() < 0.5,
                "one nine = a fifth of the width: {xs:?}"
            );
        }
        let image = svg(&[r], "tail");
        for label in [">90 %<", ">99 %<", ">99.9 %<", ">99.99 %<", ">max<"] {
            assert!(image.contains(label), "{label}");
        }
        // The curve's 10 ms step starts where 99.9 % of samples are below.
        let path = image
            .split("d=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap();
        let at_10ms = format!("{:.1}", scale.y(10_000.0));
        let first_slow_x: f64 = path
            .split(['M', 'L'])
            .filter_map(|pt| pt.trim().split_once(','))
            .find(|(_, y)| *y == at_10ms)
            .map(|(x, _)| x.parse().unwrap())
            .expect("a 10 ms step");
        let expected = scale.x(10_000.0 / 10_010.0);
        assert!(
            (first_slow_x - expected).abs() < 0.2,
            "{first_slow_x} vs {expected}"
        );
        assert!(first_slow_x > scale.x(0.999) - 1.0, "at 99.9 % or later");
    }

    #[test]
    fn percentiles_read_as_people_write_them() {
        let labels: Vec<String> = (0..=5).map(percentile_label).collect();
        assert_eq!(
            labels,
            ["0 %", "90 %", "99 %", "99.9 %", "99.99 %", "99.999 %"]
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
