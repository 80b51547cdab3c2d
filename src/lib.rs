//! `keylatch-cli`: the `keylatch` command line (its binary, `src/main.rs`)
//! and the benchmark kit it measures with.
//!
//! The kit is a library so the comparison binary in `benches/` (redis-rs,
//! rslock) runs the very same scenarios through the very same report code.
//! It lives here rather than in the `keylatch` library so an application
//! that depends on `keylatch` compiles neither the CLI nor the kit.
//!
//! ```no_run
//! use keylatch_cli::bench::Histogram;
//! let mut h = Histogram::new();
//! h.record(std::time::Duration::from_micros(120));
//! assert_eq!(h.count(), 1);
//! ```

#![forbid(unsafe_code)]

pub mod bench;
