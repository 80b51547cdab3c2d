//! The catalogue of Lua scripts, compiled in from this crate's `lua/`.
//!
//! Each script is a `static` [`Script`]: its SHA-1 is computed once, on first
//! use, and [`Commands::eval_script`](keylatch_cluster::Commands::eval_script)
//! runs it with `EVALSHA`, loading it where a node answers `NOSCRIPT`.
//!
//! Lua in Redis has no `require`, so helpers that several scripts share are
//! written once, as fragments in `lua/lib/` (one `local function NAME` in
//! `lua/lib/NAME.lua`), and each script is assembled at compile time by
//! `concat!` of `include_str!`s (no build script): the `#!lua flags=…` line
//! first when the script has one (Redis 7 reads flags only from the first
//! line; the per-node renewals, which Redis 6.2 never runs, are the only
//! ones), then its fragments in the order listed (a Lua local must be
//! defined before it is called, so a fragment comes after those it calls),
//! then the script's own file. The [`Script::source`] is that assembled
//! text, and its SHA-1 is what a server caches; the unit tests pin every
//! one.

use keylatch_cluster::Script;

/// A script assembled from this crate's `lua/`: `"#!lua flags=<flags>\n"`
/// when flags are given, then each `lua/lib/<fragment>.lua` followed by an
/// empty line, then `lua/<name>.lua`.
macro_rules! script {
    ($name:literal $(, flags = $flags:literal)? $(, lib = [$($lib:literal),+ $(,)?])? $(,)?) => {
        Script::new(
            $name,
            concat!(
                $("#!lua flags=", $flags, "\n",)?
                $($(include_str!(concat!("../lua/lib/", $lib, ".lua")), "\n",)+)?
                include_str!(concat!("../lua/", $name, ".lua")),
            ),
        )
    };
}

/// Take or re-enter a reentrant lock (Redisson-compatible); see
/// `lua/reentrant_acquire.lua` for KEYS, ARGV and returns.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::REENTRANT_ACQUIRE.sha1().len(), 40);
/// ```
pub static REENTRANT_ACQUIRE: Script = script!(
    "reentrant_acquire",
    lib = [
        "register_waiter",
        "unregister_waiter",
        "stretch",
        "take_grant",
        "counter_now"
    ]
);

/// Take a non-reentrant lock (Redisson's RLock layout; a re-entry is
/// refused); see `lua/nonreentrant_acquire.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::NONREENTRANT_ACQUIRE.name(), "nonreentrant_acquire");
/// ```
pub static NONREENTRANT_ACQUIRE: Script = script!(
    "nonreentrant_acquire",
    lib = [
        "register_waiter",
        "unregister_waiter",
        "stretch",
        "take_grant",
        "counter_now"
    ]
);

/// Drop one hold of a reentrant lock, publishing the unlock message on the
/// last one; see `lua/reentrant_release.lua`.
///
/// ```
/// assert!(keylatch_lock::scripts::REENTRANT_RELEASE.source().contains("KEYS[2]"));
/// ```
pub static REENTRANT_RELEASE: Script =
    script!("reentrant_release", lib = ["wake_one", "grant_waiter"]);

/// Extend many holds at once (the watchdog); see `lua/reentrant_renew.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::REENTRANT_RENEW.name(), "reentrant_renew");
/// ```
pub static REENTRANT_RENEW: Script = script!(
    "reentrant_renew",
    lib = ["stretch", "judge_reentrant", "renew_current"]
);

/// [`REENTRANT_RENEW`] for holds in many slots of one cluster node (script
/// flag `allow-cross-slot-keys`); see `lua/reentrant_renew_node.lua`.
///
/// ```
/// assert!(keylatch_lock::scripts::REENTRANT_RENEW_NODE.source().starts_with("#!lua"));
/// ```
pub static REENTRANT_RENEW_NODE: Script = script!(
    "reentrant_renew_node",
    flags = "allow-cross-slot-keys",
    lib = ["stretch", "judge_reentrant", "renew_current"]
);

