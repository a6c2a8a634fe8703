#!/usr/bin/env bash
# The whole test suite on a fresh machine: install what is missing, start throwaway PostgreSQL
# and MariaDB servers on loopback (and PgBouncer in transaction mode in front of PostgreSQL),
# build, and run: every test (unit, conformance per backend, backend-specific, CLI, stories,
# package, fuzzers, then the bounded fault-injection runs, three at a time); the same again under
# AddressSanitizer+UBSan (less the fault and fuzz runs, which are long and already sanitized);
# the conformance suites under ThreadSanitizer; the quick benchmarks, so they never rot. The
# PgBouncer tests (label pgbouncer) run in the first pass only: they test the protocol through the
# pooler, which the sanitizer passes already cover directly. So do the failover tests (label
# replication, about 80 s: each starts its own PostgreSQL primary + standby with
# scripts/postgresql-replica.sh, kills the primary and promotes the standby), and the package
# tests (label package: installing, a shared build, the .deb; they build trees of their own and
# test no sanitized code). So do the Galera tests (label galera, about 60 s, plus about 25 s to
# start the cluster, while the release tree builds): a 3-node MariaDB Galera cluster
# (scripts/galera-cluster.sh) runs for the first pass only and is stopped after it. Stops the
# servers also when tests fail, and closes with one "total: N passed, N failed". The ASan tree
# builds behind the first pass and the TSan tree behind the ASan pass, at idle CPU priority
# (build_behind).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SQLLOCK_BUILD_DIR:-$root/build}
jobs=${SQLLOCK_JOBS:-2}

"$root/scripts/install-deps.sh"

