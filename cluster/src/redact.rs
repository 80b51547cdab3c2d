//! Credentials never printed: [`redact_url`] for URLs, and the hand-written
//! `Debug` of [`ConnectionConfig`] (its password shown as `***`).

use std::fmt;

use crate::config::ConnectionConfig;

/// What a password is printed as.
const HIDDEN: &str = "***";

/// A URL as it may be printed: the password in its userinfo becomes `***`,
/// and so does a `sentinel_password=` parameter's value.
///
/// `redis://user:pw@host` → `redis://user:***@host`, `redis://:pw@host` →
/// `redis://:***@host`, and the password-only form `redis://pw@host` (which
/// [`ConnectionConfig::from_url`] reads as a password) → `redis://***@host`.
/// A URL without userinfo comes back unchanged.
///
/// ```
/// use keylatch_cluster::redact_url;
/// assert_eq!(redact_url("redis://bob:s3cret@h:6379/0"), "redis://bob:***@h:6379/0");
/// assert_eq!(redact_url("redis://:s3cret@h"), "redis://:***@h");
/// assert_eq!(redact_url("redis://s3cret@h"), "redis://***@h");
/// assert_eq!(redact_url("rediss://h:1?ca=f"), "rediss://h:1?ca=f");
/// assert_eq!(
///     redact_url("redis+sentinel://:pw@s1,s2/m?sentinel_password=sp&db=1"),
///     "redis+sentinel://:***@s1,s2/m?sentinel_password=***&db=1"
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    let url = redact_query(url);
    let url = url.as_str();
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    let user = match rest[..at].split_once(':') {
        Some((user, _)) => format!("{user}:{HIDDEN}"),
        None if rest[..at].is_empty() => String::new(),
        None => HIDDEN.to_owned(),
    };
    format!("{}{user}{}", &url[..scheme_end], &rest[at..])
}

/// `sentinel_password=VALUE` → `sentinel_password=***` in the query.
fn redact_query(url: &str) -> String {
    let Some((head, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let pairs: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some(("sentinel_password", _)) => format!("sentinel_password={HIDDEN}"),
            _ => p.to_owned(),
        })
        .collect();
    format!("{head}?{}", pairs.join("&"))
}

impl fmt::Debug for ConnectionConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| HIDDEN))
            .field("db", &self.db)
            .field("protocol", &self.protocol)
            .field("client_name", &self.client_name)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("queue_capacity", &self.queue_capacity)
            .field("max_in_flight", &self.max_in_flight)
            .field("reconnect_min", &self.reconnect_min)
            .field("reconnect_max", &self.reconnect_max)
            .field("tracking", &self.tracking)
            .field("tracking_optin", &self.tracking_optin)
            .field("health_interval", &self.health_interval)
            .field("tls", &self.tls)
            .field("sentinel", &self.sentinel)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ClientConfig;

    #[test]
    fn urls_hide_every_password_form() {
        assert_eq!(redact_url("redis://:s3cret@h:1"), "redis://:***@h:1");
        assert_eq!(
            redact_url("redis://bob:s3cret@h:1/0"),
            "redis://bob:***@h:1/0"
        );
        assert_eq!(redact_url("redis://s3cret@h:1"), "redis://***@h:1");
        assert_eq!(
            redact_url("redis://h:1/0?name=a@b"),
            "redis://h:1/0?name=a@b"
        );
        assert_eq!(redact_url("redis://b:p@ss@h"), "redis://b:***@h");
        assert_eq!(redact_url("not a url"), "not a url");
    }

    #[test]
    fn configs_debug_without_the_password() {
        for url in [
            "redis://bob:s3cret@h:1",
            "redis://:s3cret@h",
            "redis://s3cret@h",
        ] {
            let c = ConnectionConfig::from_url(url).expect("parses");
            assert_eq!(c.password.as_deref(), Some("s3cret"));
            let shown = format!("{c:?} {c:#?}");
            assert!(
                !shown.contains("s3cret") && shown.contains("***"),
                "{shown}"
            );
            let client = ClientConfig::from_urls(&[url, url]).expect("parses");
            let shown = format!("{client:?} {client:#?}");
            assert!(!shown.contains("s3cret"), "{shown}");
        }
    }

    #[test]
    fn url_errors_do_not_echo_the_password() {
        for url in [
            "redis://:s3cret@",
            "redis://bob:s3%zzcret@h",
            "redis://bob:s3cret%ff@h",
        ] {
            let e = ConnectionConfig::from_url(url).expect_err("bad URL");
            let shown = format!("{e} {e:?}");
            assert!(!shown.contains("s3"), "{shown}");
        }
    }
}
