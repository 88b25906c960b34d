#!/usr/bin/env bash
# Differential testing against the real XState: generates random machines
# (gen_json.py: JSON configs with an implementations module, stressing
# statechart structure; gen_js.py: JS modules, stressing actions and
# actors), runs each with ../shared/conformance's oracle and with
# `stategate trace`, and keeps the cases whose traces differ.
#   scripts/difffuzz/run.sh [-g json|js] [-n COUNT] [-s FIRST_SEED] [-o OUTDIR]
# Needs node, npm (for the oracle) and python3. A case that loops forever
# in XState (the generators bound their loops, not perfectly) is counted
# as "hang" and left out. Minimize a kept case by hand, then record it as
# a conformance case (see README, Correctness).
set -euo pipefail
gen=json count=50 seed=1 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -g) gen="$2"; shift 2 ;;
    -n) count="$2"; shift 2 ;;
    -s) seed="$2"; shift 2 ;;
    -o) out="$2"; shift 2 ;;
    *) echo "usage: $0 [-g json|js] [-n COUNT] [-s FIRST_SEED] [-o OUTDIR]" >&2; exit 2 ;;
  esac
done
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
shared="${STATEGATE_SHARED:-$here/../shared}"
cache="${XSTATE_ORACLE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/xstate-oracle}"
[ -n "$out" ] || out="$(mktemp -d)/difffuzz-$gen"
mkdir -p "$out"
bin="$out/stategate"
(cd "$here" && go build -o "$bin" ./cmd/stategate)
# Install the oracle once (oracle.sh does), then call its script directly:
# oracle.sh copies it on every run, which concurrent runs would race on.
probe="$out/probe"
mkdir -p "$probe"
printf '{"id":"p","initial":"a","states":{"a":{}}}' > "$probe/p.json"
printf '{"machine":"p.json","steps":[]}' > "$probe/p.case.json"
"$shared/conformance/oracle.sh" "$probe/p.case.json" > /dev/null
agree=0 differ=0 hang=0 failed=0
for s in $(seq "$seed" $((seed + count - 1))); do
  d="$out/$s"
  rm -rf "$d"; mkdir -p "$d"
  python3 "$here/scripts/difffuzz/gen_$gen.py" "$s" "$d"
  c="$d/m.case.json"
  orc=0; timeout 30 node "$cache/trace.mjs" "$c" > "$d/expected.json" 2> "$d/oracle.err" || orc=$?
  sgc=0; timeout 30 "$bin" trace "$c" > "$d/actual.json" 2> "$d/stategate.err" || sgc=$?
  if [ "$orc" -eq 124 ]; then
    hang=$((hang + 1)); rm -rf "$d"; continue
  fi
  if [ "$orc" -ne 0 ] || [ "$sgc" -ne 0 ]; then
    if [ "$orc" -ne 0 ] && [ "$sgc" -ne 0 ]; then agree=$((agree + 1)); rm -rf "$d"; continue; fi
    failed=$((failed + 1)); echo "$s: oracle exit $orc, stategate exit $sgc ($d)"; continue
  fi
  if python3 "$shared/conformance/compare.py" "$d/expected.json" "$d/actual.json" > "$d/compare.txt" 2>&1; then
    agree=$((agree + 1)); rm -rf "$d"
  else
    differ=$((differ + 1)); echo "$s: traces differ: $(head -1 "$d/compare.txt") ($d)"
  fi
done
echo "generator $gen, seeds $seed..$((seed + count - 1)): $agree agree, $differ differ, $failed fail on one side only, $hang hang in XState; kept in $out"
[ "$differ" -eq 0 ] && [ "$failed" -eq 0 ]
