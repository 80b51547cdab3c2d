//! [`NodeSubscriber`]: the handle to one node's subscriber connection task,
//! the [`Control`] messages handles and subscriptions send that task, and
//! the [`Notice`]s a task of a cluster hub sends back.
//!
//! The handle is usable on its own (one node, any kind of subscription);
//! [`PubSub`](crate::PubSub) is the front that picks the node.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::cluster::Keep;
use super::message::SubscriptionKind;
use super::registry::{Confirm, Moving};
use super::subscription::{Inbox, Route, Subscription};
use super::task::Task;
use super::PubSubConfig;
use crate::config::ConnectionConfig;
use crate::error::{Error, Result};
use crate::handshake::{establish, Established};

/// A request to the socket task. Sent on an unbounded channel so that a
/// `Subscription`'s `Drop` can send without waiting; the number in flight is
/// bounded by the number of live subscriptions and pending `subscribe` calls.
#[derive(Debug)]
pub(crate) enum Control {
    /// Add a listener; answer `confirm` once the subscription is live.
    Subscribe {
        kind: SubscriptionKind,
        name: Bytes,
        id: u64,
        inbox: Arc<Inbox>,
        confirm: Confirm,
    },
    /// A listener's `Subscription` was dropped.
    Release {
        kind: SubscriptionKind,
        name: Bytes,
        id: u64,
    },
    /// Take over listeners (and waiting callers) of a name: new ones in a
    /// cluster hub, or ones another node gave up.
    Adopt(Moving),
    /// The topology changed: hand back every name `Keep` rejects.
    Retain(Keep),
}

/// Why a node's task handed listeners back to the cluster hub.
#[derive(Debug)]
pub(crate) enum Why {
    /// The node answered `MOVED slot addr` to SSUBSCRIBE.
    Moved { slot: u16, addr: String },
    /// The node unsubscribed the names on its own (`sunsubscribe` push): the
    /// slot went elsewhere, but the topology may not say so yet.
    Dropped,
    /// A transient refusal (`CLUSTERDOWN`, `TRYAGAIN`, …): try again later.
    Retry,
    /// `Control::Retain` rejected them.
    Retained,
}

/// What a node's task of a cluster hub tells the hub's coordinator.
#[derive(Debug)]
pub(crate) enum Notice {
    /// Listeners the node `from` gave up, to be placed elsewhere.
    Evicted {
        from: String,
        why: Why,
        entries: Vec<Moving>,
    },
    /// The node's connection is down: the topology may have changed.
    Down,
    /// Something was parked: start the coordinator's retry timer.
    Wake,
}

/// A node task's way back to its cluster hub.
#[derive(Debug)]
pub(crate) struct Link {
    /// The node's `host:port`, as the topology names it.
    pub(crate) addr: String,
    pub(crate) notices: mpsc::UnboundedSender<Notice>,
}

/// State shared by the handles and the task.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) connection: ConnectionConfig,
    pub(crate) config: PubSubConfig,
    /// Set for the nodes of a cluster hub: shard channels the node may not
    /// keep go back to the hub instead of failing or being resubscribed here.
    pub(crate) link: Option<Link>,
    connected: AtomicBool,
    reconnects: AtomicU64,
    next_id: AtomicU64,
}

impl Shared {
    pub(crate) fn set_connected(&self, up: bool) {
        self.connected.store(up, Ordering::Release);
    }

    pub(crate) fn count_reconnect(&self) {
        self.reconnects.fetch_add(1, Ordering::Relaxed);
    }

    /// Gives listeners back to the cluster hub (no-op without a link).
    pub(crate) fn hand_off(&self, why: Why, entries: Vec<Moving>) {
        if let (Some(link), false) = (&self.link, entries.is_empty()) {
            // The coordinator outlives every node task it links; if it is
            // gone the hub is too, and nobody listens any more.
            let _ = link.notices.send(Notice::Evicted {
                from: link.addr.clone(),
                why,
                entries,
            });
        }
    }

    /// Tells the cluster hub this node's connection is down.
    pub(crate) fn notify_down(&self) {
        if let Some(link) = &self.link {
            let _ = link.notices.send(Notice::Down);
        }
    }
}

/// A cheap, cloneable handle to one node's subscriber task.
#[derive(Clone, Debug)]
pub(crate) struct NodeSubscriber {
    control: mpsc::UnboundedSender<Control>,
    shared: Arc<Shared>,
}

impl NodeSubscriber {
    /// Connects (handshake included) and spawns the socket task.
    pub(crate) async fn connect(
        connection: ConnectionConfig,
        config: PubSubConfig,
    ) -> Result<Self> {
        let (node, task) = Self::connect_unspawned(connection, config).await?;
        tokio::spawn(task);
        Ok(node)
    }

    /// Connects and returns the task's future unspawned.
    pub(crate) async fn connect_unspawned(
        connection: ConnectionConfig,
        config: PubSubConfig,
    ) -> Result<(Self, impl Future<Output = ()> + Send + 'static)> {
        let io = establish(&connection).await?;
        let (node, task) = Self::new(connection, config, None, Some(io));
        Ok((node, task.run()))
    }

    /// Spawns a node task of a cluster hub that connects in the background:
    /// requests are taken at once and wait for the connection, so the hub
    /// can place names while holding its lock.
    pub(crate) fn spawn_lazy(
        connection: ConnectionConfig,
        config: PubSubConfig,
        link: Link,
    ) -> Self {
        let (node, task) = Self::new(connection, config, Some(link), None);
        tokio::spawn(task.run());
        node
    }

    fn new(
        connection: ConnectionConfig,
        config: PubSubConfig,
        link: Option<Link>,
        io: Option<Established>,
    ) -> (Self, Task) {
        let (control, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            connection,
            config,
            link,
            connected: AtomicBool::new(io.is_some()),
            reconnects: AtomicU64::new(0),
            next_id: AtomicU64::new(0),
        });
        let task = Task::new(rx, Arc::clone(&shared), io);
        (Self { control, shared }, task)
    }

    /// Queues a request for the task; `false` if the task is gone.
    pub(crate) fn send(&self, control: Control) -> bool {
        self.control.send(control).is_ok()
    }

    /// Adds a listener for `name` and waits until the server has confirmed
    /// the subscription (at once if it is already live), within the
    /// configured `subscribe_timeout`.
    pub(crate) async fn subscribe(
        &self,
        kind: SubscriptionKind,
        name: Bytes,
    ) -> Result<Subscription> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let inbox = Arc::new(Inbox::new(self.shared.config.listener_capacity));
        let (confirm, confirmed) = oneshot::channel();
        // Built before the request is sent: if this future is dropped from
        // here on, the Subscription's Drop releases the listener, and the
        // task sees the release after the request (one ordered channel).
        let subscription = Subscription::new(
            kind,
            name.clone(),
            id,
            Arc::clone(&inbox),
            Route::Node(self.control.clone()),
        );
        self.control
            .send(Control::Subscribe {
                kind,
                name,
                id,
                inbox,
                confirm,
            })
            .map_err(|_| Error::ConnectionClosed)?;
        let timeout = self.shared.config.subscribe_timeout;
        subscription
            .confirmed(confirmed, timeout, |_| self.is_connected())
            .await
    }

    /// Whether the task holds a live socket.
    pub(crate) fn is_connected(&self) -> bool {
        self.shared.connected.load(Ordering::Acquire)
    }

    /// Reconnects since the task started.
    pub(crate) fn reconnects(&self) -> u64 {
        self.shared.reconnects.load(Ordering::Relaxed)
    }
}
