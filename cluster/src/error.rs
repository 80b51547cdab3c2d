//! The one error type callers see, and server errors parsed once into kinds.

use std::fmt;
use std::io;
use std::sync::Arc;

use bytes::Bytes;
use keylatch_resp::ProtocolError;

pub(crate) use crate::server_error::kind_of;
pub use crate::server_error::{RetryClass, ServerError, ServerErrorKind};

/// `Result` with keylatch's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong talking to Redis.
///
/// `Clone` (the I/O error is behind an `Arc`) so that one socket failure can
/// complete every pending request with the same cause.
///
/// ```
/// use keylatch_cluster::{Error, ServerErrorKind};
/// let e = Error::from_server_error(b"NOSCRIPT No matching script.");
/// assert_eq!(e.server_kind(), Some(ServerErrorKind::NoScript));
/// assert!(!e.is_unknown_outcome());
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Error {
    /// Connecting failed, or the socket failed with this I/O error. Requests
    /// that were pending when it happened may or may not have run.
    Io(Arc<io::Error>),
    /// The server closed the connection (or the connection task ended) while
    /// the request was pending: it may or may not have run.
    ConnectionClosed,
    /// The connection is down and being re-established; the request was not
    /// sent, so it is safe to retry.
    Disconnected,
    /// No reply within the request timeout. The request may still run; its
    /// late reply is read and discarded, so the connection stays in sync.
    Timeout,
    /// The server sent bytes that are not valid RESP; the connection is reset.
    Protocol(ProtocolError),
    /// The peer at this address answered the handshake with bytes that are
    /// not RESP: it is not a Redis or Valkey server (an HTTP server, a TLS
    /// port reached without `rediss://`, another protocol). Retrying does
    /// not help until the address or the scheme changes.
    NotRedis {
        /// The address connected to.
        addr: String,
        /// What the bytes look like: `"HTTP"`, `"TLS"`, or `"another protocol"`.
        looks_like: &'static str,
        /// The first bytes it sent, printable ASCII kept, the rest escaped
        /// (at most 40 of them).
        first_bytes: String,
    },
    /// The server answered with an error reply.
    Server(ServerError),
    /// The reply was valid RESP but not of the type asked for.
    UnexpectedReply(String),
    /// The URL or configuration is not usable.
    Config(String),
    /// TLS (`rediss://`) failed: a certificate or key file that cannot be
    /// read or parsed, no trusted roots, or a handshake the server or this
    /// client refused (untrusted certificate, host name not in the
    /// certificate, client certificate required or rejected). One line
    /// naming the address and the cause. Retrying does not help until the
    /// certificates or the configuration change.
    Tls(String),
    /// The command cannot be sent on a multiplexed connection (e.g. SUBSCRIBE,
    /// MONITOR), or is otherwise refused before sending.
    InvalidCommand(String),
    /// A command's keys hash to different slots of a cluster; refused
    /// before sending (the server would answer `CROSSSLOT`).
    CrossSlot {
        /// The slot of the first key.
        first: u16,
        /// The first slot that differs from it.
        other: u16,
    },
    /// Sentinels could not name a master that answers as one (a
    /// `redis+sentinel://` deployment): see [`SentinelError`]. Nothing was
    /// sent to any data node.
    Sentinel(SentinelError),
    /// The cluster router gave up: no node answered for the slot within the
    /// attempt budget (redirects, retries and topology refreshes included).
    Routing {
        /// The slot routed by (`None` for keyless commands).
        slot: Option<u16>,
        /// The nodes tried, in order.
        tried: Vec<String>,
        /// The last error seen.
        last: Box<Error>,
    },
}

impl Error {
    /// Parses an error reply (`-KIND message`) into a [`Error::Server`].
    ///
    /// ```
    /// let e = keylatch_cluster::Error::from_server_error(b"MOVED 3999 127.0.0.1:6381");
    /// assert!(e.is_redirect());
    /// ```
    pub fn from_server_error(line: &[u8]) -> Self {
        Error::Server(ServerError::parse(Bytes::copy_from_slice(line)))
    }

