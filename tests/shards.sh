#!/usr/bin/env bash
# shards.sh N PROGRAM [ARGS...]: run a GoogleTest program as N shards at once (GTEST_TOTAL_SHARDS,
# GTEST_SHARD_INDEX; at most $SQLLOCK_TEST_SHARDS_MAX when that is set), print each shard's output
# in turn, and fail if any shard failed or if the shards together ran another number of tests than
# the program lists (a shard that died early is a failure, never a smaller pass).
#
# Why: the conformance suites spend nearly all their time waiting (leases expiring,
# waiters polling, servers answering): conformance_postgresql takes about 68 s of wall time for
# 2.5 s of CPU. Each test works on names and tables of its own (and each SQLite shard on a
# database file of its own), so shards run side by side on the shared servers. The suites hold
# timing claims (a 300 ms lease renewed for 1.5 s, a fair queue moving on within a bound) that
# shards side by side break now and then, so CI runs the suites whole (tests/CMakeLists.txt,
# option SQLLOCK_TEST_SHARDS, off by default).
set -uo pipefail

if [[ $# -lt 2 || ! $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: shards.sh N PROGRAM [ARGS...]" >&2
  exit 2
fi
n=$1
shift
# A pass that makes each test heavier on the CPU (the sanitizer passes of scripts/test-all.sh)
# runs fewer shards at once.
if [[ ${SQLLOCK_TEST_SHARDS_MAX:-} =~ ^[1-9][0-9]*$ && $SQLLOCK_TEST_SHARDS_MAX -lt $n ]]; then
  n=$SQLLOCK_TEST_SHARDS_MAX
fi

# A shard still running after this many seconds is stopped (SIGTERM, then SIGKILL 5 s later) and
# its output so far printed, ending in the test it hung in: under ctest's own TIMEOUT (900 s for
# the conformance suites), which kills this script and its shards with SIGKILL and shows nothing.
limit=${SQLLOCK_SHARDS_TIMEOUT:-840}

work=$(mktemp -d "${TMPDIR:-/tmp}/shards.XXXXXX")
pids=()
timer=""
cleanup() {
  # Stopped (Ctrl-C, or a TERM to this script): the shards go too.
  local p
  [[ -z $timer ]] || kill "$timer" 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# How many tests the program has with the same arguments (a --gtest_filter among them applies).
listed=$("$@" --gtest_list_tests | grep -c '^  ') || true
if [[ -z $listed || $listed -eq 0 ]]; then
  echo "shards.sh: $1 lists no tests" >&2
  exit 1
fi

start=$SECONDS
for ((i = 0; i < n; i++)); do
  GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i "$@" >"$work/$i.log" 2>&1 &
  pids+=("$!")
done

(
  trap 'kill "$nap" 2>/dev/null; exit 0' TERM
  sleep "$limit" &
  nap=$!
  wait "$nap"
  echo "=== shards.sh: still running after ${limit} s: stopping the shards" >"$work/timeout"
  kill -TERM "${pids[@]}" 2>/dev/null
  sleep 5
  kill -KILL "${pids[@]}" 2>/dev/null
) </dev/null >/dev/null 2>&1 &
timer=$!

status=0
ran=0
for ((i = 0; i < n; i++)); do
  rc=0
  wait "${pids[$i]}" || rc=$?
  echo "=== shard $((i + 1)) of $n (exit $rc)"
  cat "$work/$i.log"
  [[ $rc -eq 0 ]] || status=1
  count=$(grep -E '^\[==========\] [0-9]+ tests? from .* ran\.' "$work/$i.log" | sed -E 's/^\[==========\] ([0-9]+) .*/\1/')
  ran=$((ran + ${count:-0}))
done
pids=()
kill "$timer" 2>/dev/null || true
wait "$timer" 2>/dev/null || true
timer=""
if [[ -e $work/timeout ]]; then
  cat "$work/timeout"
  status=1
fi

echo "=== $n shards: $ran of $listed tests ran, $((SECONDS - start)) s"
if [[ $ran -ne $listed ]]; then
  echo "shards.sh: the shards ran $ran tests, the program lists $listed" >&2
  status=1
fi
exit $status
