#!/usr/bin/env bash
# Times durable saves (go test -bench BenchmarkSaves ./store/badger: 1 and
# 64 concurrent savers) of this tree's store and of an earlier commit's,
# side by side: the earlier commit is unpacked into a temporary folder
# (git archive), given this tree's store/badger/save_bench_test.go (it
# uses the Store API and badger.Open only; for a commit from before
# store/badger, rewritten to call store.OpenBadger), and both test
# binaries run ROUNDS times, alternating.
#   scripts/compare-store.sh [-r ROUNDS] [-t BENCHTIME] [REV]   (REV: 314fc77, the write-ahead log)
set -euo pipefail
rounds=3 benchtime=2s
while [ $# -gt 0 ]; do
  case "$1" in
    -r) rounds="$2"; shift 2 ;;
    -t) benchtime="$2"; shift 2 ;;
    *) break ;;
  esac
done
rev="${1:-314fc77}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/old"
git -C "$here" archive "$rev" | tar -x -C "$tmp/old"
bench="$here/store/badger/save_bench_test.go"
if [ -d "$tmp/old/store/badger" ]; then
  cp "$bench" "$tmp/old/store/badger/"
  oldpkg=./store/badger
else
  sed -e 's/^package badger_test$/package store_test/' \
      -e '\#"github.com/stategate/stategate/store/badger"#d' \
      -e 's/badger\.Open(/store.OpenBadger(/' -e 's/badger\.Options{/store.BadgerOptions{/' \
      "$bench" >"$tmp/old/store/save_bench_test.go"
  oldpkg=./store
fi
(cd "$tmp/old" && go test -c -o "$tmp/old.test" "$oldpkg")
(cd "$here" && go test -c -o "$tmp/new.test" ./store/badger)
for r in $(seq "$rounds"); do
  for side in old new; do
    echo "== $side ($([ $side = old ] && echo "$rev" || echo "this tree")), round $r"
    (cd "$tmp" && "./$side.test" -test.run '^$' -test.bench '^BenchmarkSaves$' -test.benchtime "$benchtime" | grep '^Benchmark')
  done
done
