//! The progress line on stderr while a benchmark runs.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the terminal line is redrawn.
const REDRAW: Duration = Duration::from_millis(100);
const BAR: usize = 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Redrawn in place with `\r`, about 10 times a second.
    Terminal,
    /// One plain line per stage, so logs stay readable.
    Lines,
    /// Nothing.
    Hidden,
}

struct Shared {
    label: Mutex<String>,
    started: Instant,
    total: Duration,
    stop: AtomicBool,
}

/// Shows which stage runs and how far the run is: on a terminal, one line
/// redrawn about ten times a second (`\r`); otherwise (a pipe, a test log)
/// one plain line as each stage starts. Always on stderr, so stdout holds
/// only results.
///
/// ```
/// use std::time::Duration;
/// use keylatch_cli::bench::Progress;
/// let p = Progress::hidden(Duration::from_secs(1));
/// p.stage("a. uncontended pair — keylatch");
/// p.done();
/// ```
pub struct Progress {
    mode: Mode,
    shared: Arc<Shared>,
    painter: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl Progress {
    /// A progress display for a run of about `total`: redrawn in place when
    /// stderr is a terminal, one line per stage otherwise.
    ///
    /// ```
    /// let p = keylatch_cli::bench::Progress::new(std::time::Duration::from_secs(10));
    /// p.done();
    /// ```
    pub fn new(total: Duration) -> Self {
        let mode = if std::io::stderr().is_terminal() {
            Mode::Terminal
        } else {
            Mode::Lines
        };
        Self::with_mode(total, mode)
    }

    /// A progress display that shows nothing (for embedding and tests).
    ///
    /// ```
    /// keylatch_cli::bench::Progress::hidden(std::time::Duration::ZERO).stage("quiet");
    /// ```
    pub fn hidden(total: Duration) -> Self {
        Self::with_mode(total, Mode::Hidden)
    }

    fn with_mode(total: Duration, mode: Mode) -> Self {
        Self {
            mode,
            shared: Arc::new(Shared {
                label: Mutex::new(String::new()),
                started: Instant::now(),
                total,
                stop: AtomicBool::new(false),
            }),
            painter: Mutex::new(None),
        }
    }

    /// A new stage starts (scenario and client).
    ///
    /// ```
    /// let p = keylatch_cli::bench::Progress::hidden(std::time::Duration::from_secs(1));
    /// p.stage("b. distinct locks — keylatch");
    /// ```
    pub fn stage(&self, label: &str) {
        if let Ok(mut l) = self.shared.label.lock() {
            label.clone_into(&mut l);
        }
        match self.mode {
            Mode::Hidden => {}
            Mode::Lines => eprintln!(
                "bench: {label} (at {:.1}s of ~{:.1}s)",
                self.shared.started.elapsed().as_secs_f64(),
                self.shared.total.as_secs_f64()
            ),
            Mode::Terminal => {
                let Ok(mut painter) = self.painter.lock() else {
                    return;
                };
                if painter.is_none() {
                    let shared = Arc::clone(&self.shared);
                    // A plain thread: it must redraw even while every
                    // runtime worker is busy benchmarking.
                    *painter = std::thread::Builder::new()
                        .name("keylatch-progress".into())
                        .spawn(move || paint(&shared))
                        .ok();
                }
            }
        }
    }

    /// The run is over: stops redrawing and clears the line.
    ///
    /// ```
    /// keylatch_cli::bench::Progress::hidden(std::time::Duration::ZERO).done();
    /// ```
    pub fn done(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        let painter = self.painter.lock().ok().and_then(|mut p| p.take());
        if let Some(p) = painter {
            let _ = p.join();
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.done();
    }
}

fn paint(shared: &Shared) {
    while !shared.stop.load(Ordering::Relaxed) {
        let label = shared.label.lock().map(|l| l.clone()).unwrap_or_default();
        let _ = std::io::stderr()
            .lock()
            .write_all(line(&label, shared.started.elapsed(), shared.total).as_bytes());
        std::thread::sleep(REDRAW);
    }
}

/// `\r<label> [#####-----] 3.2s/10.0s` and clear-to-end-of-line.
fn line(label: &str, elapsed: Duration, total: Duration) -> String {
    let fraction = if total.is_zero() {
        1.0
    } else {
        (elapsed.as_secs_f64() / total.as_secs_f64()).min(1.0)
    };
    let filled = (fraction * BAR as f64).round() as usize;
    format!(
        "\r{label} [{}{}] {:.1}s/{:.1}s\x1b[K",
        "#".repeat(filled),
        "-".repeat(BAR - filled),
        elapsed.as_secs_f64(),
        total.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_fills_with_time_and_never_overflows() {
        let total = Duration::from_secs(10);
        let half = line("x", Duration::from_secs(5), total);
        assert!(half.starts_with("\rx [############------------] 5.0s/10.0s"));
        let over = line("x", Duration::from_secs(20), total);
        assert!(over.contains(&"#".repeat(BAR)));
        assert!(line("x", Duration::ZERO, Duration::ZERO).contains(&"#".repeat(BAR)));
    }
}
