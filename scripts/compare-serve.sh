#!/usr/bin/env bash
# Measures `stategate serve` and a peer (scripts/ts-peer: the official
# TypeScript SDK and the real XState) under the same load, alternating, with
# the project's load generator (internal/cmd/mcpload): the invoice cycle of
# issue #4 (submit, request changes, a tools/list every 10 calls) at each
# session count. Prints one line per run: calls/s, p50 and p99 in µs, and
# the server's peak RSS.
#   scripts/compare-serve.sh [-r REPEAT] [-d SECONDS] [SESSIONS...]   (default: 1 64)
# Needs Go, and node and npm for the peer (its packages are installed on
# first use).
set -euo pipefail
repeat=3 secs=10
while [ $# -gt 0 ]; do
  case "$1" in
    -r) repeat="$2"; shift 2 ;;
    -d) secs="$2"; shift 2 ;;
    *) break ;;
  esac
done
sessions=("$@")
[ $# -eq 0 ] && sessions=(1 64)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
(cd "$here" && go build -o "$tmp/stategate" ./cmd/stategate)
(cd "$here" && go build -o "$tmp/mcpload" ./internal/cmd/mcpload)
if [ ! -d "$here/scripts/ts-peer/node_modules" ]; then
  (cd "$here/scripts/ts-peer" && npm install --no-audit --no-fund --silent)
fi
port=3101
# field NAME LINE: a number from mcpload's JSON line.
field() { sed 's/.*"'"$1"'":\([0-9.]*\).*/\1/' <<<"$2"; }
# run NAME SESSIONS CMD...: starts the server, loads it, stops it.
run() {
  local name=$1 s=$2; shift 2
  "$@" >/dev/null 2>"$tmp/server.log" &
  local pid=$!
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  local out
  out=$("$tmp/mcpload" -sessions "$s" -duration "${secs}s" -warmup 3s -cycle invoice_submit,invoice_request_changes \
    -args '{"reason":"fix it"}' -list-every 10 -url "http://127.0.0.1:$port/mcp")
  local rss
  rss=$(awk '/VmHWM/{print int($2/1024)}' "/proc/$pid/status")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  awk -v n="$name" -v s="$s" -v c="$(field calls_per_s "$out")" -v p50="$(field p50_us "$out")" -v p99="$(field p99_us "$out")" -v r="$rss" \
    'BEGIN { printf "%-10s %8s %10.0f %9d %9d %6s MB\n", n, s, c, p50, p99, r }'
}
printf '%-10s %8s %10s %9s %9s %9s\n' server sessions calls/s p50_us p99_us peak_rss
for s in "${sessions[@]}"; do
  for _ in $(seq "$repeat"); do
    rm -rf "$tmp/data"
    run stategate "$s" "$tmp/stategate" serve --http "127.0.0.1:$port" --data "$tmp/data" --machines "$here/machines"
    run ts-peer "$s" node "$here/scripts/ts-peer/server.mjs" "$port"
  done
done
