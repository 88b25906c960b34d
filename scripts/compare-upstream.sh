#!/usr/bin/env bash
# Measures what the gate adds to an upstream MCP server's tool calls: a
# trivial upstream (internal/cmd/upstream-echo) called directly over
# Streamable HTTP, and through `stategate serve` with the upstream over
# HTTP and over stdio, both as a tool a state lists (meta.tools: no event,
# nothing stored) and as a tool bound to an event (meta.tool.upstream: an
# intent and a transition stored, two syncs). Alternating, with the
# project's load generator (internal/cmd/mcpload); one line per run.
#   scripts/compare-upstream.sh [-r REPEAT] [-d SECONDS] [SESSIONS...]   (default: 1 64)
# Needs Go only. The store's own cost of a sync: go test -bench Saves ./store/badger
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
(cd "$here" && go build -o "$tmp/stategate" ./cmd/stategate && go build -o "$tmp/mcpload" ./internal/cmd/mcpload && go build -o "$tmp/upstream-echo" ./internal/cmd/upstream-echo)
up=3201 gate=3202
echo "{\"mcpServers\":{\"echo\":{\"url\":\"http://127.0.0.1:$up/mcp\"}}}" >"$tmp/http.json"
echo "{\"mcpServers\":{\"echo\":{\"command\":\"$tmp/upstream-echo\"}}}" >"$tmp/stdio.json"
"$tmp/upstream-echo" -http "127.0.0.1:$up" &
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return; sleep 0.1; done; }
wait_port $up
load() { "$tmp/mcpload" -sessions "$1" -duration "${secs}s" -warmup 2s -cycle "$2" -args '{"text":"hi"}' -url "http://127.0.0.1:$3/mcp"; }
for s in "${sessions[@]}"; do
  for _ in $(seq "$repeat"); do
    echo "direct s=$s $(load "$s" echo $up)"
    for via in http stdio; do
      rm -rf "$tmp/data"
      "$tmp/stategate" serve --http "127.0.0.1:$gate" --data "$tmp/data" --machines "$here/scripts/upstream-bench/machines" --upstreams "$tmp/$via.json" 2>"$tmp/gate.log" &
      pid=$!
      wait_port $gate
      echo "gate-$via-state s=$s $(load "$s" echo $gate)"
      echo "gate-$via-bound s=$s $(load "$s" echo_bound $gate)"
      kill $pid; wait $pid 2>/dev/null || true
    done
  done
done
