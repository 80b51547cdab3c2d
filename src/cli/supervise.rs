//! The command `exec` runs, supervised as a whole: it starts in a process
//! group of its own, and every stop (a forwarded signal, a lost lock, the
//! command's own exit leaving processes behind) reaches the whole group,
//! then SIGKILL after the grace period, so that nothing the command started
//! outlives the lock (as `timeout(1)` and systemd's
//! `KillMode=control-group` do).
//!
//! What it cannot reach: a process that left the group itself (`setsid`,
//! daemons that double-fork into a new session). Such a process is no
//! longer part of the command, and runs on after the lock is released.
//!
//! With `--foreground` the command stays in keylatch's own group (so an
//! interactive command can read the terminal); then only its main process
//! is signalled, and what it started is not waited for.
//!
//! Group members are read from `/proc` (Linux): the workspace forbids
//! `unsafe`, so there is no `kill(2)` or `waitpid(2)` here; signals go out
//! through kill(1), which the harness and CI already need.

use std::io;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use super::signals::{Signals, Stop};

/// How often the group is looked at while it is asked to stop.
const POLL: Duration = Duration::from_millis(20);
/// The longest keylatch waits for the group to go after SIGKILL (a process
/// in uninterruptible sleep takes its time; it cannot run on anyway).
const AFTER_KILL: Duration = Duration::from_secs(5);

/// A running command and the group it leads.
pub(crate) struct Supervised {
    child: Child,
    /// The process group's id (the command's pid); `None` in `--foreground`
    /// mode, or once the command has been reaped without one.
    group: Option<u32>,
    pid: Option<u32>,
}

/// How a stop went.
#[derive(Debug, Default)]
pub(crate) struct StopReport {
    /// SIGKILL had to be sent (the grace period ran out).
    pub(crate) killed: bool,
    /// Processes of the group still alive at the end (0 unless SIGKILL
    /// could not end them within [`AFTER_KILL`]).
    pub(crate) left: usize,
}

impl Supervised {
    /// Spawns `cmd`, in a new process group unless `foreground`.
    pub(crate) fn spawn(cmd: &mut Command, foreground: bool) -> io::Result<Self> {
        if !foreground {
            // setpgid(0, 0) in the child before exec: the group's id is
            // the child's pid.
            cmd.process_group(0);
        }
        let child = cmd.spawn()?;
        let pid = child.id();
        Ok(Self {
            child,
            group: if foreground { None } else { pid },
            pid,
        })
    }

    /// Waits for the command's main process to exit (and reaps it). Cancel
    /// safe.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// The live processes (zombies do not count) of the command's group.
    pub(crate) fn members(&self) -> usize {
        match self.group {
            Some(g) => group_members(g),
            None => usize::from(self.main_alive()),
        }
    }

