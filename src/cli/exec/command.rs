//! The command's life while the lock is held: spawned with the hold in
//! its environment, watched until it exits, the hold is lost, a fixed lease
//! is about to end or a signal comes, then its group stopped and the hold
//! released, in that order.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use keylatch::{LockError, LossReason};
use tokio::process::Command;

use super::options::ExecArgs;
use super::{release, show, subject, target};
use crate::cli::held::Held;
use crate::cli::signals::{Signals, Stop, TERM};
use crate::cli::supervise::Supervised;
use crate::cli::{Failure, EXIT_LOST, EXIT_SOFTWARE};

/// Why the wait on the command ended.
enum Outcome {
    Exited(std::io::Result<ExitStatus>),
    Lost(LossReason),
    Signalled(Stop),
    /// A fixed `--lease` is about to end: the stop begins early enough
    /// for SIGKILL to go out at this instant, a margin before it ends.
    LeaseEnding(Instant),
}

/// Runs the command while `held`, and releases.
pub(super) async fn run_held(
    a: &ExecArgs,
    held: (Held, Option<String>),
    signals: &mut Signals,
) -> Result<u8, Failure> {
    let (guard, owner) = held;
    let mut cmd = command(a, &guard, owner.as_deref());
    let mut child = match Supervised::spawn(&mut cmd, a.foreground) {
        Ok(c) => c,
        Err(e) => {
            release(guard, &subject(a)).await;
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            return Err(Failure {
                code,
                message: format!("cannot run {:?}: {e}", a.command[0]),
            });
        }
    };
    let outcome = watch(a, &mut child, &guard, signals).await;
    match outcome {
        Outcome::Exited(Ok(status)) => {
            after_exit(a, exit_code(status), child, guard, signals).await
        }
        Outcome::Exited(Err(e)) => {
            let report = child.stop(TERM, a.grace, signals).await;
            warn_left(report.left);
            release(guard, &subject(a)).await;
            Err(Failure::software(format!(
                "waiting for the command failed: {e}"
            )))
        }
        Outcome::Lost(reason) => {
            errln!(
                "keylatch: {} lost while the command ran ({}); sending SIGTERM to {}, \
                 SIGKILL after {}",
                subject(a),
                describe(reason, a.lease.is_some()),
                target(a),
                show(a.grace)
            );
            stop_for_loss(child, guard, signals, Instant::now() + a.grace).await
        }
        Outcome::LeaseEnding(kill_at) => {
            errln!(
                "keylatch: the fixed --lease of {} is about to end; sending SIGTERM to {}, \
                 SIGKILL in {}",
                subject(a),
                target(a),
                show(kill_at.saturating_duration_since(Instant::now()))
            );
            stop_for_loss(child, guard, signals, kill_at).await
        }
        Outcome::Signalled(stop) => {
            errln!(
                "keylatch: got SIG{}; sending it to {}, SIGKILL after {}",
                stop.name,
                target(a),
                show(a.grace)
            );
            let report = child.stop(stop, a.grace, signals).await;
            warn_left(report.left);
            release(guard, &subject(a)).await;
            Err(Failure {
                code: stop.exit_code(),
                message: String::new(),
            })
        }
    }
}

/// The command with the hold in its environment: the lock's name, its
/// owner (or the permit ids) and its fencing token; variables of those
/// names inherited from keylatch's own environment are removed, as they
/// would belong to some other hold.
fn command(a: &ExecArgs, held: &Held, owner: Option<&str>) -> Command {
    let mut cmd = Command::new(&a.command[0]);
    cmd.args(&a.command[1..]).env("KEYLATCH_LOCK_NAME", &a.name);
    match owner {
        Some(o) => cmd
            .env("KEYLATCH_LOCK_OWNER", o)
            .env_remove("KEYLATCH_PERMIT_IDS"),
        None => cmd.env_remove("KEYLATCH_LOCK_OWNER"),
    };
    if let Some(ids) = held.permit_ids() {
        cmd.env("KEYLATCH_PERMIT_IDS", ids);
    }
    match held.fencing_token() {
        Some(t) => cmd.env("KEYLATCH_FENCING_TOKEN", t.to_string()),
        // An inherited token would belong to some other hold.
        None => cmd.env_remove("KEYLATCH_FENCING_TOKEN"),
    };
    match held.fencing_tokens(&a.names) {
        Some(t) => cmd.env("KEYLATCH_FENCING_TOKENS", t),
        None => cmd.env_remove("KEYLATCH_FENCING_TOKENS"),
    };
    cmd
}

