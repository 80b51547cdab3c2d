//! Argument reading shared by the subcommands: flag values, durations,
//! and the server URLs (`--url`, `$KEYLATCH_URL`, the default), with
//! `$KEYLATCH_TLS_CA` for `rediss://` ones.

use std::ffi::OsString;
use std::time::Duration;

use super::Failure;

/// Where the CLI connects when neither `--url` nor `$KEYLATCH_URL` says.
pub(crate) const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// The arguments left after the subcommand's name, read front to back.
pub(crate) struct Argv {
    rest: std::vec::IntoIter<String>,
    /// The command after `--`, as given (see [`split_os`]); `rest` then
    /// ends at that `--`.
    command: Option<Vec<OsString>>,
}

/// Splits the process's arguments at the first `--`: what keylatch reads
/// (up to and with the `--`), which must be UTF-8, and the command after
/// it, kept as given (`None` when there is no `--`).
///
/// # Errors
/// A usage failure (64) naming an argument before `--` that is not UTF-8.
pub(crate) fn split_os(
    args: impl Iterator<Item = OsString>,
) -> Result<(Vec<String>, Option<Vec<OsString>>), Failure> {
    let mut head = Vec::new();
    let mut args = args.peekable();
    while let Some(a) = args.next() {
        match a.into_string() {
            Ok(a) => {
                let end = a == "--";
                head.push(a);
                if end {
                    return Ok((head, Some(args.collect())));
                }
            }
            Err(a) => {
                return Err(Failure::usage(format!(
                    "argument {:?} is not UTF-8 (only the command after `--` may be any bytes)",
                    a.to_string_lossy()
                )))
            }
        }
    }
    Ok((head, None))
}

impl Argv {
    /// Arguments with no command kept apart (the parsers' unit tests).
    #[cfg(test)]
    pub(crate) fn new(args: impl Iterator<Item = String>) -> Self {
        Self {
            rest: args.collect::<Vec<_>>().into_iter(),
            command: None,
        }
    }

    /// `args` (up to and with a `--`), and the command after it as given.
    pub(crate) fn with_command(args: Vec<String>, command: Option<Vec<OsString>>) -> Self {
        Self {
            rest: args.into_iter(),
            command,
        }
    }

    /// The next argument, if any.
    pub(crate) fn next(&mut self) -> Option<String> {
        self.rest.next()
    }

    /// The value of flag `name`, which must follow it.
    pub(crate) fn value(&mut self, name: &str) -> Result<String, Failure> {
        self.rest
            .next()
            .ok_or_else(|| Failure::usage(format!("{name} needs a value")))
    }

    /// Everything not read yet: the command after `--`, as given.
    pub(crate) fn remaining(self) -> Vec<OsString> {
        let mut out: Vec<OsString> = self.rest.map(OsString::from).collect();
        out.extend(self.command.unwrap_or_default());
        out
    }
}

/// Parses `250ms`, `10s`, `1.5s`, `2m`, `1h`; a bare number means seconds
/// (the parser is [`keylatch_cli::bench::parse_duration`], shared with the
/// comparison binary).
pub(crate) fn duration(flag: &str, text: &str) -> Result<Duration, Failure> {
    keylatch_cli::bench::parse_duration(text).ok_or_else(|| {
        Failure::usage(format!(
            "{flag} takes a duration such as 500ms, 10s or 2m, not {text:?}"
        ))
    })
}

/// The seeds to connect to: every `--url` given, else `$KEYLATCH_URL`
/// (commas separate several seeds, except in a `redis+sentinel://` URL,
/// whose commas separate its sentinels), else [`DEFAULT_URL`].
pub(crate) fn urls(given: Vec<String>) -> Vec<String> {
    if !given.is_empty() {
        return given;
    }
    match std::env::var("KEYLATCH_URL") {
        // A sentinel URL lists its sentinels with commas itself.
        Ok(v) if v.trim().contains("+sentinel://") => vec![v.trim().to_owned()],
        Ok(v) if !v.trim().is_empty() => v
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect(),
        // Not UTF-8: no URL can be read from it, and silently connecting
        // to the default instead would be a surprise; the URL parser's
        // refusal names it (exit 64).
        Err(std::env::VarError::NotUnicode(v)) => vec![v.to_string_lossy().into_owned()],
        _ => vec![DEFAULT_URL.to_owned()],
    }
}

