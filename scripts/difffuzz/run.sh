#!/usr/bin/env bash
# Differential testing against the real XState: generates random machines
# (gen_json.py: JSON configs with an implementations module, stressing
# statechart structure; gen_js.py: JS modules, stressing actions and
# actors), runs each with the project's oracle (scripts/oracle.sh's
# trace.mjs) and with `stategate trace`, compares the traces
# (internal/cmd/tracediff), and keeps the cases whose traces differ.
#   scripts/difffuzz/run.sh [-g json|js] [-n COUNT] [-s FIRST_SEED] [-o OUTDIR]
# Needs Go, node (>= 20) and npm (for the oracle), and python3 (the
# generators are Python). A case that loops forever in XState (the
# generators bound their loops, not perfectly) is counted as "hang" and
# left out. Minimize a kept case by hand, then record it as a conformance
# case (see README, Correctness).
set -euo pipefail
gen=json count=50 seed=1 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -g) gen="$2"; shift 2 ;;
    -n) count="$2"; shift 2 ;;
    -s) seed="$2"; shift 2 ;;
    -o) out="$2"; shift 2 ;;
    *) echo "usage: $0 [-g json|js] [-n COUNT] [-s FIRST_SEED] [-o OUTDIR]   (needs Go, node, npm and python3)" >&2; exit 2 ;;
  esac
done
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[ -n "$out" ] || out="$(mktemp -d)/difffuzz-$gen"
mkdir -p "$out"
bin="$out/stategate"
(cd "$here" && go build -o "$bin" ./cmd/stategate)
(cd "$here" && go build -o "$out/tracediff" ./internal/cmd/tracediff)
# Install the oracle once, then run its script directly.
oracle="$("$here/scripts/xstate/install.sh")"
agree=0 differ=0 hang=0 failed=0
for s in $(seq "$seed" $((seed + count - 1))); do
  d="$out/$s"
  rm -rf "$d"; mkdir -p "$d"
  python3 "$here/scripts/difffuzz/gen_$gen.py" "$s" "$d"
  c="$d/m.case.json"
  orc=0; timeout 30 node "$oracle/trace.mjs" "$c" > "$d/expected.json" 2> "$d/oracle.err" || orc=$?
  sgc=0; timeout 30 "$bin" trace "$c" > "$d/actual.json" 2> "$d/stategate.err" || sgc=$?
  if [ "$orc" -eq 124 ]; then
    hang=$((hang + 1)); rm -rf "$d"; continue
  fi
  if [ "$orc" -ne 0 ] || [ "$sgc" -ne 0 ]; then
    if [ "$orc" -ne 0 ] && [ "$sgc" -ne 0 ]; then agree=$((agree + 1)); rm -rf "$d"; continue; fi
    failed=$((failed + 1)); echo "$s: oracle exit $orc, stategate exit $sgc ($d)"; continue
  fi
  if "$out/tracediff" "$d/expected.json" "$d/actual.json" > "$d/compare.txt" 2>&1; then
    agree=$((agree + 1)); rm -rf "$d"
  else
    differ=$((differ + 1)); echo "$s: traces differ: $(head -1 "$d/compare.txt") ($d)"
  fi
done
echo "generator $gen, seeds $seed..$((seed + count - 1)): $agree agree, $differ differ, $failed fail on one side only, $hang hang in XState; kept in $out"
[ "$differ" -eq 0 ] && [ "$failed" -eq 0 ]
