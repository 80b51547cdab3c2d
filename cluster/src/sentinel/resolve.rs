//! Asking the sentinels where the master is, and connecting there.

use std::sync::Arc;
use std::time::Duration;

use keylatch_resp::{Cmd, Frame};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::Sentinels;
use crate::config::ConnectionConfig;
use crate::error::{Error, Result, SentinelError, ServerError, ServerErrorKind};
use crate::handshake::{ask, establish_direct, Established};

/// Pause between tries while the sentinels disagree or name a node that is
/// not (yet) the master: a failover under way settles within seconds.
const SETTLE_PAUSE: Duration = Duration::from_millis(100);

/// Connects to the master the sentinels name, within `cfg.connect_timeout`:
/// resolve, connect, check `ROLE`; tried again (every [`SETTLE_PAUSE`])
/// while the answer may change by itself (a disagreement, a node not yet
/// master, a named node that refuses), never past the timeout.
pub(crate) async fn establish_master(
    cfg: &ConnectionConfig,
    sentinels: &Arc<Sentinels>,
    warn: bool,
) -> Result<Established> {
    let deadline = Instant::now() + cfg.connect_timeout;
    // Read before asking: a switch announced after this moment makes the
    // connection stale even if the answer already named the new master.
    let epoch = sentinels.epoch();
    super::watch::ensure(sentinels);
    let mut last: Option<Error> = None;
    loop {
        // Only the first try of a settling failover may warn: the tries
        // 100 ms apart would fill the log.
        let warn = warn && last.is_none();
        let attempt = tokio::time::timeout_at(deadline, attempt(cfg, sentinels, warn)).await;
        let err = match attempt {
            Ok(Ok(mut io)) => {
                io.sentinel_epoch = Some(epoch);
                return Ok(io);
            }
            Ok(Err(e)) => e,
            // The last answer says more than "timed out", when there was one.
            Err(_) => {
                return Err(last.unwrap_or_else(|| {
                    Error::io(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "no master for {:?} through the sentinels within {:?}",
                            sentinels.master_name(),
                            cfg.connect_timeout
                        ),
                    ))
                }))
            }
        };
        let settles = match &err {
            Error::Sentinel(SentinelError::Disagree { .. } | SentinelError::NotMaster { .. }) => {
                true
            }
            Error::Sentinel(_) => false,
            // The named node refused or died: the sentinels will name another.
            e => e.is_connection_error() || matches!(e, Error::Timeout),
        };
        if !settles || Instant::now() + SETTLE_PAUSE >= deadline {
            return Err(err);
        }
        tracing::debug!(master = %sentinels.master_name(), error = %err,
            "sentinel: no usable master yet; asking again");
        last = Some(err);
        tokio::time::sleep(SETTLE_PAUSE).await;
    }
}

async fn attempt(cfg: &ConnectionConfig, sentinels: &Sentinels, warn: bool) -> Result<Established> {
    let (host, port, via) = resolve(sentinels).await?;
    let mut node = cfg.clone();
    node.sentinel = None;
    node.host = host;
    node.port = port;
    let io = establish_direct(&node, warn, true).await?;
    sentinels.remember(node.addr(), via);
    Ok(io)
}

