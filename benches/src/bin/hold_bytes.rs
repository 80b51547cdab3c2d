//! `hold_bytes`: live heap bytes per held watchdog lock, by stage (issue
//! 31's memory goal), from a counting global allocator: bytes the process
//! has allocated and not freed, not the resident set (which also counts
//! what the allocator keeps after a free).
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml --bin hold_bytes -- \
//!     [--holds 100000] [--watchdog-ms 3000] [--url redis://…]
//! ```
//!
//! Stages: N lock handles made (`locks.lock(name)`, kept); N acquired
//! (guards kept, handles dropped); the engine watching them all; after a
//! renewal round; after every release, once the engine dropped them.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use keylatch_benches::{url_or_local_server, Flags};
use keylatch_cluster::ClientConfig;
use keylatch_lock::{Locks, LocksConfig};

struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: delegates every call to the system allocator unchanged; only
// counts the bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

fn main() {
    let flags = Flags::parse(&["--holds", "--watchdog-ms", "--url"]);
    let holds: usize = flags.number("--holds", 100_000);
    let watchdog = Duration::from_millis(flags.number("--watchdog-ms", 3000));
    let url = flags.text("--url");
    let (url, _server) = url_or_local_server(url.as_deref());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(&url, holds, watchdog));
}

async fn run(url: &str, holds: usize, watchdog: Duration) {
    let config = LocksConfig::default().watchdog_timeout(watchdog);
    let locks = Locks::connect_with(ClientConfig::from_url(url).expect("url"), config)
        .await
        .expect("client");
    // Warm: the connection, scripts, the engine's task.
    let g = locks.lock("hold-bytes:warm").acquire().await.expect("warm");
    g.unlock().await.expect("unlock");
    let n = holds as i64;
    let per = |from: i64| (live() - from) / n;
    let l0 = live();
    let handles: Vec<_> = (0..holds)
        .map(|i| locks.lock(&format!("hold-bytes:{i}")))
        .collect();
    println!("{holds} handles made: {} B per handle", per(l0));
    let mut guards = Vec::with_capacity(holds);
    for chunk in handles.chunks(256) {
        let got = futures_join(chunk).await;
        guards.extend(got);
    }
    drop(handles);
    println!(
        "acquired ({} guards, handles dropped): {} B per hold (a LockGuard is {} B)",
        guards.len(),
        per(l0),
        std::mem::size_of::<keylatch_lock::LockGuard>()
    );
    let until = Instant::now() + Duration::from_secs(30);
    while locks.watched_holds() < holds && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "watched by the engine ({}): {} B per hold",
        locks.watched_holds(),
        per(l0)
    );
    let r = locks.renewal_rounds();
    while locks.renewal_rounds() < r + 2 && Instant::now() < until + watchdog * 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!("after a renewal round: {} B per hold", per(l0));
    // Released 256 at a time, as they were acquired: one by one, a million
    // releases took four minutes of round trips.
    let mut guards = guards;
    while !guards.is_empty() {
        let tasks: Vec<_> = guards
            .drain(..guards.len().min(256))
            .map(|g| tokio::spawn(async move { g.unlock().await.is_ok() }))
            .collect();
        for t in tasks {
            let _ = t.await;
        }
    }
    drop(guards);
    let until = Instant::now() + Duration::from_secs(30);
    while locks.watched_holds() > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "released, engine empty ({} watched): {} B per former hold still allocated",
        locks.watched_holds(),
        per(l0)
    );
}

/// Acquires every handle of `chunk` at once (watchdog).
async fn futures_join(chunk: &[keylatch_lock::Lock]) -> Vec<keylatch_lock::LockGuard> {
    let tasks: Vec<_> = chunk
        .iter()
        .map(|l| {
            let l = l.clone();
            tokio::spawn(async move { l.acquire().await })
        })
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        if let Ok(Ok(g)) = t.await {
            out.push(g);
        }
    }
    out
}
