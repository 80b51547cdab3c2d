//! [`NodeSubscriber`]: the handle to one node's subscriber connection task,
//! and the [`Control`] messages handles and subscriptions send that task.
//!
//! The handle is usable on its own (one node, any kind of subscription);
//! [`PubSub`](crate::PubSub) is the front that picks the node.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::message::SubscriptionKind;
use super::registry::Confirm;
use super::subscription::{Inbox, Subscription};
use super::task::Task;
use super::PubSubConfig;
use crate::config::ConnectionConfig;
use crate::error::{Error, Result};
use crate::handshake::establish;

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
}

/// State shared by the handles and the task.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) connection: ConnectionConfig,
    pub(crate) config: PubSubConfig,
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
        let (control, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            connection,
            config,
            connected: AtomicBool::new(true),
            reconnects: AtomicU64::new(0),
            next_id: AtomicU64::new(0),
        });
        let task = Task::new(rx, Arc::clone(&shared), io);
        Ok((Self { control, shared }, task.run()))
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
            self.control.clone(),
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
        match tokio::time::timeout(self.shared.config.subscribe_timeout, confirmed).await {
            Ok(Ok(Ok(()))) => Ok(subscription),
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(_)) => Err(Error::ConnectionClosed),
            // Not confirmed in time: say whether the connection was the reason.
            Err(_) if self.is_connected() => Err(Error::Timeout),
            Err(_) => Err(Error::Disconnected),
        }
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