work=$(mktemp -d /tmp/sqllock-servers.XXXXXX)
chmod 755 "$work"
galera_start=""
behind=""
cleanup() {
  # A sanitizer tree still building behind a pass (the script stopped early) is stopped.
  [[ -z $behind ]] || kill -- "-$behind" 2>/dev/null || true
  # A cluster still starting (the script stopped during the release build) is stopped once started.
  [[ -z $galera_start ]] || wait "$galera_start" >/dev/null 2>&1 || true
  "$root/scripts/pgbouncer-server.sh" stop "$work/pgb" >/dev/null 2>&1 || true
  "$root/scripts/postgresql-server.sh" stop "$work/pg" >/dev/null 2>&1 || true
  "$root/scripts/mariadb-server.sh" stop "$work/my" >/dev/null 2>&1 || true
  "$root/scripts/galera-cluster.sh" stop "$work/galera" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
"$root/scripts/postgresql-server.sh" start "$work/pg"
"$root/scripts/mariadb-server.sh" start "$work/my"
"$root/scripts/pgbouncer-server.sh" start "$work/pgb" "$work/pg/env.sh"
# shellcheck disable=SC1091
source "$work/pg/env.sh"
# shellcheck disable=SC1091
source "$work/pgb/env.sh"
# shellcheck disable=SC1091
source "$work/my/env.sh"

configure() {  # configure NAME [cmake args...]: configure the tree build/NAME
  local name=$1
  shift
  cmake -S "$root" -B "$build/$name" -G Ninja -DSQLLOCK_WITH_SQLITE=ON -DSQLLOCK_WITH_POSTGRESQL=ON \
    -DSQLLOCK_WITH_MYSQL=ON "$@" >/dev/null
}
build_tree() {  # build_tree NAME [TARGET...]: build those targets of build/NAME (and what they need), or all
  local name=$1
  shift
  cmake --build "$build/$name" -j "$jobs" ${1+--target "$@"}
}
# build_behind NAME [TARGET...]: build_tree in the background while a pass runs, at the lowest CPU
# priority (SCHED_IDLE: a compiler gets a core only when no test, server or test-run build wants
# it, and gives it up the moment one does), in its own process group (stopped by cleanup), its
# output kept for built_behind. Most tests wait on servers, leases and sleeps, so the cores are
# mostly idle during a pass: the ASan tree (about 550 CPU-s) builds during the first pass and the
# TSan tree (about 240 CPU-s) during the ASan pass, instead of about 400 s of wall time between
# the passes on the 2-core CI machine.
build_behind() {
  local name=$1
  shift
  set -m
  (
    chrt --idle -p 0 "$BASHPID" >/dev/null 2>&1 || renice -n 19 -p "$BASHPID" >/dev/null 2>&1 || true
    # Its disk I/O too waits for the servers' (their fsyncs pace the timing tests).
    ionice -c 3 -p "$BASHPID" >/dev/null 2>&1 || true
    build_tree "$name" "$@"
  ) </dev/null >"$work/build-$name.log" 2>&1 &
  behind=$!
  set +m
}
# built_behind NAME: wait for build_behind NAME, print its output; a tree that did not build ends
# the run (as a failed build_tree does).
built_behind() {
  local name=$1 rc=0
  wait "$behind" || rc=$?
  behind=""
  cat "$work/build-$name.log"
  if [[ $rc -ne 0 ]]; then
    echo "=== the $name tree did not build (exit $rc)"
    exit 1
  fi
}
# pass_programs CTEST-FILTER-ARGS...: the programs the tests of a pass run, as paths relative to a
# build tree (which ninja takes as targets): every executable file of the release tree named in the
# command of a test the same ctest filter selects there. A sanitizer tree builds only these and what
# they depend on, not the fault, fuzz, safety, Galera, replication or PgBouncer programs its pass
# never runs (about 2 minutes of the two sanitizer builds on the 2-core CI machine). Nothing is
# skipped by this: a test whose program a tree lacks fails (ctest: not found, or *_NOT_BUILT).
pass_programs() {
  local f
  ctest --test-dir "$build/release" --show-only=json-v1 "$@" | grep -oE '"/[^"]+"' | tr -d '"' | sort -u |
    while read -r f; do
      if [[ $f == "$build/release/"* && -f $f && -x $f ]]; then echo "${f#"$build/release/"}"; fi
    done
}

status=0
passed=0
failed=0
passes=0
run() {  # run TITLE ctest-args...: run ctest, count, remember failure, keep going so every suite reports
  local title=$1
  shift
  passes=$((passes + 1))
  local log=$work/ctest-$passes.log
  echo "=== $title"
  if ! ctest "$@" --output-on-failure --timeout 1200 2>&1 | tee "$log"; then
    status=1
  fi
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
  local line total bad
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
  if [[ -z "$line" ]]; then
    echo "=== $title: ctest reported no result"
    status=1
    return
  fi
  total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
  bad=$(sed -E 's/.*tests passed, ([0-9]+) tests? failed.*/\1/' <<<"$line")
  passed=$((passed + total - bad))
  failed=$((failed + bad))
  [[ "$bad" -eq 0 ]] || echo "=== $title: $bad FAILED"
}

# -g1: line tables and function names (backtraces with file:line), no variable or type
# descriptions that nothing in the run reads; the same code as -g (gcc never lets -g change it),
# about a quarter less compiler CPU on the critical path of the run.
configure release -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSQLLOCK_BUILD_BENCH=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
# The Galera cluster starts while the release tree builds: about 20 s of waiting on its nodes
# (about 3 s of CPU) that no longer comes after the build. No test runs before both are done.
"$root/scripts/galera-cluster.sh" start "$work/galera" >"$work/galera-start.log" 2>&1 &
galera_start=$!
build_tree release
# A cluster that does not start fails the galera tests (their URLs are missing), not the run.
if wait "$galera_start"; then
  cat "$work/galera-start.log"
  # shellcheck disable=SC1091
  source "$work/galera/env.sh"
else
  cat "$work/galera-start.log"
  echo "=== the Galera cluster did not start: the galera tests will fail"
fi
galera_start=""
asan_tests=(-LE "fault|fuzz|safety|pgbouncer|replication|package|galera")
configure asan -DCMAKE_BUILD_TYPE=Debug -DSQLLOCK_SANITIZE=address,undefined
mapfile -t programs < <(pass_programs "${asan_tests[@]}")
build_behind asan "${programs[@]}"
run "all tests (RelWithDebInfo) but the fault runs" --test-dir "$build/release" -LE fault
"$root/scripts/galera-cluster.sh" stop "$work/galera" || true
unset "${!SQLLOCK_TEST_GALERA_@}"
# The fault tests side by side: each bounded run (55 s) mostly waits on its workers, faults and
# servers (about 14 CPU-s each), and each has a database of its own; one at a time they took about
# 3.5 minutes of the run, three at a time about 1.5. A run that restarts or crashes a shared server
# holds its RESOURCE_LOCK (tests/fault/CMakeLists.txt), so no other test uses that server meanwhile.
run "fault runs and fault tests, three at a time (RelWithDebInfo)" --test-dir "$build/release" -L fault -j 3
built_behind asan

tsan_tests=(-L "conformance|unit" -LE "pgbouncer|replication|galera")
configure tsan -DCMAKE_BUILD_TYPE=Debug -DSQLLOCK_SANITIZE=thread -DSQLLOCK_BUILD_CLI=OFF
mapfile -t programs < <(pass_programs "${tsan_tests[@]}")
build_behind tsan "${programs[@]}"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run "all tests under AddressSanitizer + UndefinedBehaviorSanitizer" --test-dir "$build/asan" "${asan_tests[@]}"
built_behind tsan

TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/tests/tsan.supp" \
  run "conformance suites and engine unit tests under ThreadSanitizer" --test-dir "$build/tsan" "${tsan_tests[@]}"

echo "=== quick benchmarks (bench/run.sh --quick): ratios to same-run baselines"
if bash "$root/bench/run.sh" --quick --out "$work/bench" --build "$build/release"; then
  passed=$((passed + 1))
else
  echo "=== quick benchmarks: FAILED"
  failed=$((failed + 1))
fi

# The failures once more, short, at the end: a CI page that keeps only the head and the tail of the
# output still names the failing test and its assertion.
if [[ $failed -gt 0 ]]; then
  echo "=== failure digest (whole output above)"
  for f in "$work"/ctest-*.log; do
    [[ -e "$f" ]] || continue
    grep -E '\*\*\*(Failed|Timeout|Exception)|^\[  FAILED  \] [A-Za-z]|^(=== )?shards\.sh: |^=== shard [0-9]+ of [0-9]+ \(exit [1-9]' "$f" |
      sort -u | head -n 12 || true
    grep -E -A 5 '^[^ ]+:[0-9]+: Failure$|ERROR: (Address|Leak)Sanitizer|WARNING: ThreadSanitizer|runtime error:|^VIOLATION ' "$f" | cut -c1-300 | head -n 30 || true
  done
fi
echo "total: $passed passed, $failed failed"
[[ $failed -eq 0 ]] || status=1
exit $status