/// Renew many RLock-hash holds judged by their owners alone, without
/// reading the fencing counter (the watchdog's common renewal, for holds
/// no other request can have re-taken as the same owner); see
/// `lua/owner_renew.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::OWNER_RENEW.name(), "owner_renew");
/// ```
pub static OWNER_RENEW: Script = script!("owner_renew", lib = ["stretch", "renew_owner"]);

/// [`OWNER_RENEW`] for holds in many slots of one cluster node (script
/// flag `allow-cross-slot-keys`); see `lua/owner_renew_node.lua`.
///
/// ```
/// assert!(keylatch_lock::scripts::OWNER_RENEW_NODE.source().starts_with("#!lua"));
/// ```
pub static OWNER_RENEW_NODE: Script = script!(
    "owner_renew_node",
    flags = "allow-cross-slot-keys",
    lib = ["stretch", "renew_owner"]
);

/// End whatever holds a name in the way its type means (a lock's hold, a
/// read-write lock's holds, a permit-expirable semaphore's leased permits),
/// refusing what is no lock; see `lua/force_unlock.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::FORCE_UNLOCK.name(), "force_unlock");
/// ```
pub static FORCE_UNLOCK: Script = script!("force_unlock");

/// The leader's proclamation, written while it leads; see
/// `lua/leader_proclaim.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::LEADER_PROCLAIM.name(), "leader_proclaim");
/// ```
pub static LEADER_PROCLAIM: Script = script!("leader_proclaim");

/// A resigning leader's proclamation taken back; see
/// `lua/leader_clear.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::LEADER_CLEAR.name(), "leader_clear");
/// ```
pub static LEADER_CLEAR: Script = script!("leader_clear");

/// What a name's key holds (read only), for typed wrong-type answers; see
/// `lua/key_shape.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::KEY_SHAPE.name(), "key_shape");
/// ```
pub static KEY_SHAPE: Script = script!("key_shape");

/// Take or re-enter a fair lock, or join its queue (Redisson's
/// `RedissonFairLock` layout, deadlines in Redisson's chained form from
/// server time, keylatch waiters' liveness beside it); see
/// `lua/fair_acquire.lua`, whose header explains how the queue stays
/// shared with Redisson's waiters.
///
/// ```
/// assert!(keylatch_lock::scripts::FAIR_ACQUIRE.source().contains("KEYS[4]"));
/// ```
pub static FAIR_ACQUIRE: Script = script!("fair_acquire");

/// Drop one hold of a fair lock, waking only the queue's head on the last
/// one; see `lua/fair_release.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::FAIR_RELEASE.name(), "fair_release");
/// ```
pub static FAIR_RELEASE: Script = script!("fair_release");

/// A fair-lock waiter leaving the queue (gave up or cancelled); see
/// `lua/fair_leave.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::FAIR_LEAVE.name(), "fair_leave");
/// ```
pub static FAIR_LEAVE: Script = script!("fair_leave");

/// Take or add a read hold of a read-write lock (Redisson's
/// `RedissonReadLock` layout, with keylatch's waiting-writer marker); see
/// `lua/rw_read_acquire.lua`.
///
/// ```
/// assert!(keylatch_lock::scripts::RW_READ_ACQUIRE.source().contains("rwlock_timeout"));
/// ```
pub static RW_READ_ACQUIRE: Script =
    script!("rw_read_acquire", lib = ["end_lapsed_write", "session"]);

/// Drop one read hold of a read-write lock; see `lua/rw_read_release.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::RW_READ_RELEASE.name(), "rw_read_release");
/// ```
pub static RW_READ_RELEASE: Script = script!(
    "rw_read_release",
    lib = ["end_lapsed_write", "session", "longest"]
);

/// Extend (or check) read-write lock holds (read sessions and write
/// holds), one slot per call; see `lua/rw_renew.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::RW_RENEW.name(), "rw_renew");
/// ```
pub static RW_RENEW: Script = script!("rw_renew", lib = ["end_lapsed_write", "judge_rw"]);

/// [`RW_RENEW`] for many slots of one cluster node; see
/// `lua/rw_renew_node.lua`.
///
/// ```
/// assert!(keylatch_lock::scripts::RW_RENEW_NODE.source().starts_with("#!lua"));
/// ```
pub static RW_RENEW_NODE: Script = script!(
    "rw_renew_node",
    flags = "allow-cross-slot-keys",
    lib = ["end_lapsed_write", "judge_rw"]
);

