//! `Cmd`'s `Debug`: the arguments as text, with every secret a command can
//! carry printed as `***`, so that a command in a log line, an error or a
//! panic message never shows a password.

use std::fmt;

use crate::Cmd;

/// Longest argument shown in full; longer ones are cut with `…(N bytes)`.
const SHOWN: usize = 64;

impl fmt::Debug for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let args: Vec<&[u8]> = self.args().collect();
        let secret = secret_positions(&args);
        let mut list = f.debug_list();
        for (i, a) in args.iter().enumerate() {
            if secret.contains(&i) {
                list.entry(&format_args!("***"));
            } else {
                list.entry(&Shown(a));
            }
        }
        list.finish()
    }
}

/// Which arguments are secrets, by position, for the commands that carry
/// one.
fn secret_positions(args: &[&[u8]]) -> Vec<usize> {
    let is = |i: usize, word: &str| {
        args.get(i)
            .is_some_and(|a| a.eq_ignore_ascii_case(word.as_bytes()))
    };
    let mut out = Vec::new();
    if is(0, "AUTH") {
        // AUTH password | AUTH username password: the last one.
        if args.len() > 1 {
            out.push(args.len() - 1);
        }
    } else if is(0, "HELLO") || is(0, "MIGRATE") {
        // HELLO … AUTH user pass …; MIGRATE … AUTH pass | AUTH2 user pass.
        for i in 1..args.len() {
            if is(i, "AUTH") && is(0, "HELLO") || is(i, "AUTH2") {
                out.push(i + 2);
            } else if is(i, "AUTH") {
                out.push(i + 1);
            }
        }
    } else if is(0, "CONFIG") && is(1, "SET") {
        // CONFIG SET name value [name value …]
        let mut i = 2;
        while i + 1 < args.len() {
            if is(i, "requirepass") || is(i, "masterauth") || is(i, "tls-key-file-pass") {
                out.push(i + 1);
            }
            i += 2;
        }
    } else if is(0, "ACL") && is(1, "SETUSER") {
        // Rules `>password` and `#sha256` (a hash is a secret too).
        for (i, a) in args.iter().enumerate().skip(3) {
            if a.first()
                .is_some_and(|b| *b == b'>' || *b == b'#' || *b == b'<' || *b == b'!')
            {
                out.push(i);
            }
        }
    }
    out
}

/// One argument as text: UTF-8 lossily, cut past [`SHOWN`] bytes.
struct Shown<'a>(&'a [u8]);

impl fmt::Debug for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cut = &self.0[..self.0.len().min(SHOWN)];
        write!(f, "{:?}", String::from_utf8_lossy(cut))?;
        if self.0.len() > SHOWN {
            write!(f, "…({} bytes)", self.0.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::Cmd;

    fn shown(c: &Cmd) -> String {
        format!("{c:?}")
    }

    /// A command from its words, the first one the name.
    fn cmd(words: &[&str]) -> Cmd {
        words[1..].iter().fold(Cmd::new(words[0]), |c, w| c.arg(*w))
    }

    #[test]
    fn secrets_are_masked() {
        let cases = [
            cmd(&["AUTH", "s3cret"]),
            cmd(&["auth", "bob", "s3cret"]),
            cmd(&["HELLO", "3", "AUTH", "bob", "s3cret", "SETNAME", "x"]),
            cmd(&[
                "MIGRATE", "h", "1", "", "0", "5", "AUTH", "s3cret", "KEYS", "k",
            ]),
            cmd(&["MIGRATE", "h", "1", "", "0", "5", "AUTH2", "bob", "s3cret"]),
            cmd(&["CONFIG", "SET", "maxmemory", "1", "requirepass", "s3cret"]),
            cmd(&["ACL", "SETUSER", "bob", "on", ">s3cret", "~*"]),
        ];
        for c in &cases {
            let s = shown(c);
            assert!(!s.contains("s3cret"), "{s}");
            assert!(s.contains("***"), "{s}");
        }
        assert_eq!(
            shown(&cases[2]),
            r#"["HELLO", "3", "AUTH", "bob", ***, "SETNAME", "x"]"#
        );
    }

    #[test]
    fn other_commands_show_their_arguments() {
        assert_eq!(
            shown(&Cmd::new("SET").key("k").arg("v")),
            r#"["SET", "k", "v"]"#
        );
        let long = "x".repeat(100);
        let s = shown(&Cmd::new("SET").key("k").arg(long.as_str()));
        assert!(s.ends_with(r#"…(100 bytes)]"#), "{s}");
    }
}
