//! Real `redis-server` processes for keylatch's tests, demo and benchmarks.
//!
//! Layout:
//! - [`RedisServer`] (`server.rs`): one server on a free loopback port, in its
//!   own temp dir, without persistence, killed and cleaned up on `Drop`;
//!   [`ServerBuilder`] for extra config arguments; [`TempDir`]; [`redis_cli`],
//!   [`ping`], [`free_port`].
//! - [`RedisCluster`] (`cluster.rs`): a real Redis Cluster (3 masters with a
//!   replica each by default) with failover, kill/restart/pause of nodes and
//!   slot migration, for the cluster router tests.
//! - [`Masters`] (`masters.rs`): independent standalone servers, for RedLock.
//! - [`SentinelGroup`] (`sentinel.rs`): a master, replicas and sentinels
//!   (`redis-server --sentinel`), with `SENTINEL FAILOVER` and waits for the
//!   new master.
//! - [`TlsCerts`] (`tls.rs`): a throwaway CA, server and client certificate
//!   made with the `openssl` CLI, for TLS-only servers
//!   ([`ServerBuilder::tls`]) and clusters ([`ClusterBuilder::tls`]).
//! - [`Feature`] (`features.rs`): what a server offers, by its version; a
//!   test that needs something the configured binary lacks runs on the
//!   default `redis-server` ([`ServerBuilder::needs`]).
//! - [`monotonic_ns`] (`clock.rs`): `CLOCK_MONOTONIC`, one clock for the
//!   histories that several client processes write.
//! - [`rss_kib`] (`memory.rs`): this process' resident memory, for the lock
//!   tests and benchmarks that report what many holds cost the client.
//!
//! The harness is synchronous and std-only on purpose: it must not depend on
//! the client under test, and the demo binary and the benchmark crate use it too.
//! Servers are started with `--save "" --appendonly no` so a kill loses all
//! state, which the fault tests rely on. Every wait is bounded and reports
//! the server logs when it gives up.
//!
//! Environment:
//! - `KEYLATCH_REDIS_SERVER`: path of the `redis-server` binary (default: found on `PATH`).
//! - `KEYLATCH_REDIS_CLI`: path of the `redis-cli` binary (default: found on `PATH`).
//! - `KEYLATCH_OPENSSL`: path of the `openssl` binary (default: found on `PATH`).
//!
//! A missing binary is an error (tests fail, they never skip).
//!
//! ```no_run
//! let server = keylatch_harness::RedisServer::start();
//! println!("redis on {}", server.url());
//!
//! let cluster = keylatch_harness::RedisCluster::start();
//! println!("cluster seeds {:?}", cluster.seed_urls());
//! ```

mod clock;
mod cluster;
mod features;
mod masters;
mod memory;
mod parse;
mod sentinel;
mod server;
mod slot;
mod tls;

pub use clock::{check_monotonic_clock, monotonic_ns};
pub use cluster::{ClusterBuilder, ClusterNode, FailoverMode, RedisCluster};
pub use features::{debug_command_args, Feature};
pub use masters::Masters;
pub use memory::rss_kib;
pub use sentinel::{SentinelGroup, SentinelNode, MASTER_NAME};
pub use server::{
    cli_binary, free_port, ping, redis_cli, redis_cli_timeout, server_binary, RedisServer,
    ServerBuilder, TempDir, CLI_TIMEOUT,
};
pub use tls::{openssl_binary, TlsCerts};
