//! `keylatch bench --compare`: finds and runs the comparison binary
//! (`benches/src/bin/compare.rs`, its own Cargo workspace), which runs the
//! same [`keylatch_cli::bench`] scenarios through keylatch, redis-rs and rslock
//! (on a cluster: keylatch and redis-rs's cluster client) and prints the
//! tables itself. It lives outside this package so the
//! product's dependency tree never holds another Redis client.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::bench::BenchArgs;
use super::{Failure, EXIT_SOFTWARE};

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

/// The options passed through, in the comparison binary's syntax: every
/// seed, as `--cluster` when the user insisted on a cluster (the binary then
/// refuses a standalone server as `bench` does), else as `--url` (the
/// binary tells a cluster from a standalone server itself).
fn pass_through(a: &BenchArgs, seeds: &[String]) -> Vec<OsString> {
    let flag = if a.cluster.is_empty() {
        "--url"
    } else {
        "--cluster"
    };
    let mut out: Vec<OsString> = Vec::new();
    for seed in seeds {
        out.push(flag.into());
        out.push(seed.into());
    }
    out.extend([
        "--clients".into(),
        a.clients.to_string().into(),
        "--duration".into(),
        format!("{}ms", a.duration.as_millis()).into(),
    ]);
    if let Some(plot) = &a.plot {
        out.push("--plot".into());
        out.push(plot.clone().into_os_string());
    }
    out
}

/// Runs the comparison against `seeds` (a standalone server or a
/// cluster), its output going straight to ours; returns its exit code.
pub(crate) fn launch(a: &BenchArgs, seeds: &[String]) -> Result<u8, Failure> {
    if seeds.is_empty() {
        return Err(Failure::usage("bench: --compare needs a server URL"));
    }
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
        .args(pass_through(a, seeds))
        .status()
        .map_err(|e| Failure::software(format!("bench: cannot start {shown}: {e}")))?;
    match status.code() {
        Some(0) => Ok(0),
        // It printed its own one-line error.
        Some(code) => Err(Failure {
            code: u8::try_from(code).unwrap_or(EXIT_SOFTWARE),
            message: String::new(),
        }),
        None => Err(Failure::software(format!(
            "bench: {shown} was killed ({status})"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn args(urls: &[&str], cluster: &[&str]) -> BenchArgs {
        BenchArgs {
            urls: urls.iter().map(|s| (*s).to_owned()).collect(),
            cluster: cluster.iter().map(|s| (*s).to_owned()).collect(),
            clients: 8,
            duration: Duration::from_millis(1500),
            compare: true,
            plot: None,
            timeline: None,
            holds: None,
            rounds: 3,
            watchdog: Duration::from_secs(3),
        }
    }

    #[test]
    fn every_seed_is_passed_through_as_cluster_when_one_was_demanded() {
        let strs = |v: Vec<OsString>| -> Vec<String> {
            v.into_iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect()
        };
        let seeds = ["redis://a:1".to_owned(), "redis://b:2".to_owned()];
        assert_eq!(
            strs(pass_through(
                &args(&["redis://a:1", "redis://b:2"], &[]),
                &seeds
            )),
            [
                "--url",
                "redis://a:1",
                "--url",
                "redis://b:2",
                "--clients",
                "8",
                "--duration",
                "1500ms"
            ]
        );
        assert_eq!(
            strs(pass_through(
                &args(&["redis://a:1"], &["redis://b:2"]),
                &seeds
            )),
            [
                "--cluster",
                "redis://a:1",
                "--cluster",
                "redis://b:2",
                "--clients",
                "8",
                "--duration",
                "1500ms"
            ]
        );
    }

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
