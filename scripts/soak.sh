#!/usr/bin/env bash
# Soak: runs the durability test of a runtime killed mid-burst (kill -9 while a pipelined
# `/burst` is being committed, then a restart on the same store, followed from the host's
# persisted cursor: every event the host was handed is still there, and the events after it
# come without gap or repeat; killed at three points of the burst each run) many times in a row;
# stops at the first failure. Not part of the test command, which runs it once.
#
# usage: scripts/soak.sh [--runs N]   (default 50)
# exit:  0 every run passed; 1 a run failed (its output is printed); 2 bad usage
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
runs=50
if [[ "${1:-}" == "--runs" ]]; then
  runs="${2:?--runs needs a number}"
elif [[ $# -gt 0 ]]; then
  echo "usage: scripts/soak.sh [--runs N]" >&2
  exit 2
fi
test_name="client_e2e::a_thread_is_followed_across_a_killed_runtime_without_gap_or_repeat"
cargo test -p agentwire-cli --test it --no-run --quiet
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
for ((run = 1; run <= runs; run++)); do
  if ! cargo test -p agentwire-cli --test it --quiet -- --exact "$test_name" >"$log" 2>&1; then
    cat "$log"
    echo "soak: run $run of $runs failed" >&2
    exit 1
  fi
  printf '\rsoak: %d of %d passed' "$run" "$runs" >&2
done
echo >&2
echo "soak: all $runs runs passed"