/// The client configuration for `urls`, or a usage failure naming the bad
/// URL. `rediss://` seeds without a `ca=` parameter trust the PEM bundle
/// named by `$KEYLATCH_TLS_CA` when it is set (else the system roots).
pub(crate) fn client_config(urls: &[String]) -> Result<keylatch::ClientConfig, Failure> {
    let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
    let mut cfg =
        keylatch::ClientConfig::from_urls(&refs).map_err(|e| Failure::usage(format!("{e}")))?;
    let ca = std::env::var_os("KEYLATCH_TLS_CA").filter(|v| !v.is_empty());
    if let Some(ca) = ca {
        for seed in &mut cfg.seeds {
            if seed.tls.as_ref().is_some_and(|t| t.ca_files().is_empty()) {
                *seed = seed
                    .clone()
                    .tls_ca_file(&ca)
                    .map_err(|e| Failure::usage(format!("$KEYLATCH_TLS_CA: {e}")))?;
            }
        }
    }
    Ok(cfg)
}

/// Connects within `bound`, the wait the user asked for (`--wait`): the
/// whole connect (every seed, a cluster's topology) ends there, so a server
/// that accepts and never answers cannot stretch a 2 s wait into 20 s. Each
/// seed's own connect timeout is cut to the bound too (at least
/// [`MIN_CONNECT_TIMEOUT`], since it also bounds the reconnects of a
/// command that runs for hours), so the library's message, which says
/// whether the connection or the handshake was waited for, usually comes
/// first. A wait below [`MIN_CONNECT_TIMEOUT`] (`--wait 0s`: try once)
/// still gets that long to connect.
pub(crate) async fn connect_within<T, E, Fut>(
    urls: &[String],
    cfg: &mut keylatch::ClientConfig,
    bound: Duration,
    connect: impl FnOnce(keylatch::ClientConfig) -> Fut,
) -> Result<T, Failure>
where
    E: std::fmt::Display,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let per_seed = seed_connect_timeout(bound);
    for seed in &mut cfg.seeds {
        seed.connect_timeout = seed.connect_timeout.min(per_seed);
    }
    // A zero or tiny wait means "do not wait for the lock", not "do not
    // connect": connecting gets at least MIN_CONNECT_TIMEOUT.
    let asked = bound;
    let bound = bound.max(MIN_CONNECT_TIMEOUT);
    let what = if asked < bound {
        format!("{} (connecting gets at least that)", show(bound))
    } else {
        format!("--wait {}", show(bound))
    };
    let started = std::time::Instant::now();
    match tokio::time::timeout(bound, connect(cfg.clone())).await {
        Ok(r) => r.map_err(|e| {
            connect_failure(
                urls,
                format_args!("{e} (after {})", spent(started.elapsed())),
            )
        }),
        Err(_) => Err(connect_failure(
            urls,
            format_args!(
                "no connection within {what} (spent {}: the server did not complete the \
                 connection and handshake in time)",
                spent(started.elapsed())
            ),
        )),
    }
}

/// A duration as people write it: `0s`, not `0ns`.
pub(crate) fn show(d: Duration) -> String {
    if d.is_zero() {
        "0s".to_owned()
    } else {
        format!("{d:?}")
    }
}

/// A measured duration, to a tenth of a second (`2.0s`), or whole
/// milliseconds below one second: "2.000412s" says nothing more.
pub(crate) fn spent(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// A seed's connect timeout within a wait of `bound`: the bound, at least
/// [`MIN_CONNECT_TIMEOUT`] and at most the library's default.
pub(crate) fn seed_connect_timeout(bound: Duration) -> Duration {
    bound.clamp(
        MIN_CONNECT_TIMEOUT,
        keylatch::ConnectionConfig::default().connect_timeout,
    )
}

/// The shortest connect timeout a seed gets from [`connect_within`].
const MIN_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// "cannot connect to a, b: cause" — one line naming what was tried.
pub(crate) fn connect_failure(urls: &[String], cause: impl std::fmt::Display) -> Failure {
    let shown: Vec<String> = urls.iter().map(|u| keylatch::redact_url(u)).collect();
    Failure::unavailable(format!("cannot connect to {}: {cause}", shown.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_a_url_is_never_printed() {
        let f = connect_failure(&["redis://bob:s3cret@h:1".to_owned()], "WRONGPASS");
        assert!(!f.message.contains("s3cret"), "{}", f.message);
    }

    #[test]
    fn durations_in_the_units_people_type() {
        let d = |s| duration("--wait", s).map_err(|f| f.message);
        assert_eq!(d("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(d("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(d("10"), Ok(Duration::from_secs(10)));
        assert_eq!(d("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(d("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(d("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(d("0"), Ok(Duration::ZERO));
        for bad in ["", "s", "10x", "-1s", "1..2s", "ms10"] {
            assert!(d(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn explicit_urls_win() {
        let given = vec!["redis://a:1".to_owned(), "redis://b:2".to_owned()];
        assert_eq!(urls(given.clone()), given);
    }
}