    /// Whether the command's main process is stopped (state `T`): in a
    /// group of its own it is a background job of the terminal, and reading
    /// the terminal stops it with SIGTTIN.
    pub(crate) fn main_stopped(&self) -> bool {
        self.pid.is_some_and(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| parse_stat(&s))
                .is_some_and(|(state, _)| state == 'T')
        })
    }

    fn main_alive(&self) -> bool {
        self.pid.is_some_and(process_alive)
    }

    /// Stops the command as a whole: `first` to the group (to the main
    /// process only in `--foreground` mode), up to `grace` for every
    /// process to end, then SIGKILL; a second terminating signal on
    /// `signals` meanwhile cuts the grace short. Returns once the group is
    /// gone (or SIGKILL could not end it within a bound) with the command
    /// reaped.
    pub(crate) async fn stop(
        &mut self,
        first: Stop,
        grace: Duration,
        signals: &mut Signals,
    ) -> StopReport {
        self.stop_by(first, Instant::now() + grace, signals).await
    }

    /// [`stop`](Self::stop) with SIGKILL due at `kill_at` (an instant, not
    /// a span: a fixed lease's stop must not drift later by the time the
    /// signals take to send, nor by a timer that fired late).
    pub(crate) async fn stop_by(
        &mut self,
        first: Stop,
        kill_at: Instant,
        signals: &mut Signals,
    ) -> StopReport {
        let mut report = StopReport::default();
        // Already due (a late timer, a lease nearly out): SIGKILL at once,
        // without the two kill(1) runs of the polite stop first.
        if self.members() > 0 && Instant::now() < kill_at {
            self.send(first.name).await;
            // A stopped process (a background job that read the terminal,
            // one stopped with Ctrl-Z or SIGSTOP) would hold the signal
            // pending until the grace ran out: CONT lets it act on it, as
            // timeout(1) and systemd do.
            self.send("CONT").await;
            tokio::select! {
                () = self.gone_by(kill_at) => {}
                again = signals.recv() => {
                    errln!("keylatch: SIG{} during the grace period: SIGKILL now", again.name);
                }
            }
        }
        if self.members() > 0 {
            report.killed = true;
            self.send("KILL").await;
            self.gone_by(Instant::now() + AFTER_KILL).await;
        }
        report.left = self.members();
        // Reaps the main process (SIGKILL first if it still runs: only in
        // the bounded case above).
        if self.main_alive() {
            let _ = self.child.kill().await;
        } else {
            let _ = self.child.wait().await;
        }
        report
    }

    /// Polls until the group has no live process, or `until`.
    async fn gone_by(&mut self, until: Instant) {
        while self.members() > 0 && Instant::now() < until {
            // The last step ends at `until`, not up to a poll after it.
            let step = POLL.min(until.saturating_duration_since(Instant::now()));
            match self.child.try_wait() {
                // Reaps the main process as soon as it exits; the group is
                // waited for by membership, not by this.
                Ok(None) => {
                    let _ = tokio::time::timeout(step, self.child.wait()).await;
                }
                _ => tokio::time::sleep(step).await,
            }
        }
    }

    /// Sends SIG`name` to the group (`kill -NAME -- -PGID`), or to the main
    /// process in `--foreground` mode.
    async fn send(&self, name: &str) {
        let target = match (self.group, self.pid) {
            (Some(g), _) => format!("-{g}"),
            (None, Some(p)) if self.main_alive() => p.to_string(),
            _ => return,
        };
        let sent = Command::new("kill")
            .args([&format!("-{name}"), "--", &target])
            .stderr(std::process::Stdio::null())
            .status()
            .await;
        if let Err(e) = sent {
            errln!("keylatch: cannot run kill(1) to send SIG{name}: {e}");
        }
    }
}

/// Whether `pid` runs (exists and is not a zombie).
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => parse_stat(&stat).is_some_and(|(state, _)| !dead(state)),
        Err(_) => false,
    }
}

/// The live processes whose process group is `group`.
fn group_members(group: u32) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|stat| parse_stat(&stat))
        .filter(|&(state, pgrp)| pgrp == group && !dead(state))
        .count()
}

/// A zombie (`Z`) or dead (`X`) process no longer runs anything.
fn dead(state: char) -> bool {
    matches!(state, 'Z' | 'X')
}

/// The state and process group from a `/proc/PID/stat` line: `pid (comm)
/// state ppid pgrp …`, where comm may hold spaces and parentheses, so the
/// fields are counted from the last `)`.
fn parse_stat(stat: &str) -> Option<(char, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_read_from_the_last_parenthesis() {
        assert_eq!(
            parse_stat("42 (sleep) S 1 42 42 0 -1 4194560"),
            Some(('S', 42))
        );
        // A command name with spaces and a parenthesis of its own.
        assert_eq!(parse_stat("7 (a) b) Z 1 9 9 0"), Some(('Z', 9)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) R 0 notanumber"), None);
    }

    #[test]
    fn this_process_is_alive_and_in_its_own_group_count() {
        let me = std::process::id();
        assert!(process_alive(me));
        let stat = std::fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
        let (_, group) = parse_stat(&stat).unwrap();
        assert!(group_members(group) >= 1);
        assert!(!process_alive(u32::MAX));
    }
}
