//! RedLock over 5 independent masters (started here on loopback): acquire
//! and release latency, keylatch's `RedLock` (masters' `Locks` as the README
//! builds them; under the watchdog, and with a fixed 30 s lease like
//! rslock's) against rslock's `LockManager` over the same 5, in one run.
//! One task, a free lock each time (uncontended), `--pairs` pairs each,
//! alternating blocks of 100 so both see the same machine.
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin redlock -- [--pairs 2000]
//! ```

use std::time::{Duration, Instant};

use keylatch_benches::{arg, summarise};
use keylatch_lock::{Locks, RedLock};

fn main() {
    let pairs = arg("--pairs", 2000) as usize;
    let masters = keylatch_harness::Masters::start(5);
    let urls = masters.urls();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let mut nodes = Vec::new();
        for u in &urls {
            nodes.push(Locks::connect(u).await.expect("connect"));
        }
        let ours = RedLock::new(nodes);
        let clients: Vec<redis::Client> = urls
            .iter()
            .map(|u| redis::Client::open(u.as_str()).expect("rslock client"))
            .collect();
        let theirs = rslock::LockManager::from_clients(clients);
        // Warm both (connections, scripts).
        for i in 0..50 {
            let name = format!("warm:{i}");
            ours.lock(&name)
                .acquire()
                .await
                .expect("acquire")
                .unlock()
                .await
                .expect("release");
            let l = theirs
                .lock(name.as_bytes(), Duration::from_secs(30))
                .await
                .expect("rslock lock");
            theirs.unlock(&l).await;
        }
        let (mut k, mut r) = (Vec::with_capacity(pairs), Vec::with_capacity(pairs));
        let mut f = Vec::with_capacity(pairs);
        let mut i = 0;
        while i < pairs {
            for _ in 0..100 {
                let name = format!("k:{i}");
                let t = Instant::now();
                let g = ours.lock(&name).acquire().await.expect("acquire");
                g.unlock().await.expect("release");
                k.push(t.elapsed());
                let name = format!("f:{i}");
                let t = Instant::now();
                let g = ours
                    .lock(&name)
                    .try_acquire(Duration::ZERO, Some(Duration::from_secs(30)))
                    .await
                    .expect("acquire")
                    .expect("free");
                g.unlock().await.expect("release");
                f.push(t.elapsed());
                let name = format!("r:{i}");
                let t = Instant::now();
                let l = theirs
                    .lock(name.as_bytes(), Duration::from_secs(30))
                    .await
                    .expect("rslock lock");
                theirs.unlock(&l).await;
                r.push(t.elapsed());
                i += 1;
            }
        }
        let (ks, rs, fs) = (summarise(&mut k), summarise(&mut r), summarise(&mut f));
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        println!("RedLock over 5 masters, uncontended acquire + release, {pairs} pairs each");
        println!("{:<30} {:>10} {:>10}", "", "p50 µs", "p99 µs");
        println!(
            "{:<30} {:>10.1} {:>10.1}",
            "keylatch RedLock (watchdog)",
            us(ks.p50),
            us(ks.p99)
        );
        println!(
            "{:<30} {:>10.1} {:>10.1}",
            "keylatch RedLock (30 s lease)",
            us(fs.p50),
            us(fs.p99)
        );
        println!(
            "{:<30} {:>10.1} {:>10.1}",
            "rslock lock + unlock",
            us(rs.p50),
            us(rs.p99)
        );
        println!(
            "keylatch / rslock: watchdog p50 {:.2}, p99 {:.2}; fixed lease p50 {:.2}, p99 {:.2}",
            us(ks.p50) / us(rs.p50),
            us(ks.p99) / us(rs.p99),
            us(fs.p50) / us(rs.p50),
            us(fs.p99) / us(rs.p99)
        );
    });
    drop(masters);
}
