//! Error replies from the server: [`ServerError`] (the line as sent) and
//! its [`ServerErrorKind`], classified once, by the line's first word or by
//! the code inside Redis 6.2's wrapped script error, and the [`RetryClass`]
//! a kind calls for.

use std::fmt;

use bytes::Bytes;

/// What kind of error reply the server sent, from its first word.
///
/// ```
/// use keylatch_cluster::ServerErrorKind;
/// assert_eq!(ServerErrorKind::from_code(b"TRYAGAIN"), ServerErrorKind::TryAgain);
/// assert_eq!(ServerErrorKind::from_code(b"ERR"), ServerErrorKind::Other);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServerErrorKind {
    /// `NOSCRIPT`: EVALSHA of a script the node does not have.
    NoScript,
    /// `MOVED slot host:port`: the slot lives elsewhere for good.
    Moved,
    /// `ASK slot host:port`: the slot is migrating; ask the target once.
    Ask,
    /// `TRYAGAIN`: multi-key command during a slot migration.
    TryAgain,
    /// `CLUSTERDOWN`: the cluster cannot serve the slot now.
    ClusterDown,
    /// `CROSSSLOT`: keys of one command in different slots.
    CrossSlot,
    /// `READONLY`: a write sent to a replica.
    ReadOnly,
    /// `LOADING`: the server is loading its dataset.
    Loading,
    /// `BUSY`: a script is running too long.
    Busy,
    /// `NOAUTH`: authentication required.
    NoAuth,
    /// `WRONGPASS`: bad user name or password.
    WrongPass,
    /// `NOPERM`: the ACL user may not run this.
    NoPerm,
    /// `NOPROTO`: the requested protocol version is not supported.
    NoProto,
    /// `ERR unknown command …` or `ERR unknown subcommand …` (any case, as
    /// servers differ): the server does not know the command or subcommand.
    UnknownCommand,
    /// `MASTERDOWN`: a replica whose link to its master is down.
    MasterDown,
    /// `OOM`: the server is at its `maxmemory` and refuses a command that
    /// may grow memory (inside a script, its first write: nothing of the
    /// script ran). Not retried by the client itself; a lock release is
    /// (it ran nothing, and memory may come back).
    Oom,
    /// Any other error (`ERR`, `WRONGTYPE`, script errors, …).
    Other,
}

impl ServerErrorKind {
    /// Classifies an error code (the first word of the error line).
    ///
    /// ```
    /// use keylatch_cluster::ServerErrorKind;
    /// assert_eq!(ServerErrorKind::from_code(b"NOSCRIPT"), ServerErrorKind::NoScript);
    /// // Codes without a kind of their own are `Other`.
    /// assert_eq!(ServerErrorKind::from_code(b"WRONGTYPE"), ServerErrorKind::Other);
    /// ```
    pub fn from_code(code: &[u8]) -> Self {
        match code {
            b"NOSCRIPT" => Self::NoScript,
            b"MOVED" => Self::Moved,
            b"ASK" => Self::Ask,
            b"TRYAGAIN" => Self::TryAgain,
            b"CLUSTERDOWN" => Self::ClusterDown,
            b"CROSSSLOT" => Self::CrossSlot,
            b"READONLY" => Self::ReadOnly,
            b"LOADING" => Self::Loading,
            b"BUSY" => Self::Busy,
            b"NOAUTH" => Self::NoAuth,
            b"WRONGPASS" => Self::WrongPass,
            b"NOPERM" => Self::NoPerm,
            b"NOPROTO" => Self::NoProto,
            b"MASTERDOWN" => Self::MasterDown,
            b"OOM" => Self::Oom,
            _ => Self::Other,
        }
    }

    /// How a caller should react to this kind.
    ///
    /// ```
    /// use keylatch_cluster::{RetryClass, ServerErrorKind};
    /// assert_eq!(ServerErrorKind::TryAgain.retry_class(), RetryClass::AfterBackoff);
    /// ```
    pub fn retry_class(self) -> RetryClass {
        match self {
            Self::Moved | Self::Ask => RetryClass::Redirect,
            Self::TryAgain | Self::ClusterDown | Self::Loading | Self::Busy | Self::MasterDown => {
                RetryClass::AfterBackoff
            }
            Self::NoScript => RetryClass::ReloadScript,
            _ => RetryClass::Never,
        }
    }
}

/// The retry policy a server error calls for.
///
/// ```
/// use keylatch_cluster::{RetryClass, ServerErrorKind};
/// assert_eq!(ServerErrorKind::WrongPass.retry_class(), RetryClass::Never);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryClass {
    /// Resend to the node named in the redirect.
    Redirect,
    /// Resend after a short backoff (the condition is transient).
    AfterBackoff,
    /// Load the script and resend.
    ReloadScript,
    /// Retrying will not help.
    Never,
}

/// An error reply from the server, classified once.
///
/// ```
/// use keylatch_cluster::{ServerError, ServerErrorKind};
/// let e = ServerError::parse(bytes::Bytes::from_static(b"MOVED 3999 127.0.0.1:6381"));
/// assert_eq!(e.kind(), ServerErrorKind::Moved);
/// assert_eq!(e.redirect(), Some((3999, "127.0.0.1:6381")));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerError {
    kind: ServerErrorKind,
    line: Bytes,
}