/// When the stop of a fixed lease begins, and when its SIGKILL goes out.
///
/// A fixed lease ends for sure (nothing renews it): SIGKILL goes out a
/// [`kill_margin`] before its local end, and SIGTERM a grace before that
/// (half the lease when the grace is longer), so that the group is gone by
/// the time the lock can pass to someone else, instead of a grace after.
/// (A watchdog hold's end is not known ahead: a late renewal may still
/// come, so its stop waits for the loss, and the command may overlap the
/// next holder by at most the grace.)
fn lease_ending(a: &ExecArgs, guard: &Held) -> Option<(Instant, Instant)> {
    let (lease, left) = (a.lease?, guard.remaining_lease()?);
    Some(stop_times(Instant::now(), lease, left, a.grace))
}

/// [`lease_ending`]'s arithmetic: from `now`, with `left` of a `lease` to
/// run, the instants SIGTERM and SIGKILL go out.
fn stop_times(
    now: Instant,
    lease: Duration,
    left: Duration,
    grace: Duration,
) -> (Instant, Instant) {
    let kill_at = now + left.saturating_sub(kill_margin(lease));
    let term_at = kill_at
        .checked_sub(grace.min(lease / 2))
        .map_or(now, |t| t.max(now));
    (term_at, kill_at)
}

/// How long before a fixed lease's local end SIGKILL goes out: a tenth of
/// the lease, at most 250 ms. It covers sending the signal (kill(1) is a
/// process to start, slow on a loaded machine) and the processes dying,
/// so none is seen running once the lock has passed on.
fn kill_margin(lease: Duration) -> Duration {
    (lease / 10).min(Duration::from_millis(250))
}

