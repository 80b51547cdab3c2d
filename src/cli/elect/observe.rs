//! `keylatch elect --observe NAME`: who leads the election now, then a line
//! each time that changes, until a signal. Built on the library's
//! [`keylatch::LeaderObserver`]; a server that cannot be read is said once
//! on stderr and read again (with backoff) until it answers, so an
//! observer outlives a failover.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keylatch::{LeaderInfo, Locks, LocksConfig};

use crate::cli::args;
use crate::cli::signals::Signals;
use crate::cli::status::json_string;
use crate::cli::{runtime, Failure};

/// What `--observe` was asked.
#[derive(Debug)]
pub(super) struct ObserveArgs {
    pub(super) name: String,
    pub(super) json: bool,
    pub(super) urls: Vec<String>,
}

/// The longest pause between reads of a server that does not answer.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// How long connecting may take at the start.
const CONNECT_BOUND: Duration = Duration::from_secs(10);

pub(super) fn run(o: ObserveArgs) -> Result<u8, Failure> {
    runtime()?.block_on(observe(o))
}

async fn observe(o: ObserveArgs) -> Result<u8, Failure> {
    let mut signals =
        Signals::install().map_err(|e| Failure::software(format!("cannot handle signals: {e}")))?;
    let mut cfg = args::client_config(&o.urls)?;
    let connect = args::connect_within(&o.urls, &mut cfg, CONNECT_BOUND, |cfg| {
        Locks::connect_with(cfg, LocksConfig::default())
    });
    let locks = tokio::select! {
        r = connect => r?,
        _ = signals.recv() => return Ok(0),
    };
    let mut watch = locks.leader(&o.name).observe().await;
    let mut backoff = Duration::from_millis(50);
    let mut failing = false;
    loop {
        let next = tokio::select! {
            r = watch.next() => r,
            _ = signals.recv() => return Ok(0),
        };
        match next {
            Ok(leader) => {
                failing = false;
                backoff = Duration::from_millis(50);
                outln!("{}", line(SystemTime::now(), leader.as_ref(), o.json));
            }
            // The name holds something else than an election: reading it
            // again will not change that (64, as `elect NAME` exits).
            Err(e @ keylatch::LockError::WrongType { .. }) => {
                return Err(Failure::lock(&e, format!("election {:?}: {e}", o.name)));
            }
            Err(e) => {
                if !failing {
                    errln!("keylatch: reading election {:?} failed ({e}); reading again until it answers", o.name);
                    failing = true;
                }
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    _ = signals.recv() => return Ok(0),
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// One change as printed: `TIME leader token=T owner=O value="V"` or
/// `TIME none`; with `json`, one JSON object.
fn line(at: SystemTime, leader: Option<&LeaderInfo>, json: bool) -> String {
    let ms = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    if json {
        let mut out = format!("{{\"at_ms\":{ms},\"leader\":");
        match leader {
            None => out.push_str("null"),
            Some(l) => {
                out.push_str("{\"owner\":");
                json_string(&mut out, &l.owner);
                out.push_str(",\"token\":");
                out.push_str(&l.token.map_or("null".to_owned(), |t| t.to_string()));
                out.push_str(",\"value\":");
                match &l.value {
                    Some(v) => json_string(&mut out, v),
                    None => out.push_str("null"),
                }
                out.push('}');
            }
        }
        out.push('}');
        return out;
    }
    let time = utc(ms);
    match leader {
        None => format!("{time} none"),
        Some(l) => {
            let token = l.token.map_or("-".to_owned(), |t| t.to_string());
            // The moment between election and proclamation has no value yet.
            let value = l
                .value
                .as_deref()
                .map_or("-".to_owned(), |v| format!("{v:?}"));
            format!(
                "{time} leader token={token} owner={} value={value}",
                l.owner
            )
        }
    }
}

/// Unix milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC; the proleptic
/// Gregorian calendar, by the days-to-civil conversion).
fn utc(ms: u128) -> String {
    let secs = (ms / 1000) as u64;
    let days = (secs / 86_400) as i64;
    let of_day = secs % 86_400;
    // Days since 0000-03-01, in 400-year eras of 146,097 days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (a leap day in a year divisible by 400).
        assert_eq!(utc(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(utc(1_795_779_062_117), "2026-11-27T11:31:02.117Z");
        assert_eq!(utc(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
    }

    #[test]
    fn a_change_as_a_line() {
        let at = UNIX_EPOCH + Duration::from_millis(1_795_779_062_117);
        let mut l = LeaderInfo::default();
        l.owner = "ab:1".into();
        l.token = Some(17);
        l.value = Some("10.0.0.7:8080".into());
        assert_eq!(
            line(at, Some(&l), false),
            "2026-11-27T11:31:02.117Z leader token=17 owner=ab:1 value=\"10.0.0.7:8080\""
        );
        assert_eq!(line(at, None, false), "2026-11-27T11:31:02.117Z none");
        assert_eq!(
            line(at, Some(&l), true),
            "{\"at_ms\":1795779062117,\"leader\":{\"owner\":\"ab:1\",\"token\":17,\"value\":\"10.0.0.7:8080\"}}"
        );
        assert_eq!(
            line(at, None, true),
            "{\"at_ms\":1795779062117,\"leader\":null}"
        );
        l.token = None;
        l.value = None;
        assert_eq!(
            line(at, Some(&l), false),
            "2026-11-27T11:31:02.117Z leader token=- owner=ab:1 value=-"
        );
    }
}
