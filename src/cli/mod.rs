//! The `keylatch` subcommands besides `demo`: `exec`, `status`, `unlock`,
//! `bench`.
//!
//! Layout:
//! - [`args`]: the hand-written argument reader, durations, server URLs.
//! - [`exec`]: run a command while holding a lock (the distributed `flock`)
//!   or leased semaphore permits; [`held`]: what it holds, one shape;
//!   [`supervise`]: the command's process group, stopped as a whole;
//!   [`signals`]: INT, TERM, HUP and QUIT, handled alike (exit 128 + N).
//! - [`elect`]: run a command only while leading an election, or print
//!   who leads as it changes (`--observe`).
//! - [`latch`]: set, count down, wait on or read a count-down latch.
//! - [`status`]: what a lock name holds right now, for people and scripts.
//! - [`unlock`]: force-release a lock, with confirmation.
//! - [`watch`]: the locks matching a pattern, redrawn every interval.
//! - [`bench`](mod@bench): the lock benchmark (scenarios, histogram, table and plot
//!   live in the library, [`keylatch_cli::bench`]); [`compare`] finds and runs
//!   the comparison binary for `--compare`.
//! - [`local_server`]: a redis-server for `demo` and `bench` when none was
//!   named and none answers on 127.0.0.1:6379.
//! - [`verbose`]: the global `-v`/`-vv` flags and the stderr `tracing`
//!   subscriber they install.
//!
//! Every subcommand returns a [`Failure`] (exit code + one-line message)
//! instead of printing and exiting itself, so `main` owns the process exit.

pub(crate) mod args;
pub(crate) mod bench;
pub(crate) mod bench_scale;
pub(crate) mod compare;
pub(crate) mod elect;
pub(crate) mod exec;
pub(crate) mod held;
pub(crate) mod latch;
pub(crate) mod local_server;
pub(crate) mod signals;
pub(crate) mod status;
pub(crate) mod supervise;
pub(crate) mod unlock;
pub(crate) mod verbose;
pub(crate) mod watch;

use std::process::ExitCode;

/// A usage error: a bad command line, or a request the name cannot serve
/// (unlock of a non-lock, a semaphore never created) (sysexits' EX_USAGE).
pub(crate) const EXIT_USAGE: u8 = 64;
/// No server could be reached or the handshake (AUTH) was refused
/// (sysexits' EX_UNAVAILABLE).
pub(crate) const EXIT_UNAVAILABLE: u8 = 69;
/// The server answered with an error, or keylatch itself failed
/// (sysexits' EX_SOFTWARE).
pub(crate) const EXIT_SOFTWARE: u8 = 70;
/// The lock could not be had within `--wait` (sysexits' EX_TEMPFAIL: try again later).
pub(crate) const EXIT_TIMEOUT: u8 = 75;
/// The lock was lost while the command ran; the command was terminated.
pub(crate) const EXIT_LOST: u8 = 76;

/// A subcommand's unhappy ending: the exit code and a one-line message
/// (printed as `keylatch: <message>`; empty prints nothing).
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Failure {
    /// A usage error (exit 64).
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self::with(EXIT_USAGE, message)
    }

    /// No server reachable, or the connection refused (exit 69).
    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Self::with(EXIT_UNAVAILABLE, message)
    }

    /// A server error or an internal failure (exit 70).
    pub(crate) fn software(message: impl Into<String>) -> Self {
        Self::with(EXIT_SOFTWARE, message)
    }

    /// A client call's failure: 69 when the connection is gone (the
    /// server unreachable, restarting, or gone away), else 70.
    pub(crate) fn client(e: &keylatch::Error, message: impl Into<String>) -> Self {
        let code = if e.is_connection_error() {
            EXIT_UNAVAILABLE
        } else {
            EXIT_SOFTWARE
        };
        Self::with(code, message)
    }

    /// A lock call's failure: 64 when the name cannot serve the request
    /// (it holds something else, a count out of range, a refusal), 69 when
    /// the connection is gone or too few RedLock masters answer, else 70.
    pub(crate) fn lock(e: &keylatch::LockError, message: impl Into<String>) -> Self {
        use keylatch::LockError as E;
        let code = match e {
            E::WrongType { .. }
            | E::NotReentrant { .. }
            | E::UpgradeRefused { .. }
            | E::SelfDeadlock { .. }
            | E::PermitCount { .. }
            | E::CountTooLarge { .. }
            | E::NoSuchSemaphore { .. }
            | E::ForceUnlockRefused { .. } => EXIT_USAGE,
            E::Client(c) if c.is_connection_error() => EXIT_UNAVAILABLE,
            // Too few RedLock masters answered at all: unavailable, as a
            // server that cannot be reached is.
            E::Quorum { .. } => EXIT_UNAVAILABLE,
            _ => EXIT_SOFTWARE,
        };
        Self::with(code, message)
    }

    fn with(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// A subcommand's entry point: the arguments after its name in, the exit
/// code out.
pub(crate) type Subcommand = fn(args::Argv) -> Result<u8, Failure>;

/// Prints the failure, if any, and turns the outcome into the process exit.
pub(crate) fn finish(result: Result<u8, Failure>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            if !f.message.is_empty() {
                errln!("keylatch: {}", f.message);
            }
            ExitCode::from(f.code)
        }
    }
}

/// A runtime for one subcommand. Two workers are plenty: the CLI waits on
/// one lock and one child.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::software(format!("cannot start the async runtime: {e}")))
}
