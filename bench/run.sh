#!/usr/bin/env bash
# Build and run every benchmark scenario per backend: Markdown tables on stdout, JSON and a chart in --out.
#
#   bash bench/run.sh [--quick] [--out DIR] [--stock N] [--build DIR]
#
# Builds in build/bench (Release), or only the sqllock_bench target of an existing build tree
# configured with -DSQLLOCK_BUILD_BENCH=ON (--build DIR; scripts/test-all.sh passes its
# RelWithDebInfo tree, so CI's quick run compiles the library once less). Servers: reuses SQLLOCK_TEST_POSTGRESQL_URL / SQLLOCK_TEST_MYSQL_URL when
# exported, otherwise starts throwaway ones (scripts/postgresql-server.sh, scripts/mariadb-server.sh)
# for the backends that were built, and stops them at the end. Scenario 7 (MariaDB Galera, as
# ratios to that single MariaDB server) runs when SQLLOCK_TEST_GALERA_URL1/2 are exported
# (scripts/galera-cluster.sh start DIR; source DIR/env.sh) and otherwise prints why it was
# skipped: run.sh starts no cluster (CI's --quick run has none). The PgBouncer row of scenario 1
# uses SQLLOCK_TEST_PGBOUNCER_URL (scripts/pgbouncer-server.sh exports it; started here in front of
# a throwaway PostgreSQL when pgbouncer is installed); without it the row is missing and the table
# says why. Exits non-zero only on a real failure (a build error, a crash, an oversell, broken
# exclusion); a missed speed target is printed as MISSED.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
quick=0
out=$root/bench/out
stock=()
given_build=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick=1 ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    --stock) stock=(--stock "${2:?--stock needs a number}"); shift ;;
    --build) given_build=${2:?--build needs a build directory}; shift ;;
    -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=$root/build/bench
jobs=${SQLLOCK_JOBS:-2}
started=$(date +%s)

# ---- build ------------------------------------------------------------------------------------
if [[ -n "$given_build" ]]; then
  build=$given_build
  grep -qx 'SQLLOCK_BUILD_BENCH:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null \
    || { echo "run.sh: $build is not a build tree configured with -DSQLLOCK_BUILD_BENCH=ON" >&2; exit 64; }
else
  generator=()
  command -v ninja >/dev/null 2>&1 && [[ ! -f "$build/CMakeCache.txt" || -f "$build/build.ninja" ]] && generator=(-G Ninja)
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DSQLLOCK_BUILD_BENCH=ON \
    -DSQLLOCK_BUILD_TESTS=OFF -DSQLLOCK_BUILD_CLI=OFF -DSQLLOCK_BUILD_EXAMPLES=OFF -DSQLLOCK_INSTALL=OFF >&2
fi
cmake --build "$build" -j "$jobs" --target sqllock_bench >&2
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")
bin=$build/bench/sqllock_bench
built=$(date +%s)

# ---- servers ----------------------------------------------------------------------------------
work=""
cleanup() {
  if [[ -n "$work" ]]; then
    [[ -d "$work/pgb" ]] && "$root/scripts/pgbouncer-server.sh" stop "$work/pgb" >/dev/null 2>&1 || true
    [[ -d "$work/pg" ]] && "$root/scripts/postgresql-server.sh" stop "$work/pg" >/dev/null 2>&1 || true
    [[ -d "$work/my" ]] && "$root/scripts/mariadb-server.sh" stop "$work/my" >/dev/null 2>&1 || true
    rm -rf "$work"
  fi
}
trap cleanup EXIT
backends=$("$bin" backends)
need_server() {  # need_server VAR BACKEND: the backend is built and no URL was exported
  [[ -z "${!1:-}" ]] && grep -qx "$2" <<<"$backends"
}
if need_server SQLLOCK_TEST_POSTGRESQL_URL postgresql || need_server SQLLOCK_TEST_MYSQL_URL mysql; then
  work=$(mktemp -d /tmp/sqllock-bench-servers.XXXXXX)
  chmod 755 "$work"
fi
if need_server SQLLOCK_TEST_POSTGRESQL_URL postgresql; then
  "$root/scripts/postgresql-server.sh" start "$work/pg" >&2
  # shellcheck disable=SC1091
  source "$work/pg/env.sh"
  # PgBouncer (transaction mode) in front of it, for scenario 1's pooler row; without pgbouncer
  # installed the row is left out and the table says why.
  if [[ -z "${SQLLOCK_TEST_PGBOUNCER_URL:-}" ]] && command -v pgbouncer >/dev/null 2>&1 &&
    "$root/scripts/pgbouncer-server.sh" start "$work/pgb" "$work/pg/env.sh" >&2; then
    # shellcheck disable=SC1091
    source "$work/pgb/env.sh"
  fi
