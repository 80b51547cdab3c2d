//! What a permit-expirable semaphore shows of itself: its leased permits.

use keylatch_cluster::Client;

use crate::error::LockResult;
use crate::inspection::LeasedPermit;
use crate::probe::{server_now_ms, zset};

use super::counter::SemNames;

/// Redisson's score for a permit without a lease (`Long.MAX_VALUE` ms,
/// as a double, less a margin).
const NO_LEASE: f64 = 922_337_203_685_477.0;

/// The leased permits of semaphore `name`, when its permits zset exists:
/// each raw id shown in hex, with its expiry from now.
pub(crate) async fn permits(client: &Client, name: &str) -> LockResult<Option<Vec<LeasedPermit>>> {
    let names = SemNames::new(name);
    let Some(members) = zset(client, &names.timeouts).await? else {
        return Ok(None);
    };
    let now = server_now_ms(client).await?;
    Ok(Some(
        members
            .into_iter()
            .map(|(id, score)| LeasedPermit {
                id: id.iter().map(|x| format!("{x:02x}")).collect(),
                expires_in_ms: Some(score)
                    .filter(|d| *d < NO_LEASE)
                    .zip(now)
                    .map(|(d, now)| d as i64 - now),
            })
            .collect(),
    ))
}
