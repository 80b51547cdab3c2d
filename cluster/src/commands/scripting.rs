//! `EVAL`/`EVALSHA` commands, and `NOSCRIPT` healing in two round trips
//! for [`Commands`] implementations without a one-write path
//! ([`Connection`](crate::Connection) and [`Client`](crate::Client) have
//! theirs).

use keylatch_resp::{Cmd, Frame, ToArg};

use super::Commands;
use crate::error::{Result, ServerErrorKind};
use crate::script::Script;

/// `name script numkeys keys… args…` (`EVAL` or `EVALSHA`), the keys marked
/// as keys for routing.
pub(super) fn script_cmd<K: ToArg, A: ToArg>(
    name: &str,
    script: impl ToArg,
    keys: impl IntoIterator<Item = K>,
    args: impl IntoIterator<Item = A>,
) -> Cmd {
    let keys: Vec<K> = keys.into_iter().collect();
    let mut cmd = Cmd::new(name).arg(script).arg(keys.len());
    for k in keys {
        cmd.push_key(k);
    }
    for a in args {
        cmd.push_arg(a);
    }
    cmd
}

/// Sends `make()`; on `NOSCRIPT`, loads `script` and sends `make()` again.
pub(super) async fn load_on_noscript<C: Commands + ?Sized, F: Fn() -> Cmd + Send>(
    client: &C,
    script: &Script,
    make: F,
) -> Result<Frame> {
    match client.send(make()).await {
        Err(e) if e.server_kind() == Some(ServerErrorKind::NoScript) => {
            // Load, then run again: two round trips on this rare path
            // (Connection and Client override this with one write).
            script.log_reload(None);
            client.send(script.load_cmd()).await?;
            client.send(make()).await
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_cmd_marks_keys() {
        let cmd = script_cmd("EVALSHA", "abc", ["k1", "k2"], ["a"]);
        let args: Vec<&[u8]> = cmd.args().collect();
        assert_eq!(args, [&b"EVALSHA"[..], b"abc", b"2", b"k1", b"k2", b"a"]);
        let keys: Vec<&[u8]> = cmd.keys().collect();
        assert_eq!(keys, [&b"k1"[..], b"k2"]);
    }
}
