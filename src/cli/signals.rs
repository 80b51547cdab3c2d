//! The terminating signals `exec` handles, one way whether they come while
//! it waits for the lock or while the command runs: INT (Ctrl-C), TERM
//! (`kill`, service managers), HUP (a closed terminal or ssh session) and
//! QUIT (Ctrl-\). Registered before anything else, so from then on none of
//! them can end keylatch with its command still running or its lock held.

use std::io;

use tokio::signal::unix::{signal, Signal, SignalKind};

/// One terminating signal, as received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stop {
    /// The signal's number (2, 15, 1, 3).
    pub(crate) number: i32,
    /// Its name without `SIG`, as kill(1) takes it (`INT`, `TERM`, …).
    pub(crate) name: &'static str,
}

impl Stop {
    /// The exit code that reports it, by the shell convention (128 + the
    /// signal's number): 130, 143, 129, 131.
    pub(crate) fn exit_code(self) -> u8 {
        u8::try_from(128 + self.number).unwrap_or(u8::MAX)
    }
}

/// SIGINT.
pub(crate) const INT: Stop = Stop {
    number: 2,
    name: "INT",
};
/// SIGTERM.
pub(crate) const TERM: Stop = Stop {
    number: 15,
    name: "TERM",
};
/// SIGHUP.
pub(crate) const HUP: Stop = Stop {
    number: 1,
    name: "HUP",
};
/// SIGQUIT.
pub(crate) const QUIT: Stop = Stop {
    number: 3,
    name: "QUIT",
};

/// The four handlers; while this lives, those signals no longer end the
/// process by their default action.
pub(crate) struct Signals {
    int: Signal,
    term: Signal,
    hup: Signal,
    quit: Signal,
}

impl Signals {
    /// Installs the handlers (inside a tokio runtime).
    pub(crate) fn install() -> io::Result<Self> {
        Ok(Self {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
            quit: signal(SignalKind::quit())?,
        })
    }

    /// The next terminating signal. Cancel safe: a signal that arrives
    /// while nobody awaits is kept for the next call.
    pub(crate) async fn recv(&mut self) -> Stop {
        // `recv` answers `None` only once its driver is gone (the runtime
        // shutting down); such a stream is never ready again.
        tokio::select! {
            Some(()) = self.int.recv() => INT,
            Some(()) = self.term.recv() => TERM,
            Some(()) = self.hup.recv() => HUP,
            Some(()) = self.quit.recv() => QUIT,
            else => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell_convention() {
        assert_eq!(INT.exit_code(), 130);
        assert_eq!(TERM.exit_code(), 143);
        assert_eq!(HUP.exit_code(), 129);
        assert_eq!(QUIT.exit_code(), 131);
    }
}
