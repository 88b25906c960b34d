#!/usr/bin/env bash
# Installs the pinned XState and esbuild (package.json, package-lock.json)
# into a cache folder once, copies the oracle's scripts beside them, and
# prints the folder's path. scripts/oracle.sh and scripts/bench-xstate.sh
# call it; call it yourself to run another script with the real XState in
# that folder (see README, Persistence).
#   scripts/xstate/install.sh        -> ~/.cache/stategate-xstate
# The folder is $STATEGATE_XSTATE_DIR, else $XDG_CACHE_HOME/stategate-xstate,
# else ~/.cache/stategate-xstate. Needs node (>= 20) and npm.
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="${STATEGATE_XSTATE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/stategate-xstate}"
command -v node >/dev/null || { echo "$0: needs node (>= 20) and npm" >&2; exit 1; }
mkdir -p "$dir"
if [ ! -f "$dir/node_modules/xstate/package.json" ] ||
  ! cmp -s "$src/package.json" "$dir/package.json" ||
  ! cmp -s "$src/package-lock.json" "$dir/package-lock.json"; then
  command -v npm >/dev/null || { echo "$0: needs npm to install XState into $dir" >&2; exit 1; }
  cp "$src/package.json" "$src/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --no-audit --no-fund --silent >&2) ||
    { rm -f "$dir/package.json"; echo "$0: npm ci failed in $dir" >&2; exit 1; }
fi
# Copy a script only when it changed, through a rename, so that runs side
# by side never see a half-written file.
for f in trace.mjs bench.mjs case.mjs; do
  if ! cmp -s "$src/$f" "$dir/$f"; then
    cp "$src/$f" "$dir/.$f.$$" && mv -f "$dir/.$f.$$" "$dir/$f"
  fi
done
echo "$dir"
