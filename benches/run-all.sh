#!/usr/bin/env bash
# Every comparison benchmark in one command: builds the bench crate once,
# then runs each binary in turn (each starts its own redis-server or cluster
# on free loopback ports and stops it). Output goes to the terminal and to
# benches/last-run.txt.
#
#   bash benches/run-all.sh            # full runs (~6 minutes)
#   QUICK=1 bash benches/run-all.sh    # shorter rounds (~2 minutes)
set -euo pipefail
cd "$(dirname "$0")"
cargo build --release --locked --bins
bin="${CARGO_TARGET_DIR:-target}/release"
if [ "${QUICK:-0}" = 1 ]; then r=1; s=1; d=6s; else r=3; s=3; d=20s; fi
{
  echo "== decode"; "$bin/decode" --mib 32
  echo "== client"; "$bin/client" --rounds "$r" --seconds "$s"
  echo "== cluster"; "$bin/cluster" --rounds "$r" --seconds "$s"
  echo "== pubsub"; "$bin/pubsub" --rounds "$r"
  echo "== locks"; "$bin/locks" --rounds "$r" --seconds "$s"
  echo "== handoff across 8 processes (the herd)"; "$bin/handoff" --processes 8 --seconds "$s" --rounds "$r"
  echo "== fair lock: a dead waiter at the head"; "$bin/fair"
  echo "== read-write lock: 8 readers + 1 writer"; "$bin/rwlock" --seconds "$s"
  echo "== semaphores vs the lock"; "$bin/semaphore" --seconds "$s"
  echo "== RedLock over 5 masters vs rslock"; "$bin/redlock"
  echo "== compare (keylatch bench --compare's scenarios)"; "$bin/compare" --duration "$d"
  echo "== compare on a 6-node cluster"; "$bin/compare" --cluster-local --duration "$d"
} 2>&1 | tee last-run.txt
