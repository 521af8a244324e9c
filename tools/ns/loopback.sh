#!/usr/bin/env bash
# Runs a command with no network but loopback, writing nothing outside a scratch folder. Every
# run of the real OpenClaw CLI or gateway goes through here (tests and scripts/bench.sh).
#
#   tools/ns/loopback.sh --scratch DIR [--keep PATH]... [--setenv NAME=VALUE]... -- CMD [ARG]...
#       CMD in a new network and mount namespace (unshare -n -m; as root, or mapped to root in a
#       user namespace otherwise).
#   tools/ns/loopback.sh --enter PID --scratch DIR [--setenv NAME=VALUE]... -- CMD [ARG]...
#       CMD in the namespaces of PID, a process started by the first form (nsenter), with the same
#       environment: several processes (a gateway, its clients) share one loopback.
#
# Inside:
# - the only interface is `lo`, up: 127.0.0.1 and [::1] answer, any other address fails at once;
# - /tmp is DIR/tmp, so what a program writes under /tmp whatever TMPDIR says (the OpenClaw
#   gateway's log and lock folders) lands in DIR; DIR and every --keep PATH under /tmp (a test
#   binary built under a temporary folder) stay reachable at their own paths;
# - HOME=DIR/home, TMPDIR=/tmp, the XDG folders and npm's cache under HOME, no OPENCLAW_* variable
#   but those given with --setenv (set last).
# DIR must exist; the caller removes it.
set -euo pipefail

die() {
  printf 'loopback.sh: %s\n' "$*" >&2
  exit 125
}

self="$(realpath "${BASH_SOURCE[0]}")"
scratch=""
enter=""
inside=false
cwd=""
keeps=()
setenv=()
while (($# > 0)); do
  case "$1" in
    --scratch) scratch="${2:?--scratch needs a folder}"; shift 2 ;;
    --keep) keeps+=("${2:?--keep needs a path}"); shift 2 ;;
    --setenv) setenv+=("${2:?--setenv needs NAME=VALUE}"); shift 2 ;;
    --enter) enter="${2:?--enter needs a process id}"; shift 2 ;;
    --inside) inside=true; shift ;;
    --cwd) cwd="${2:?--cwd needs a folder}"; shift 2 ;;
    --) shift; break ;;
    -*) die "unknown option $1 (usage: loopback.sh --scratch DIR [--keep PATH]... -- CMD [ARG]...)" ;;
    *) break ;;
  esac
done
(($# > 0)) || die "no command given (usage: loopback.sh --scratch DIR [--keep PATH]... -- CMD [ARG]...)"
[[ -n "$scratch" ]] || die "--scratch DIR is required"
[[ -d "$scratch" ]] || die "scratch folder $scratch does not exist"
scratch="$(realpath "$scratch")"

# The environment every process in the namespace gets.
run_isolated() {
  local name
  for name in $(compgen -e); do
    [[ "$name" == OPENCLAW_* ]] && unset "$name"
  done
  export HOME="$scratch/home" TMPDIR=/tmp
  export XDG_CONFIG_HOME="$HOME/.config" XDG_CACHE_HOME="$HOME/.cache"
  export XDG_DATA_HOME="$HOME/.local/share" XDG_STATE_HOME="$HOME/.local/state"
  export npm_config_cache="$HOME/.npm"
  local pair
  for pair in "${setenv[@]}"; do
    [[ "$pair" == *=* ]] || die "--setenv $pair is not NAME=VALUE"
    export "${pair%%=*}=${pair#*=}"
  done
  exec "$@"
}

if [[ -n "$enter" ]]; then
  command -v nsenter >/dev/null 2>&1 || die "nsenter is missing (Debian package util-linux)"
  # nsenter --mount starts in the namespace's root folder: the command runs where it was asked.
  pass=(--inside --cwd "$PWD" --scratch "$scratch")
  for pair in "${setenv[@]}"; do pass+=(--setenv "$pair"); done
  user=()
  ((EUID == 0)) || user=(--user --preserve-credentials)
  exec nsenter --target "$enter" "${user[@]}" --net --mount -- "$BASH" "$self" "${pass[@]}" -- "$@"
fi

if $inside; then
  # Entered with --enter: the namespace is set up already.
  [[ -d "$scratch/home" ]] || die "$scratch is not the scratch folder of this namespace"
  cd "$cwd" 2>/dev/null || cd "$scratch"
  run_isolated "$@"
fi

if [[ "${AGENTWIRE_NS_SETUP:-}" != "$scratch" ]]; then
  command -v unshare >/dev/null 2>&1 || die "unshare is missing (Debian package util-linux)"
  command -v ip >/dev/null 2>&1 || die "ip is missing (Debian package iproute2)"
  user=()
  ((EUID == 0)) || user=(--map-root-user)
  pass=(--scratch "$scratch")
  for keep in "${keeps[@]}"; do pass+=(--keep "$keep"); done
  for pair in "${setenv[@]}"; do pass+=(--setenv "$pair"); done
  AGENTWIRE_NS_SETUP="$scratch" exec unshare "${user[@]}" --net --mount --propagation private -- \
    "$BASH" "$self" "${pass[@]}" -- "$@"
fi

# In the new namespaces: loopback up, /tmp replaced.
unset AGENTWIRE_NS_SETUP
ip link set lo up || die "cannot bring lo up in the new network namespace"
mkdir -p "$scratch/home" "$scratch/tmp"
chmod 1777 "$scratch/tmp"
for keep in "$scratch" "${keeps[@]}"; do
  keep="$(realpath -m "$keep")"
  [[ "$keep" == /tmp/* ]] || continue
  top="${keep#/tmp/}"
  top="${top%%/*}"
  target="$scratch/tmp/$top"
  [[ -e "$target" ]] && continue
  if [[ -d "/tmp/$top" ]]; then mkdir -p "$target"; else touch "$target"; fi
  mount --bind "/tmp/$top" "$target" || die "cannot bind /tmp/$top into the namespace's /tmp"
done
mount --rbind "$scratch/tmp" /tmp || die "cannot mount $scratch/tmp over /tmp"
run_isolated "$@"
