//! Lua scripts named by their SHA-1, for EVALSHA with a NOSCRIPT fallback.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use keylatch_resp::{Cmd, ToArg};

use crate::sha1::sha1_hex;

/// A Lua script. Its SHA-1 is computed once, on first use, so scripts can be
/// `static`s built from `include_str!` at compile time.
///
/// Invoke it with [`Commands::eval_script`](crate::Commands::eval_script): `EVALSHA` first;
/// when the node answers `NOSCRIPT` (new node, restart, failover, `SCRIPT
/// FLUSH`), `SCRIPT LOAD` on that node and the retry go out in one write.
///
/// ```
/// use keylatch_cluster::Script;
/// static ECHO: Script = Script::new("echo", "return ARGV[1]");
/// assert_eq!(ECHO.sha1().len(), 40);
/// assert_eq!(ECHO.name(), "echo");
/// ```
#[derive(Debug)]
pub struct Script {
    name: &'static str,
    source: &'static str,
    sha1: OnceLock<String>,
}

impl Script {
    /// A script with a short name (for logs and errors) and its Lua source.
    /// Never build the source from user data: pass names and values in
    /// KEYS and ARGV.
    pub const fn new(name: &'static str, source: &'static str) -> Self {
        Self {
            name,
            source,
            sha1: OnceLock::new(),
        }
    }

    /// The event of a `NOSCRIPT` load. Scripts are loaded on first use (the
    /// first EVALSHA answers `NOSCRIPT`), so the first load of a script on
    /// a node is routine (debug); a second one means the node lost its
    /// script cache (a restart, a failover, `SCRIPT FLUSH`): info, as an
    /// operator wants to see that. The set of (script, node) pairs seen is
    /// touched only here, on the rare `NOSCRIPT` path.
    pub(crate) fn log_reload(&self, node: Option<&str>) {
        static LOADED: OnceLock<Mutex<HashSet<(&'static str, String)>>> = OnceLock::new();
        let node = node.unwrap_or("?");
        let first = LOADED
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert((self.name(), node.to_owned()));
        if first {
            tracing::debug!(
                script = self.name(),
                sha1 = self.sha1(),
                node,
                "loading the script (first use on this node)"
            );
        } else {
            tracing::info!(
                script = self.name(),
                sha1 = self.sha1(),
                node,
                "NOSCRIPT: the node lost its script cache; loading the script again"
            );
        }
    }

    /// The script's name.
    ///
    /// ```
    /// use keylatch_cluster::Script;
    /// static UNLOCK: Script = Script::new("unlock", "return redis.call('DEL', KEYS[1])");
    /// assert_eq!(UNLOCK.name(), "unlock");
    /// ```
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The Lua source.
    ///
    /// ```
    /// use keylatch_cluster::Script;
    /// static PONG: Script = Script::new("pong", "return 'PONG'");
    /// assert_eq!(PONG.source(), "return 'PONG'");
    /// ```
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// The lowercase hex SHA-1 of the source, as `SCRIPT LOAD` returns it.
    ///
    /// ```
    /// use keylatch_cluster::Script;
    /// static ONE: Script = Script::new("one", "return 1");
    /// assert_eq!(ONE.sha1(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    /// ```
    pub fn sha1(&self) -> &str {
        self.sha1.get_or_init(|| sha1_hex(self.source.as_bytes()))
    }

    /// `EVALSHA sha numkeys keys… args…`, with the keys recorded for routing.
    ///
    /// ```
    /// use keylatch_cluster::Script;
    /// static S: Script = Script::new("s", "return 1");
    /// let cmd = S.evalsha_cmd(&["k"], &["a", "b"]);
    /// assert_eq!(cmd.argc(), 6);
    /// assert_eq!(cmd.first_key(), Some(&b"k"[..]));
    /// ```
    pub fn evalsha_cmd<K: ToArg, A: ToArg>(&self, keys: &[K], args: &[A]) -> Cmd {
        // Sized up front for lock-sized arguments: growing from `Cmd::new`'s
        // 64 bytes reallocated (and copied) twice per lock script call.
        let room = 96 + 48 * (keys.len() + args.len());
        let mut cmd = Cmd::with_capacity("EVALSHA", room)
            .arg(self.sha1())
            .arg(keys.len());
        for k in keys {
            cmd.push_key(k);
        }
        for a in args {
            cmd.push_arg(a);
        }
        cmd
    }

    /// `SCRIPT LOAD source`.
    ///
    /// ```
    /// use keylatch_cluster::Script;
    /// static ONE: Script = Script::new("one", "return 1");
    /// let cmd = ONE.load_cmd();
    /// assert_eq!(cmd.args().collect::<Vec<_>>(), [&b"SCRIPT"[..], b"LOAD", b"return 1"]);
    /// ```
    pub fn load_cmd(&self) -> Cmd {
        Cmd::new("SCRIPT").arg("LOAD").arg(self.source)
    }
}
