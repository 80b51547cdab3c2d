//! A child process's output lines, read as they come.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Soon;

/// A process whose standard output is read on a thread, line by line as
/// it comes (`elect --observe`, say), and stopped with SIGINT. Dropped
/// without [`stop`](Self::stop) (a test that failed first), it is killed:
/// left running, it kept the test binary's output pipe open and CI's
/// `tee` waited on it for good.
pub(crate) struct Lines {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Lines {
    pub(crate) fn start(mut cmd: Command) -> Self {
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Self {
            child,
            lines,
            reader: Some(reader),
        }
    }

    /// Waits (up to 10 s) for a line containing `text`.
    pub(crate) fn wait_for(&self, text: &str) {
        Soon::new(Duration::from_secs(10), Duration::from_millis(10)).until_blocking(|| {
            let lines = self.lines.lock().unwrap();
            if lines.iter().any(|l| l.contains(text)) {
                Ok(())
            } else {
                Err(format!("no line with {text:?} in {lines:?}"))
            }
        });
    }

    /// Every line so far.
    pub(crate) fn so_far(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// SIGINT; its exit code and every line it printed.
    pub(crate) fn stop(mut self) -> (Option<i32>, Vec<String>) {
        let ok = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let code = self.child.wait().unwrap().code();
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        let lines = self.lines.lock().unwrap().clone();
        (code, lines)
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
