#!/usr/bin/env bash
# The full check: installs the test tools, then format, build, lint and test the whole workspace.
# A formatting or lint failure does not hide the test results: every step after a successful
# build runs, and the script fails at the end naming the steps that failed. When all pass, the
# last lines printed are cargo test's own summary.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

step() { printf '\n==> %s\n' "$*"; }
failed=()

shared="${AGENTWIRE_SHARED_DIR:-$repo_root/../shared}"
if [[ ! -d "$shared/peers" ]]; then
  printf 'test.sh: FAILED: %s/peers is missing: the tests read the peers'"'"' fixtures from shared/ beside the repository root (or set AGENTWIRE_SHARED_DIR)\n' "$shared" >&2
  exit 1
fi

fmt_color=()
if [[ "${CI:-}" == "true" ]]; then
  # A CI build starts from nothing and never rebuilds incrementally; its log is plain text.
  export CARGO_INCREMENTAL=0
  export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
  fmt_color=(-- --color=never)
fi

step "scripts/install-test-tools.sh"
scripts/install-test-tools.sh

step "cargo fmt --all --check"
cargo fmt --all --check "${fmt_color[@]}" || failed+=("cargo fmt --all --check")

step "cargo build --workspace --all-targets"
if ! cargo build --workspace --all-targets; then
  printf '\ntest.sh: FAILED: cargo build --workspace --all-targets\n' >&2
  exit 1
fi

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings \
  || failed+=("cargo clippy --workspace --all-targets -- -D warnings")

# Before the tests, so that cargo test's summary stays the last thing printed.
step "scripts/fuzz.sh --seconds ${AGENTWIRE_FUZZ_SECONDS:-10}"
scripts/fuzz.sh --seconds "${AGENTWIRE_FUZZ_SECONDS:-10}" || failed+=("scripts/fuzz.sh")

step "cargo test --workspace --no-fail-fast"
cargo test --workspace --no-fail-fast || failed+=("cargo test --workspace --no-fail-fast")

if ((${#failed[@]} > 0)); then
  printf '\n' >&2
  printf 'test.sh: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