    /// The server error kind, if this is a server error (or ends in one:
    /// a routing failure's last error, the sentinels' refusal).
    ///
    /// ```
    /// use keylatch_cluster::{Error, SentinelError, ServerError, ServerErrorKind};
    /// assert_eq!(Error::Timeout.server_kind(), None);
    /// let refused = Error::Sentinel(SentinelError::Refused {
    ///     tried: vec!["127.0.0.1:26379".into()],
    ///     error: ServerError::parse(bytes::Bytes::from_static(b"WRONGPASS invalid username-password pair")),
    /// });
    /// assert_eq!(refused.server_kind(), Some(ServerErrorKind::WrongPass));
    /// ```
    pub fn server_kind(&self) -> Option<ServerErrorKind> {
        match self {
            Error::Server(e) => Some(e.kind()),
            Error::Routing { last, .. } => last.server_kind(),
            Error::Sentinel(SentinelError::Refused { error, .. }) => Some(error.kind()),
            _ => None,
        }
    }

    /// The server error, if this is one.
    ///
    /// ```
    /// use keylatch_cluster::Error;
    /// let e = Error::from_server_error(b"WRONGTYPE Operation against a key holding the wrong kind of value");
    /// assert_eq!(e.as_server_error().map(|s| s.code()), Some("WRONGTYPE"));
    /// assert!(Error::Timeout.as_server_error().is_none());
    /// ```
    pub fn as_server_error(&self) -> Option<&ServerError> {
        match self {
            Error::Server(e) => Some(e),
            _ => None,
        }
    }

    /// True when the request may or may not have executed on the server: the
    /// connection broke or the reply did not come in time after it was sent.
    /// A lock acquire that ends this way must be treated as maybe-acquired.
    ///
    /// ```
    /// assert!(keylatch_cluster::Error::Timeout.is_unknown_outcome());
    /// assert!(!keylatch_cluster::Error::Disconnected.is_unknown_outcome());
    /// ```
    pub fn is_unknown_outcome(&self) -> bool {
        match self {
            Error::Io(_) | Error::ConnectionClosed | Error::Timeout | Error::Protocol(_) => true,
            Error::Routing { last, .. } => last.is_unknown_outcome(),
            _ => false,
        }
    }

    /// True when the connection (not the command) failed: worth retrying on
    /// a fresh connection.
    ///
    /// ```
    /// assert!(keylatch_cluster::Error::Disconnected.is_connection_error());
    /// ```
    pub fn is_connection_error(&self) -> bool {
        matches!(
            self,
            Error::Io(_)
                | Error::ConnectionClosed
                | Error::Disconnected
                | Error::Protocol(_)
                | Error::Sentinel(_)
        )
    }

    /// True for `MOVED` and `ASK` replies.
    ///
    /// ```
    /// assert!(keylatch_cluster::Error::from_server_error(b"ASK 1 127.0.0.1:7000").is_redirect());
    /// ```
    pub fn is_redirect(&self) -> bool {
        matches!(
            self.server_kind(),
            Some(ServerErrorKind::Moved | ServerErrorKind::Ask)
        )
    }

    pub(crate) fn io(e: io::Error) -> Self {
        Error::Io(Arc::new(e))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "I/O error: {e}"),
            Error::ConnectionClosed => f.write_str("connection closed with the request pending"),
            Error::Disconnected => f.write_str("not connected (reconnecting); request not sent"),
            Error::Timeout => f.write_str("request timed out (it may still run)"),
            Error::Protocol(e) => write!(f, "protocol error: {e}"),
            Error::NotRedis {
                addr,
                looks_like,
                first_bytes,
            } => {
                write!(
                    f,
                    "the server at {addr} did not answer as Redis or Valkey: \
                     it sent what looks like {looks_like} (\"{first_bytes}\")"
                )?;
                if *looks_like == "TLS" {
                    f.write_str("; use a rediss:// URL")?;
                }
                Ok(())
            }
            Error::Server(e) => write!(f, "server error: {e}"),
            Error::UnexpectedReply(s) => write!(f, "unexpected reply: {s}"),
            Error::Config(s) => write!(f, "configuration error: {s}"),
            Error::Tls(s) => write!(f, "TLS error: {s}"),
            Error::InvalidCommand(s) => write!(f, "invalid command: {s}"),
            Error::CrossSlot { first, other } => write!(
                f,
                "keys of one command hash to different slots ({first} and {other})"
            ),
            Error::Sentinel(e) => write!(f, "sentinel: {e}"),
            Error::Routing { slot, tried, last } => {
                match slot {
                    Some(s) => write!(f, "no node served slot {s}")?,
                    None => f.write_str("no node answered")?,
                }
                write!(f, " (tried {}): {last}", tried.join(", "))
            }
        }
    }
}

