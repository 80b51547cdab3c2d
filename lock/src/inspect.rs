//! Inspecting a lock name: the key's own contents (the RLock hash's holders,
//! a count's value, the TTL, the fencing counter), then each type's part
//! from its own file (the fair queue, the read-write lock's readers, writer
//! and waiting writers, the leased permits). Above the types, as it asks
//! all of them.

use keylatch_cluster::Client;
use keylatch_resp::{Cmd, Frame};

use crate::error::{LockError, LockResult};
use crate::inspection::{Holder, Inspection, QueuedWaiter};
use crate::lock::waiters_key;
use crate::names::LockNames;
use crate::probe::{ask, key_type, pairs, server_now_ms, text, zset};
use crate::types::{fair, rwlock, semaphore};

/// The RLock hash's field saying keylatch waiters are registered to be
/// woken by name (`lua/lib/register_waiter.lua`): not a holder.
const WAITERS_MARK: &str = "keylatch_waiters";

impl Inspection {
    /// Reads what lock `name` holds through `client` (see
    /// [`Locks::inspect`](crate::Locks::inspect), which calls this with its
    /// own client).
    ///
    /// ```no_run
    /// use keylatch_lock::Inspection;
    /// # async fn demo(client: keylatch_cluster::Client) -> keylatch_lock::LockResult<()> {
    /// let seen = Inspection::read(&client, "nightly-report").await?;
    /// println!("{} holder(s)", seen.holders.len());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Client`] when a read fails;
    /// [`LockError::Protocol`] for a reply of an unexpected shape.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn read(client: &Client, name: &str) -> LockResult<Self> {
        let mut seen = Inspection {
            name: name.to_owned(),
            redis_type: key_type(client, name).await?,
            ..Inspection::default()
        };
        match seen.redis_type.as_str() {
            "hash" => hash_fields(client, &mut seen).await?,
            "string" => seen.value = text(&ask(client, Cmd::new("GET").key(name)).await?),
            _ => {}
        }
        seen.ttl_ms = match ask(client, Cmd::new("PTTL").key(name)).await? {
            Frame::Integer(-2) => None,
            Frame::Integer(ms) => Some(ms),
            other => {
                return Err(LockError::Protocol(format!(
                    "PTTL answered {}",
                    other.shown()
                )))
            }
        };
        seen.waiters = fair::inspect_queue(client, name).await?;
        seen.registered = registered(client, name).await?;
        if seen.mode.is_some() && !seen.shapeless {
            rwlock::inspect_holds(client, &mut seen).await?;
        }
        seen.permits = semaphore::inspect_permits(client, name).await?;
        seen.writers_waiting = rwlock::writers_waiting(client, name).await?;
        let token = LockNames::new(name).token();
        seen.fencing_token = ask(client, Cmd::new("GET").key(&*token))
            .await
            .ok()
            .and_then(|f| text(&f))
            .and_then(|t| t.parse().ok());
        Ok(seen)
    }
}

/// A hash's fields: counts are holders, `mode` a read-write lock's,
/// `keylatch_waiters` the mark of keylatch waiters to wake by name (no
/// holder); any other field makes it shapeless (an application's hash).
async fn hash_fields(client: &Client, seen: &mut Inspection) -> LockResult<()> {
    let entries = match ask(client, Cmd::new("HGETALL").key(seen.name.as_str())).await? {
        Frame::Map(m) => m,
        Frame::Array(items) => pairs(items),
        other => {
            return Err(LockError::Protocol(format!(
                "HGETALL answered {}",
                other.shown()
            )))
        }
    };
    for (k, v) in entries {
        let (Some(k), v) = (text(&k), text(&v)) else {
            continue;
        };
        if k == WAITERS_MARK {
            continue;
        }
        if k == "mode" {
            seen.shapeless |= !matches!(v.as_deref(), Some("read" | "write"));
            seen.mode = v;
        } else if let Some(n) = v.as_deref().and_then(|v| v.parse::<i64>().ok()) {
            seen.holders.push(Holder::new(&k, n));
        } else {
            seen.shapeless = true;
        }
    }
    Ok(())
}

/// The keylatch waiters registered at an RLock hash to be woken by name
/// (`lua/lib/register_waiter.lua`: owner → the server time in ms its
/// registration ends, plus a tag / 1024), soonest end first.
async fn registered(client: &Client, name: &str) -> LockResult<Vec<QueuedWaiter>> {
    let key = waiters_key(&LockNames::new(name));
    let Some(entries) = zset(client, &key).await? else {
        return Ok(Vec::new());
    };
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    // Read after the registrations, as the fair queue's deadlines are.
    let now_ms = server_now_ms(client).await?;
    Ok(entries
        .into_iter()
        .map(|(owner, end)| {
            // A grant's mark is the tag alone (`grant_waiter.lua`: below 1),
            // no end in time.
            let granted = end < 1.0;
            QueuedWaiter {
                owner: String::from_utf8_lossy(&owner).into_owned(),
                // The tag is the fraction: the end is the whole milliseconds.
                deadline_in_ms: now_ms
                    .filter(|_| !granted)
                    .map(|now| end.floor() as i64 - now),
                keylatch: true,
                granted,
            }
        })
        .collect())
}
