//! A real terminal for the tests that need one: a tmux session running
//! `sh`, on a socket of its own, typed into with send-keys and read with
//! capture-pane.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use keylatch_harness::TempDir;

use super::{stderr, tmux, Soon};

/// One tmux session; its server is killed on drop.
pub(crate) struct Terminal {
    tmux: &'static str,
    socket: PathBuf,
    session: String,
    _dir: TempDir,
}

impl Terminal {
    /// A `cols`×`rows` session running `sh`; `None` where tmux is missing
    /// and not required (see [`tmux`]), named after `test`.
    pub(crate) fn start(test: &str, cols: u16, rows: u16) -> Option<Self> {
        let tmux = tmux(test)?;
        let dir = TempDir::new("keylatch-tty").unwrap();
        let t = Self {
            tmux,
            socket: dir.path().join("tmux.sock"),
            session: format!("kl{}", std::process::id()),
            _dir: dir,
        };
        let (cols, rows) = (cols.to_string(), rows.to_string());
        let out = t.tm(&[
            "new-session",
            "-d",
            "-s",
            &t.session,
            "-x",
            &cols,
            "-y",
            &rows,
            "sh",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        Some(t)
    }

    fn tm(&self, args: &[&str]) -> Output {
        Command::new(self.tmux)
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }

    /// Types `keys` (tmux key names: `Enter`, `C-c`, or text).
    pub(crate) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", self.session.as_str()];
        args.extend_from_slice(keys);
        self.tm(&args);
    }

    /// Types `line` and Enter.
    pub(crate) fn line(&self, line: &str) {
        self.keys(&[line, "Enter"]);
    }

    /// What the screen shows now (wrapped lines joined).
    pub(crate) fn screen(&self) -> String {
        let out = self.tm(&["capture-pane", "-p", "-J", "-t", &self.session]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits (up to 15 s) until `what` holds for the screen; fails with
    /// `label` and the screen.
    pub(crate) fn until(&self, what: impl Fn(&str) -> bool, label: &str) {
        Soon::new(Duration::from_secs(15), Duration::from_millis(50)).until_blocking(|| {
            let s = self.screen();
            what(&s)
                .then_some(())
                .ok_or_else(|| format!("{label}; screen:\n{s}"))
        });
    }

    /// Waits until the screen shows `text`.
    pub(crate) fn shows(&self, text: &str) {
        self.until(|s| s.contains(text), &format!("no {text:?} on screen"));
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.tm(&["kill-server"]);
    }
}
