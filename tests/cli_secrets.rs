//! Issue 30 through the real binary: no password in any output, and the
//! sysexits-style exit codes (64 usage, 69 unavailable, 70 server error).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

use keylatch_harness::{free_port, RedisServer};

mod common;
use common::{stderr, stdout};

const USER_PW: &str = "bobs-pw-4711";
const WRONG_PW: &str = "wrong-pw-0815";

/// The binary with no `$KEYLATCH_URL` of the caller's.
fn keylatch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keylatch"))
        .env_remove("KEYLATCH_URL")
        .args(args)
        .output()
        .unwrap()
}

/// A server whose default user wants a password nobody here knows, and a
/// user `bob` with [`USER_PW`]; `limited` may run no script.
fn guarded_server() -> RedisServer {
    let server = RedisServer::start();
    let rules = ["on", ">bobs-pw-4711", "~*", "&*", "+@all"];
    let out = server
        .cli(&[&["ACL", "SETUSER", "bob"][..], &rules[..]].concat())
        .unwrap();
    assert_eq!(out.trim(), "OK", "{out}");
    let out = server
        .cli(&[
            "ACL",
            "SETUSER",
            "limited",
            "on",
            ">lim-pw-1",
            "~*",
            "&*",
            "+@all",
            "-@scripting",
        ])
        .unwrap();
    assert_eq!(out.trim(), "OK", "{out}");
    let out = server
        .cli(&["CONFIG", "SET", "requirepass", "default-pw-nobody-knows"])
        .unwrap();
    assert_eq!(out.trim(), "OK", "{out}");
    server
}

/// Every subcommand that connects, with `url`.
fn every_path(url: &str) -> Vec<Vec<String>> {
    let cmds: [&[&str]; 8] = [
        &["exec", "job", "--wait", "1s", "--url", url, "--", "true"],
        &["-v", "exec", "job", "--url", url, "--", "true"],
        &["status", "job", "--url", url],
        &["status", "job", "--json", "--url", url],
        &["unlock", "--force", "--yes", "job", "--url", url],
        &["latch", "l", "--count", "--url", url],
        &[
            "exec",
            "job",
            "--wait",
            "1s",
            "--redlock",
            &format!("{url},{url},{url}"),
            "--",
            "true",
        ],
        &["bench", "--url", url, "--duration", "1s", "--clients", "2"],
    ];
    cmds.iter()
        .map(|c| c.iter().map(|s| (*s).to_owned()).collect())
        .collect()
}

fn assert_hidden(args: &[String], o: &Output, secret: &str) -> Option<i32> {
    let (out, err) = (stdout(o), stderr(o));
    assert!(
        !out.contains(secret) && !err.contains(secret),
        "{args:?} printed the password:\n{out}\n{err}"
    );
    o.status.code()
}

#[test]
fn a_wrong_password_is_never_printed_and_exits_69() {
    let server = guarded_server();
    let port = server.port();
    for url in [
        format!("redis://:{WRONG_PW}@127.0.0.1:{port}"),
        format!("redis://bob:{WRONG_PW}@127.0.0.1:{port}"),
        format!("redis://{WRONG_PW}@127.0.0.1:{port}"),
    ] {
        for args in every_path(&url) {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = keylatch(&refs);
            let code = assert_hidden(&args, &o, WRONG_PW);
            assert_eq!(code, Some(69), "{args:?}: {}", stderr(&o));
            assert!(stderr(&o).contains("***"), "{args:?}: {}", stderr(&o));
        }
    }
}

#[test]
fn a_good_user_and_password_are_never_printed() {
    let server = guarded_server();
    let url = format!("redis://bob:{USER_PW}@127.0.0.1:{}", server.port());
    for args in every_path(&url) {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = keylatch(&refs);
        assert_hidden(&args, &o, USER_PW);
    }
}

#[test]
fn a_server_error_exits_70() {
    let server = guarded_server();
    let url = format!("redis://limited:lim-pw-1@127.0.0.1:{}", server.port());
    let o = keylatch(&["exec", "job", "--url", &url, "--", "true"]);
    assert_eq!(o.status.code(), Some(70), "{}", stderr(&o));
    assert!(!stderr(&o).contains("lim-pw-1"), "{}", stderr(&o));
}

