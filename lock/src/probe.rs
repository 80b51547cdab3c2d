//! Read-only server calls the inspection of a lock makes, in both
//! protocols (RESP3 maps and doubles, RESP2 flat arrays and strings).

use keylatch_cluster::{Client, Commands, Error};
use keylatch_resp::{Cmd, Frame};

use crate::error::{LockError, LockResult};

/// A bulk or simple string as text.
pub(crate) fn text(f: &Frame) -> Option<String> {
    f.as_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

/// Sends one command; an error reply is returned as the frame.
async fn ask_raw(client: &Client, cmd: Cmd) -> LockResult<Frame> {
    Ok(client.send(cmd).await.map(Frame::into_value)?)
}

/// Sends one command; error replies become errors.
pub(crate) async fn ask(client: &Client, cmd: Cmd) -> LockResult<Frame> {
    match ask_raw(client, cmd).await? {
        Frame::Error(e) => Err(LockError::Client(Error::from_server_error(&e))),
        f => Ok(f),
    }
}

/// The key's Redis type (`none` when missing).
pub(crate) async fn key_type(client: &Client, key: &str) -> LockResult<String> {
    Ok(text(&ask(client, Cmd::new("TYPE").key(key)).await?).unwrap_or_else(|| "none".to_owned()))
}

/// The server's clock in ms (scores in keylatch's zsets are server time).
pub(crate) async fn server_now_ms(client: &Client) -> LockResult<Option<i64>> {
    Ok(match ask(client, Cmd::new("TIME")).await? {
        Frame::Array(parts) => {
            let num = |f: Option<&Frame>| f.and_then(text).and_then(|t| t.parse::<i64>().ok());
            match (num(parts.first()), num(parts.get(1))) {
                (Some(s), Some(us)) => Some(s * 1000 + us / 1000),
                _ => None,
            }
        }
        _ => None,
    })
}

/// `ZSCORE key member`, `None` when absent (or the key is no zset).
pub(crate) async fn zscore(client: &Client, key: &str, member: &str) -> LockResult<Option<f64>> {
    // RESP3 answers a double, RESP2 a bulk string.
    Ok(
        match ask_raw(client, Cmd::new("ZSCORE").key(key).arg(member)).await? {
            Frame::Double(d) => Some(d),
            Frame::Error(e) if e.starts_with(b"WRONGTYPE") => None,
            Frame::Error(e) => return Err(LockError::Client(Error::from_server_error(&e))),
            other => text(&other).and_then(|t| t.parse::<f64>().ok()),
        },
    )
}

/// The members and scores of zset `key` (at most 1,000), or `None` when
/// it is not a zset.
pub(crate) async fn zset(client: &Client, key: &str) -> LockResult<Option<Vec<(Vec<u8>, f64)>>> {
    if key_type(client, key).await? != "zset" {
        return Ok(None);
    }
    let cmd = Cmd::new("ZRANGE")
        .key(key)
        .arg(0)
        .arg(999)
        .arg("WITHSCORES");
    let Frame::Array(items) = ask(client, cmd).await? else {
        return Ok(Some(Vec::new()));
    };
    Ok(Some(
        pairs(items)
            .into_iter()
            .filter_map(|(m, s)| {
                let score = match s {
                    Frame::Double(d) => Some(d),
                    other => text(&other).and_then(|t| t.parse::<f64>().ok()),
                };
                Some((m.as_bytes()?.to_vec(), score?))
            })
            .collect(),
    ))
}

/// Pairs from a RESP3 array of pairs (`[[a, b]...]`) or a RESP2 flat one
/// (`[a, b, ...]`), or a RESP3 map's entries.
pub(crate) fn pairs(items: Vec<Frame>) -> Vec<(Frame, Frame)> {
    let mut out = Vec::with_capacity(items.len());
    if !items.is_empty() && items.iter().all(|f| matches!(f, Frame::Array(_))) {
        for f in items {
            if let Frame::Array(p) = f {
                let mut p = p.into_iter();
                if let (Some(a), Some(b), None) = (p.next(), p.next(), p.next()) {
                    out.push((a, b));
                }
            }
        }
    } else {
        let mut it = items.into_iter();
        while let (Some(a), Some(b)) = (it.next(), it.next()) {
            out.push((a, b));
        }
    }
    out
}
