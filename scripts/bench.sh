#!/usr/bin/env bash
# Validation benchmark: builds in release and measures the Rust validators and AJV 8 (node) on
# the same schemas and the same messages in one run, printing every ratio (see
# docs/PERFORMANCE.md). Needs the test tools: scripts/install-test-tools.sh.
#
# usage: scripts/bench.sh [--quick] [--only NAME]
#   --quick      shorter timing rounds (0.2 s instead of 1 s)
#   --only NAME  only workloads whose name contains NAME (e.g. openclaw, small, huge)
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
exec cargo bench -p agentwire-schema --bench validate -- "$@"
