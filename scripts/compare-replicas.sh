#!/usr/bin/env bash
# Measures `stategate serve` on its stores side by side, in one run,
# alternating:
#   badger   one serve on a fresh Badger folder (durable)
#   pg1      one serve --store on a fresh database of a throwaway PostgreSQL
#   pg3      three serve --store --route a|b|c on a fresh database, behind
#            the project's proxy (internal/cmd/mcpproxy: sessions sticky by
#            their id's route prefix)
# with the project's load generator (internal/cmd/mcpload): the invoice
# cycle (submit, request changes, a tools/list every 10 calls), SECONDS
# after 3 s of warm-up, at each session count. Prints a line per run:
# calls/s, p50 and p99 in µs, the saves per commit of the store(s) (from
# the servers' logs on exit), and on PostgreSQL the round trips per stored
# call (pg_stat_statements: the statements sent on their own, and two per
# commit of a batch, over the saves made), the CPU time per call of the
# servers and of PostgreSQL (its processes' user and system time, from
# /proc, over the load), errors.
#   scripts/compare-replicas.sh [-r REPEAT] [-d SECONDS] [-o SIDES] [SESSIONS...]
# (default: 3 rounds of 10 s, 1 and 64 sessions, every side; -o "pg1 pg3"
# keeps only those sides). Needs Go and PostgreSQL's programs (initdb,
# pg_ctl, psql: the newest /usr/lib/postgresql/*/bin, or $PG_BIN); run as
# root, the cluster runs as the postgres user. The cluster listens on a
# unix socket in a temporary folder only, and is removed at the end.
set -euo pipefail
repeat=3 secs=10 only=""
while [ $# -gt 0 ]; do
  case "$1" in
    -r) repeat="$2"; shift 2 ;;
    -d) secs="$2"; shift 2 ;;
    -o) only="$2"; shift 2 ;;
    *) break ;;
  esac
