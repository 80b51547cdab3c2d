//! `-v` / `-vv`: the library's `tracing` events on stderr, through a
//! subscriber small enough to read in one sitting (no tracing-subscriber).
//!
//! Levels: without the flag nothing is installed and the library stays
//! silent (stderr keeps its one-line-error contract); `-v` shows INFO and
//! above (WARN: e.g. a waiter falling back to polling), `-vv` DEBUG,
//! `-vvv` TRACE. Spans are accepted and ignored: the library uses events.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// Takes the global verbosity flags (`-v`, `-vv`, `-vvv`, `--verbose`) out
/// of the arguments, wherever they are before a `--` (after it they belong
/// to `exec`'s command). Returns the verbosity and what is left.
pub(crate) fn take_flags(args: Vec<String>) -> (u8, Vec<String>) {
    let mut level = 0u8;
    let mut rest = Vec::with_capacity(args.len());
    let mut passthrough = false;
    for a in args {
        if !passthrough {
            match a.as_str() {
                "--" => passthrough = true,
                "--verbose" => {
                    level = level.saturating_add(1);
                    continue;
                }
                s if s.len() > 1 && s.starts_with('-') && s[1..].bytes().all(|b| b == b'v') => {
                    level = level.saturating_add(u8::try_from(s.len() - 1).unwrap_or(u8::MAX));
                    continue;
                }
                _ => {}
            }
        }
        rest.push(a);
    }
    (level, rest)
}

/// The most verbose level shown at a verbosity (`None`: install nothing).
fn max_level(verbosity: u8) -> Option<Level> {
    match verbosity {
        0 => None,
        1 => Some(Level::INFO),
        2 => Some(Level::DEBUG),
        _ => Some(Level::TRACE),
    }
}

/// Installs the stderr subscriber for this verbosity (nothing at 0).
pub(crate) fn install(verbosity: u8) {
    if let Some(max) = max_level(verbosity) {
        let sub = LineSubscriber::new(max, |line| errln!("{line}"));
        // Fails only if a subscriber is already set: then that one wins.
        let _ = tracing::subscriber::set_global_default(sub);
    }
}

/// Writes each enabled event as one line:
/// `keylatch [0.123s] WARN target: message key=value …`.
pub(crate) struct LineSubscriber {
    max: Level,
    started: Instant,
    next_span: AtomicU64,
    write: Box<dyn Fn(&str) + Send + Sync>,
}

impl LineSubscriber {
    pub(crate) fn new(max: Level, write: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Self {
            max,
            started: Instant::now(),
            next_span: AtomicU64::new(1),
            write: Box::new(write),
        }
    }
}

/// Collects an event's fields: the message first, the rest as `k=v`.
#[derive(Default)]
struct Fields {
    message: String,
    rest: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.rest, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.rest, " {}={value:?}", field.name());
        }
    }
}

impl Subscriber for LineSubscriber {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        // tracing orders levels by verbosity: TRACE > DEBUG > … > ERROR.
        *metadata.level() <= self.max
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::from_level(self.max))
    }

    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        // Ids must be non-zero and distinct while in use; nothing else
        // is done with spans.
        Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed).max(1))
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        (self.write)(&format!(
            "keylatch [{:.3}s] {} {}: {}{}",
            self.started.elapsed().as_secs_f64(),
            meta.level(),
            meta.target(),
            fields.message,
            fields.rest
        ));
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn verbosity_flags_are_taken_before_the_double_dash_only() {
        let (level, rest) = take_flags(strings(&["-v", "exec", "x", "-vv", "--", "ls", "-v"]));
        assert_eq!(level, 3);
        assert_eq!(rest, strings(&["exec", "x", "--", "ls", "-v"]));
        let (level, rest) = take_flags(strings(&["status", "--verbose", "x", "-"]));
        assert_eq!((level, rest), (1, strings(&["status", "x", "-"])));
        assert_eq!(take_flags(strings(&["-vx"])).0, 0);
    }

    #[test]
    fn events_at_or_above_the_level_become_one_line_each() {
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = Arc::clone(&lines);
        let sub = LineSubscriber::new(Level::INFO, move |l| {
            sink.lock().unwrap().push(l.to_owned())
        });
        tracing::subscriber::with_default(sub, || {
            tracing::warn!(lock = "orders", error = %"NOPERM", "waiting by polling");
            tracing::info!(n = 3, "an info");
            tracing::debug!("hidden at -v");
            let span = tracing::info_span!("ignored");
            let _in = span.enter();
            tracing::error!("inside a span");
        });
        let lines = lines.lock().unwrap();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(
            lines[0].contains("WARN")
                && lines[0].ends_with("waiting by polling lock=orders error=NOPERM"),
            "{}",
            lines[0]
        );
        assert!(lines[1].contains("INFO") && lines[1].ends_with("an info n=3"));
        assert!(lines[2].contains("ERROR"));
        assert_eq!(max_level(0), None);
        assert_eq!(max_level(2), Some(Level::DEBUG));
    }
}
