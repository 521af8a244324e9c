#!/usr/bin/env bash
# The full check: installs the test tools, then format, build, lint and test the whole workspace.
# A formatting or lint failure does not hide the test results: every step after a successful
# build runs, and the script fails at the end naming the steps that failed. When all pass, the
# last lines printed are cargo test's own summary and one line of step times.
#
# With CI=true the builds go into a temporary folder outside the clone (the workspace's target
# and the fuzz targets' own), and the tests' temporary files into another; the script removes
# them when it exits, whatever the outcome. Without it the builds go to target/ and fuzz/target/
# as usual, reused by the next run. Either way the run ends by listing what it left in the clone
# and fails when that is more than it may leave (.tools/, plus target/ and fuzz/target/ outside
# CI). Before anything is built it checks the free disk space (AGENTWIRE_MIN_FREE_GIB).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

# What a run from nothing needs, measured (docs/testing.md gives the parts), with a margin for
# the tests' stores and the machine's other users.
min_free_gib="${AGENTWIRE_MIN_FREE_GIB:-4}"
fuzz_seconds="${AGENTWIRE_FUZZ_SECONDS:-10}"

failed=()
timings=()
step_name=""
step_started=0
end_step() {
  if [[ -n "$step_name" ]]; then
    timings+=("$step_name $((SECONDS - step_started))s")
    printf -- '--> %s: %ss\n' "$step_name" "$((SECONDS - step_started))"
    step_name=""
  fi
}
step() {
  end_step
  step_name="$1"
  step_started=$SECONDS
  printf '\n==> %s\n' "$2"
}
fail() {
  end_step
  printf '\ntest.sh: FAILED: %s\n' "$*" >&2
  exit 1
}

shared="${AGENTWIRE_SHARED_DIR:-$repo_root/../shared}"
if [[ ! -d "$shared/peers" ]]; then
  fail "$shared/peers is missing: the tests read the peers' fixtures from shared/ beside the repository root (or set AGENTWIRE_SHARED_DIR)"
fi

# --- What the clone holds before the run (compared with what it holds after) -------------------
clone_listing() {
  git -C "$repo_root" status --porcelain --ignored=matching --untracked-files=normal \
    | LC_ALL=C sort
}
have_git=false
if git -C "$repo_root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  have_git=true
  listing_before="$(clone_listing)"
fi

