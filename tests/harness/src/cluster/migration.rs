//! Live resharding of one slot: open, move keys, close.

use std::io;
use std::time::{Duration, Instant};

use super::{RedisCluster, QUERY_TIMEOUT};
use crate::parse::parse_quoted_array;
use crate::slot::SLOTS;

/// Limit of one `MIGRATE` (whose own I/O timeout is 5 s).
const MIGRATE_CLI_TIMEOUT: Duration = Duration::from_secs(15);
/// Keys moved per `MIGRATE`.
const MIGRATE_BATCH: &str = "100";

impl RedisCluster {
    /// Opens the migration of `slot` from node `from_idx` to node `to_idx`:
    /// `CLUSTER SETSLOT slot IMPORTING <from-id>` on the target first, then
    /// `CLUSTER SETSLOT slot MIGRATING <to-id>` on the source (in this order,
    /// so a client sent to the target by `-ASK` is never refused).
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// let from = cluster.master_for_slot(100);
    /// let to = *cluster.masters().iter().find(|&&m| m != from).unwrap();
    /// cluster.begin_migration(100, from, to).unwrap();
    /// // … exercise -ASK redirections …
    /// cluster.migrate_keys(100, from, to).unwrap();
    /// cluster.finish_migration(100, to).unwrap();
    /// ```
    ///
    /// # Errors
    /// `slot` is not below 16384 or the nodes are the same
    /// ([`io::ErrorKind::InvalidInput`]), or a node does not answer `OK`.
    ///
    /// # Panics
    /// An index is out of range.
    pub fn begin_migration(&self, slot: u16, from_idx: usize, to_idx: usize) -> io::Result<()> {
        check_slot(slot)?;
        check_distinct(from_idx, to_idx)?;
        let s = slot.to_string();
        let (from_id, to_id) = (self.nodes[from_idx].node_id(), self.nodes[to_idx].node_id());
        self.expect_ok(to_idx, &["CLUSTER", "SETSLOT", &s, "IMPORTING", from_id])?;
        self.expect_ok(from_idx, &["CLUSTER", "SETSLOT", &s, "MIGRATING", to_id])
    }

    /// Moves every key of `slot` from node `from_idx` to node `to_idx`: lists
    /// up to 100 keys with `CLUSTER GETKEYSINSLOT` on the source and sends them
    /// with `MIGRATE 127.0.0.1 <to-port> "" 0 5000 KEYS …`, until none are
    /// left. TTLs travel with the keys. Returns how many keys were sent.
    /// Needs [`begin_migration`](Self::begin_migration) first.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// let (from, to) = (cluster.master_for_slot(0), cluster.master_for_slot(16383));
    /// cluster.begin_migration(0, from, to).unwrap();
    /// let moved = cluster.migrate_keys(0, from, to).unwrap();
    /// cluster.finish_migration(0, to).unwrap();
    /// ```
    ///
    /// # Errors
    /// Bad slot or same nodes ([`io::ErrorKind::InvalidInput`]); `MIGRATE`
    /// answers an error (e.g. `BUSYKEY`: the target already has that key);
    /// a key name is not UTF-8; or keys remain after the wait timeout.
    ///
    /// # Panics
    /// An index is out of range.
    pub fn migrate_keys(&self, slot: u16, from_idx: usize, to_idx: usize) -> io::Result<usize> {
        check_slot(slot)?;
        check_distinct(from_idx, to_idx)?;
        let (source, target) = (&self.nodes[from_idx], &self.nodes[to_idx]);
        let s = slot.to_string();
        let to_port = target.port().to_string();
        let deadline = Instant::now() + self.wait_timeout;
        let mut moved = 0;
        loop {
            // Quoted output (`--no-raw`): plain output cannot tell a newline in
            // a key name from the separator between keys.
            let listing = source.server().cli_timeout(
                &["--no-raw", "CLUSTER", "GETKEYSINSLOT", &s, MIGRATE_BATCH],
                QUERY_TIMEOUT,
            )?;
            let keys = parse_quoted_array(&listing)
                .map_err(|e| io::Error::other(format!("GETKEYSINSLOT on node {from_idx}: {e}")))?;
            if keys.is_empty() {
                return Ok(moved);
            }
            if Instant::now() >= deadline {
                return Err(self.error(
                    io::ErrorKind::TimedOut,
                    &format!(
                        "slot {slot} still has keys on node {from_idx} after {:?} of MIGRATE",
                        self.wait_timeout
                    ),
                ));
            }
            let mut command = vec!["MIGRATE", "127.0.0.1", &to_port, "", "0", "5000", "KEYS"];
            command.extend(keys.iter().map(String::as_str));
            let reply = source.server().cli_timeout(&command, MIGRATE_CLI_TIMEOUT)?;
            match reply.trim() {
                "OK" => moved += keys.len(),
                // Every listed key expired meanwhile: nothing to move.
                "NOKEY" => {}
                other => {
                    return Err(io::Error::other(format!(
                        "MIGRATE of slot {slot} from node {from_idx} to node {to_idx}: {other}"
                    )))
                }
            }
        }
    }

