#!/usr/bin/env bash
# Reproducer: a SQLite holder with its wall clock 1 h ahead (libfaketime) dies; its 2 s lease then lasts an hour.
#
#   tests/fault/repro_clock_skew.sh BUILD_DIR [URL]    (URL default sqlite:/tmp/sqllock-skew-$$.db)
# Exit 0: the lease ended after its TTL (correct); 1: the lock stayed stuck.
set -euo pipefail
bin=$1/tests/fault/repro_clock_skew
url=${2:-sqlite:/tmp/sqllock-skew-$$.db}
lib=$(ls /usr/lib/*/faketime/libfaketimeMT.so.1 2>/dev/null | head -n 1)
[[ -n $lib ]] || { echo "libfaketime not installed (Debian package faketime)" >&2; exit 2; }
FAKETIME=+1h FAKETIME_DONT_FAKE_MONOTONIC=1 LD_PRELOAD=$lib "$bin" hold "$url" skewed-holder
sleep 3
status=0
"$bin" take "$url" skewed-holder || status=$?
[[ $url == sqlite:/tmp/sqllock-skew-* ]] && rm -f "${url#sqlite:}" "${url#sqlite:}"-*
exit $status
