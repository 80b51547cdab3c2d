//! `keylatch bench --compare`: finds and runs the comparison binary
//! (`benches/src/bin/compare.rs`, its own Cargo workspace), which runs the
//! same [`keylatch::bench`] scenarios through keylatch, redis-rs and rslock
//! and prints the tables itself. It lives outside this package so the
//! product's dependency tree never holds another Redis client.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::bench::BenchArgs;
use super::{Failure, EXIT_USAGE};

/// How to start the comparison binary.
#[derive(Debug, PartialEq)]
enum Launcher {
    /// A built binary.
    Binary(PathBuf),
    /// `cargo run --release` with this benches manifest (builds it first).
    Cargo(PathBuf),
}

/// Where the binary is, in order: `$KEYLATCH_COMPARE_BIN`; a
/// `keylatch-compare` or `compare` next to this executable; cargo on the
/// source tree this binary was built from, if it is still there.
fn locate(env: Option<OsString>, exe: Option<PathBuf>, source: &Path) -> Option<Launcher> {
    if let Some(bin) = env.filter(|v| !v.is_empty()) {
        return Some(Launcher::Binary(bin.into()));
    }
    if let Some(dir) = exe.as_deref().and_then(Path::parent) {
        for name in ["keylatch-compare", "compare"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(Launcher::Binary(candidate));
            }
        }
    }
    let manifest = source.join("benches").join("Cargo.toml");
    manifest.is_file().then_some(Launcher::Cargo(manifest))
}

/// The options passed through, in the comparison binary's syntax.
fn pass_through(a: &BenchArgs, url: &str) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec![
        "--url".into(),
        url.into(),
        "--clients".into(),
        a.clients.to_string().into(),
        "--duration".into(),
        format!("{}ms", a.duration.as_millis()).into(),
    ];
    if let Some(plot) = &a.plot {
        out.push("--plot".into());
        out.push(plot.clone().into_os_string());
    }
    out
}

/// Runs the comparison against the first seed, its output going straight
/// to ours; returns its exit code.
pub(crate) fn launch(a: &BenchArgs, seeds: &[String]) -> Result<u8, Failure> {
    let url = seeds
        .first()
        .ok_or_else(|| Failure::usage("bench: --compare needs a server URL"))?;
    let launcher = locate(
        std::env::var_os("KEYLATCH_COMPARE_BIN"),
        std::env::current_exe().ok(),
        Path::new(env!("CARGO_MANIFEST_DIR")),
    )
    .ok_or_else(|| {
        Failure::usage(
            "bench: --compare needs the comparison binary: in keylatch's source tree run \
             `cargo build --release --manifest-path benches/Cargo.toml --bin compare` and set \
             KEYLATCH_COMPARE_BIN=benches/target/release/compare",
        )
    })?;
    let mut cmd = match &launcher {
        Launcher::Binary(bin) => Command::new(bin),
        Launcher::Cargo(manifest) => {
            let mut c = Command::new("cargo");
            c.args(["run", "--quiet", "--release", "--manifest-path"])
                .arg(manifest)
                .args(["--bin", "compare", "--"]);
            c
        }
    };
    let shown = match &launcher {
        Launcher::Binary(bin) => bin.display().to_string(),
        Launcher::Cargo(m) => format!("cargo run --release --manifest-path {}", m.display()),
    };
    let status = cmd
        .args(pass_through(a, url))
        .status()
        .map_err(|e| Failure::usage(format!("bench: cannot start {shown}: {e}")))?;
    match status.code() {
        Some(0) => Ok(0),
        // It printed its own one-line error.
        Some(code) => Err(Failure {
            code: u8::try_from(code).unwrap_or(EXIT_USAGE),
            message: String::new(),
        }),
        None => Err(Failure::usage(format!(
            "bench: {shown} was killed ({status})"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_wins_then_a_neighbour_then_the_source_tree() {
        let dir = keylatch_harness::TempDir::new("keylatch-compare").unwrap();
        let exe = dir.path().join("keylatch");
        let source = dir.path().join("src-tree");
        assert_eq!(locate(None, Some(exe.clone()), &source), None);
        std::fs::create_dir_all(source.join("benches")).unwrap();
        std::fs::write(source.join("benches/Cargo.toml"), "").unwrap();
        assert_eq!(
            locate(None, Some(exe.clone()), &source),
            Some(Launcher::Cargo(source.join("benches/Cargo.toml")))
        );
        std::fs::write(dir.path().join("compare"), "").unwrap();
        assert_eq!(
            locate(None, Some(exe.clone()), &source),
            Some(Launcher::Binary(dir.path().join("compare")))
        );
        assert_eq!(
            locate(Some("/opt/cmp".into()), Some(exe), &source),
            Some(Launcher::Binary("/opt/cmp".into()))
        );
    }
}
