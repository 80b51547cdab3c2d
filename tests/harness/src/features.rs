//! What a server binary offers, told from its version, and which binary a
//! test runs when the configured one (`KEYLATCH_REDIS_SERVER`) lacks what the
//! test needs.
//!
//! The suite runs against Redis 6.2 and 7.x and Valkey 8.1 and 9.x. A test of
//! a client behaviour that only some servers can provoke (a MOVED ping-pong,
//! sharded pub/sub) says so with [`ServerBuilder::needs`] or
//! [`ClusterBuilder::needs`]; where the configured binary lacks it, the test
//! runs on the default `redis-server` (Debian's 7.0, which has all of them),
//! and the harness says so once, in one line. A test never passes by skipping
//! its check.
//!
//! [`ServerBuilder::needs`]: crate::ServerBuilder::needs
//! [`ClusterBuilder::needs`]: crate::ClusterBuilder::needs

use std::collections::HashMap;
use std::process::Command;
use std::sync::Mutex;

/// A server capability that some tests need and some supported servers lack.
///
/// ```
/// use keylatch_harness::Feature;
/// assert!(Feature::ShardedPubSub.describe().contains("SSUBSCRIBE"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Feature {
    /// `SSUBSCRIBE` / `SPUBLISH` / `PUBSUB SHARDNUMSUB`: Redis 7.0+, every Valkey.
    ShardedPubSub,
    /// The `cluster-preferred-endpoint-type` option (so a node can announce an
    /// empty host in `MOVED slot :port`): Redis 7.0+, every Valkey.
    PreferredEndpointType,
    /// A migrating source answers `TRYAGAIN` to a multi-key command (a
    /// script's keys included) whose keys are split between it and the
    /// target: Redis 7.0+, every Valkey. Redis 6.2 runs the script on what it
    /// has.
    TryagainDuringMigration,
    /// A lasting MOVED ping-pong: once the source of a migration has given
    /// the slot away (`SETSLOT … NODE target`) but the target is still
    /// IMPORTING it, the target redirects a plain request back to the source
    /// until it is told (`SETSLOT … NODE` on the target). Redis does; Valkey
    /// 8.1 ends it within a second (the target takes the slot from the
    /// source's gossip), Valkey 9 never opens one.
    MovedPingPong,
    /// The `enable-debug-command` option (`--enable-debug-command local`,
    /// without which `DEBUG` is refused): Redis 7.0+, every Valkey. Redis 6.2
    /// allows `DEBUG` without it but refuses to start with the option.
    EnableDebugCommand,
}

impl Feature {
    /// What the feature is, for the harness' one-line notice.
    ///
    /// ```
    /// assert!(!keylatch_harness::Feature::MovedPingPong.describe().is_empty());
    /// ```
    pub fn describe(self) -> &'static str {
        match self {
            Feature::ShardedPubSub => "no sharded pub/sub (SSUBSCRIBE)",
            Feature::PreferredEndpointType => "no cluster-preferred-endpoint-type",
            Feature::TryagainDuringMigration => {
                "no TRYAGAIN for a multi-key command split by a migration"
            }
            Feature::MovedPingPong => {
                "no lasting MOVED ping-pong (an importing target soon serves the key)"
            }
            Feature::EnableDebugCommand => "no enable-debug-command option",
        }
    }

    /// Whether a server of this version offers the feature.
    fn offered_by(self, version: &Version) -> bool {
        let at_least = |major: u32, minor: u32| (version.major, version.minor) >= (major, minor);
        match (self, version.product) {
            (Feature::ShardedPubSub, Product::Redis)
            | (Feature::PreferredEndpointType, Product::Redis)
            | (Feature::TryagainDuringMigration, Product::Redis)
            | (Feature::EnableDebugCommand, Product::Redis) => at_least(7, 0),
            (Feature::ShardedPubSub, Product::Valkey)
            | (Feature::PreferredEndpointType, Product::Valkey)
            | (Feature::TryagainDuringMigration, Product::Valkey)
            | (Feature::EnableDebugCommand, Product::Valkey) => true,
            (Feature::MovedPingPong, Product::Redis) => true,
            (Feature::MovedPingPong, Product::Valkey) => false,
        }
    }
}

/// Which server a binary is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Product {
    Redis,
    Valkey,
}

/// A server binary's product and version, from `--version`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Version {
    product: Product,
    major: u32,
    minor: u32,
}

