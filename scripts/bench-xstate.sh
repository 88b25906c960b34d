#!/usr/bin/env bash
# Times the real XState 5.33.3 on conformance cases (scripts/xstate/bench.mjs)
# and prints, per case, the JSON line `stategate bench` prints:
#   scripts/bench-xstate.sh [-s SECONDS] CASE.case.json...   (default 2 s each)
#   {"case","rounds","steps","ns_per_step","ns_per_round"}
# Needs node (>= 20) and npm (scripts/xstate/install.sh installs XState once).
# Each case runs in a node of its own. scripts/compare-bench.sh runs this
# and `stategate bench` side by side.
set -euo pipefail
secs=2
if [ "${1:-}" = "-s" ]; then secs="$2"; shift 2; fi
[ $# -gt 0 ] || { echo "usage: $0 [-s SECONDS] CASE.case.json..." >&2; exit 2; }
dir="$("$(dirname "${BASH_SOURCE[0]}")/xstate/install.sh")"
for f in "$@"; do
  node "$dir/bench.mjs" "$f" "$secs"
done
