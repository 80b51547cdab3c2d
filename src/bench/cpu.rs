//! This process's CPU time, for "CPU per operation" figures, and its
//! resident memory, for "bytes per hold".

use std::time::Duration;

/// CPU time (user + system) this process has used so far, from
/// `/proc/self/stat`; `None` where that file is missing or unreadable.
/// Resolution is one clock tick (10 ms): measure spans of seconds.
///
/// ```
/// let before = keylatch_cli::bench::process_cpu();
/// let after = keylatch_cli::bench::process_cpu();
/// if let (Some(a), Some(b)) = (before, after) {
///     assert!(b >= a);
/// }
/// ```
pub fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_stat(&stat)
}

/// This process's resident memory in bytes (`VmRSS` in
/// `/proc/self/status`); `None` where that file is missing or unreadable.
///
/// ```
/// if let Some(rss) = keylatch_cli::bench::resident_bytes() {
///     assert!(rss > 0);
/// }
/// ```
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_rss(&status)
}

/// `VmRSS:   1234 kB` → 1234 × 1024.
fn parse_rss(status: &str) -> Option<u64> {
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// utime + stime from a `/proc/<pid>/stat` line. The fields are counted
/// after the command name, which is in parentheses and may hold spaces.
fn parse_stat(stat: &str) -> Option<Duration> {
    let (_, after) = stat.rsplit_once(')')?;
    let mut fields = after.split_whitespace();
    // utime and stime are fields 14 and 15 overall: the 12th and 13th after ')'.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // /proc reports in USER_HZ, which Linux fixes at 100 for user space.
    Some(Duration::from_millis((utime + stime) * 10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_utime_and_stime_after_a_name_with_spaces() {
        let line = "42 (my (odd) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0";
        assert_eq!(parse_stat(line), Some(Duration::from_secs(3)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 1 2"), None);
    }

    #[test]
    fn reads_the_resident_set_in_bytes() {
        let status = "Name:\tkeylatch\nVmPeak:\t 9000 kB\nVmRSS:\t    1234 kB\n";
        assert_eq!(parse_rss(status), Some(1234 * 1024));
        assert_eq!(parse_rss("Name: x\n"), None);
        assert_eq!(parse_rss("VmRSS: lots kB\n"), None);
    }
}