/// Parses `Redis server v=6.2.14 sha=…` or `Valkey server v=9.1.2 …`.
fn parse_version(text: &str) -> Option<Version> {
    let product = if text.starts_with("Valkey") {
        Product::Valkey
    } else if text.starts_with("Redis") {
        Product::Redis
    } else {
        return None;
    };
    let v = text.split_whitespace().find_map(|w| w.strip_prefix("v="))?;
    let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
    Some(Version {
        product,
        major: parts.next()??,
        minor: parts.next()??,
    })
}

/// Versions already asked, by binary (each binary is run with `--version`
/// once per test process).
static VERSIONS: Mutex<Option<HashMap<String, Option<Version>>>> = Mutex::new(None);

/// The version of `binary`, or `None` when it cannot be told (then it is
/// assumed to offer everything: the test runs on it and shows what it lacks).
fn version_of(binary: &str) -> Option<Version> {
    let mut versions = VERSIONS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    *versions
        .get_or_insert_with(HashMap::new)
        .entry(binary.to_owned())
        .or_insert_with(|| {
            let out = Command::new(binary).arg("--version").output().ok()?;
            parse_version(&String::from_utf8_lossy(&out.stdout))
        })
}

/// The options that let a test send `DEBUG` (`DEBUG SLEEP`) to a server
/// started from the configured binary: `--enable-debug-command local` where
/// that option exists (Redis 7.0+, Valkey), nothing on Redis 6.2, where
/// `DEBUG` is on by default and the option is a bad directive.
///
/// ```
/// let args = keylatch_harness::debug_command_args();
/// assert!(args.is_empty() || args == ["--enable-debug-command", "local"]);
/// ```
pub fn debug_command_args() -> &'static [&'static str] {
    let offered = version_of(&crate::server::server_binary())
        .map_or(true, |v| Feature::EnableDebugCommand.offered_by(&v));
    if offered {
        &["--enable-debug-command", "local"]
    } else {
        &[]
    }
}

/// Notices already printed, as (binary, feature).
static NOTED: Mutex<Vec<(String, Feature)>> = Mutex::new(Vec::new());

/// The first of `needs` that `binary` lacks, said once per binary and
/// feature in one line naming `instead`, the binary the test runs on.
pub(crate) fn first_lacking(binary: &str, needs: &[Feature], instead: &str) -> Option<Feature> {
    let version = version_of(binary)?;
    let lacking = needs.iter().copied().find(|f| !f.offered_by(&version))?;
    let mut noted = NOTED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !noted.iter().any(|(b, f)| b == binary && *f == lacking) {
        crate::server::notice(&format!(
            "{binary} has {}; tests that need it run on {instead}",
            lacking.describe()
        ));
        noted.push((binary.to_owned(), lacking));
    }
    Some(lacking)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_each_servers_banner() {
        let redis = parse_version(
            "Redis server v=6.2.14 sha=40305114:0 malloc=libc bits=64 build=dff95a8e7a99d269",
        );
        assert_eq!(
            redis,
            Some(Version {
                product: Product::Redis,
                major: 6,
                minor: 2
            })
        );
        let valkey = parse_version("Valkey server v=9.1.2 sha=00000000:1 malloc=libc bits=64");
        assert_eq!(
            valkey,
            Some(Version {
                product: Product::Valkey,
                major: 9,
                minor: 1
            })
        );
        assert_eq!(parse_version("KeyDB server v=6.3.4"), None);
        assert_eq!(parse_version("Redis server"), None);
    }

    #[test]
    fn each_feature_is_offered_where_the_servers_have_it() {
        let v = |product, major, minor| Version {
            product,
            major,
            minor,
        };
        let redis62 = v(Product::Redis, 6, 2);
        let redis70 = v(Product::Redis, 7, 0);
        let valkey81 = v(Product::Valkey, 8, 1);
        let valkey91 = v(Product::Valkey, 9, 1);
        assert!(!Feature::ShardedPubSub.offered_by(&redis62));
        assert!(Feature::ShardedPubSub.offered_by(&redis70));
        assert!(Feature::ShardedPubSub.offered_by(&valkey81));
        assert!(!Feature::PreferredEndpointType.offered_by(&redis62));
        assert!(!Feature::TryagainDuringMigration.offered_by(&redis62));
        assert!(Feature::TryagainDuringMigration.offered_by(&valkey91));
        assert!(Feature::MovedPingPong.offered_by(&redis62));
        assert!(!Feature::MovedPingPong.offered_by(&valkey81));
        assert!(!Feature::MovedPingPong.offered_by(&valkey91));
        assert!(!Feature::EnableDebugCommand.offered_by(&redis62));
        assert!(Feature::EnableDebugCommand.offered_by(&redis70));
        assert!(Feature::EnableDebugCommand.offered_by(&valkey81));
    }
}
