//! A timeline of a contended run (scenario c): one lane per contender, its
//! waits and its holds, so who held the lock when, and who waited how long
//! meanwhile, can be seen. Drawn as a hand-written SVG, like `plot.rs`.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::plot::escape;
use super::scenarios::{contended_log, ContendedLog, Event};
use super::{BenchResult, LockClient, Plan};

/// What each contender of a contended run did, from the run's start.
///
/// ```
/// use std::time::Duration;
/// use keylatch_cli::bench::{Lane, Timeline};
/// let ms = Duration::from_millis;
/// let t = Timeline {
///     lanes: vec![
///         Lane { holds: vec![(ms(0), ms(1))], waits: vec![] },
///         Lane { holds: vec![(ms(2), ms(3))], waits: vec![(ms(0), ms(2))] },
///     ],
///     elapsed: ms(4),
/// };
/// assert_eq!(t.holds(), 2);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// One lane per contender, in contender order.
    pub lanes: Vec<Lane>,
    /// How long the run took.
    pub elapsed: Duration,
}

/// One contender's spans, each `(from, to)` since the run's start.
#[derive(Clone, Debug, Default)]
pub struct Lane {
    /// From an acquisition to its release's reply.
    pub holds: Vec<(Duration, Duration)>,
    /// From asking for the lock to getting it (or giving the try up).
    pub waits: Vec<(Duration, Duration)>,
}

impl Timeline {
    /// Acquisitions in all lanes.
    ///
    /// ```
    /// assert_eq!(keylatch_cli::bench::Timeline::default().holds(), 0);
    /// ```
    pub fn holds(&self) -> usize {
        self.lanes.iter().map(|l| l.holds.len()).sum()
    }

    fn from_log(log: &ContendedLog) -> Self {
        let since = |t: std::time::Instant| t.saturating_duration_since(log.start);
        let mut lanes: Vec<Lane> = Vec::new();
        let mut waiting: Vec<Option<Duration>> = Vec::new();
        let mut held: Vec<Option<Duration>> = Vec::new();
        for (t, c, e) in &log.events {
            let c = *c;
            if lanes.len() <= c {
                lanes.resize_with(c + 1, Lane::default);
                waiting.resize(c + 1, None);
                held.resize(c + 1, None);
            }
            let at = since(*t);
            match e {
                Event::Waiting => {
                    // A try given up: its wait ends where the next begins.
                    if let Some(from) = waiting[c].replace(at) {
                        lanes[c].waits.push((from, at));
                    }
                }
                Event::Acquired => {
                    if let Some(from) = waiting[c].take() {
                        lanes[c].waits.push((from, at));
                    }
                    held[c] = Some(at);
                }
                Event::Released => {}
                Event::Unlocked => {
                    if let Some(from) = held[c].take() {
                        lanes[c].holds.push((from, at));
                    }
                }
            }
        }
        Self {
            lanes,
            elapsed: log.elapsed,
        }
    }
}

/// Runs scenario c (`plan.contenders` tasks on one fresh lock, hold 0,
/// `plan.think` after each release) for `span` and returns its timeline.
///
/// ```no_run
/// use std::time::Duration;
/// use keylatch_cli::bench::{contended_timeline, timeline_svg, Plan};
/// # async fn demo(locks: keylatch::Locks) -> keylatch_cli::bench::BenchResult<()> {
/// let t = contended_timeline(&locks, &Plan::new(Duration::from_secs(1), 8), Duration::from_secs(1)).await?;
/// let image = timeline_svg(&t, "who held it", Duration::from_millis(20));
/// # let _ = image;
/// # Ok(()) }
/// ```
///
/// # Errors
/// The client failed, or a contender task panicked.
///
/// # Cancel safety
/// Dropped mid-run, the contender tasks run to the span's end and their
/// holds end by release or lease (the lock name is never reused).
pub async fn contended_timeline<C: LockClient>(
    client: &C,
    plan: &Plan,
    span: Duration,
) -> BenchResult<Timeline> {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let name = format!("keylatch:bench:{}:{stamp}:timeline", std::process::id());
    let log = contended_log(client, &name, plan, span).await?;
    Ok(Timeline::from_log(&log))
}

const WIDTH: f64 = 980.0;
const LEFT: f64 = 250.0;
const RIGHT: f64 = 950.0;
const TOP: f64 = 60.0;
const LANE: f64 = 34.0;
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
];

