//! The lock bench through a Sentinel URL next to the direct URL of the
//! same master, in one run (issue 33): a `SentinelGroup` from the harness
//! (a master, 2 replicas, 3 sentinels), two `Locks::connect` clients (one
//! per URL), and the CLI's three scenarios run for each in alternating
//! halves (`keylatch_cli::bench::run_suite`), then the table and the
//! direct/sentinel ratios. Once connected, the two must not differ by more
//! than noise: the sentinels are asked only when a connection is made.
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin sentinel -- [--seconds 10] [--tasks 64]
//! ```

use std::time::Duration;

use keylatch_benches::Flags;
use keylatch_cli::bench::{comparison, run_suite, table, Contender, LockClient, Plan, Progress};
use keylatch_harness::SentinelGroup;
use keylatch_lock::{Lock, Locks};

/// A `Locks` under a label of its own, so the table tells the URLs apart.
struct Labelled {
    label: &'static str,
    locks: Locks,
}

impl LockClient for Labelled {
    type Handle = Lock;

    fn label(&self) -> &str {
        self.label
    }

    fn handle(&self, name: &str) -> Lock {
        self.locks.lock(name)
    }
}

fn main() {
    let flags = Flags::parse(&["--seconds", "--tasks"]);
    let seconds: u64 = flags.number("--seconds", 10);
    let tasks: usize = flags.number("--tasks", 64);
    let group = SentinelGroup::start();
    let master = group.nodes()[group.master()].url();
    let sentinel = group.url();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let direct = Labelled {
            label: "direct",
            locks: Locks::connect(&master).await.expect("direct client"),
        };
        let through = Labelled {
            label: "sentinel",
            locks: Locks::connect(&sentinel).await.expect("sentinel client"),
        };
        println!("direct {master}\nsentinel {sentinel}\n");
        let plan = Plan::new(Duration::from_secs(seconds), tasks);
        let clients: [&dyn Contender; 2] = [&direct, &through];
        let results = run_suite(&clients, &plan, &Progress::hidden(plan.duration))
            .await
            .expect("bench");
        println!("{}", table(&results));
        println!("{}", comparison(&results));
    });
}
