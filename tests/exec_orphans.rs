//! `keylatch exec` leaves no lock behind after an acquire of unknown
//! outcome (issue 28, part 0). The fault matrix's CLI row failed now and
//! then with shells waiting out `--wait 30s` on a lock held by an `exec`
//! that had already exited. The chain, reproduced here on purpose: an
//! acquire runs on the server but its reply is lost with the connection;
//! the release meant to undo it meets the client still reconnecting and is
//! not delivered; the next acquire of the same owner then re-enters the
//! orphan hold (count 2), so the release at the command's end leaves
//! count 1 behind, held by nobody, for the whole lease.
//!
//! A small TCP proxy between keylatch and a real redis-server forwards
//! everything, except that after the first script call that runs (not one
//! answered NOSCRIPT) it drops both sockets instead of passing the reply
//! on, and refuses new connections for a moment.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keylatch_harness::RedisServer;

mod common;
use common::stderr;

/// How long the proxy refuses connections after it dropped the reply.
const REFUSE: Duration = Duration::from_millis(400);

struct Proxy {
    port: u16,
    tripped: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the acceptor.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

impl Proxy {
    fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let tripped = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let refuse_until: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
        let (t, s) = (tripped.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(client) = conn else { continue };
                if refuse_until
                    .lock()
                    .unwrap()
                    .is_some_and(|u| Instant::now() < u)
                {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let armed = Arc::new(AtomicBool::new(false));
                // Client to server: arms the trap when a script call goes by.
                let (mut from, mut to) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (arm, tripped) = (armed.clone(), t.clone());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    while let Ok(n) = from.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        if !tripped.load(Ordering::Relaxed) && contains(&buf[..n], b"EVAL") {
                            arm.store(true, Ordering::Relaxed);
                        }
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(Shutdown::Both);
                });
                // Server to client: drops the reply of the armed call.
                let (mut from, mut to) = (server, client);
                let (tripped, refuse) = (t.clone(), refuse_until.clone());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    while let Ok(n) = from.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        if armed.load(Ordering::Relaxed) && !tripped.load(Ordering::Relaxed) {
                            if buf[..n].starts_with(b"-NOSCRIPT") {
                                armed.store(false, Ordering::Relaxed);
                            } else {
                                tripped.store(true, Ordering::Relaxed);
                                *refuse.lock().unwrap() = Some(Instant::now() + REFUSE);
                                let _ = to.shutdown(Shutdown::Both);
                                let _ = from.shutdown(Shutdown::Both);
                                return;
                            }
                        }
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(Shutdown::Both);
                });
            }
        });
        Proxy {
            port,
            tripped,
            stop,
        }
    }
}

#[test]
fn an_acquire_whose_reply_is_lost_leaves_no_hold_behind() {
    let server = RedisServer::start();
    for (i, mode) in [&[][..], &["--fair"][..], &["--write"][..]]
        .iter()
        .enumerate()
    {
        let name = format!("orphan{i}");
        let proxy = Proxy::start(server.port());
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_keylatch"))
            .args(["exec", &name, "--wait", "10s", "--url"])
            .arg(format!("redis://127.0.0.1:{}", proxy.port))
            .args(*mode)
            .args(["--", "true"])
            .output()
            .unwrap();
        assert!(
            proxy.tripped.load(Ordering::Relaxed),
            "{mode:?}: the proxy never dropped a reply: {}",
            stderr(&o)
        );
        assert_eq!(o.status.code(), Some(0), "{mode:?}: {}", stderr(&o));
        // Read on the server itself: no hold of the exited exec remains.
        let left = server.cli(&["HGETALL", &name]).unwrap();
        assert!(
            left.trim().is_empty(),
            "{mode:?}: a hold outlived its exec: {left:?} (TTL {} ms)",
            server.cli(&["PTTL", &name]).unwrap().trim()
        );
    }
}