    /// Closes the migration of `slot` to node `to_idx`: `CLUSTER SETSLOT slot
    /// NODE <to-id>` on the target, then on the previous owner (as the target
    /// saw it), then on every other live master; then waits until every live
    /// node sees the target as owner with no open migration and the cluster
    /// is healthy.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// let (from, to) = (cluster.master_for_slot(0), cluster.master_for_slot(16383));
    /// cluster.begin_migration(0, from, to).unwrap();
    /// cluster.migrate_keys(0, from, to).unwrap();
    /// cluster.finish_migration(0, to).unwrap();
    /// assert_eq!(cluster.master_for_slot(0), to);
    /// ```
    ///
    /// # Errors
    /// Bad slot; a node refuses (e.g. the source still holds keys of the
    /// slot); or no agreement within the wait timeout (with logs).
    ///
    /// # Panics
    /// `to_idx` is out of range.
    pub fn finish_migration(&self, slot: u16, to_idx: usize) -> io::Result<()> {
        check_slot(slot)?;
        let to_id = self.nodes[to_idx].node_id();
        let s = slot.to_string();
        let command = ["CLUSTER", "SETSLOT", &s, "NODE", to_id];
        let source = self
            .view(to_idx)
            .map_err(io::Error::other)?
            .owner(slot)
            .and_then(|id| self.node_index_by_id(id))
            .filter(|&i| i != to_idx && self.nodes[i].is_live());
        // The target first: once it owns the slot it answers for the keys it
        // imported, so no client is bounced between the two in the meantime.
        self.expect_ok(to_idx, &command)?;
        if let Some(source) = source {
            self.expect_ok(source, &command)?;
        }
        for master in self.try_masters().map_err(io::Error::other)? {
            if master != to_idx && Some(master) != source {
                self.expect_ok(master, &command)?;
            }
        }
        self.wait_for(
            &format!("every live node to see slot {slot} owned by node {to_idx}"),
            || {
                for i in self.live() {
                    let view = self.view(i)?;
                    if view.owner(slot) != Some(to_id) {
                        return Err(format!("node {i} sees {:?} as owner", view.owner(slot)));
                    }
                    if view
                        .myself()
                        .is_some_and(|me| me.open_slots.contains(&slot))
                    {
                        return Err(format!("node {i} still has slot {slot} open"));
                    }
                }
                Ok(())
            },
        )?;
        self.wait_healthy()
    }

    /// Moves `slot` with its keys from node `from_idx` to node `to_idx`:
    /// [`begin_migration`](Self::begin_migration),
    /// [`migrate_keys`](Self::migrate_keys),
    /// [`finish_migration`](Self::finish_migration). Returns how many keys
    /// were sent.
    ///
    /// ```no_run
    /// let cluster = keylatch_harness::RedisCluster::start();
    /// let (from, to) = (cluster.master_for_slot(0), cluster.master_for_slot(16383));
    /// let moved = cluster.move_slot(0, from, to).unwrap();
    /// ```
    ///
    /// # Errors
    /// As for the three steps.
    ///
    /// # Panics
    /// An index is out of range.
    pub fn move_slot(&self, slot: u16, from_idx: usize, to_idx: usize) -> io::Result<usize> {
        self.begin_migration(slot, from_idx, to_idx)?;
        let moved = self.migrate_keys(slot, from_idx, to_idx)?;
        self.finish_migration(slot, to_idx)?;
        Ok(moved)
    }
}

fn check_slot(slot: u16) -> io::Result<()> {
    if slot < SLOTS {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("slot {slot} out of range 0..{SLOTS}"),
        ))
    }
}

fn check_distinct(from_idx: usize, to_idx: usize) -> io::Result<()> {
    if from_idx == to_idx {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("source and target are both node {from_idx}"),
        ))
    } else {
        Ok(())
    }
}
