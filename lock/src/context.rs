//! The context every handle of one [`Locks`](crate::Locks) shares: the
//! client, the lease engine's handle, the settings, the local wait queues,
//! the background releases, the waiters' pub/sub hub (opened on first need)
//! and the script arguments fixed by the settings.

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;

use keylatch_cluster::{Client, PubSub, PubSubConfig};

use crate::background::{Background, Leaves};
use crate::config::LocksConfig;
use crate::lease::{Counters, Engine, Invalidations};
use crate::owner::Owner;
use crate::span::millis;
use crate::waiters::WaitQueues;

/// Script arguments fixed by a [`Locks`](crate::Locks)' configuration and
/// client, formatted once rather than on every acquire and release.
#[derive(Clone, Debug)]
pub(crate) struct ScriptArgs {
    /// The watchdog lease in milliseconds.
    pub(crate) watchdog_ms: String,
    /// Expiry of a fencing counter an acquire creates (and that renewals
    /// keep up), in milliseconds.
    pub(crate) token_ttl_ms: String,
    /// `publish`, or `spublish` in a cluster.
    pub(crate) publish: &'static str,
    /// A fair-lock waiter's deadline span in milliseconds
    /// ([`LocksConfig::fair_waiter_timeout`]).
    pub(crate) fair_waiter_ms: String,
    /// A fair-lock waiter's wait allowance in milliseconds
    /// ([`LocksConfig::fair_wait_allowance`]).
    pub(crate) fair_allowance_ms: String,
    /// The lease a release grants a lock to a waiter with: the watchdog
    /// lease, or `"0"` when [`LocksConfig::grant_to_waiters`] is off.
    pub(crate) grant_ms: String,
}

/// What every handle of one `Locks` shares.
pub(crate) struct Inner {
    pub(crate) client: Client,
    pub(crate) config: LocksConfig,
    /// Shared by every owner id this context makes (see [`Owner::made`]).
    client_id: Arc<String>,
    next_handle: AtomicU64,
    /// Waits that a release may grant the lock, counted: each gets its own
    /// tag (see [`Inner::grant_tag`]).
    grant_waits: AtomicU16,
    pub(crate) engine: Engine,
    /// What this `Locks` counts (live holds among them), shared with its
    /// holds.
    pub(crate) counters: Arc<Counters>,
    /// Releases running on the runtime (see [`Locks::settle`]).
    pub(crate) background: Arc<Background>,
    /// Leaves of waits that may have been granted the lock, on their way
    /// (an acquire of their owner waits for them).
    pub(crate) leaves: Arc<Leaves>,
    pub(crate) waiters: Arc<WaitQueues>,
    pubsub: tokio::sync::OnceCell<PubSub>,
    /// Script arguments fixed by the configuration and the client.
    pub(crate) script_args: ScriptArgs,
}

impl Inner {
    /// The context for `client`: the settings bounded, the engine started.
    pub(crate) fn new(
        client: Client,
        config: LocksConfig,
        invalidations: Option<Invalidations>,
    ) -> Self {
        let config = config.bounded();
        let token_ttl_ms = millis(config.token_idle_ttl).to_string();
        let engine = Engine::spawn(
            client.clone(),
            token_ttl_ms.clone(),
            invalidations,
            config.tracked_holds,
        );
        let script_args = ScriptArgs {
            watchdog_ms: millis(config.watchdog_timeout).to_string(),
            token_ttl_ms,
            // Sharded where the cluster has it (Redis 7+, Valkey), so the
            // message stays in the lock's shard; plain PUBLISH otherwise
            // (standalone, Redis 6.2 clusters), as Redisson does.
            publish: if client.has_sharded_pubsub() {
                "spublish"
            } else {
                "publish"
            },
            fair_waiter_ms: millis(config.fair_waiter_timeout).to_string(),
            fair_allowance_ms: millis(config.fair_wait_allowance).to_string(),
            grant_ms: if config.grant_to_waiters {
                millis(config.watchdog_timeout).to_string()
            } else {
                "0".into()
            },
        };
        Self {
            client,
            client_id: Arc::new(uuid::Uuid::new_v4().to_string()),
            next_handle: AtomicU64::new(1),
            grant_waits: AtomicU16::new(0),
            engine,
            counters: Arc::new(Counters::default()),
            background: Arc::default(),
            leaves: Arc::default(),
            waiters: Arc::new(WaitQueues::default()),
            pubsub: tokio::sync::OnceCell::new(),
            script_args,
            config,
        }
    }

    /// `<client uuid>:<n>`, n unique within this context.
    pub(crate) fn new_owner(&self) -> Owner {
        let n = self.next_handle.fetch_add(1, Ordering::Relaxed);
        Owner::made(&self.client_id, n)
    }

    /// A tag (1..=1023) for a wait that a release may grant the lock: the
    /// grant's mark names the wait, so a try of another wait of the same
    /// owner (a clone of the handle, or another handle given the same
    /// owner id) is never taken for it. Successive waits of this client
    /// get successive tags: two would meet only 1,023 waits apart.
    pub(crate) fn grant_tag(&self) -> u16 {
        let step = |n: u16| Some((n + 1) % 1023);
        let last = self
            .grant_waits
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, step);
        // (`step` always answers: the update cannot fail.)
        last.unwrap_or_else(|n| n) + 1
    }

    /// The client's id, which every owner id of this context starts with.
    pub(crate) fn client_id(&self) -> &str {
        &self.client_id
    }

    /// Whether `owner` is an owner id this client made (`<client id>:<n>`,
    /// see `new_owner`), not one the application gave.
    pub(crate) fn made_owner(&self, owner: &str) -> bool {
        owner
            .strip_prefix(self.client_id())
            .and_then(|rest| rest.strip_prefix(':'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }

    /// The hub waiters listen on, opened on first need. `None` when it
    /// cannot be had now: waiters then poll (bounded by the lock's PTTL and
    /// [`LocksConfig::recheck`]) instead of failing.
    pub(crate) async fn pubsub(&self) -> Option<&PubSub> {
        self.pubsub
            .get_or_try_init(|| PubSub::from_client_with(&self.client, PubSubConfig::default()))
            .await
            .ok()
    }

    /// Whether the hub is open and connected (a wait's subscriptions then
    /// cost no round trip while they linger).
    pub(crate) fn pubsub_connected(&self) -> bool {
        self.pubsub.get().is_some_and(PubSub::is_connected)
    }

    /// The command the release scripts publish with: sharded pub/sub in a
    /// cluster, so a release reaches only the channel's shard instead of
    /// flooding the cluster bus. (A Redisson client that still publishes
    /// with classic PUBLISH in a cluster wakes our waiters only at their
    /// next re-check, at most [`LocksConfig::recheck`] later.)
    pub(crate) fn publish_command(&self) -> &'static str {
        self.script_args.publish
    }
}