/// Take or re-enter the write hold of a read-write lock, refusing an
/// upgrade; see `lua/rw_write_acquire.lua`.
///
/// ```
/// assert!(keylatch_lock::scripts::RW_WRITE_ACQUIRE.source().contains(":write"));
/// ```
pub static RW_WRITE_ACQUIRE: Script =
    script!("rw_write_acquire", lib = ["end_lapsed_write", "session"]);

/// Drop one write hold of a read-write lock (freeing it, or downgrading to
/// the owner's read holds); see `lua/rw_write_release.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::RW_WRITE_RELEASE.name(), "rw_write_release");
/// ```
pub static RW_WRITE_RELEASE: Script =
    script!("rw_write_release", lib = ["end_lapsed_write", "longest"]);

/// A writer that gave up waiting takes its waiting-writer marker back; see
/// `lua/rw_write_leave.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::RW_WRITE_LEAVE.name(), "rw_write_leave");
/// ```
pub static RW_WRITE_LEAVE: Script = script!("rw_write_leave");

/// A waiter of an RLock hash that gave up leaves the waiters its lock's
/// releases wake by name (passing a wake that came to it on); see
/// `lua/waiter_leave.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::WAITER_LEAVE.name(), "waiter_leave");
/// ```
pub static WAITER_LEAVE: Script = script!("waiter_leave");

/// Take n permits of a semaphore (Redisson's `RSemaphore` layout); see `lua/semaphore_acquire.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::SEMAPHORE_ACQUIRE.name(), "semaphore_acquire");
/// ```
pub static SEMAPHORE_ACQUIRE: Script = script!("semaphore_acquire");

/// Release or add permits of a semaphore, publishing the new count; see `lua/semaphore_change.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::SEMAPHORE_CHANGE.name(), "semaphore_change");
/// ```
pub static SEMAPHORE_CHANGE: Script = script!("semaphore_change");

/// Set a semaphore's permits or a latch's count when absent; see `lua/semaphore_set.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::SEMAPHORE_SET.name(), "semaphore_set");
/// ```
pub static SEMAPHORE_SET: Script = script!("semaphore_set");

/// Count or drain a semaphore's available permits (returning expired leased permits first); see `lua/semaphore_drain.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::SEMAPHORE_DRAIN.name(), "semaphore_drain");
/// ```
pub static SEMAPHORE_DRAIN: Script = script!("semaphore_drain");

/// Take n leased permits of a permit-expirable semaphore (Redisson's `RPermitExpirableSemaphore` layout, server time); see `lua/permits_acquire.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::PERMITS_ACQUIRE.name(), "permits_acquire");
/// ```
pub static PERMITS_ACQUIRE: Script = script!("permits_acquire");

/// Give leased permits back by id; see `lua/permits_release.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::PERMITS_RELEASE.name(), "permits_release");
/// ```
pub static PERMITS_RELEASE: Script = script!("permits_release");

/// Extend (or check) permit guards' leases, one slot per call; see `lua/permits_renew.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::PERMITS_RENEW.name(), "permits_renew");
/// ```
pub static PERMITS_RENEW: Script = script!("permits_renew", lib = ["raw", "judge_permits"]);

/// `PERMITS_RENEW` for many slots of one cluster node; see `lua/permits_renew_node.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::PERMITS_RENEW_NODE.name(), "permits_renew_node");
/// ```
pub static PERMITS_RENEW_NODE: Script = script!(
    "permits_renew_node",
    flags = "allow-cross-slot-keys",
    lib = ["raw", "judge_permits"]
);

/// Count a count-down latch down by one (Redisson's `RCountDownLatch`); see `lua/latch_count_down.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::LATCH_COUNT_DOWN.name(), "latch_count_down");
/// ```
pub static LATCH_COUNT_DOWN: Script = script!("latch_count_down");

/// Take or re-enter a fenced lock, a token per acquire (Redisson's `RFencedLock`); see `lua/fenced_acquire.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::FENCED_ACQUIRE.name(), "fenced_acquire");
/// ```
pub static FENCED_ACQUIRE: Script = script!(
    "fenced_acquire",
    lib = [
        "register_waiter",
        "unregister_waiter",
        "stretch",
        "take_grant",
        "counter_now"
    ]
);

