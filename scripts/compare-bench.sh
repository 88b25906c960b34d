#!/usr/bin/env bash
# Times stategate and the real XState (../shared/conformance/bench.sh) side
# by side on conformance cases, one after the other in the same run, and
# prints a table with the ratio of ns per step.
#   scripts/compare-bench.sh [-s SECONDS] CASE.json...
set -euo pipefail
secs=1
if [ "${1:-}" = "-s" ]; then secs="$2"; shift 2; fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="${STATEGATE_SHARED:-$here/../shared}"
bin="$(mktemp -d)/stategate"
(cd "$here" && go build -o "$bin" ./cmd/stategate)
printf '%-48s %12s %12s %8s\n' case xstate_ns stategate_ns ratio
for f in "$@"; do
  x=$("$shared/conformance/bench.sh" -s "$secs" "$f" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ns_per_step"])')
  g=$("$bin" bench -s "$secs" "$f" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ns_per_step"])')
  python3 -c "import sys; c,x,g=sys.argv[1:]; print(f'{c:<48} {x:>12} {g:>12} {float(x)/float(g):>7.1f}x')" "$(basename "$(dirname "$f")")/$(basename "$f")" "$x" "$g"
done
