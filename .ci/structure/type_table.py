#!/usr/bin/env python3
"""Which files name each lock type (issue 29's test of the seam).

In the lock crate: a grep of the type's kind value, its module path, its
handle type and its scripts (`scripts.rs`, the catalogue, and `lib.rs`, the
re-exports, left out: they name every script or public type by
construction; `fuzzing.rs` too: it runs every reply parser). In the CLI
(`src/`): a grep of the type's server layout only (key and channel names,
script names): a CLI may use the public API, but keeps no copy of a layout.

    python3 .ci/structure/type_table.py
"""
import os, re
# type: (names in the lock crate, layout names anywhere)
TYPES = {
    "reentrant": (r"\bREENTRANT\b|\btypes::reentrant\b", r"\bREENTRANT_ACQUIRE\b"),
    "non-reentrant": (r"\bNON_REENTRANT\b", r"\bNONREENTRANT_ACQUIRE\b"),
    "fenced": (r"\bFENCED\b|\btypes::fenced\b", r"\bFENCED_ACQUIRE\b"),
    "fair": (r"\bFAIR\b|\bfair::", r"\bFAIR_(ACQUIRE|RELEASE|LEAVE)\b|redisson_lock_queue|redisson_lock_timeout|keylatch_fair_alive"),
    "read-write": (r"\bRwLock\b|\brwlock::", r"\bRW_[A-Z_]+\b|rwlock_timeout|rwlock_writers_waiting|redisson_rwlock"),
    "semaphore": (r"-> Semaphore\b|\bsemaphore::", r"\bSEMAPHORE_(ACQUIRE|CHANGE|DRAIN|SET)\b|redisson_sc\b"),
    "expirable semaphore": (r"\bExpirableSemaphore\b|\bPermitGuard\b|\bPERMITS_LEASE\b", r"\bPERMITS_(ACQUIRE|RELEASE|RENEW|RENEW_NODE)\b|\{name\}:timeout|\"timeout\""),
    "latch": (r"\bCountDownLatch\b", r"\bLATCH_COUNT_DOWN\b|countdownlatch"),
    "multi-lock": (r"\bMultiLock\b", r"\bMULTI_ACQUIRE\b"),
    "RedLock": (r"\bRedLock\b|\bUNFENCED\b", r"\bUNFENCED_ACQUIRE\b"),
    "spin": (r"\bSPIN\b|\btypes::spin\b", r"$^"),
}
def files_under(root):
    for d, _, fs in os.walk(root):
        for f in fs:
            if f.endswith(".rs"):
                yield os.path.join(d, f)
def code(path):
    src = re.split(r"#\[cfg\(test\)\]\s*mod tests", open(path).read())[0]
    return "\n".join(l for l in src.split("\n") if not l.strip().startswith("//"))
lock = {f: code(f) for f in files_under("lock/src") if not f.endswith(("/scripts.rs", "/lib.rs", "/fuzzing.rs"))}
cli = {f: code(f) for f in files_under("src")}
print("| type | lock crate files naming it | CLI files with its layout |")
print("|---|---|---|")
for t, (ident, layout) in TYPES.items():
    pat = f"(?:{ident})|(?:{layout})"
    a = sorted(f.replace("lock/src/", "") for f, s in lock.items() if re.search(pat, s))
    b = sorted(f for f, s in cli.items() if re.search(layout, s))
    print(f"| {t} | {', '.join(a)} ({len(a)}) | {', '.join(b) or 'none'} |")
