#!/usr/bin/env bash
# The user's story through PgBouncer in transaction mode, or spread over the nodes of a Galera
# cluster: N concurrent `sqllock run` processes on NAMES lock names, each CMD appending "start"/"end" lines with nanosecond timestamps and its fence.
# Passes when every run ran its command (exit 0), no two critical sections of one name overlap
# (by the timestamps, and by an atomic mkdir marker), and the fences of each name increase in
# critical-section order.
#
#   cli_story.sh SQLLOCK_BINARY URL [PROCESSES [NAMES [WAIT]]]     (defaults 8, 1, 30s)
#
# URL is the PgBouncer URL (SQLLOCK_TEST_PGBOUNCER_URL), or several URLs separated by spaces (the
# Galera nodes): run i uses URL number i modulo their count. An empty one is a failure, not a skip.
set -uo pipefail

[[ $# -ge 2 ]] || { echo "usage: $0 SQLLOCK_BINARY URL [PROCESSES [NAMES [WAIT]]]" >&2; exit 64; }
bin=$1
read -r -a urls <<<"$2"
url=${urls[0]:-}
processes=${3:-8}
names=${4:-1}
wait_for=${5:-30s}
if [[ -z "$url" ]]; then
  echo "cli_story.sh: no URL (SQLLOCK_TEST_PGBOUNCER_URL or SQLLOCK_TEST_GALERA_URL1..3 is not set); start" \
       "the servers with scripts/pgbouncer-server.sh or scripts/galera-cluster.sh (scripts/test-all.sh does)." \
       "This is a failure, not a skip." >&2
  exit 2
fi
[[ -x "$bin" ]] || { echo "cli_story.sh: $bin is not executable" >&2; exit 2; }

work=$(mktemp -d /tmp/sqllock-pgbouncer-story.XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix="cli-story-$$-$RANDOM"

if ! "$bin" migrate --url "$url" >"$work/migrate.out" 2>&1; then
  echo "FAIL: sqllock migrate:" >&2
  cat "$work/migrate.out" >&2
  exit 1
fi

# CMD: an atomic marker per name (mkdir fails if another section of the name is inside), then
# start/end lines around a short sleep.
cmd='n=$1; d=$2
if ! mkdir "$d/inside-$n" 2>/dev/null; then echo "$SQLLOCK_HOLDER" >> "$d/overlap-$n"; fi
echo "start $(date +%s%N) $SQLLOCK_FENCE" >> "$d/log-$n"
sleep 0.1
echo "end $(date +%s%N) $SQLLOCK_FENCE" >> "$d/log-$n"
rmdir "$d/inside-$n" 2>/dev/null; true'

started=$(date +%s%N)
pids=()
for i in $(seq 1 "$processes"); do
  n=$((i % names))
  "$bin" run --url "${urls[$((i % ${#urls[@]}))]}" --name "$prefix-$n" --wait "$wait_for" --ttl 10s -- sh -c "$cmd" sh "$n" "$work" \
    >"$work/out-$i" 2>"$work/err-$i" &
  pids+=($!)
done
ran_ok=0
failures=0
for i in $(seq 1 "$processes"); do
  wait "${pids[$((i - 1))]}"
  rc=$?
  if [[ $rc -eq 0 ]]; then
    ran_ok=$((ran_ok + 1))
  else
    failures=$((failures + 1))
    if [[ $failures -le 5 ]]; then
      echo "run $i exited $rc: $(tr '\n' ' ' <"$work/err-$i" | cut -c1-400)" >&2
    fi
  fi
done
elapsed_ms=$(( ($(date +%s%N) - started) / 1000000 ))

status=0
sections=0
for n in $(seq 0 $((names - 1))); do
  if [[ -e "$work/overlap-$n" ]]; then
    echo "FAIL: critical sections of $prefix-$n overlapped (marker): $(cat "$work/overlap-$n")" >&2
    status=1
  fi
  [[ -e "$work/log-$n" ]] || continue
  # Sorted by time, the lines of one name must alternate start/end with the same fence, and the
  # fences must increase.
  if ! sort -k2,2n "$work/log-$n" | awk -v name="$prefix-$n" '
      { if ($1 == "start") { if (open) { print "FAIL: " name ": fence " $3 " started while fence " f " was inside" > "/dev/stderr"; bad = 1 }
                             if ($3 <= last) { print "FAIL: " name ": fence " $3 " after fence " last > "/dev/stderr"; bad = 1 }
                             open = 1; f = $3; last = $3; n++ }
        else { if (!open || $3 != f) { print "FAIL: " name ": end of fence " $3 " does not close fence " f > "/dev/stderr"; bad = 1 }
               open = 0 } }
      END { exit bad }'; then
    status=1
  fi
  sections=$((sections + $(grep -c '^start' "$work/log-$n")))
done

echo "cli_story: $ran_ok of $processes runs ran their command ($sections critical sections on $names name(s)," \
     "$failures failed) in $elapsed_ms ms"
if [[ $ran_ok -ne $processes || $sections -ne $processes ]]; then
  echo "FAIL: every run must run its command" >&2
  status=1
fi
exit $status