/// The master's address as a majority of the configured sentinels name it
/// (each asked at once, each bounded by its own connect timeout), and the
/// first sentinel that named it. Answers as soon as a majority agrees: a
/// sentinel that never answers (paused, cut off) costs nothing then.
pub(crate) async fn resolve(sentinels: &Sentinels) -> Result<(String, u16, String)> {
    let mut asks = JoinSet::new();
    for (i, node) in sentinels.nodes.iter().enumerate() {
        let node = node.clone();
        let cmd = Cmd::new("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(sentinels.master_name.as_str());
        asks.spawn(async move { (i, ask(&node, &[cmd]).await) });
    }
    let mut answers: Vec<(usize, Option<(String, u16)>)> = Vec::new();
    let mut last_error = None;
    let mut refused = None;
    while let Some(joined) = asks.join_next().await {
        let Ok((i, reply)) = joined else { continue };
        match reply.and_then(|mut r| r.pop().ok_or(Error::ConnectionClosed)) {
            Ok(frame) => match address(&frame) {
                Ok(addr) => answers.push((i, addr)),
                Err(e) => last_error = Some(refusal(e, &mut refused)),
            },
            Err(e) => last_error = Some(refusal(e, &mut refused)),
        }
        // Dropping the set aborts the questions still out: once a majority
        // names an address, or once none can any more whatever the
        // sentinels still silent say (a majority said nil, say).
        if let Some(named) = majority(sentinels, &answers) {
            return Ok(named);
        }
        let best = answers
            .iter()
            .filter_map(|a| a.1.as_ref())
            .map(|addr| {
                answers
                    .iter()
                    .filter(|b| b.1.as_ref() == Some(addr))
                    .count()
            })
            .max()
            .unwrap_or(0);
        if !answers.is_empty() && best + asks.len() <= sentinels.nodes.len() / 2 {
            break;
        }
    }
    answers.sort_by_key(|a| a.0);
    if let (true, Some(error)) = (answers.is_empty(), refused) {
        // A password or permission to fix: said as such, typed.
        return Err(Error::Sentinel(SentinelError::Refused {
            tried: sentinels.nodes.iter().map(ConnectionConfig::addr).collect(),
            error,
        }));
    }
    tally(sentinels, &answers, last_error)
}

/// A sentinel's error as text, keeping the first that refused this client
/// (`WRONGPASS`, `NOAUTH`, `NOPERM`) in `refused`.
fn refusal(e: Error, refused: &mut Option<ServerError>) -> String {
    let text = e.to_string();
    if let Error::Server(s) = e {
        let kind = s.kind();
        if matches!(
            kind,
            ServerErrorKind::WrongPass | ServerErrorKind::NoAuth | ServerErrorKind::NoPerm
        ) {
            refused.get_or_insert(s);
        }
    }
    text
}

/// The address named by a majority of all configured sentinels, if one is,
/// with the first sentinel (in configured order) that named it.
fn majority(
    sentinels: &Sentinels,
    answers: &[(usize, Option<(String, u16)>)],
) -> Option<(String, u16, String)> {
    let of = sentinels.nodes.len();
    let mut sorted: Vec<&(usize, Option<(String, u16)>)> = answers.iter().collect();
    sorted.sort_by_key(|a| a.0);
    sorted.iter().find_map(|(i, addr)| {
        let addr = addr.as_ref()?;
        let votes = answers
            .iter()
            .filter(|a| a.1.as_ref() == Some(addr))
            .count();
        (votes > of / 2).then(|| (addr.0.clone(), addr.1, sentinels.nodes[*i].addr()))
    })
}

/// [`majority`], or the error that says why there is none.
fn tally(
    sentinels: &Sentinels,
    answers: &[(usize, Option<(String, u16)>)],
    last_error: Option<String>,
) -> Result<(String, u16, String)> {
    let of = sentinels.nodes.len();
    let name = |i: usize| sentinels.nodes[i].addr();
    if let Some(named) = majority(sentinels, answers) {
        return Ok(named);
    }
    if answers.is_empty() {
        return Err(Error::Sentinel(SentinelError::NoneAnswered {
            tried: sentinels.nodes.iter().map(ConnectionConfig::addr).collect(),
            last: last_error.unwrap_or_default(),
        }));
    }
    if answers.iter().all(|a| a.1.is_none()) && answers.len() > of / 2 {
        return Err(Error::Sentinel(SentinelError::UnknownMaster {
            name: sentinels.master_name.clone(),
        }));
    }
    Err(Error::Sentinel(SentinelError::Disagree {
        answers: answers
            .iter()
            .map(|(i, a)| match a {
                Some((h, p)) => format!("{} → {h}:{p}", name(*i)),
                None => format!("{} → nil", name(*i)),
            })
            .collect(),
        of,
    }))
}

/// `SENTINEL GET-MASTER-ADDR-BY-NAME`'s reply: `[ip, port]`, or nil for a
/// name the sentinel does not know.
fn address(frame: &Frame) -> Result<Option<(String, u16)>> {
    match frame.value() {
        Frame::Null => Ok(None),
        Frame::Array(items) if items.is_empty() => Ok(None),
        Frame::Array(items) if items.len() == 2 => {
            let text = |f: &Frame| {
                f.as_bytes()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
            };
            let host = text(&items[0]);
            let port = text(&items[1]).and_then(|p| p.parse::<u16>().ok());
            match (host, port) {
                (Some(h), Some(p)) => Ok(Some((h, p))),
                _ => Err(Error::UnexpectedReply(format!("sentinel named {frame}"))),
            }
        }
        Frame::Error(_) => Err(crate::reply::check(frame.clone())
            .err()
            .unwrap_or(Error::UnexpectedReply(format!("sentinel answered {frame}")))),
        _ => Err(Error::UnexpectedReply(format!("sentinel answered {frame}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sentinels(n: usize) -> Sentinels {
        let nodes = (0..n)
            .map(|i| ConnectionConfig::from_url(&format!("redis://10.0.0.{i}:26379")).expect("url"))
            .collect();
        Sentinels::new("m", nodes)
    }

    fn at(p: u16) -> Option<(String, u16)> {
        Some(("127.0.0.1".to_owned(), p))
    }

    #[test]
    fn a_majority_of_all_sentinels_names_the_master() {
        let s = sentinels(3);
        let ok = tally(&s, &[(0, at(1)), (2, at(1))], None).expect("two of three agree");
        assert_eq!(
            (ok.0.as_str(), ok.1, ok.2.as_str()),
            ("127.0.0.1", 1, "10.0.0.0:26379")
        );
        // Two of three answered and disagree: no guess.
        let e = tally(&s, &[(0, at(1)), (1, at(2))], None).unwrap_err();
        assert!(
            matches!(e, Error::Sentinel(SentinelError::Disagree { of: 3, .. })),
            "{e}"
        );
        // One of three answered: not a majority of the configured three.
        let e = tally(&s, &[(0, at(1))], None).unwrap_err();
        assert!(
            matches!(e, Error::Sentinel(SentinelError::Disagree { .. })),
            "{e}"
        );
        let e = tally(&s, &[], Some("refused".into())).unwrap_err();
        assert!(
            matches!(e, Error::Sentinel(SentinelError::NoneAnswered { .. })),
            "{e}"
        );
        let e = tally(&s, &[(0, None), (1, None)], None).unwrap_err();
        assert!(
            matches!(e, Error::Sentinel(SentinelError::UnknownMaster { .. })),
            "{e}"
        );
        // One sentinel configured: its word is the majority.
        let one = sentinels(1);
        assert!(tally(&one, &[(0, at(7))], None).is_ok());
    }

    #[test]
    fn the_sentinels_reply() {
        let bulk = |s: &str| Frame::Bulk(bytes::Bytes::copy_from_slice(s.as_bytes()));
        let pair = Frame::Array(vec![bulk("127.0.0.1"), bulk("6380")]);
        assert_eq!(address(&pair).unwrap(), at(6380));
        assert_eq!(address(&Frame::Null).unwrap(), None);
        assert!(address(&Frame::Array(vec![bulk("h"), bulk("x")])).is_err());
    }
}