impl ServerError {
    /// Classifies a raw error line (without the leading `-`).
    ///
    /// ```
    /// use bytes::Bytes;
    /// use keylatch_cluster::{ServerError, ServerErrorKind};
    /// let e = ServerError::parse(Bytes::from_static(b"ERR unknown command 'FOO'"));
    /// assert_eq!(e.kind(), ServerErrorKind::UnknownCommand);
    /// assert_eq!(e.code(), "ERR");
    /// ```
    pub fn parse(line: Bytes) -> Self {
        let kind = kind_of(&line);
        Self { kind, line }
    }

    /// The classified kind.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use keylatch_cluster::{RetryClass, ServerError, ServerErrorKind};
    /// let e = ServerError::parse(Bytes::from_static(b"BUSY Redis is busy running a script."));
    /// assert_eq!(e.kind(), ServerErrorKind::Busy);
    /// assert_eq!(e.kind().retry_class(), RetryClass::AfterBackoff);
    /// ```
    pub fn kind(&self) -> ServerErrorKind {
        self.kind
    }

    /// The first word of the line (`ERR`, `WRONGTYPE`, …).
    ///
    /// ```
    /// use bytes::Bytes;
    /// use keylatch_cluster::ServerError;
    /// let e = ServerError::parse(Bytes::from_static(b"WRONGTYPE Operation against a key holding the wrong kind of value"));
    /// assert_eq!(e.code(), "WRONGTYPE");
    /// ```
    pub fn code(&self) -> &str {
        let end = self
            .line
            .iter()
            .position(|&b| b == b' ')
            .unwrap_or(self.line.len());
        std::str::from_utf8(&self.line[..end]).unwrap_or("")
    }

    /// The whole line as text (lossy for non-UTF-8 bytes).
    ///
    /// ```
    /// use bytes::Bytes;
    /// use keylatch_cluster::ServerError;
    /// let e = ServerError::parse(Bytes::from_static(b"NOAUTH Authentication required."));
    /// assert_eq!(e.message(), "NOAUTH Authentication required.");
    /// ```
    pub fn message(&self) -> String {
        String::from_utf8_lossy(&self.line).into_owned()
    }

    /// The raw line.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use keylatch_cluster::ServerError;
    /// let e = ServerError::parse(Bytes::from_static(b"LOADING Redis is loading the dataset in memory"));
    /// assert!(e.as_bytes().starts_with(b"LOADING "));
    /// ```
    pub fn as_bytes(&self) -> &[u8] {
        &self.line
    }

    /// For `MOVED`/`ASK`: the slot and the `host:port` to go to.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use keylatch_cluster::ServerError;
    /// let ask = ServerError::parse(Bytes::from_static(b"ASK 16383 [::1]:7001"));
    /// assert_eq!(ask.redirect(), Some((16383, "[::1]:7001")));
    /// // Only MOVED and ASK redirect.
    /// let other = ServerError::parse(Bytes::from_static(b"ERR 1 127.0.0.1:7000"));
    /// assert_eq!(other.redirect(), None);
    /// ```
    pub fn redirect(&self) -> Option<(u16, &str)> {
        if !matches!(self.kind, ServerErrorKind::Moved | ServerErrorKind::Ask) {
            return None;
        }
        let text = std::str::from_utf8(&self.line).ok()?;
        let mut parts = text.split(' ');
        parts.next()?;
        let slot = parts.next()?.parse::<u16>().ok()?;
        let addr = parts.next()?;
        (slot < 16384).then_some((slot, addr))
    }
}

/// The kind of an error line: by its first word, or for Redis 6.2's
/// wrapped script error by the code inside it (see [`wrapped_script_code`]).
pub(crate) fn kind_of(line: &[u8]) -> ServerErrorKind {
    let code_end = line.iter().position(|&b| b == b' ').unwrap_or(line.len());
    let kind = ServerErrorKind::from_code(&line[..code_end]);
    if kind != ServerErrorKind::Other {
        return kind;
    }
    if let Some(inner) = wrapped_script_code(line).map(ServerErrorKind::from_code) {
        if inner != ServerErrorKind::Other {
            return inner;
        }
    }
    if names_unknown_command(line) {
        return ServerErrorKind::UnknownCommand;
    }
    kind
}

/// The code of an error a script's `redis.call` raised, as Redis 6.2 (and
/// older) reports it: wrapped in its own `ERR`, `ERR Error running script
/// (call to f_…): @user_script:1: @user_script: 1: -READONLY You can't
/// write …`. Redis 7 and Valkey answer the inner error itself (`READONLY
/// You can't write … script: …`). Without this, a write refused by a
/// demoted master inside a lock script was `Other` on 6.2: neither "surely
/// did not run" nor a demotion the connection follows.
fn wrapped_script_code(line: &[u8]) -> Option<&[u8]> {
    if !line.starts_with(b"ERR Error running script") {
        return None;
    }
    let at = line.windows(3).position(|w| w == b": -")? + 3;
    let rest = &line[at..];
    let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Whether an `ERR` line says the command (or subcommand) does not exist,
/// in any server's wording: `ERR unknown command 'X'` (Redis, Valkey),
/// `ERR unknown subcommand 'X'` (Redis 7+), `ERR Unknown subcommand or wrong
/// number of arguments for 'X'` (Redis 6.2: the only way it says so).
fn names_unknown_command(line: &[u8]) -> bool {
    const PREFIXES: [&[u8]; 2] = [b"ERR unknown command", b"ERR unknown subcommand"];
    PREFIXES
        .iter()
        .any(|p| line.len() >= p.len() && line[..p.len()].eq_ignore_ascii_case(p))
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.line))
    }
}

impl std::error::Error for ServerError {}
