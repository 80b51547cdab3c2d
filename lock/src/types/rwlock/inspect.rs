//! What a read-write lock shows of itself: its writer and readers (each
//! read hold's TTL) and the writers waiting.

use keylatch_cluster::Client;
use keylatch_resp::{Cmd, Frame};

use crate::error::LockResult;
use crate::inspection::{Holder, Inspection, Reader, WaitingWriter};
use crate::names::{suffixed, LockNames};
use crate::probe::{ask, server_now_ms, zset};

use super::sides::read_prefix;

/// Splits `seen.holders` into the writer (`<owner>:write`) and readers,
/// each read hold with its key's PTTL.
pub(crate) async fn holds(client: &Client, seen: &mut Inspection) -> LockResult<()> {
    let names = LockNames::new(&seen.name);
    for h in &seen.holders {
        if let Some(owner) = h.owner.strip_suffix(":write") {
            seen.writer = Some(Holder::new(owner, h.count));
            continue;
        }
        let prefix = read_prefix(&names, &h.owner);
        let mut holds_ttl_ms = Vec::new();
        // Bounded: a count is small in practice, and a corrupt one must not
        // make an inspection hang.
        for i in 1..=h.count.clamp(0, 1000) {
            let key = format!("{prefix}:{i}");
            if let Frame::Integer(t) = ask(client, Cmd::new("PTTL").key(key.as_str())).await? {
                holds_ttl_ms.push(t);
            }
        }
        seen.readers.push(Reader {
            owner: h.owner.clone(),
            count: h.count,
            holds_ttl_ms,
        });
    }
    Ok(())
}

/// Writers waiting for the lock `name`, with their deadlines from now;
/// expired entries are left out.
pub(crate) async fn writers_waiting(client: &Client, name: &str) -> LockResult<Vec<WaitingWriter>> {
    let key = suffixed(name, Some("rwlock_writers_waiting"));
    let Some(members) = zset(client, &key).await? else {
        return Ok(Vec::new());
    };
    let now = server_now_ms(client).await?.unwrap_or(0);
    Ok(members
        .into_iter()
        .map(|(owner, score)| WaitingWriter {
            owner: String::from_utf8_lossy(&owner).into_owned(),
            deadline_in_ms: score as i64 - now,
        })
        .filter(|w| w.deadline_in_ms > 0)
        .collect())
}