/// Why sentinels could not give a master ([`Error::Sentinel`]). The client
/// never picks a master by guess: it uses an address only when a majority
/// of the configured sentinels name it, and only once that node says it is
/// the master (`ROLE`).
///
/// ```
/// use keylatch_cluster::{Error, SentinelError};
/// let e = Error::Sentinel(SentinelError::UnknownMaster { name: "mymaster".into() });
/// assert!(e.to_string().contains("mymaster"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SentinelError {
    /// No sentinel answered.
    NoneAnswered {
        /// The sentinels asked.
        tried: Vec<String>,
        /// The last one's error.
        last: String,
    },
    /// No sentinel answered, and one refused this client: a wrong or
    /// missing sentinel password (`WRONGPASS`, `NOAUTH`), or a user without
    /// the permission (`NOPERM`). [`Error::server_kind`] gives its kind.
    Refused {
        /// The sentinels asked.
        tried: Vec<String>,
        /// The first refusal.
        error: ServerError,
    },
    /// The sentinels that answered do not know this master name.
    UnknownMaster {
        /// The master name asked for.
        name: String,
    },
    /// No address was named by a majority of the configured sentinels
    /// (a failover under way, or sentinels that disagree): each answer.
    Disagree {
        /// `sentinel → address` (or `→ nil`) for each sentinel that
        /// answered.
        answers: Vec<String>,
        /// How many sentinels are configured.
        of: usize,
    },
    /// The node the sentinels named does not say it is the master.
    NotMaster {
        /// The node.
        addr: String,
        /// What `ROLE` answered first (`slave`, `sentinel`, …).
        role: String,
    },
}

impl fmt::Display for SentinelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SentinelError::NoneAnswered { tried, last } => {
                write!(
                    f,
                    "no sentinel answered (tried {}): {last}",
                    tried.join(", ")
                )
            }
            SentinelError::Refused { tried, error } => write!(
                f,
                "the sentinels refused this client (tried {}): {error}",
                tried.join(", ")
            ),
            SentinelError::UnknownMaster { name } => {
                write!(f, "the sentinels know no master named {name:?}")
            }
            SentinelError::Disagree { answers, of } => write!(
                f,
                "no address named by a majority of the {of} sentinels: {}",
                answers.join("; ")
            ),
            SentinelError::NotMaster { addr, role } => write!(
                f,
                "the sentinels named {addr}, which answers ROLE with {role:?}, not master"
            ),
        }
    }
}

/// No `source()`: every message already carries the inner error's text
/// (the I/O error, the protocol error, the server's reply, a routing
/// failure's last error), and a chain printer (`anyhow`'s `{:?}`, a CLI
/// walking `source()`) would print it again. Match on the variant to reach
/// the inner error (`Error::Io(e)` gives the `io::Error` and its kind).
impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::io(e)
    }
}