/// An SVG of `window` of the timeline (from its middle, or all of it when
/// shorter): a lane per contender, each hold a bar in the lane's colour,
/// each wait a grey line, a labelled tick every tenth of the window. The
/// lane labels give each contender's holds over the whole run and its share
/// of them, so fairness reads as numbers as well as bars.
///
/// ```
/// use std::time::Duration;
/// use keylatch_cli::bench::{timeline_svg, Lane, Timeline};
/// let ms = Duration::from_millis;
/// let t = Timeline {
///     lanes: vec![Lane { holds: vec![(ms(1), ms(2))], waits: vec![(ms(0), ms(1))] }],
///     elapsed: ms(3),
/// };
/// let image = timeline_svg(&t, "demo", ms(3));
/// assert!(image.starts_with("<svg") && image.contains("contender 0"));
/// assert_eq!(image.matches("class=\"hold\"").count(), 1);
/// ```
pub fn timeline_svg(t: &Timeline, title: &str, window: Duration) -> String {
    let window = window.min(t.elapsed).max(Duration::from_micros(1));
    let from = (t.elapsed - window) / 2;
    let to = from + window;
    let span = window.as_secs_f64();
    let x = |d: Duration| {
        let d = d.clamp(from, to) - from;
        LEFT + d.as_secs_f64() / span * (RIGHT - LEFT)
    };
    let bottom = TOP + LANE * t.lanes.len().max(1) as f64;
    let mut out = String::with_capacity(64 * 1024);
    head(&mut out, title, bottom);
    for i in 0..=10u32 {
        let at = from + window * i / 10;
        let gx = x(at);
        let _ = writeln!(
            out,
            r##"<line x1="{gx:.1}" y1="{TOP}" x2="{gx:.1}" y2="{bottom}" stroke="#ddd"/><text x="{gx:.1}" y="{}" text-anchor="middle">{:.1} ms</text>"##,
            bottom + 18.0,
            at.as_secs_f64() * 1e3
        );
    }
    let total = t.holds().max(1);
    for (i, lane) in t.lanes.iter().enumerate() {
        let shown = |s: &&(Duration, Duration)| s.1 >= from && s.0 <= to;
        let waits = lane.waits.iter().filter(shown).map(|&(a, b)| (x(a), x(b)));
        let holds = lane.holds.iter().filter(shown).map(|&(a, b)| (x(a), x(b)));
        draw_lane(&mut out, i, lane.holds.len(), total, waits, holds);
    }
    let _ = writeln!(
        out,
        r#"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="black"/>"#,
        RIGHT - LEFT,
        bottom - TOP
    );
    out.push_str("</svg>\n");
    out
}

/// The image's head: its size, background, title and the x axis' title.
fn head(out: &mut String, title: &str, bottom: f64) {
    let height = bottom + 60.0;
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="16">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">time since the run's start (bars: holds, grey: waiting)</text>"#,
        (LEFT + RIGHT) / 2.0,
        bottom + 42.0
    );
}

/// Lane `i`: its label (holds over the run and their share of `total`),
/// its waits as grey lines and its holds as bars, given in x.
fn draw_lane(
    out: &mut String,
    i: usize,
    holds: usize,
    total: usize,
    waits: impl Iterator<Item = (f64, f64)>,
    bars: impl Iterator<Item = (f64, f64)>,
) {
    let colour = COLOURS[i % COLOURS.len()];
    let top = TOP + LANE * i as f64;
    let mid = top + LANE / 2.0;
    let share = 100.0 * holds as f64 / total as f64;
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{:.1}" text-anchor="end">contender {i}: {holds} holds ({share:.1} %)</text>"#,
        LEFT - 10.0,
        mid + 4.0
    );
    for (xa, xb) in waits {
        let _ = writeln!(
            out,
            r##"<line class="wait" x1="{xa:.1}" y1="{mid:.1}" x2="{xb:.1}" y2="{mid:.1}" stroke="#aaa" stroke-width="2"/>"##
        );
    }
    for (xa, xb) in bars {
        // At least a pixel: a hold shorter than one still shows.
        let _ = writeln!(
            out,
            r#"<rect class="hold" x="{xa:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{colour}"/>"#,
            top + 6.0,
            (xb - xa).max(1.0),
            LANE - 12.0
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_log_becomes_lanes_of_waits_and_holds() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let log = ContendedLog {
            start: t0,
            events: vec![
                (at(0), 0, Event::Waiting),
                (at(0), 1, Event::Waiting),
                (at(1), 0, Event::Acquired),
                (at(1), 0, Event::Released),
                (at(2), 0, Event::Unlocked),
                // Contender 1 gave a try up at 5 and asked again.
                (at(5), 1, Event::Waiting),
                (at(6), 1, Event::Acquired),
                (at(6), 1, Event::Released),
                (at(7), 1, Event::Unlocked),
            ],
            elapsed: Duration::from_millis(8),
            cpu: None,
        };
        let t = Timeline::from_log(&log);
        let ms = Duration::from_millis;
        assert_eq!(t.lanes.len(), 2);
        assert_eq!(t.lanes[0].holds, [(ms(1), ms(2))]);
        assert_eq!(t.lanes[0].waits, [(ms(0), ms(1))]);
        assert_eq!(t.lanes[1].holds, [(ms(6), ms(7))]);
        assert_eq!(t.lanes[1].waits, [(ms(0), ms(5)), (ms(5), ms(6))]);
        assert_eq!(t.holds(), 2);
    }

    #[test]
    fn the_window_is_the_middle_of_the_run_and_shares_are_labelled() {
        let ms = Duration::from_millis;
        let t = Timeline {
            lanes: vec![
                Lane {
                    holds: vec![(ms(0), ms(1)), (ms(50), ms(51)), (ms(99), ms(100))],
                    waits: vec![],
                },
                Lane {
                    holds: vec![(ms(52), ms(53))],
                    waits: vec![(ms(45), ms(52))],
                },
            ],
            elapsed: ms(100),
        };
        let image = timeline_svg(&t, "a & b", ms(20));
        // Only the holds within 40..60 ms are drawn.
        assert_eq!(image.matches("class=\"hold\"").count(), 2, "{image}");
        assert_eq!(image.matches("class=\"wait\"").count(), 1);
        assert!(image.contains("contender 0: 3 holds (75.0 %)"), "{image}");
        assert!(image.contains("contender 1: 1 holds (25.0 %)"));
        assert!(image.contains(">40.0 ms<") && image.contains(">60.0 ms<"));
        assert!(image.contains("a &amp; b"));
    }
}