# --- Build folders -------------------------------------------------------------------------------
fmt_color=()
fuzz_target_dir="$repo_root/fuzz/target"
fuzz_artifacts=()
allowed_leftovers=(.tools/)
if [[ "${CI:-}" == "true" ]]; then
  # A CI build starts from nothing and never rebuilds incrementally; its log is plain text.
  export CARGO_INCREMENTAL=0
  export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
  fmt_color=(-- --color=never)

  tmp_root="${TMPDIR:-/tmp}"
  # A run killed with SIGKILL (or a machine that went down) could not remove its folder: remove
  # ours whose run is gone.
  for stale in "$tmp_root"/agentwire-test.*; do
    [[ -O "$stale" && -f "$stale/pid" ]] || continue
    pid="$(cat "$stale/pid" 2>/dev/null || true)"
    if [[ "$pid" =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null; then
      printf 'test.sh: removing %s, left by an earlier run that did not finish\n' "$stale"
      rm -rf "$stale" || true
    fi
  done
  work="$(mktemp -d "$tmp_root/agentwire-test.XXXXXX")"
  printf '%s\n' "$$" >"$work/pid"
  cleanup() {
    local status=$?
    # Child processes of the tests (a PostgreSQL server stopping) may still be writing for a
    # moment; a second pass removes what they added.
    rm -rf "$work" 2>/dev/null || { sleep 2; rm -rf "$work"; }
    return "$status"
  }
  trap cleanup EXIT
  # A signal ends the script through its EXIT trap (while a step runs in the foreground, bash
  # acts on the signal when that step ends; Ctrl-C reaches the step too).
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
  # The tests' PostgreSQL server runs as the postgres user when the tests run as root: it must
  # reach its data folder under the tests' TMPDIR.
  chmod 755 "$work"
  mkdir -m 1777 "$work/tmp"
  export CARGO_TARGET_DIR="$work/target"
  fuzz_target_dir="$work/fuzz-target"
  # A crash input goes with the folder; the log shows it (base64 and its Debug form).
  fuzz_artifacts=(--artifacts "$work/fuzz-artifacts")
  tests_tmp="$work/tmp"
  printf 'test.sh: building in %s (removed when the run ends)\n' "$work"
else
  allowed_leftovers+=(target/ fuzz/target/)
fi
target_dir="${CARGO_TARGET_DIR:-$repo_root/target}"

# --- Free disk space -----------------------------------------------------------------------------
# The space still needed is the measured peak less what the build folders already hold (a
# developer's second run rebuilds little).
size_kib() { if [[ -d "$1" ]]; then du -sk "$1" 2>/dev/null | cut -f1; else echo 0; fi; }
free_kib() {
  local dir="$1"
  while [[ ! -d "$dir" ]]; do dir="$(dirname "$dir")"; done
  df -Pk "$dir" | awk 'NR == 2 { print $4 }'
}
gib() { awk -v k="$1" 'BEGIN { printf "%.1f GiB", k / 1048576 }'; }
check_free_space() {
  local need_kib=$((min_free_gib * 1048576))
  local held_kib=$(($(size_kib "$target_dir") + $(size_kib "$fuzz_target_dir")))
  need_kib=$((need_kib > held_kib + 1048576 ? need_kib - held_kib : 1048576))
  local free
  free="$(free_kib "$target_dir")"
  ((free >= need_kib)) && return 0
  {
    printf '\ntest.sh: FAILED: %s free on the disk that holds %s; the run needs about %s\n' \
      "$(gib "$free")" "$target_dir" "$(gib "$need_kib")"
    printf '(AGENTWIRE_MIN_FREE_GIB=%s GiB for a run from nothing). Build output that can go:\n' \
      "$min_free_gib"
    local dir real seen=" " found=false
    for dir in "$repo_root"/target "$repo_root"/fuzz/target \
      "$repo_root"/../*/target "$repo_root"/../*/fuzz/target "${TMPDIR:-/tmp}"/agentwire-test.*; do
      [[ -d "$dir" ]] || continue
      real="$(realpath "$dir")"
      [[ "$seen" == *" $real "* || "$real" == "${work:-}" ]] && continue
      seen+="$real "
      # Less than 10 MiB is not worth naming.
      (($(size_kib "$real") >= 10240)) || continue
      printf '  rm -rf %s   # %s\n' "$real" "$(gib "$(size_kib "$real")")"
      found=true
    done
    $found || printf '  (no build folder of agentwire beside %s: free space elsewhere)\n' "$repo_root"
  } >&2
  exit 1
}
check_free_space

# --- The steps -----------------------------------------------------------------------------------
step install "scripts/install-test-tools.sh"
scripts/install-test-tools.sh

step fmt "cargo fmt --all --check"
cargo fmt --all --check "${fmt_color[@]}" || failed+=("cargo fmt --all --check")

step build "cargo build --workspace --all-targets"
cargo build --workspace --all-targets || fail "cargo build --workspace --all-targets"

step clippy "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings \
  || failed+=("cargo clippy --workspace --all-targets -- -D warnings")

# Before the tests, so that cargo test's summary stays near the end. The smoke run builds without
# a sanitizer (a second, sanitized build of every dependency cost minutes on every run); the long
# runs of docs/testing.md keep AddressSanitizer.
step fuzz "scripts/fuzz.sh --sanitizer none --dev --seconds $fuzz_seconds"
scripts/fuzz.sh --sanitizer none --dev --seconds "$fuzz_seconds" --target-dir "$fuzz_target_dir" \
  "${fuzz_artifacts[@]}" \
  || failed+=("scripts/fuzz.sh")

step test "cargo test --workspace --no-fail-fast"
if [[ -n "${tests_tmp:-}" ]]; then
  TMPDIR="$tests_tmp" cargo test --workspace --no-fail-fast \
    || failed+=("cargo test --workspace --no-fail-fast")
else
  cargo test --workspace --no-fail-fast || failed+=("cargo test --workspace --no-fail-fast")
fi
end_step

# --- What the run left behind --------------------------------------------------------------------
if [[ -n "${tests_tmp:-}" ]]; then
  # A test binary's PostgreSQL server is stopped and its folder removed just after the binary
  # exits: give the last one a moment.
  for _ in $(seq 20); do
    [[ -z "$(ls -A "$tests_tmp")" ]] && break
    sleep 0.5
  done
  if [[ -n "$(ls -A "$tests_tmp")" ]]; then
    printf '\ntest.sh: the tests left in their temporary folder:\n' >&2
    (cd "$tests_tmp" && ls -A | sed 's/^/  /') >&2
    failed+=("the tests removed their temporary files")
  fi
fi
if $have_git; then
  leftovers="$(comm -13 <(printf '%s\n' "$listing_before") <(clone_listing) | sed 's/^...//')"
  unexpected=()
  while IFS= read -r path; do
    [[ -z "$path" ]] && continue
    allowed=false
    for prefix in "${allowed_leftovers[@]}"; do
      [[ "$path" == "$prefix"* ]] && allowed=true
    done
    $allowed || unexpected+=("$path")
  done <<<"$leftovers"
  if ((${#unexpected[@]} > 0)); then
    printf '\ntest.sh: the run changed or left in the clone (it may leave only %s):\n' \
      "${allowed_leftovers[*]}" >&2
    printf '  %s\n' "${unexpected[@]}" >&2
    failed+=("the run left the clone as it found it")
  fi
fi

printf '\ntest.sh: step times:'
printf ' %s,' "${timings[@]}"
printf ' total %ss\n' "$SECONDS"
if ((${#failed[@]} > 0)); then
  printf '\n' >&2
  printf 'test.sh: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
