#!/usr/bin/env bash
# Times stategate (`stategate bench`) and the real XState
# (scripts/bench-xstate.sh) side by side on conformance cases and prints
# the ratio of ns per step. Each side runs REPEAT times (default 3),
# alternating, and the best run of each counts: on a shared machine the
# best run is the least disturbed one.
#   scripts/compare-bench.sh [-s SECONDS] [-r REPEAT] CASE.json...
# Needs Go, node (>= 20) and npm.
set -euo pipefail
secs=1 repeat=3
while [ $# -gt 0 ]; do
  case "$1" in
    -s) secs="$2"; shift 2 ;;
    -r) repeat="$2"; shift 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [-s SECONDS] [-r REPEAT] CASE.json..." >&2; exit 2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
bin="$tmp/stategate"
(cd "$here" && go build -o "$bin" ./cmd/stategate)
# ns per step of a bench line (a case without steps has none: its time per round).
ns() {
  local l
  l=$(cat)
  case "$l" in
    *'"ns_per_step":null'*) sed 's/.*"ns_per_round":\([0-9]*\).*/\1/' <<<"$l" ;;
    *) sed 's/.*"ns_per_step":\([0-9]*\).*/\1/' <<<"$l" ;;
  esac
}
printf '%-52s %10s %12s %8s\n' case xstate_ns stategate_ns ratio
for f in "$@"; do
  x=999999999 g=999999999
  for _ in $(seq "$repeat"); do
    v=$("$here/scripts/bench-xstate.sh" -s "$secs" "$f" | ns); [ "$v" -lt "$x" ] && x=$v
    v=$("$bin" bench -s "$secs" "$f" | ns); [ "$v" -lt "$g" ] && g=$v
  done
  awk -v c="$(basename "$(dirname "$f")")/$(basename "$f")" -v x="$x" -v g="$g" \
    'BEGIN { printf "%-52s %10d %12d %7.1fx\n", c, x, g, x / g }'
done
