#!/usr/bin/env bash
# Runs the cargo-fuzz targets of fuzz/ for a while each; a crash fails the script.
#
#   scripts/fuzz.sh [--seconds N] [TARGET…]
#
# Without TARGET it runs every [[bin]] of fuzz/Cargo.toml (as `cargo fuzz list` prints them),
# for N seconds each (default 10). cargo-fuzz is installed with `cargo install cargo-fuzz
# --locked` when missing. The targets build on the stable toolchain with RUSTC_BOOTSTRAP=1 (the
# sanitizer flags cargo-fuzz passes are unstable) in fuzz/target, away from the main build.
# Each run starts from the committed seeds in fuzz/corpus/<target>/ and keeps what it finds in
# fuzz/target/corpus/<target>/ (not committed); a crash leaves its input in fuzz/artifacts/.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds=10
targets=()
while (($# > 0)); do
  case "$1" in
    --seconds)
      [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --seconds needs a whole number" >&2; exit 2; }
      seconds="$2"
      shift 2
      ;;
    -h | --help)
      sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    -*)
      echo "fuzz.sh: unknown option $1 (usage: scripts/fuzz.sh [--seconds N] [TARGET…])" >&2
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
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(cargo fuzz list)
fi
if ((${#targets[@]} == 0)); then
  echo "fuzz.sh: fuzz/Cargo.toml lists no targets" >&2
  exit 1
fi

failed=()
for target in "${targets[@]}"; do
  seeds="corpus/$target"
  work="target/corpus/$target"
  mkdir -p "$work"
  corpora=("$work")
  [[ -d "$seeds" ]] && corpora+=("$seeds")
  printf '\n==> fuzz %s for %ss\n' "$target" "$seconds"
  if ! cargo fuzz run "$target" "${corpora[@]}" -- -max_total_time="$seconds" -print_final_stats=1; then
    failed+=("$target")
  fi
done

if ((${#failed[@]} > 0)); then
  printf 'fuzz.sh: FAILED: %s (crash inputs are in fuzz/artifacts/)\n' "${failed[@]}" >&2
  exit 1
fi
