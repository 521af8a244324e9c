#!/usr/bin/env bash
# Runs the cargo-fuzz targets of fuzz/ for a while each; a crash fails the script.
#
#   scripts/fuzz.sh [--seconds N] [--sanitizer address|none] [--dev] [--target-dir DIR]
#                   [--artifacts DIR] [TARGET…]
#
# Without TARGET it runs every [[bin]] of fuzz/Cargo.toml (as `cargo fuzz list` prints them),
# for N seconds each (default 10), built optimized with AddressSanitizer unless told otherwise
# (the test command's brief smoke run uses --sanitizer none --dev: one unoptimized build without
# a sanitizer, minutes shorter; the long runs keep the defaults). cargo-fuzz is
# installed with `cargo install cargo-fuzz --locked` when missing. The targets build on the
# stable toolchain with RUSTC_BOOTSTRAP=1 (the flags cargo-fuzz passes are unstable) in
# fuzz/target (or DIR), away from the main build. Each run starts from the committed seeds in
# fuzz/corpus/<target>/ and keeps what it finds in <target folder>/corpus/<target>/ (not
# committed); a crash leaves its input in fuzz/artifacts/<target>/ (or DIR/<target>/ with
# --artifacts; libFuzzer also prints a small one in base64, and cargo fuzz its Debug form).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds=10
sanitizer=address
dev=false
target_dir=""
artifacts_dir=""
targets=()
while (($# > 0)); do
  case "$1" in
    --seconds)
      [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --seconds needs a whole number" >&2; exit 2; }
      seconds="$2"
      shift 2
      ;;
    --sanitizer)
      [[ $# -ge 2 && "$2" =~ ^(address|none)$ ]] || { echo "fuzz.sh: --sanitizer is address or none" >&2; exit 2; }
      sanitizer="$2"
      shift 2
      ;;
    --dev)
      dev=true
      shift
      ;;
    --target-dir)
      [[ $# -ge 2 && -n "$2" ]] || { echo "fuzz.sh: --target-dir needs a folder" >&2; exit 2; }
      target_dir="$(realpath -m "$2")"
      shift 2
      ;;
    --artifacts)
      [[ $# -ge 2 && -n "$2" ]] || { echo "fuzz.sh: --artifacts needs a folder" >&2; exit 2; }
      artifacts_dir="$(realpath -m "$2")"
      shift 2
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    -*)
      echo "fuzz.sh: unknown option $1 (usage: scripts/fuzz.sh [--seconds N] [--sanitizer address|none] [--dev] [--target-dir DIR] [--artifacts DIR] [TARGET…])" >&2
      exit 2
      ;;
    *)
      targets+=("$1")
      shift
      ;;
  esac
done

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz.sh: installing cargo-fuzz (cargo install cargo-fuzz --locked)" >&2
  cargo install cargo-fuzz --locked
fi

cd "$repo_root/fuzz"
export RUSTC_BOOTSTRAP=1
target_dir="${target_dir:-$repo_root/fuzz/target}"
# cargo fuzz finds its binaries through cargo's target folder; the main build's CARGO_TARGET_DIR
# (set by scripts/test.sh in CI) must not leak into it.
export CARGO_TARGET_DIR="$target_dir"
build_flags=(--sanitizer "$sanitizer")
$dev && build_flags+=(--dev)
build_all=false
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(cargo fuzz list)
  build_all=true
fi
if ((${#targets[@]} == 0)); then
  echo "fuzz.sh: fuzz/Cargo.toml lists no targets" >&2
  exit 1
fi

if $build_all; then
  # One build of every target first: cargo links them in parallel, where each `cargo fuzz run`
  # would build its own in turn.
  printf '\n==> cargo fuzz build %s (into %s)\n' "${build_flags[*]}" "$target_dir"
  cargo fuzz build "${build_flags[@]}" || { echo "fuzz.sh: FAILED: cargo fuzz build" >&2; exit 1; }
fi

failed=()
for target in "${targets[@]}"; do
  seeds="corpus/$target"
  work="$target_dir/corpus/$target"
  mkdir -p "$work"
  corpora=("$work")
  [[ -d "$seeds" ]] && corpora+=("$seeds")
  libfuzzer_flags=(-max_total_time="$seconds" -print_final_stats=1)
  if [[ -n "$artifacts_dir" ]]; then
    mkdir -p "$artifacts_dir/$target"
    # libFuzzer takes the last value of a flag: this one overrides cargo fuzz's fuzz/artifacts/.
    libfuzzer_flags+=(-artifact_prefix="$artifacts_dir/$target/")
  fi
  printf '\n==> fuzz %s for %ss\n' "$target" "$seconds"
  if ! cargo fuzz run "${build_flags[@]}" "$target" "${corpora[@]}" -- "${libfuzzer_flags[@]}"; then
    failed+=("$target")
  fi
done

if [[ -n "$artifacts_dir" ]]; then
  # cargo fuzz makes fuzz/artifacts/<target>/ whatever the prefix; leave no empty folder behind.
  for target in "${targets[@]}"; do
    rmdir "artifacts/$target" 2>/dev/null || true
  done
  rmdir artifacts 2>/dev/null || true
fi
if ((${#failed[@]} > 0)); then
  printf 'fuzz.sh: FAILED: %s (crash inputs are in %s/<target>/)\n' "${failed[*]}" \
    "${artifacts_dir:-fuzz/artifacts}" >&2
  exit 1
fi