/// Waits for the first of: the command's exit, the hold's loss, a signal,
/// the fixed lease's stop time. Meanwhile says once if the command was
/// stopped by the terminal (unless `--foreground`).
async fn watch(
    a: &ExecArgs,
    child: &mut Supervised,
    guard: &Held,
    signals: &mut Signals,
) -> Outcome {
    let lost = guard.lost();
    tokio::pin!(lost);
    let mut look = tokio::time::interval(STOPPED_CHECK);
    let mut told = a.foreground;
    let ending = lease_ending(a, guard);
    let lease_end = async {
        match ending {
            Some((term_at, _)) => tokio::time::sleep_until(term_at.into()).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(lease_end);
    loop {
        tokio::select! {
            status = child.wait() => break Outcome::Exited(status),
            reason = &mut lost => break Outcome::Lost(reason),
            stop = signals.recv() => break Outcome::Signalled(stop),
            () = &mut lease_end => {
                break Outcome::LeaseEnding(
                    ending.map_or_else(|| Instant::now() + a.grace, |(_, kill_at)| kill_at),
                );
            }
            _ = look.tick(), if !told => {
                if child.main_stopped() {
                    told = true;
                    errln!(
                        "keylatch: the command is stopped (did it read the terminal? it runs in a \
                         process group of its own: use --foreground for interactive commands); \
                         the lock stays held"
                    );
                }
            }
        }
    }
}

/// The command exited with `code`: what it left running in its group is
/// stopped, then the hold released; its code is ours unless the hold turned
/// out to be gone already.
async fn after_exit(
    a: &ExecArgs,
    code: u8,
    mut child: Supervised,
    guard: Held,
    signals: &mut Signals,
) -> Result<u8, Failure> {
    // What the command left running in its group would run on
    // unlocked once we release: it is stopped first.
    let left = child.members();
    if left > 0 {
        errln!(
            "keylatch: the command exited {code} leaving {left} process(es) in its group; \
             sending SIGTERM, SIGKILL after {}",
            show(a.grace)
        );
        let report = child.stop(TERM, a.grace, signals).await;
        warn_left(report.left);
    }
    match guard.unlock().await {
        Ok(()) => Ok(code),
        // The hold ended before the command did (expired or deleted
        // behind us) and the loss signal had not fired yet: the
        // command may have overlapped another holder, which the
        // caller must hear about more than the command's own code.
        Err(LockError::NotOwner { .. } | LockError::Expired { .. }) => Err(Failure {
            code: EXIT_LOST,
            message: format!(
                "{} was lost before the command finished (it exited {code})",
                subject(a)
            ),
        }),
        Err(e) => {
            errln!(
                "keylatch: releasing {} failed ({e}); retrying until its lease ends",
                subject(a)
            );
            Ok(code)
        }
    }
}

/// The hold was lost, or its fixed lease is about to end: the group gets
/// SIGTERM, SIGKILL at `kill_at`, and then the hold is released if it is
/// still ours (after an `Expired` loss the server may have been
/// unreachable, not the hold taken; a fixed lease is most often still ours
/// for a moment: released rather than left to run out). Exit 76.
async fn stop_for_loss(
    mut child: Supervised,
    guard: Held,
    signals: &mut Signals,
    kill_at: Instant,
) -> Result<u8, Failure> {
    let report = child.stop_by(TERM, kill_at, signals).await;
    warn_left(report.left);
    let _ = guard.unlock().await;
    Err(Failure {
        code: EXIT_LOST,
        message: String::new(),
    })
}

/// How often `exec` looks whether the command was stopped by the terminal.
const STOPPED_CHECK: Duration = Duration::from_secs(1);

/// Says so when SIGKILL could not end the whole group in time (a process in
/// uninterruptible sleep): the lock is released all the same, since keeping
/// it would not stop that process either.
fn warn_left(left: usize) {
    if left > 0 {
        errln!("keylatch: {left} process(es) of the command's group survived SIGKILL so far");
    }
}

/// The child's exit code, or 128 + signal as shells report a killed child.
fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => (c & 0xff) as u8,
        (None, Some(s)) => (128 + s).clamp(0, 255) as u8,
        (None, None) => EXIT_SOFTWARE,
    }
}

/// Why a hold was lost, for the message.
fn describe(reason: LossReason, fixed_lease: bool) -> &'static str {
    match reason {
        LossReason::Gone => "deleted or taken over on the server",
        LossReason::Expired if fixed_lease => "its fixed --lease ran out",
        LossReason::Expired => "lease ran out without a successful renewal",
        LossReason::MaxHold => "maximum hold time reached",
        _ => "lost",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn sigkill_goes_out_a_margin_before_the_lease_ends_and_sigterm_a_grace_before() {
        let now = Instant::now();
        // 2 s lease, 1.9 s left, 1 s grace: SIGKILL 200 ms before the end.
        let (term, kill) = stop_times(now, MS(2000), MS(1900), MS(1000));
        assert_eq!(kill - now, MS(1700));
        assert_eq!(kill - term, MS(1000));
        // A long lease: the margin stops at 250 ms.
        let (_, kill) = stop_times(now, MS(60_000), MS(60_000), MS(5000));
        assert_eq!(kill - now, MS(59_750));
    }

    #[test]
    fn a_grace_longer_than_half_the_lease_or_the_time_left_starts_the_stop_now_at_the_latest() {
        let now = Instant::now();
        // Half the lease (500 ms) rather than the 5 s grace.
        let (term, kill) = stop_times(now, MS(1000), MS(1000), MS(5000));
        assert_eq!((term - now, kill - now), (MS(400), MS(900)));
        // Little left: SIGTERM at once, never before now.
        let (term, kill) = stop_times(now, MS(1000), MS(150), MS(5000));
        assert_eq!((term, kill - now), (now, MS(50)));
        let (term, kill) = stop_times(now, MS(1000), MS(0), MS(5000));
        assert_eq!((term, kill), (now, now));
    }
}
