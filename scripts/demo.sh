#!/usr/bin/env bash
# Build the sqllock command and show the main job on SQLite: two `sqllock run` contenders for one
# lock; the second waits for the first and gets a larger fencing token.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SQLLOCK_BUILD_DIR:-$root/build}/demo
"$root/scripts/install-deps.sh" --minimal
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSQLLOCK_WITH_SQLITE=ON \
  -DSQLLOCK_WITH_POSTGRESQL=OFF -DSQLLOCK_WITH_MYSQL=OFF -DSQLLOCK_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j 2 --target sqllock_cli >/dev/null
sqllock=$build/cli/sqllock

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export SQLLOCK_URL="sqlite:$dir/demo.db"
"$sqllock" migrate
job='echo "[$(date +%T.%3N)] $0 holds the lock with fence $SQLLOCK_FENCE as $SQLLOCK_HOLDER"; sleep 2; echo "[$(date +%T.%3N)] $0 done"'
"$sqllock" run --name nightly-report --ttl 10s -- sh -c "$job" first &
sleep 0.5
"$sqllock" status
"$sqllock" run --name nightly-report --ttl 10s --wait 30s -- sh -c "$job" second
wait
echo "a third contender that will not wait gets exit code 75 while the lock is held:"
"$sqllock" run --name nightly-report --ttl 10s -- sleep 3 &
sleep 0.5
set +e
"$sqllock" run --name nightly-report --wait 0s -- true
echo "exit code: $?"
wait
