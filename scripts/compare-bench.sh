#!/usr/bin/env bash
# Times stategate and the real XState (../shared/conformance/bench.sh) side
# by side on conformance cases and prints the ratio of ns per step. Each
# side runs REPEAT times (default 3), alternating, and the best run of each
# counts: on a shared machine the best run is the least disturbed one.
#   scripts/compare-bench.sh [-s SECONDS] [-r REPEAT] CASE.json...
set -euo pipefail
secs=1 repeat=3
while [ $# -gt 0 ]; do
  case "$1" in
    -s) secs="$2"; shift 2 ;;
    -r) repeat="$2"; shift 2 ;;
    *) break ;;
  esac
done
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="${STATEGATE_SHARED:-$here/../shared}"
bin="$(mktemp -d)/stategate"
(cd "$here" && go build -o "$bin" ./cmd/stategate)
ns() { python3 -c 'import json,sys; print(json.load(sys.stdin)["ns_per_step"])'; }
printf '%-52s %10s %12s %8s\n' case xstate_ns stategate_ns ratio
for f in "$@"; do
  x=999999999 g=999999999
  for _ in $(seq "$repeat"); do
    v=$("$shared/conformance/bench.sh" -s "$secs" "$f" | ns); [ "$v" -lt "$x" ] && x=$v
    v=$("$bin" bench -s "$secs" "$f" | ns); [ "$v" -lt "$g" ] && g=$v
  done
  python3 -c "import sys; c,x,g=sys.argv[1:]; print(f'{c:<52} {x:>10} {g:>12} {float(x)/float(g):>7.1f}x')" "$(basename "$(dirname "$f")")/$(basename "$f")" "$x" "$g"
done