impl From<ProtocolError> for Error {
    fn from(e: ProtocolError) -> Self {
        Error::Protocol(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_error_wrapped_by_redis_6_2_is_classified_by_its_inner_code() {
        let six_two = ServerError::parse(Bytes::from_static(
            b"ERR Error running script (call to f_0123): @user_script:1: @user_script: 1: \
              -READONLY You can't write against a read only replica.",
        ));
        assert_eq!(six_two.kind(), ServerErrorKind::ReadOnly);
        assert_eq!(six_two.code(), "ERR");
        let oom = ServerError::parse(Bytes::from_static(
            b"OOM command not allowed when used memory > 'maxmemory'. script: 0123, on @user_script:5.",
        ));
        assert_eq!(oom.kind(), ServerErrorKind::Oom);
        assert_eq!(oom.kind().retry_class(), RetryClass::Never);
        // Redis 7 and Valkey: the inner error itself.
        let seven = ServerError::parse(Bytes::from_static(
            b"READONLY You can't write against a read only replica. script: 0123, on @user_script:1.",
        ));
        assert_eq!(seven.kind(), ServerErrorKind::ReadOnly);
        // A script's own error, or an unknown inner code, stays Other; a
        // plain ERR mentioning ": -READONLY" is no script's.
        for line in [
            &b"ERR Error running script (call to f_0123): @user_script:3: user_script:3: boom"[..],
            b"ERR Error running script (call to f_0123): @user_script:1: -WRONGTYPE Operation",
            b"ERR something: -READONLY",
        ] {
            let e = ServerError::parse(Bytes::copy_from_slice(line));
            assert_eq!(e.kind(), ServerErrorKind::Other, "{e}");
        }
        assert_eq!(
            kind_of(b"ERR Error running script: -"),
            ServerErrorKind::Other
        );
    }

    #[test]
    fn kinds_are_parsed_once_from_the_first_word() {
        let table: &[(&[u8], ServerErrorKind)] = &[
            (b"NOSCRIPT No matching script.", ServerErrorKind::NoScript),
            (b"MOVED 1 127.0.0.1:7000", ServerErrorKind::Moved),
            (b"ASK 1 127.0.0.1:7000", ServerErrorKind::Ask),
            (
                b"TRYAGAIN Multiple keys request during rehashing of slot",
                ServerErrorKind::TryAgain,
            ),
            (
                b"CLUSTERDOWN The cluster is down",
                ServerErrorKind::ClusterDown,
            ),
            (
                b"CROSSSLOT Keys in request don't hash to the same slot",
                ServerErrorKind::CrossSlot,
            ),
            (
                b"READONLY You can't write against a read only replica.",
                ServerErrorKind::ReadOnly,
            ),
            (
                b"LOADING Redis is loading the dataset in memory",
                ServerErrorKind::Loading,
            ),
            (
                b"BUSY Redis is busy running a script.",
                ServerErrorKind::Busy,
            ),
            (b"NOAUTH Authentication required.", ServerErrorKind::NoAuth),
            (
                b"WRONGPASS invalid username-password pair or user is disabled.",
                ServerErrorKind::WrongPass,
            ),
            (b"NOPERM User x has no permissions", ServerErrorKind::NoPerm),
            (
                b"NOPROTO unsupported protocol version",
                ServerErrorKind::NoProto,
            ),
            (
                b"ERR unknown command 'HELLO', with args beginning with: ",
                ServerErrorKind::UnknownCommand,
            ),
            (
                b"MASTERDOWN Link with MASTER is down",
                ServerErrorKind::MasterDown,
            ),
            (
                b"ERR Unknown subcommand or wrong number of arguments for 'SHARDS'. Try CLUSTER HELP.",
                ServerErrorKind::UnknownCommand,
            ),
            (
                b"ERR unknown subcommand 'SHARDS'. Try CLUSTER HELP.",
                ServerErrorKind::UnknownCommand,
            ),
            (b"ERR syntax error", ServerErrorKind::Other),
            (
                b"WRONGTYPE Operation against a key holding the wrong kind of value",
                ServerErrorKind::Other,
            ),
            (b"", ServerErrorKind::Other),
        ];
        for (line, kind) in table {
            let e = ServerError::parse(Bytes::copy_from_slice(line));
            assert_eq!(e.kind(), *kind, "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn redirects_are_parsed() {
        let e = ServerError::parse(Bytes::from_static(b"ASK 16383 [::1]:7001"));
        assert_eq!(e.redirect(), Some((16383, "[::1]:7001")));
        let bad = ServerError::parse(Bytes::from_static(b"MOVED 16384 127.0.0.1:1"));
        assert_eq!(bad.redirect(), None);
        let other = ServerError::parse(Bytes::from_static(b"ERR x 1"));
        assert_eq!(other.redirect(), None);
        assert_eq!(other.code(), "ERR");
    }

    #[test]
    fn outcome_classes() {
        assert!(Error::ConnectionClosed.is_unknown_outcome());
        assert!(!Error::Disconnected.is_unknown_outcome());
        assert!(Error::Disconnected.is_connection_error());
        assert!(!Error::Timeout.is_connection_error());
        assert_eq!(
            ServerErrorKind::NoScript.retry_class(),
            RetryClass::ReloadScript
        );
        assert_eq!(ServerErrorKind::Moved.retry_class(), RetryClass::Redirect);
    }
}
