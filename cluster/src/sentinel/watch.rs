//! The `+switch-master` listener: one task per [`Sentinels`], subscribed on
//! one sentinel at a time (the next one when it fails), that bumps the
//! switch count when the sentinels announce a new master for this name.
//! Connections made before the switch see the count change and reconnect
//! (through the sentinels, to the new master). It holds the `Sentinels`
//! weakly and ends once nothing else holds them.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use keylatch_resp::{Cmd, Decoder, Frame, Limits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Sentinels;
use crate::config::ConnectionConfig;
use crate::error::Error;
use crate::handshake::establish_direct;

/// The channel sentinels announce a finished failover on.
const CHANNEL: &str = "+switch-master";
/// How often a listener waiting on its socket looks whether it is still
/// wanted (and pings), and the pause before it tries the next sentinel.
const LOOK: Duration = Duration::from_secs(1);
/// How long a listener's sentinel may send nothing, pings answered
/// included, before the next sentinel is tried.
const SILENT: Duration = Duration::from_secs(3);

/// Starts the listener for `sentinels` once (on the current runtime).
pub(super) fn ensure(sentinels: &Arc<Sentinels>) {
    if sentinels.watching.swap(true, Ordering::AcqRel) {
        return;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn(listen(Arc::downgrade(sentinels)));
        }
        Err(_) => sentinels.watching.store(false, Ordering::Release),
    }
}

/// Clears the `watching` flag when the listener ends, however it ends (its
/// runtime shut down with it, say): the next connect starts another.
struct Watching(Weak<Sentinels>);

impl Drop for Watching {
    fn drop(&mut self) {
        if let Some(s) = self.0.upgrade() {
            s.watching.store(false, Ordering::Release);
        }
    }
}

async fn listen(weak: Weak<Sentinels>) {
    let _watching = Watching(weak.clone());
    let mut next = 0usize;
    loop {
        let Some((node, name)) = weak.upgrade().and_then(|s| {
            let node = s.nodes.get(next % s.nodes.len().max(1))?.clone();
            Some((node, s.master_name.clone()))
        }) else {
            return;
        };
        next += 1;
        if let Err(e) = subscribed(&weak, &node, &name).await {
            tracing::debug!(sentinel = %node.addr(), error = %e,
                "sentinel: +switch-master listener lost; trying the next sentinel");
        }
        if weak.strong_count() == 0 {
            return;
        }
        tokio::time::sleep(LOOK).await;
    }
}

/// Subscribes on `node` and counts the switches of `name` until the socket
/// fails (`Err`) or nothing holds the sentinels any more (`Ok`).
async fn subscribed(
    weak: &Weak<Sentinels>,
    node: &ConnectionConfig,
    name: &str,
) -> crate::error::Result<()> {
    let io = establish_direct(node, false, false).await?;
    let (mut stream, mut buf) = (io.stream, io.read_buf);
    let mut out = BytesMut::new();
    Cmd::new("SUBSCRIBE").arg(CHANNEL).encode(&mut out);
    stream.write_all(&out).await?;
    stream.flush().await?;
    let mut decoder = Decoder::new(Limits::default());
    // A sentinel that stops answering (paused, cut off) would leave the
    // listener deaf: it is pinged each quiet look, and given up when
    // nothing at all came for SILENT.
    let mut heard = Instant::now();
    loop {
        while let Some(frame) = decoder.decode(&mut buf).map_err(Error::Protocol)? {
            heard = Instant::now();
            if let Some(payload) = switch_of(&frame, name) {
                let Some(s) = weak.upgrade() else {
                    return Ok(());
                };
                s.switched();
                tracing::info!(master = %name, switch = %payload,
                    "sentinel: +switch-master; reconnecting to the new master");
            }
        }
        buf.reserve(4096);
        match tokio::time::timeout(LOOK, stream.read_buf(&mut buf)).await {
            Ok(Ok(0)) => return Err(Error::ConnectionClosed),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e.into()),
            Err(_) if weak.strong_count() == 0 => return Ok(()),
            Err(_) if heard.elapsed() > SILENT => return Err(Error::Timeout),
            Err(_) => {
                out.clear();
                Cmd::new("PING").encode(&mut out);
                stream.write_all(&out).await?;
                stream.flush().await?;
            }
        }
    }
}

/// The payload of a `+switch-master` message about `name`
/// (`name old-ip old-port new-ip new-port`), RESP2 or RESP3.
fn switch_of(frame: &Frame, name: &str) -> Option<String> {
    let items = match frame.value() {
        Frame::Array(items) | Frame::Push(items) => items,
        _ => return None,
    };
    let text = |i: usize| items.get(i).and_then(|f| f.as_bytes());
    if text(0)?.as_ref() != b"message" || text(1)?.as_ref() != CHANNEL.as_bytes() {
        return None;
    }
    let payload = String::from_utf8_lossy(text(2)?).into_owned();
    (payload.split(' ').next() == Some(name)).then_some(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_of_this_master_only() {
        let bulk = |s: &str| Frame::Bulk(bytes::Bytes::copy_from_slice(s.as_bytes()));
        let msg = |payload: &str| Frame::Array(vec![bulk("message"), bulk(CHANNEL), bulk(payload)]);
        let mine = msg("cache 127.0.0.1 1 127.0.0.1 2");
        assert_eq!(
            switch_of(&mine, "cache").as_deref(),
            Some("cache 127.0.0.1 1 127.0.0.1 2")
        );
        assert_eq!(
            switch_of(&msg("other 127.0.0.1 1 127.0.0.1 2"), "cache"),
            None
        );
        assert_eq!(
            switch_of(&msg("cache2 127.0.0.1 1 127.0.0.1 2"), "cache"),
            None
        );
        let subscribed = Frame::Array(vec![bulk("subscribe"), bulk(CHANNEL), Frame::Integer(1)]);
        assert_eq!(switch_of(&subscribed, "cache"), None);
    }
}
