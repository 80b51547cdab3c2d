//! `keylatch bench --holds N`: the kit's scale mode
//! ([`keylatch_cli::bench::run_scale`]) through `Locks::connect`'s path,
//! so users can see what N held locks cost their own server.

use keylatch::{Locks, LocksConfig};
use keylatch_cli::bench::{run_scale, ScaleOptions};

use super::args;
use super::bench::BenchArgs;
use super::Failure;

/// Connects as `Locks::connect` does (client tracking on), with the
/// watchdog asked for, runs the scale mode and prints its report.
pub(crate) async fn run(holds: usize, a: BenchArgs, seeds: Vec<String>) -> Result<u8, Failure> {
    let cfg = args::client_config(&seeds)?;
    let opts = ScaleOptions {
        holds,
        watchdog: a.watchdog,
        rounds: a.rounds,
        ..ScaleOptions::default()
    };
    let locks = Locks::connect_with(cfg, LocksConfig::default().watchdog_timeout(opts.watchdog))
        .await
        .map_err(|e| args::connect_failure(&seeds, e))?;
    let shown: Vec<String> = seeds.iter().map(|u| keylatch::redact_url(u)).collect();
    outln!(
        "keylatch bench --holds: {} ({}), {holds} watchdog holds, {} acquires in flight, \
         watchdog {:.1}s (a round every {:.1}s), {} rounds idle",
        shown.join(", "),
        if locks.client().is_cluster() {
            "cluster"
        } else {
            "standalone"
        },
        opts.inflight,
        opts.watchdog.as_secs_f64(),
        opts.watchdog.as_secs_f64() / 3.0,
        opts.rounds
    );
    let report = run_scale(&locks, locks.client(), &opts)
        .await
        .map_err(|e| Failure::software(format!("bench: {e}")))?;
    out!("{report}");
    Ok(0)
}