done
sessions=("$@")
[ $# -eq 0 ] && sessions=(1 64)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pgbin="${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
[ -x "$pgbin/initdb" ] || { echo "no PostgreSQL programs (set PG_BIN)" >&2; exit 2; }
tmp="$(mktemp -d)"
chmod 755 "$tmp"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pgdir="$tmp/pg"
mkdir "$pgdir"
[ "$(id -u)" = 0 ] && chown postgres "$pgdir"
cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
  as_pg "$pgbin/pg_ctl" -D "$pgdir/data" -m fast -s stop 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
(cd "$here" && go build -o "$tmp/stategate" ./cmd/stategate)
(cd "$here" && go build -o "$tmp/mcpload" ./internal/cmd/mcpload)
(cd "$here" && go build -o "$tmp/mcpproxy" ./internal/cmd/mcpproxy)
as_pg "$pgbin/initdb" -D "$pgdir/data" -U stategate -A trust -E UTF8 --no-locale >/dev/null
as_pg "$pgbin/pg_ctl" -D "$pgdir/data" -l "$pgdir/log" -w -s \
  -o "-k $pgdir -c listen_addresses='' -c max_connections=200 -c shared_preload_libraries=pg_stat_statements" start
sql() { "$pgbin/psql" -h "$pgdir" -U stategate -d "$1" -Atq -c "$2"; }
n=0
port=3111
field() { sed 's/.*"'"$1"'":\([0-9.]*\).*/\1/' <<<"$2"; }
wanted() { [ -z "$only" ] || [[ " $only " == *" $1 "* ]]; }
await_port() { for _ in $(seq 400); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return; sleep 0.05; done; echo "port $1 never opened" >&2; exit 1; }
serve=(serve --machines "$here/machines" --upstreams none)
# stored_stats LOG...: saves and commits of the servers' logs.
# cpu PID...: the user and system time of processes, in clock ticks.
cpu() { local t=0 f; for p in "$@"; do f=$(cut -d' ' -f14,15 "/proc/$p/stat" 2>/dev/null) || continue; t=$((t + ${f% *} + ${f#* })); done; echo $t; }
pg_pids() { local pm; pm=$(head -1 "$pgdir/data/postmaster.pid"); echo "$pm" $(pgrep -P "$pm"); }
hz=$(getconf CLK_TCK)
stored_stats() { awk '/msg="store closed"/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "saves") s += kv[2]; if (kv[1] == "commits") c += kv[2] } } END { printf "%d %d\n", s, c }' "$@"; }
# run NAME SESSIONS: starts the side's servers, loads them, stops them.
run() {
  local name=$1 s=$2
  wanted "$name" || return 0
  n=$((n + 1))
  local db="d$n" url pids=() logs=()
  url="postgres://stategate@/$db?host=$pgdir"
  case "$name" in
    badger)
      "$tmp/stategate" "${serve[@]}" --http "127.0.0.1:$port" --data "$tmp/data$n" 2>"$tmp/s$n.log" &
      pids+=($!) logs+=("$tmp/s$n.log")
      await_port $port ;;
    pg1)
      sql postgres "CREATE DATABASE $db" && sql "$db" "CREATE EXTENSION pg_stat_statements"
      "$tmp/stategate" "${serve[@]}" --http "127.0.0.1:$port" --store "$url" 2>"$tmp/s$n.log" &
      pids+=($!) logs+=("$tmp/s$n.log")
      await_port $port ;;
    pg3)
      sql postgres "CREATE DATABASE $db" && sql "$db" "CREATE EXTENSION pg_stat_statements"
      local backends=() i=0
      for r in a b c; do
        i=$((i + 1))
        "$tmp/stategate" "${serve[@]}" --http "127.0.0.1:$((port + i))" --store "$url" --route $r 2>"$tmp/s$n$r.log" &
        pids+=($!) logs+=("$tmp/s$n$r.log") backends+=(-backend "$r=http://127.0.0.1:$((port + i))")
        await_port $((port + i))
      done
      "$tmp/mcpproxy" -listen "127.0.0.1:$port" "${backends[@]}" 2>"$tmp/p$n.log" &
      local proxy=$!
      await_port $port ;;
  esac
  [ "$name" != badger ] && sql "$db" "SELECT pg_stat_statements_reset()" >/dev/null
  local out cpu0 pgcpu0
  cpu0=$(cpu "${pids[@]}") pgcpu0=$(cpu $(pg_pids))
  out=$("$tmp/mcpload" -sessions "$s" -duration "${secs}s" -warmup 3s -cycle invoice_submit,invoice_request_changes \
    -args '{"reason":"fix it"}' -list-every 10 -url "http://127.0.0.1:$port/mcp") || true
  local servecpu pgcpu
  servecpu=$(($(cpu "${pids[@]}") - cpu0)) pgcpu=$(($(cpu $(pg_pids)) - pgcpu0))
  local alone=0 stored=0
  if [ "$name" != badger ]; then
    alone=$(sql "$db" "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
      WHERE d.datname = '$db' AND query !~* '^(BEGIN|COMMIT)' AND query !~ '^WITH (upd|ins) AS'
        AND query !~ 'pg_current_xact_id|pg_notify|pg_stat_statements'")
    # (every call is a save; an instance's version counts them: the audit
    # trails are trimmed)
    stored=$(sql "$db" "SELECT coalesce(sum(version), 0) FROM stategate.instances WHERE get_byte(machine, 0) <> 0")
  fi
  [ "$name" = pg3 ] && { kill "$proxy"; wait "$proxy" 2>/dev/null || true; }
  kill "${pids[@]}"
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  local saves commits
  read -r saves commits < <(stored_stats "${logs[@]}")
  [ "$name" != badger ] && sql postgres "DROP DATABASE $db WITH (FORCE)"
  if [ "$name" = badger ]; then
    stored=$("$tmp/stategate" state list --data "$tmp/data$n" | awk -F'\t' '{ split($5, v, " "); t += v[2] } END { print t + 0 }')
  fi
  rm -rf "$tmp/data$n"
  awk -v n="$name" -v s="$s" -v c="$(field calls_per_s "$out")" -v p50="$(field p50_us "$out")" -v p99="$(field p99_us "$out")" \
      -v e="$(field errors "$out")" -v saves="$saves" -v commits="$commits" -v alone="$alone" -v stored="$stored" \
      -v scpu="$servecpu" -v pcpu="$pgcpu" -v hz="$hz" \
    'BEGIN { spc = commits > 0 ? saves / commits : 0; rt = stored > 0 ? (alone + 2 * commits) / stored : 0
             sms = stored > 0 ? scpu * 1000 / hz / stored : 0; pms = stored > 0 ? pcpu * 1000 / hz / stored : 0
             printf "%-7s %8s %10.0f %9d %9d %12.1f %9s %11.3f %9s %6s\n", n, s, c, p50, p99, spc, (n == "badger" ? "-" : sprintf("%.2f", rt)), sms, (n == "badger" ? "-" : sprintf("%.3f", pms)), e }'
}
printf '%-7s %8s %10s %9s %9s %12s %9s %11s %9s %6s\n' side sessions calls/s p50_us p99_us saves/commit rt/call serve_ms/c pg_ms/c errors
for s in "${sessions[@]}"; do
  for _ in $(seq "$repeat"); do
    run badger "$s"
    run pg1 "$s"
    run pg3 "$s"
  done
done