/// Take several reentrant locks of one slot at once, all or none (a
/// multi-lock's members sharing a hash tag); see `lua/multi_acquire.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::MULTI_ACQUIRE.name(), "multi_acquire");
/// ```
pub static MULTI_ACQUIRE: Script = script!("multi_acquire");

/// Take or re-enter a reentrant lock without a fencing counter (a RedLock
/// member); see `lua/unfenced_acquire.lua`.
///
/// ```
/// assert_eq!(keylatch_lock::scripts::UNFENCED_ACQUIRE.name(), "unfenced_acquire");
/// ```
pub static UNFENCED_ACQUIRE: Script = script!("unfenced_acquire");

/// Every script, for tests and tooling (e.g. preloading).
///
/// ```
/// assert!(!keylatch_lock::scripts::ALL.is_empty());
/// ```
pub static ALL: &[&Script] = &[
    &LEADER_PROCLAIM,
    &LEADER_CLEAR,
    &REENTRANT_ACQUIRE,
    &NONREENTRANT_ACQUIRE,
    &REENTRANT_RELEASE,
    &REENTRANT_RENEW,
    &REENTRANT_RENEW_NODE,
    &OWNER_RENEW,
    &OWNER_RENEW_NODE,
    &FORCE_UNLOCK,
    &KEY_SHAPE,
    &FAIR_ACQUIRE,
    &FAIR_RELEASE,
    &FAIR_LEAVE,
    &RW_READ_ACQUIRE,
    &RW_READ_RELEASE,
    &RW_RENEW,
    &RW_RENEW_NODE,
    &RW_WRITE_ACQUIRE,
    &RW_WRITE_RELEASE,
    &RW_WRITE_LEAVE,
    &WAITER_LEAVE,
    &SEMAPHORE_ACQUIRE,
    &SEMAPHORE_CHANGE,
    &SEMAPHORE_SET,
    &SEMAPHORE_DRAIN,
    &PERMITS_ACQUIRE,
    &PERMITS_RELEASE,
    &PERMITS_RENEW,
    &PERMITS_RENEW_NODE,
    &LATCH_COUNT_DOWN,
    &FENCED_ACQUIRE,
    &MULTI_ACQUIRE,
    &UNFENCED_ACQUIRE,
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, HashSet};
    use std::path::Path;

    /// The one flags line a script may start with (the per-node renewals).
    const CROSS_SLOT: &str = "#!lua flags=allow-cross-slot-keys\n";

    /// The SHA-1 of every assembled script, as servers cache it. A change
    /// here is a change of what runs on the server: deliberate, or a
    /// mistake in the assembly (a fragment dropped, reordered or doubled).
    const PINNED: &[(&str, &str)] = &[
        (
            "reentrant_acquire",
            "acfb926137d88c981240ae027d7dc6a51979a5cb",
        ),
        (
            "nonreentrant_acquire",
            "0cdd30cbb304b286f60541fe626fedfd0697e97e",
        ),
        (
            "reentrant_release",
            "7f128e9fa30f8a9f01d3202466b37f16873f6f48",
        ),
        (
            "reentrant_renew",
            "dfa709a4e434ab82d57e8bef89196352da9c9b44",
        ),
        (
            "reentrant_renew_node",
            "0e5fcd6a2ee6de9a9a2e7abcf8f6d9593a4f595c",
        ),
        ("owner_renew", "160a4944a9db583521850da0b71b50b779927e8a"),
        (
            "owner_renew_node",
            "dfa24d871e54e6dc4ae1f7931c0a885fb37b85c2",
        ),
        ("force_unlock", "c25c615d3cf9d92fa534b29a6104f1d381175f88"),
        ("leader_clear", "ae0e9eb138e6133ede308fb0614bd4549b16dc70"),
        (
            "leader_proclaim",
            "d8d91d8ee0513ea6e4ca5995606f2603f05a408a",
        ),
        ("key_shape", "968e8ac9721bc8cb83f1eb3cdfd96f3123819961"),
        ("fair_acquire", "24296ce4fc10f7380683896534367d08805e5bbd"),
        ("fair_release", "7566428ac8f9bc7b00cf3d82ca644fba12d437cd"),
        ("fair_leave", "c27ed660a7583f8e891dc319d3e8b12f86ef6af3"),
        (
            "rw_read_acquire",
            "95aecdb7b7cfda3d554e9039feae93f7595274df",
        ),
        (
            "rw_read_release",
            "de0f32507269fc75ddffee0880137a6fd416a106",
        ),
        ("rw_renew", "cc03ed08b6a6159eb28bdb69e967a206ab66bf36"),
        ("rw_renew_node", "5eafaba54112d8859d2192970b728b1303d93941"),
        (
            "rw_write_acquire",
            "b3f5eea0a92a3b42834f843dcd05cb164760f5b9",
        ),
        (
            "rw_write_release",
            "fef1c7fa39dc67573d88ac0cfd801a085acf9bb1",
        ),
        ("rw_write_leave", "b26b285f79e06e9eb80c9dd17b78f84fe2bc9ace"),
        ("waiter_leave", "688bb93f49a93072aec98930e446fd8f979df1a4"),
        (
            "semaphore_acquire",
            "73517c24f5d7f1d013cb0f3c696bb3781cd0b823",
        ),
        (
            "semaphore_change",
            "ddb369e96c8b4f8d9dba5a3cdd3e6190bd6529c7",
        ),
        ("semaphore_set", "c5a12d935458a1fb7a3b4149951fede70da448d4"),
        (
            "semaphore_drain",
            "bc4cb885b777e3071bbe9ad3fc9c374e8b9611a7",
        ),
        (
            "permits_acquire",
            "274c19de5ac587ccb07e84e6bcfcd5fa30eb58e6",
        ),
        (
            "permits_release",
            "548b2b5d3ccbea496991404a074cb30d660bc1ad",
        ),
        ("permits_renew", "09198864f3edb29c4ecd8a8189f5061a123be49b"),
        (
            "permits_renew_node",
            "4cff256ecbff3fa230bacb4f95563e13d4637da5",
        ),
        (
            "latch_count_down",
            "ef34d40e46dde25bfb46ee0f3bc11ddc320fde4c",
        ),
        ("fenced_acquire", "587e9cf1bfe1600f38bf3dd1e8e329bc198bc2cf"),
        ("multi_acquire", "ca0492154ca2330db14b428cd0221a4e371d2d0e"),
        (
            "unfenced_acquire",
            "0079458a8df9b1f689c4311fd7998003a0f89778",
        ),
    ];

    /// The crate's `lua/` folder (tests run from anywhere).
    fn lua_dir() -> &'static Path {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/lua"))
    }

    /// The names of the `local function NAME(` definitions in `src`, in order.
    fn defined(src: &str) -> Vec<&str> {
        src.lines()
            .filter_map(|l| l.trim_start().strip_prefix("local function "))
            .filter_map(|rest| rest.split_once('(').map(|(name, _)| name))
            .collect()
    }

    /// Where `NAME(` stands in `src` as a whole word (a definition or a call).
    fn mentions(src: &str, name: &str) -> Vec<usize> {
        let call = format!("{name}(");
        src.match_indices(&call)
            .map(|(at, _)| at)
            .filter(|&at| {
                !src[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
            .collect()
    }

    /// The `.lua` files below `dir`, as (path relative to `lua/`, text).
    fn lua_files(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                lua_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "lua") {
                let rel = path.strip_prefix(lua_dir()).unwrap();
                let rel = rel.to_string_lossy().into_owned();
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }

    #[test]
    fn every_script_documents_its_api_and_has_a_distinct_sha() {
        let mut shas = HashSet::new();
        for s in ALL {
            // The script's own header, after any shebang and fragments.
            let first = format!("-- {}:", s.name());
            let header: String = s
                .source()
                .lines()
                .skip_while(|l| !l.starts_with(&first))
                .take_while(|l| l.starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n");
            assert!(
                header.contains("KEYS["),
                "{}: header must list KEYS",
                s.name()
            );
            assert!(
                header.contains("ARGV[1]"),
                "{}: header must list ARGV",
                s.name()
            );
            assert!(
                header.contains("Returns"),
                "{}: header must say what it returns",
                s.name()
            );
            assert!(
                shas.insert(s.sha1().to_owned()),
                "{}: duplicate script",
                s.name()
            );
        }
    }

    #[test]
    fn every_assembled_script_has_its_pinned_sha() {
        let pinned: BTreeMap<&str, &str> = PINNED.iter().copied().collect();
        assert_eq!(pinned.len(), PINNED.len(), "a name pinned twice");
        let names: BTreeMap<&str, &str> = ALL.iter().map(|s| (s.name(), s.sha1())).collect();
        assert_eq!(names.len(), ALL.len(), "two scripts share a name");
        assert_eq!(names, pinned);
    }

    /// Redis 6.2 knows no `#!lua` line (it would fail the script), Redis 7
    /// reads one only as the first line: it stays on the per-node renewals
    /// alone (which only run where the cluster is Redis 7+ or Valkey), first,
    /// and nowhere else.
    #[test]
    fn only_the_node_renewals_have_flags_and_first() {
        for s in ALL {
            let src = s.source();
            let flag_lines = src.lines().filter(|l| l.starts_with("#!")).count();
            if s.name().ends_with("_node") {
                assert!(src.starts_with(CROSS_SLOT), "{}", s.name());
                assert_eq!(flag_lines, 1, "{}", s.name());
            } else {
                assert_eq!(flag_lines, 0, "{}", s.name());
            }
        }
    }

    /// Each script is its flags line, its fragments, then its own file, whole.
    #[test]
    fn every_script_ends_with_its_own_file() {
        for s in ALL {
            let own = lua_dir().join(format!("{}.lua", s.name()));
            let own = std::fs::read_to_string(own).unwrap();
            assert!(s.source().ends_with(&own), "{}", s.name());
        }
    }

    /// No helper is pasted twice: within an assembled script every
    /// `local function` is defined once, before its first call, and called;
    /// across `lua/` each is defined in one file only, the fragments as
    /// `lib/NAME.lua`, one function each, each used by some script, and a
    /// script names the fragments put before it in its `-- From lib/` line.
    #[test]
    fn every_helper_is_written_once_and_defined_before_use() {
        let mut files = Vec::new();
        lua_files(lua_dir(), &mut files);
        let mut home: BTreeMap<String, String> = BTreeMap::new();
        for (file, text) in &files {
            for name in defined(text) {
                if let Some(other) = home.insert(name.to_owned(), file.clone()) {
                    panic!("{name} is defined in {other} and in {file}");
                }
            }
        }
        let mut fragments = Vec::new();
        for (file, text) in &files {
            if let Some(stem) = file.strip_prefix("lib/") {
                let name = stem.trim_end_matches(".lua");
                assert_eq!(
                    defined(text),
                    [name],
                    "{file}: one function, named as the file"
                );
                fragments.push(name.to_owned());
            }
        }
        assert!(!fragments.is_empty());
        for s in ALL {
            let src = s.source();
            let names = defined(src);
            let mut seen = HashSet::new();
            for name in &names {
                assert!(seen.insert(*name), "{}: {name} defined twice", s.name());
                let at = mentions(src, name);
                let def = src.find(&format!("local function {name}(")).unwrap();
                assert_eq!(
                    at.first(),
                    Some(&(def + "local function ".len())),
                    "{}: {name} is called before it is defined",
                    s.name()
                );
                assert!(at.len() > 1, "{}: {name} is never called", s.name());
            }
            let used: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| fragments.iter().any(|f| f == n))
                .collect();
            let from_lib = src
                .lines()
                .find_map(|l| l.strip_prefix("-- From lib/ (scripts.rs puts them first): "));
            if used.is_empty() {
                assert_eq!(from_lib, None, "{}", s.name());
            } else {
                assert_eq!(
                    from_lib,
                    Some(format!("{}.", used.join(", ")).as_str()),
                    "{}",
                    s.name()
                );
            }
        }
        for name in &fragments {
            let def = format!("local function {name}(");
            assert!(
                ALL.iter().any(|s| s.source().contains(&def)),
                "lib/{name}.lua is used by no script"
            );
        }
    }
}
