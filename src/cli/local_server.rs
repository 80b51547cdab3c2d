//! A server to talk to when none was named: `demo` and `bench` use the
//! one at 127.0.0.1:6379 if it answers, else start their own through the
//! test harness (installing Debian's redis-server first when missing and
//! running as root).

use keylatch_harness::RedisServer;

/// Finds a server to talk to, starting one if needed. The returned
/// `RedisServer` (if any) must live as long as the caller uses the URL:
/// dropping it kills the server.
pub(crate) fn find_server(url: Option<String>) -> Result<(String, Option<RedisServer>), String> {
    if let Some(url) = url {
        return Ok((url, None));
    }
    if keylatch_harness::ping(6379).is_ok() {
        return Ok(("redis://127.0.0.1:6379".to_owned(), None));
    }
    ensure_redis_installed()?;
    let server = RedisServer::builder()
        .start()
        .map_err(|e| format!("cannot start redis-server: {e}"))?;
    // On stderr: stdout carries results (`bench` prints a table there).
    errln!(
        "started redis-server (pid {}) on {}",
        server.pid().unwrap_or(0),
        server.url()
    );
    Ok((server.url(), Some(server)))
}

/// Installs Debian's redis-server and redis-tools when the binary is
/// missing, if running as root and not told otherwise.
fn ensure_redis_installed() -> Result<(), String> {
    let have = std::process::Command::new(keylatch_harness::server_binary())
        .arg("--version")
        .output()
        .is_ok();
    if have {
        return Ok(());
    }
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0"))
        .unwrap_or(false);
    if !root || std::env::var_os("KEYLATCH_NO_INSTALL").is_some() {
        return Err(
            "redis-server is not installed: `apt-get install redis-server redis-tools`, \
                    or pass --url"
                .to_owned(),
        );
    }
    errln!("redis-server not found: installing Debian's redis-server and redis-tools");
    for args in [
        &["update", "-qq"][..],
        &["install", "-y", "-qq", "redis-server", "redis-tools"][..],
    ] {
        let status = std::process::Command::new("apt-get")
            .args(args)
            .status()
            .map_err(|e| format!("apt-get: {e}"))?;
        if !status.success() {
            return Err(format!("apt-get {} failed", args.join(" ")));
        }
    }
    Ok(())
}
