//! Reconnecting with backoff while still serving an inbox: shared by the
//! connection task (which fails requests at once meanwhile) and the pub/sub
//! task (which keeps taking subscription changes to replay later).

use std::future::poll_fn;
use std::task::{Context, Poll};

use tokio::sync::mpsc;

use crate::backoff::Backoff;
use crate::config::ConnectionConfig;
use crate::handshake::{establish_logged, Established};

/// Where a task's work arrives while it has no socket.
pub(crate) trait Inbox<T> {
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>>;
}

impl<T> Inbox<T> for mpsc::Receiver<T> {
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.poll_recv(cx)
    }
}

impl<T> Inbox<T> for mpsc::UnboundedReceiver<T> {
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.poll_recv(cx)
    }
}

/// Connects to `config`'s node, retrying with `backoff` between failed
/// attempts (`on_failure` after each). Whatever arrives in `inbox` meanwhile
/// goes to `meanwhile`, during attempts and pauses alike. `None` when the
/// inbox closes (every handle is gone): the task should end.
pub(crate) async fn reconnect<T>(
    config: &ConnectionConfig,
    backoff: &mut Backoff,
    inbox: &mut impl Inbox<T>,
    mut meanwhile: impl FnMut(T),
    mut on_failure: impl FnMut(),
) -> Option<Established> {
    let mut attempts: u32 = 0;
    loop {
        attempts = attempts.saturating_add(1);
        // Attempts 1, 2, 4, 8, … of an outage warn, the others are debug:
        // a node down for minutes (backoff capped at `reconnect_max`) must
        // not fill the log, yet it is still said now and then.
        let attempt = establish_logged(config, attempts.is_power_of_two());
        tokio::pin!(attempt);
        let outcome = loop {
            tokio::select! {
                r = &mut attempt => break r,
                item = poll_fn(|cx| inbox.poll_next(cx)) => meanwhile(item?),
            }
        };
        if let Ok(io) = outcome {
            backoff.reset();
            return Some(io);
        }
        on_failure();
        // `establish_logged` said why this attempt failed; this says when
        // the next one comes.
        let delay = backoff.next_delay();
        tracing::debug!(node = %config.addr(), attempt = attempts, retry_in = ?delay,
            "reconnect attempt failed; retrying");
        let sleep = tokio::time::sleep(delay);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                () = &mut sleep => break,
                item = poll_fn(|cx| inbox.poll_next(cx)) => meanwhile(item?),
            }
        }
    }
}
