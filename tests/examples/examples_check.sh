#!/usr/bin/env bash
# The event examples work: example_prometheus_metrics serves Prometheus text format on 127.0.0.1
# (read over a plain socket: bash's /dev/tcp), and example_event_log prints one line per event.
# Usage: examples_check.sh SQLLOCK_CLI EXAMPLE_PROMETHEUS_METRICS EXAMPLE_EVENT_LOG
set -uo pipefail
cli=$1 metrics_bin=$2 log_bin=$3
fail=0
problem() { echo "examples_check: $*" >&2; fail=1; }
dir=$(mktemp -d /tmp/sqllock-examples-XXXXXX)
pid=
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
url="sqlite:$dir/locks.db"
"$cli" migrate --url "$url" >/dev/null || { echo "examples_check: migrate failed" >&2; exit 1; }

# 1. Prometheus endpoint.
"$metrics_bin" "$url" 0 20 >"$dir/out" 2>"$dir/err" &
pid=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$dir/out")
  [[ -n $port ]] && break
  sleep 0.05
done
[[ -n $port ]] || { echo "examples_check: the metrics example did not say where it listens: $(cat "$dir/err")" >&2; exit 1; }
sleep 1.2  # a few acquire/release rounds with renewals
scrape() {
  exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$1" >&3
  cat <&3
  exec 3<&-
}
response=$(scrape /metrics | tr -d '\r')
head=${response%%$'\n\n'*}
body=${response#*$'\n\n'}
grep -q '^HTTP/1.1 200 OK$' <<<"$head" || problem "status line: $(head -1 <<<"$head")"
grep -qi '^Content-Type: text/plain; version=0.0.4' <<<"$head" || problem "content type: $head"
# Every line is a comment (# HELP / # TYPE) or a sample: name{labels} value.
bad=$(grep -Ev '^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$|^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"]*",?)*\})? -?[0-9.eE+-]+$' <<<"$body")
[[ -z $bad ]] || problem "lines not in the exposition format:"$'\n'"$bad"
expect_line() { grep -Eq "$1" <<<"$body" || problem "no line matching '$1' in:"$'\n'"$body"; }
expect_line '^# TYPE sqllock_events_total counter$'
expect_line '^sqllock_events_total\{backend="sqlite",kind="acquired"\} [1-9][0-9]*$'
expect_line '^sqllock_events_total\{backend="sqlite",kind="released"\} [1-9][0-9]*$'
expect_line '^sqllock_events_total\{backend="sqlite",kind="renewed"\} [1-9][0-9]*$'
expect_line '^sqllock_events_total\{backend="sqlite",kind="lost"\} 0$'
expect_line '^# TYPE sqllock_leases_held gauge$'
expect_line '^# TYPE sqllock_acquire_wait_seconds histogram$'
expect_line '^sqllock_acquire_wait_seconds_bucket\{le="\+Inf"\} [1-9][0-9]*$'
expect_line '^sqllock_acquire_wait_seconds_count [1-9][0-9]*$'
expect_line '^sqllock_hold_seconds_sum [0-9.e+-]+$'
# Buckets are cumulative: non-decreasing, +Inf equal to _count.
counts=$(sed -n 's/^sqllock_hold_seconds_bucket{le="[^"]*"} //p' <<<"$body")
sorted=$(sort -n <<<"$counts")
[[ $counts == "$sorted" ]] || problem "hold buckets not cumulative: $counts"
[[ $(tail -1 <<<"$counts") == $(sed -n 's/^sqllock_hold_seconds_count //p' <<<"$body") ]] || problem "+Inf bucket != count"
scrape /nothing | tr -d '\r' | grep -q '^HTTP/1.1 404' || problem "an unknown path is not a 404"
kill "$pid"; wait "$pid" 2>/dev/null; pid=

# 2. Event log: acquired, renewed (TTL 300 ms, held 400 ms), released, one logfmt line each.
"$log_bin" "$url" 2>"$dir/log" || problem "example_event_log failed: $(cat "$dir/log")"
for kind in acquired renewed released; do
  grep -Eq "^event=$kind backend=sqlite name=\"event-log-demo\" token=[1-9]" "$dir/log" || problem "no $kind line in: $(cat "$dir/log")"
done
grep -Eq '^event=released .* held_ms=(3[89][0-9]|[4-9][0-9][0-9]|[0-9]{4,}) ' "$dir/log" || problem "released line lacks its hold time: $(cat "$dir/log")"
exit $fail
