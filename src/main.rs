//! The `keylatch` command line.
//!
//! `keylatch demo` starts a local redis-server when none is reachable and
//! shows the client and a contended lock at work; `exec`, `status`,
//! `unlock` and `bench` live in [`cli`] (one file each; `bench`'s
//! scenarios, histogram and plot are in the library, `keylatch_cli::bench`).
//! The global `-v`/`-vv` flags show the library's `tracing` events.

// Output that never panics: std's `println!` panics when stdout is a
// closed pipe (`keylatch exec --help | head -1`: Rust ignores SIGPIPE, so
// the write fails with EPIPE). These write and drop the error: a reader
// that went away wants no more output. Defined before `mod cli` so the
// subcommands see them.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        let _ = write!(stdout, $($arg)*);
        let _ = stdout.flush();
    }};
}
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}
macro_rules! err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr().lock(), $($arg)*);
    }};
}

mod cli;

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keylatch::{Cmd, Commands, Connection, Pipeline};

const USAGE: &str = "usage: keylatch <command> [options]   (keylatch <command> --help for more)

  exec NAME [NAME...] [--fair|--read|--write|--semaphore N [--permits P]|
       --redlock URL,URL,...] [--wait 10s] [--lease 10s|watchdog]
       [--grace 5s] [--foreground] -- CMD [ARGS...]
         run CMD while holding lock NAME (several: all of them, a
         multi-lock; or N leased permits of semaphore NAME; or a RedLock
         over independent masters); exits with CMD's code, 75 when not had within --wait, 76
         when lost while CMD runs (CMD gets SIGTERM, SIGKILL after
         --grace), 128+N on signal N (129 HUP, 130 INT, 131 QUIT,
         143 TERM), stopping CMD's whole process group first
  elect NAME [--proclaim VALUE] [--wait D] -- CMD [ARGS...]
         run CMD only while leading election NAME (campaigning until
         elected); stopped like exec's CMD when leadership is lost (76)
  elect --observe NAME [--json]
         print who leads election NAME, then a line at each change
  status NAME [--json]
         holders, hold counts, TTL, type, waiters, readers and writer,
         permits of NAME
  watch NAME|PATTERN [--interval 1s] [--json] [--once]
         the locks matching PATTERN across every master, as status shows
         them, redrawn every --interval (--json: a line per lock)
  latch NAME (--set N | --count-down | --wait [--timeout D] | --count)
         a count-down latch shared by processes
  unlock --force NAME [--yes]
         delete lock NAME whoever holds it, after confirmation
  bench [--url URL]... [--cluster URL]... [--clients 64] [--duration 10s]
        [--compare] [--plot out.svg] [--timeline out.svg]
         lock latency and throughput: uncontended pairs, N tasks on distinct
         locks, 8 contenders on one lock; --compare adds redis-rs and rslock
  demo [--url redis://host:port] [--seconds N] [--clients N]
         run a short demo of the client against --url, $KEYLATCH_URL, a
         redis-server on 127.0.0.1:6379, or (if none answers) a redis-server
         it starts itself on a free port (installing Debian's package first
         when missing and running as root, unless KEYLATCH_NO_INSTALL=1)

Servers: --url (repeat for cluster seeds), else $KEYLATCH_URL (comma-
separated), else redis://127.0.0.1:6379. Through Sentinel:
redis+sentinel://[user:pass@]host:26379,host2:26379/MASTER (the master is
asked of the sentinels; their own password: ?sentinel_password=). A
password in a URL is never printed (shown as ***).
Exit codes (sysexits.h, as flock(1)): 0 success (exec: CMD's own code);
  64 usage error (bad command line, or a request the name cannot serve);
  69 no server reachable, or the connection/AUTH refused; 70 the server
  answered with an error, or an internal failure; 75 not had within --wait;
  76 lock lost while CMD ran; 128+N killed by signal N. Errors print one
  line on stderr.
-V / --version: prints `keylatch <version>`.
TLS: rediss://host:port URLs; the server's CA from $KEYLATCH_TLS_CA (a PEM
file) or the URL (rediss://host:port?ca=FILE), else the system roots;
mutual TLS: rediss://host:port?ca=FILE&cert=FILE&key=FILE.
-v / -vv (anywhere before `--`): library events on stderr, INFO+ / DEBUG+.";

struct Args {
    url: Option<String>,
    seconds: u64,
    clients: usize,
}

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args = Args {
        url: std::env::var("KEYLATCH_URL").ok(),
        seconds: 2,
        clients: 64,
    };
    while let Some(a) = argv.next() {
        let mut value = |name: &str| argv.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--url" => args.url = Some(value("--url")?),
            "--seconds" => {
                args.seconds = value("--seconds")?
                    .parse()
                    .map_err(|_| "--seconds takes a whole number".to_owned())?
            }
            "--clients" => {
                args.clients = value("--clients")?
                    .parse()
                    .map_err(|_| "--clients takes a whole number".to_owned())?
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    // The command after `--` is passed on as the bytes given (a Latin-1
    // file name, say); what keylatch reads itself must be UTF-8.
    let (head, after_dashes) = match cli::args::split_os(std::env::args_os().skip(1)) {
        Ok(split) => split,
        Err(f) => return cli::finish(Err(f)),
    };
    let (verbosity, args) = cli::verbose::take_flags(head);
    cli::verbose::install(verbosity);
    let mut argv = args.into_iter();
    let command = argv.next();
    // Each subcommand's own --help, before any parsing that could fail.
    let help = |usage: &str| {
        outln!("{usage}");
        ExitCode::SUCCESS
    };
    let wants_help = |args: &[String]| {
        args.iter()
            .take_while(|a| *a != "--")
            .any(|a| a == "-h" || a == "--help")
    };
    let result = match command.as_deref() {
        Some(sub @ ("exec" | "elect" | "status" | "unlock" | "bench" | "latch" | "watch")) => {
            let rest: Vec<String> = argv.collect();
            let (usage, run): (&str, cli::Subcommand) = match sub {
                "exec" => (cli::exec::USAGE, cli::exec::run),
                "elect" => (cli::elect::USAGE, cli::elect::run),
                "status" => (cli::status::USAGE, cli::status::run),
                "bench" => (cli::bench::USAGE, cli::bench::run),
                "latch" => (cli::latch::USAGE, cli::latch::run),
                "watch" => (cli::watch::USAGE, cli::watch::run),
                _ => (cli::unlock::USAGE, cli::unlock::run),
            };
            if wants_help(&rest) {
                return help(usage);
            }
            return cli::finish(run(cli::args::Argv::with_command(rest, after_dashes)));
        }
        Some("demo") => match parse(argv) {
            Ok(args) => demo_run(args).map_err(cli::Failure::software),
            Err(e) => Err(cli::Failure::usage(e)),
        },
        Some("-V" | "--version") => {
            outln!("keylatch {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Some("-h" | "--help" | "help") => return help(USAGE),
        // No command: the usage is the error, on stderr.
        None => Err(cli::Failure::usage(USAGE)),
        Some(other) => Err(cli::Failure::usage(format!(
            "unknown command {other:?}\n{USAGE}"
        ))),
    };
    cli::finish(result.map(|()| 0))
}

/// The demo on a runtime of its own.
fn demo_run(args: Args) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    // Run the demo as a spawned task, like application code: a
    // future driven by block_on sits outside the worker pool and
    // pays a cross-thread wake-up on every reply.
    rt.block_on(async move {
        tokio::spawn(demo(args))
            .await
            .map_err(|e| format!("demo task failed: {e}"))?
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

async fn demo(args: Args) -> Result<(), String> {
    let (url, _server) = cli::local_server::find_server(args.url)?;
    let shown = keylatch::redact_url(&url);
    let conn = Connection::connect(&url)
        .await
        .map_err(|e| format!("connect {shown}: {e}"))?;
    let err = |e: keylatch::Error| e.to_string();
    outln!("connected to {shown} ({:?})", conn.protocol());
    let info = conn.info(Some("server")).await.map_err(err)?;
    // Valkey answers `redis_version:7.2.4` for compatibility and its own
    // version beside it: show that one.
    let version = |field: &str| {
        info.lines()
            .find(|l| l.starts_with(field))
            .map(str::to_owned)
    };
    if let Some(v) = version("valkey_version:").or_else(|| version("redis_version:")) {
        outln!("server {v}");
    }

    let prefix = format!("keylatch:demo:{}", std::process::id());
    let counter = format!("{prefix}:counter");
    conn.del([counter.as_str()]).await.map_err(err)?;
    sequential_gets(&conn, &counter).await.map_err(err)?;
    explicit_pipeline(&conn, &counter).await?;
    let (ops, elapsed) = concurrent_incrs(&conn, &counter, args.clients, args.seconds).await?;
    let total: i64 = conn
        .cmd(Cmd::new("GET").key(counter.as_str()))
        .await
        .map_err(err)?;
    outln!(
        "{} tasks on one connection: {ops} INCR in {elapsed:.2} s = {:.0} ops/s",
        args.clients,
        ops as f64 / elapsed
    );
    let expected = ops as i64 + 100;
    outln!(
        "counter check: server says {total}, tasks counted {expected}: {}",
        if total == expected {
            "exact"
        } else {
            "MISMATCH"
        }
    );
    conn.del([counter.as_str()]).await.map_err(err)?;
    if total != expected {
        return Err("counter mismatch".to_owned());
    }
    lock_demo(&url, args.clients.clamp(2, 16), args.seconds.max(1)).await
}

/// Sequential round trips: the latency a single caller sees.
async fn sequential_gets(conn: &Connection, counter: &str) -> Result<(), keylatch::Error> {
    let mut lat = Vec::with_capacity(2000);
    for _ in 0..2000 {
        let t = Instant::now();
        conn.get(counter).await?;
        lat.push(t.elapsed());
    }
    lat.sort();
    outln!(
        "sequential GET: p50 {:?}  p99 {:?}  (2000 round trips)",
        percentile(&lat, 0.50),
        percentile(&lat, 0.99)
    );
    Ok(())
}

/// An explicit pipeline: 100 commands, one write.
async fn explicit_pipeline(conn: &Connection, counter: &str) -> Result<(), String> {
    let err = |e: keylatch::Error| e.to_string();
    let p: Pipeline = (0..100).map(|_| Cmd::new("INCR").key(counter)).collect();
    let replies = conn.pipeline(p).await.map_err(err)?;
    let last: i64 = keylatch::FromReply::from_reply(
        replies
            .into_iter()
            .last()
            .ok_or("empty pipeline reply")?
            .map_err(err)?,
    )
    .map_err(err)?;
    outln!("pipeline of 100 INCR: counter = {last}");
    Ok(())
}

/// Many tasks, one connection: automatic pipelining. How many INCRs the
/// tasks counted, in how many seconds.
async fn concurrent_incrs(
    conn: &Connection,
    counter: &str,
    clients: usize,
    seconds: u64,
) -> Result<(u64, f64), String> {
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(seconds.max(1));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(clients);
    for _ in 0..clients.max(1) {
        let conn = conn.clone();
        let counter = counter.to_owned();
        let done = Arc::clone(&done);
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                conn.cmd::<i64>(Cmd::new("INCR").key(counter.as_str()))
                    .await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, keylatch::Error>(())
        }));
    }
    for t in tasks {
        t.await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    Ok((done.load(Ordering::Relaxed), elapsed))
}

/// Workers on separate lock clients contend for one lock around a plain
/// read-modify-write of a shared counter; the final count and the fencing
/// tokens (strictly rising in hold order) show exclusion held.
async fn lock_demo(url: &str, workers: usize, seconds: u64) -> Result<(), String> {
    let err = |e: keylatch::LockError| e.to_string();
    let name = format!("keylatch:demo:{}:lock", std::process::id());
    let counter = format!("{{{name}}}:counter");
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let history = Arc::new(std::sync::Mutex::new(Vec::new()));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let locks = keylatch::Locks::connect(url).await.map_err(err)?;
        let lock = locks.lock(&name);
        let (counter, history) = (counter.clone(), Arc::clone(&history));
        tasks.push(tokio::spawn(async move {
            let client = locks.client().clone();
            let mut waits = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                let guard = lock.acquire().await?;
                waits.push(t.elapsed());
                let v: Option<i64> = client.cmd(Cmd::new("GET").key(counter.as_str())).await?;
                client.set(counter.as_str(), v.unwrap_or(0) + 1).await?;
                if let Ok(mut h) = history.lock() {
                    h.push(guard.fencing_token().unwrap_or(0));
                }
                guard.unlock().await?;
            }
            Ok::<_, keylatch::LockError>(waits)
        }));
    }
    let mut waits = Vec::new();
    for t in tasks {
        waits.extend(t.await.map_err(|e| e.to_string())?.map_err(err)?);
    }
    let elapsed = started.elapsed().as_secs_f64();
    waits.sort();
    let client = keylatch::Client::connect(url)
        .await
        .map_err(|e| e.to_string())?;
    let total: i64 = client
        .cmd(Cmd::new("GET").key(counter.as_str()))
        .await
        .map_err(|e| e.to_string())?;
    client
        .del([counter.as_str()])
        .await
        .map_err(|e| e.to_string())?;
    let tokens = history.lock().map(|h| h.clone()).unwrap_or_default();
    let rising = tokens.windows(2).all(|w| w[0] < w[1]);
    outln!(
        "lock: {workers} workers on one lock: {} holds in {elapsed:.2} s = {:.0}/s; wait p50 {:?}, p99 {:?}",
        waits.len(),
        waits.len() as f64 / elapsed,
        percentile(&waits, 0.50),
        percentile(&waits, 0.99)
    );
    let exact = total == waits.len() as i64;
    outln!(
        "exclusion check: counter {total} for {} holds ({}), fencing tokens {}",
        waits.len(),
        if exact { "exact" } else { "LOST UPDATES" },
        if rising {
            "strictly rising"
        } else {
            "NOT RISING"
        }
    );
    if exact && rising {
        Ok(())
    } else {
        Err("exclusion check failed".to_owned())
    }
}
