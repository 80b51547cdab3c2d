//! The memory this process uses, for the tests and benchmarks that report
//! what holding many locks costs the client.

/// Resident set size of this process in KiB (`VmRSS` in
/// `/proc/self/status`); 0 where that file is missing or unreadable
/// (not Linux), so a memory report degrades to zeros instead of failing.
///
/// ```
/// let kib = keylatch_harness::rss_kib();
/// if cfg!(target_os = "linux") {
///     assert!(kib > 0, "a running process has resident memory");
/// }
/// ```
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}
