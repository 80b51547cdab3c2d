#!/usr/bin/env bash
# The locks bench at two commits of this repository, run one after the other
# on this machine with the same arguments, so "new vs old" ratios come from
# one sitting rather than from runs minutes or machines apart:
#
#   bash benches/compare-commits.sh OLD NEW [locks bench arguments…]
#   bash benches/compare-commits.sh main HEAD --rounds 3 --seconds 3
#   bash benches/compare-commits.sh HEAD HEAD --rounds 3    # A/A: the noise
#
# Each commit is checked out with `git worktree add --detach` in a fresh
# /tmp directory and its locks bench built there, each with its own target
# dir (a first build takes several minutes). Each commit runs its own
# benches/ by default; BENCH_FROM=<commit> runs that commit's benches/
# against both (only the library differs then; the bench must compile
# against both, e.g. BENCH_FROM=NEW when OLD predates the bench's columns).
# Builds and runs go under `flock -o $CARGO_LOCK` (default /tmp/cargo.lock),
# so they never overlap other builds; each run is stopped after RUN_TIMEOUT
# (default 30m). The worktrees and target dirs are removed on exit unless
# KEEP=1. Prints both full outputs, then both tables together and the
# keylatch column NEW/OLD, beside the redis-rs (Redisson scripts) column's
# NEW/OLD: that contender does not use the lock crate, so its ratio shows
# how far the machine drifted between the two runs.
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,9p' "$0" >&2
  exit 2
fi
old=$1 new=$2
shift 2
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
lock=${CARGO_LOCK:-/tmp/cargo.lock}
run_timeout=${RUN_TIMEOUT:-30m}
sha() { git -C "$repo" rev-parse --verify --quiet "$1^{commit}" || { echo "not a commit: $1" >&2; exit 2; }; }
old_sha=$(sha "$old")
new_sha=$(sha "$new")
bench_sha=${BENCH_FROM:+$(sha "$BENCH_FROM")}

tmp=$(mktemp -d /tmp/keylatch-compare.XXXXXX)
added=()
cleanup() {
  if [ "${KEEP:-0}" = 1 ]; then
    echo "kept: $tmp (git -C $repo worktree remove --force <dir> when done)" >&2
    return
  fi
  for wt in "${added[@]}"; do
    git -C "$repo" worktree remove --force "$wt" 2>/dev/null || true
  done
  git -C "$repo" worktree prune
  rm -rf "$tmp"
}
trap cleanup EXIT

build() { # label sha
  local wt=$tmp/$1
  git -C "$repo" worktree add --quiet --detach "$wt" "$2"
  added+=("$wt")
  if [ -n "$bench_sha" ]; then
    rm -rf "$wt/benches"
    git -C "$wt" checkout --quiet "$bench_sha" -- benches
  fi
  echo "== building $1: $(git -C "$repo" log -1 --format='%h %s' "$2")" >&2
  (cd "$wt" && CARGO_TARGET_DIR=$tmp/target-$1 flock -o "$lock" \
    cargo build --quiet --release --manifest-path benches/Cargo.toml --bin locks)
}

run() { # label sha [args…]
  local label=$1 commit=$2
  shift 2
  echo "== $label: $(git -C "$repo" log -1 --format='%h %s' "$commit")"
  flock -o "$lock" timeout "$run_timeout" "$tmp/target-$label/release/locks" "$@" \
    2>&1 | tee "$tmp/$label.txt"
  echo
}

build old "$old_sha"
build new "$new_sha"
run old "$old_sha" "$@"
run new "$new_sha" "$@"

# The table: from its "scenario" header to the blank line after it.
table() { awk '/^scenario /{t=1} t&&/^$/{exit} t' "$tmp/$1.txt"; }
echo "== tables (old $(git -C "$repo" rev-parse --short "$old_sha"), new $(git -C "$repo" rev-parse --short "$new_sha")); arguments: $*"
echo "-- old"; table old
echo "-- new"; table new
echo "-- NEW/OLD: keylatch column; redis-rs (Redisson scripts) column (machine drift; n/a when a table lacks it)"
# Rows are matched by label: a 44-character label, then one value per
# contender (no spaces in a value); the Redisson column is the third when
# both headers name it.
awk '
  function ratio(a, b) { return (a != "n/a" && b != "n/a" && a + 0 > 0) ? sprintf("%.2f", b / a) : "n/a" }
  { label = substr($0, 1, 44); sub(/ +$/, "", label); split(substr($0, 45), v, " ") }
  FNR == NR { if (label == "scenario") oldref = index($0, "Redisson") > 0; o1[label] = v[1]; o3[label] = v[3]; next }
  label == "scenario" { both = oldref && index($0, "Redisson") > 0; next }
  label in o1 { printf "keylatch %-5s  redisson %-5s  %s\n", ratio(o1[label], v[1]), both ? ratio(o3[label], v[3]) : "n/a", label }
' <(table old) <(table new)
