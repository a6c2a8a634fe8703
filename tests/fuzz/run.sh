#!/usr/bin/env bash
# Bounded libFuzzer run of every parser target (default 30 s each, two at a time); fails on a crash,
# hang or leak.
#
#   tests/fuzz/run.sh [SECONDS]
#
# Builds the targets with clang++ (${CXX:-clang++}) in ${SQLLOCK_FUZZ_BUILD_DIR:-build/fuzz},
# fuzzes from the committed seed corpus (read-only; new inputs go to a scratch directory) and keeps
# any crashing input in the build directory (artifacts/), printing its path.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
seconds=${1:-30}
build=${SQLLOCK_FUZZ_BUILD_DIR:-$(cd "$here/../.." && pwd)/build/fuzz}
cxx=${CXX:-clang++}
[[ $cxx == *clang* ]] || cxx=clang++

generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
mkdir -p "$build"
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$here" -B "$build" "${generator[@]}" -DCMAKE_CXX_COMPILER="$cxx" >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log" >&2; exit 1; }
fi
cmake --build "$build" -j 2 >"$build/build.log" 2>&1 || { tail -n 40 "$build/build.log" >&2; exit 1; }

mkdir -p "$build/artifacts"
fuzz_one() {  # fuzz_one TARGET: prints one result line (and the crash's summary); returns non-zero on failure
  local target=$1 scratch log runs rc=0
  scratch=$(mktemp -d /tmp/sqllock-fuzz-corpus.XXXXXX)
  log=$build/$target.log
  if ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      "$build/$target" "$scratch" "$here/corpus/$target" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 -artifact_prefix="$build/artifacts/$target-" \
      >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    echo "fuzz $target: ok, $runs runs in ${seconds}s"
  else
    echo "fuzz $target: FAILED (log $log)"
    grep -E 'PROPERTY VIOLATED|ERROR: |SUMMARY|input \(|artifact' "$log" | head -20 || tail -20 "$log"
    rc=1
  fi
  rm -rf "$scratch"
  return $rc
}
# ${SQLLOCK_FUZZ_JOBS:-2} targets at a time (each fuzzer is one process on one core); each target's
# output is printed whole when it ends.
jobs=${SQLLOCK_FUZZ_JOBS:-2}
status=0
pids=()
outs=()
wait_first() {
  local out=${outs[0]}
  wait "${pids[0]}" || status=1
  cat "$out"
  rm -f "$out"
  pids=("${pids[@]:1}")
  outs=("${outs[@]:1}")
}
for target in fuzz_url fuzz_duration fuzz_lock_name fuzz_identifier fuzz_sql; do
  [[ ${#pids[@]} -lt $jobs ]] || wait_first
  out=$(mktemp /tmp/sqllock-fuzz-out.XXXXXX)
  fuzz_one "$target" >"$out" 2>&1 &
  pids+=($!)
  outs+=("$out")
done
while [[ ${#pids[@]} -gt 0 ]]; do wait_first; done
exit $status
