//! `-v` / `-vv` / `-vvv` and `RUST_LOG`: the library's `tracing` events on
//! stderr, through `tracing-subscriber`'s formatter and `EnvFilter` (the
//! filter syntax every Rust operator knows: `RUST_LOG=keylatch_cluster=debug`,
//! with span and field filters; a hand-written subscriber did levels only).
//!
//! Levels: with neither the flag nor `RUST_LOG` nothing is installed and the
//! library stays silent (stderr keeps its one-line-error contract). `-v`
//! shows INFO and above, `-vv` DEBUG, `-vvv` TRACE, for every target.
//! `RUST_LOG`'s directives apply as written; a `-v` flag given as well
//! sets the level of everything `RUST_LOG` names no target for.

use tracing_subscriber::EnvFilter;

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

/// The level a verbosity flag asks for (`None`: no flag).
fn flag_level(verbosity: u8) -> Option<&'static str> {
    match verbosity {
        0 => None,
        1 => Some("info"),
        2 => Some("debug"),
        _ => Some("trace"),
    }
}

/// The filter for a verbosity and a `RUST_LOG` value: `None` when neither
/// asks for anything. A directive `RUST_LOG` has that cannot be read is
/// reported on stderr and skipped (the rest still apply).
fn filter(verbosity: u8, rust_log: Option<&str>) -> Option<EnvFilter> {
    let rust_log = rust_log.map(str::trim).filter(|v| !v.is_empty());
    let flag = flag_level(verbosity);
    if rust_log.is_none() && flag.is_none() {
        return None;
    }
    let mut filter = EnvFilter::new("off");
    for directive in rust_log.into_iter().flat_map(|v| v.split(',')) {
        let directive = directive.trim();
        if directive.is_empty() {
            continue;
        }
        match directive.parse() {
            Ok(d) => filter = filter.add_directive(d),
            Err(e) => errln!("keylatch: RUST_LOG: ignoring {directive:?}: {e}"),
        }
    }
    // A bare level replaces the one RUST_LOG may have given; its
    // per-target directives stay.
    if let Some(level) = flag {
        if let Ok(d) = level.parse() {
            filter = filter.add_directive(d);
        }
    }
    Some(filter)
}

/// Each line starts `keylatch [0.123s]`: `exec`'s command writes to the
/// same stderr, and its lines and ours must tell themselves apart.
struct Uptime(std::time::Instant);

impl tracing_subscriber::fmt::time::FormatTime for Uptime {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        write!(w, "keylatch [{:.3}s]", self.0.elapsed().as_secs_f64())
    }
}

/// Installs the stderr subscriber for this verbosity and `$RUST_LOG`
/// (nothing when neither asks). Lines look like
/// `keylatch [0.012s]  INFO keylatch_cluster::connection: connected node=…`; a write
/// to a closed stderr is dropped by the formatter, never a panic.
pub(crate) fn install(verbosity: u8) {
    let rust_log = std::env::var("RUST_LOG").ok();
    if let Some(filter) = filter(verbosity, rust_log.as_deref()) {
        let sub = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .with_timer(Uptime(std::time::Instant::now()))
            .finish();
        // Fails only if a subscriber is already set: then that one wins.
        let _ = tracing::subscriber::set_global_default(sub);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// What a filter lets through, read the way tracing asks it: the most
    /// verbose level it enables anywhere.
    fn hint(f: &EnvFilter) -> Option<tracing::level_filters::LevelFilter> {
        tracing_subscriber::layer::Layer::<tracing_subscriber::Registry>::max_level_hint(f)
    }

    #[test]
    fn flags_and_rust_log_combine() {
        use tracing::level_filters::LevelFilter;
        assert!(filter(0, None).is_none());
        assert!(filter(0, Some("  ")).is_none());
        assert_eq!(hint(&filter(1, None).unwrap()), Some(LevelFilter::INFO));
        assert_eq!(hint(&filter(3, None).unwrap()), Some(LevelFilter::TRACE));
        assert_eq!(
            hint(&filter(0, Some("warn")).unwrap()),
            Some(LevelFilter::WARN)
        );
        // A target's directive stays beside the flag's level.
        let f = filter(1, Some("keylatch_cluster=trace")).unwrap();
        assert_eq!(hint(&f), Some(LevelFilter::TRACE));
        let shown = f.to_string();
        assert!(
            shown.contains("keylatch_cluster=trace") && shown.contains("info"),
            "{shown}"
        );
        // The flag raises RUST_LOG's bare level.
        let f = filter(2, Some("warn")).unwrap();
        assert_eq!(hint(&f), Some(LevelFilter::DEBUG));
        // A directive that cannot be read is skipped, the rest apply.
        let f = filter(0, Some("keylatch_lock=debug,=[bad")).unwrap();
        assert_eq!(hint(&f), Some(LevelFilter::DEBUG));
    }
}
