#!/usr/bin/env bash
# Prints the trace the real XState 5.33.3 gives for each conformance case
# (scripts/xstate/trace.mjs; the format: README, Correctness):
#   scripts/oracle.sh testdata/conformance/own/AREA/NAME.case.json > .../NAME.trace.json
# Needs node (>= 20) and npm: the pinned XState and esbuild are installed
# once into a cache folder (scripts/xstate/install.sh). Each case runs in a
# node of its own, so module-level state never leaks from one to the next.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 CASE.case.json..." >&2; exit 2; }
dir="$("$(dirname "${BASH_SOURCE[0]}")/xstate/install.sh")"
for f in "$@"; do
  node "$dir/trace.mjs" "$f"
done