#[test]
fn usage_version_and_unreachable_exit_codes() {
    let o = keylatch(&[]);
    assert_eq!(o.status.code(), Some(64));
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    assert!(stderr(&o).contains("usage: keylatch"), "{}", stderr(&o));
    for flag in ["--version", "-V"] {
        let o = keylatch(&[flag]);
        assert_eq!(o.status.code(), Some(0), "{flag}");
        let want = format!("keylatch {}\n", env!("CARGO_PKG_VERSION"));
        assert_eq!(stdout(&o), want);
    }
    let o = keylatch(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("69"), "the table is in --help");
    for args in [
        &["exec", "x", "--bogus", "--", "true"][..],
        &["status", "x", "--bogus"],
    ] {
        let o = keylatch(args);
        assert_eq!(o.status.code(), Some(64), "{args:?}: {}", stderr(&o));
    }
    let nobody = format!("redis://:{WRONG_PW}@127.0.0.1:{}", free_port().unwrap());
    for args in [
        &["status", "x", "--url", &nobody][..],
        &["exec", "x", "--wait", "1s", "--url", &nobody, "--", "true"],
    ] {
        let o = keylatch(args);
        assert_eq!(o.status.code(), Some(69), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains(WRONG_PW), "{}", stderr(&o));
    }
}

/// The library's side: a config's `Debug`, a refused connect's `Display`
/// and `Debug`, the message of a panic on that error (what `.expect()`
/// prints), and a `Cmd` carrying AUTH never hold the password.
#[tokio::test]
async fn library_errors_debug_and_panics_hold_no_password() {
    let server = guarded_server();
    for url in [
        format!("redis://bob:{WRONG_PW}@127.0.0.1:{}", server.port()),
        format!("redis://:{WRONG_PW}@127.0.0.1:{}", server.port()),
    ] {
        let cfg = keylatch::ClientConfig::from_url(&url).unwrap();
        let shown = format!("{cfg:?}");
        assert!(!shown.contains(WRONG_PW), "{shown}");
        let e = keylatch::Locks::connect(&url).await.err().unwrap();
        for text in [e.to_string(), format!("{e:?}"), format!("{e:#?}")] {
            assert!(!text.contains(WRONG_PW), "{text}");
        }
        // What a user's `Locks::connect(url).await.expect("connecting")`
        // prints when it fails.
        #[allow(clippy::unnecessary_literal_unwrap)]
        let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Err::<(), _>(e).expect("connecting");
        }))
        .unwrap_err();
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap();
        assert!(message.starts_with("connecting: "), "{message}");
        assert!(!message.contains(WRONG_PW), "{message}");
    }
    let auth = keylatch::Cmd::new("AUTH").arg("bob").arg(WRONG_PW);
    let shown = format!("{auth:?}");
    assert!(
        !shown.contains(WRONG_PW) && shown.contains("bob"),
        "{shown}"
    );
}

/// A password whose `/` or `?` stands unencoded is never printed: in a
/// sentinel URL's query (`sentinel_password=`) such a value is legal and
/// used as it is; in a URL's userinfo it ends the authority early, and the
/// refusal names no part of it (before session 27 its tail was read as
/// the port and quoted: `bad port "hunter2" in URL`). Outside review.
#[test]
fn a_password_with_a_slash_or_question_mark_is_never_printed() {
    const SECRET: &str = "hunter2";
    let urls = [
        format!("redis+sentinel://127.0.0.1:1/mymaster?sentinel_password={SECRET}/xyz"),
        format!("redis+sentinel://127.0.0.1:1/mymaster?sentinel_password={SECRET}?xyz"),
        format!("redis://:{SECRET}/xyz@127.0.0.1:1"),
        format!("redis://:{SECRET}?xyz@127.0.0.1:1"),
        format!("redis+sentinel://:{SECRET}/xyz@127.0.0.1:1/mymaster"),
    ];
    let mut leaks = Vec::new();
    for url in &urls {
        if let Err(e) = keylatch_cluster::ClientConfig::from_url(url) {
            let shown = format!("{e} / {e:?}");
            if shown.contains(SECRET) {
                leaks.push(format!("ClientConfig::from_url({url:?}) -> {e}"));
            }
        }
        let out = keylatch(&["status", "foo", "--url", url]);
        let text = format!("{}{}", stdout(&out), stderr(&out));
        if text.contains(SECRET) {
            leaks.push(format!(
                "keylatch status foo --url {url:?} -> {}",
                text.trim()
            ));
        }
    }
    assert!(
        leaks.is_empty(),
        "the password was printed:\n{}",
        leaks.join("\n")
    );
}

/// A sentinel password holding `/` or `?` (legal in a query value) is the
/// sentinels' password as written; percent-encoded, it is decoded.
#[test]
fn a_sentinel_password_with_a_slash_is_used_as_written() {
    for (q, pw) in [
        ("s3/cret", "s3/cret"),
        ("s3?cret", "s3?cret"),
        ("s3%2Fcret", "s3/cret"),
    ] {
        let url = format!("redis+sentinel://127.0.0.1:26379/mymaster?sentinel_password={q}");
        let cfg = keylatch_cluster::ClientConfig::from_url(&url)
            .unwrap_or_else(|e| panic!("{url:?} refused: {e}"));
        let s = cfg.seeds[0].sentinel.as_ref().unwrap();
        assert_eq!(s.nodes()[0].password.as_deref(), Some(pw));
        assert_eq!(s.nodes()[0].addr(), "127.0.0.1:26379");
    }
}
