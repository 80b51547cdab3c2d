//! This process's CPU time, for "CPU per operation" figures.

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
}