fi
if need_server SQLLOCK_TEST_MYSQL_URL mysql; then
  "$root/scripts/mariadb-server.sh" start "$work/my" >&2
  # shellcheck disable=SC1091
  source "$work/my/env.sh"
fi

# ---- run --------------------------------------------------------------------------------------
mode=full
[[ $quick -eq 1 ]] && mode=quick
args=(--out "$out" "${stock[@]}")
[[ $quick -eq 1 ]] && args+=(--quick)
rm -f "$out"/*.json "$out"/handoff-*.dat "$out"/tables.md
status=0
echo "## sqllock benchmarks ($mode mode, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores)"
echo
for backend in $backends; do
  admin=()
  case $backend in
    sqlite)
      rm -f "$out"/bench.db "$out"/bench.db-*
      url="sqlite:$out/bench.db" ;;
    postgresql) url=$SQLLOCK_TEST_POSTGRESQL_URL ;;
    mysql)
      url=$SQLLOCK_TEST_MYSQL_URL
      [[ -n "${SQLLOCK_TEST_MYSQL_ADMIN_URL:-}" ]] && admin=(--admin-url "$SQLLOCK_TEST_MYSQL_ADMIN_URL") ;;
  esac
  rc=0
  "$bin" run --backend "$backend" --url "$url" "${admin[@]}" "${args[@]}" | tee -a "$out/tables.md" || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "run.sh: $backend: FAILED (exit $rc)" >&2
    status=1
  fi
done
rm -f "$out"/bench.db "$out"/bench.db-*

# ---- JSON of every figure ----------------------------------------------------------------------
{
  cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
  mem=$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
  printf '{"mode": "%s", "date": "%s", "cores": %s, "cpu": "%s", "memory": "%s", "git": "%s",\n "command": "bash bench/run.sh%s", "build_type": "%s", "build_seconds": %s, "benchmark_seconds": %s,\n "backends": [' \
    "$mode" "$(date -u +%FT%TZ)" "$(nproc)" "$cpu" "$mem" "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "$([[ $quick -eq 1 ]] && echo ' --quick')${stock[*]:+ ${stock[*]}}" "$build_type" "$((built - started))" "$(($(date +%s) - built))"
  sep=""
  for f in "$out"/sqlite.json "$out"/postgresql.json "$out"/mysql.json; do
    [[ -f "$f" ]] || continue
    printf '%s\n' "$sep"
    cat "$f"
    sep=","
  done
  printf ']}\n'
} >"$out/results.json"

# ---- chart: hand-off latency distribution per backend and wake strategy -------------------------
plot=""
panels=0
for backend in sqlite postgresql mysql; do
  files=("$out"/handoff-"$backend"-*.dat)
  [[ -e "${files[0]}" ]] || continue
  panels=$((panels + 1))
  plot+="set title '$backend'"$'\n'"plot "
  first=1
  for f in "${files[@]}"; do
    label=$(head -1 "$f" | sed 's/^# [a-z]*: //')
    [[ $first -eq 1 ]] || plot+=", "
    # Latencies below 0.1 ms (down to negative: the waiter held before the holder's call
    # returned) are drawn at 0.1 ms; the JSON has the exact values.
    plot+="'$f' using (\$1 < 0.1 ? 0.1 : \$1):2 with steps lw 2 title '$label'"
    first=0
  done
  plot+=$'\n'
done
if [[ $panels -gt 0 ]] && command -v gnuplot >/dev/null 2>&1; then
  gnuplot <<EOF || { echo "run.sh: gnuplot failed (chart skipped)" >&2; }
set terminal pngcairo size $((520 * panels)),420 font 'sans,9' noenhanced
set output '$out/handoff.png'
set multiplot layout 1,$panels title 'sqllock hand-off latency, holder release returned -> waiter in another process holds ($mode mode)'
set logscale x
set xrange [0.1:300]
set yrange [0:1]
set xlabel 'latency (ms, log scale)'
set ylabel 'fraction of hand-offs'
set key top left
set grid
$plot
unset multiplot
EOF
fi

finished=$(date +%s)
echo "run.sh: build $((built - started)) s ($build_type), benchmarks $((finished - built)) s, total $((finished - started)) s;" \
  "figures in $out/results.json, chart in $out/handoff.png" >&2
exit $status
