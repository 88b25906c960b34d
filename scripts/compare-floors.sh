#!/usr/bin/env bash
# Measures `stategate serve` against its floors, in one run, alternating:
#   http     plain net/http answering the session's JSON-RPC itself
#   mcpgo    mcp-go's server and Streamable HTTP transport, no gate, memory
#   memory   serve --memory (the gate, nothing stored)
#   serve    serve on a fresh Badger store (durable)
#   before   serve of an earlier commit (-b COMMIT), durable, when given
#   peer     a peer server (-p 'CMD ... {port}'), when given: e.g. another
#            gate serving the invoice machine; {port} is replaced
# with the project's load generator (internal/cmd/mcpload): the invoice
# cycle (submit, request changes, a tools/list every 10 calls), 10 s after
# 3 s of warm-up, at each session count. Prints a line per run: calls/s,
# p50 and p99 in µs, and the server's peak RSS (VmHWM).
#   scripts/compare-floors.sh [-r REPEAT] [-d SECONDS] [-b COMMIT] [-p PEERCMD] [-o SIDES] [SESSIONS...]
# (default: 3 rounds, 1 and 64 sessions, every side; -o "serve peer"
# keeps only those sides). Needs Go; git for -b.
set -euo pipefail
repeat=3 secs=10 base="" peer="" only=""
while [ $# -gt 0 ]; do
  case "$1" in
    -r) repeat="$2"; shift 2 ;;
    -d) secs="$2"; shift 2 ;;
    -b) base="$2"; shift 2 ;;
    -p) peer="$2"; shift 2 ;;
    -o) only="$2"; shift 2 ;;
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
(cd "$here" && go build -o "$tmp/floor" ./internal/cmd/floor)
if [ -n "$base" ]; then
  git -C "$here" worktree add -q --detach "$tmp/base" "$base"
  (cd "$tmp/base" && go build -o "$tmp/stategate-before" ./cmd/stategate)
  git -C "$here" worktree remove --force "$tmp/base"
fi
port=3111
field() { sed 's/.*"'"$1"'":\([0-9.]*\).*/\1/' <<<"$2"; }
wanted() { [ -z "$only" ] || [[ " $only " == *" $1 "* ]]; }
# run NAME SESSIONS CMD...: starts the server, loads it, stops it.
run() {
  local name=$1 s=$2; shift 2
  wanted "$name" || return 0
  "$@" >/dev/null 2>"$tmp/server.log" &
  local pid=$!
  for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
  local out
  out=$("$tmp/mcpload" -sessions "$s" -duration "${secs}s" -warmup 3s -cycle invoice_submit,invoice_request_changes \
    -args '{"reason":"fix it"}' -list-every 10 -url "http://127.0.0.1:$port/mcp") || true
  local rss
  rss=$(awk '/VmHWM/{print int($2/1024)}' "/proc/$pid/status" 2>/dev/null || echo "?")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  awk -v n="$name" -v s="$s" -v c="$(field calls_per_s "$out")" -v p50="$(field p50_us "$out")" -v p99="$(field p99_us "$out")" -v e="$(field errors "$out")" -v r="$rss" \
    'BEGIN { printf "%-8s %8s %10.0f %9d %9d %6s MB %6s\n", n, s, c, p50, p99, r, e }'
}
serve=(serve --http "127.0.0.1:$port" --machines "$here/machines" --upstreams none)
printf '%-8s %8s %10s %9s %9s %9s %6s\n' side sessions calls/s p50_us p99_us peak_rss errors
for s in "${sessions[@]}"; do
  for _ in $(seq "$repeat"); do
    run http "$s" "$tmp/floor" -mode http "127.0.0.1:$port"
    run mcpgo "$s" "$tmp/floor" -mode mcpgo "127.0.0.1:$port"
    run memory "$s" "$tmp/stategate" "${serve[@]}" --memory
    rm -rf "$tmp/data"
    run serve "$s" "$tmp/stategate" "${serve[@]}" --data "$tmp/data"
    if [ -n "$base" ]; then
      rm -rf "$tmp/data"
      run before "$s" "$tmp/stategate-before" "${serve[@]}" --data "$tmp/data"
    fi
    if [ -n "$peer" ]; then
      # shellcheck disable=SC2086
      run peer "$s" ${peer//\{port\}/$port}
    fi
  done
done
