#!/usr/bin/env bash
# Runs the fault-injection harness per backend: uses exported server URLs, or starts throwaway servers.
#
#   tests/fault/run.sh [--duration D] [--backend sqlite|postgresql|mysql|all] [--build DIR] [driver args...]
#
# D is e.g. 75s (default, the CI bound per backend) or 10m (a soak). Server URLs come from
# SQLLOCK_TEST_POSTGRESQL_URL/_ADMIN_URL/_RESTART/_CRASH and SQLLOCK_TEST_MYSQL_URL/_ADMIN_URL/_RESTART/_CRASH;
# when a backend's URL is not exported, a throwaway server is started (and stopped) for it.
# The worker is $SQLLOCK_FAULT_WORKER, else DIR/tests/fault/fault_worker, built if missing; the
# fault proxy (partitions, lost answers) is $SQLLOCK_FAULT_PROXY, else fault_proxy next to the worker.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
duration=75s
backend=all
build=${SQLLOCK_FAULT_BUILD_DIR:-$root/build/fault}
extra=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --duration) duration=$2; shift 2 ;;
    --backend) backend=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) extra+=("$1"); shift ;;
  esac
done
case $backend in
  all) backends=(sqlite postgresql mysql) ;;
  sqlite|postgresql|mysql) backends=("$backend") ;;
  *) echo "run.sh: --backend sqlite|postgresql|mysql|all" >&2; exit 64 ;;
esac

worker=${SQLLOCK_FAULT_WORKER:-$build/tests/fault/fault_worker}
proxy=${SQLLOCK_FAULT_PROXY:-$(dirname "$worker")/fault_proxy}
if [[ ! -x $worker || ! -x $proxy ]]; then
  # A build directory of the caller's keeps its own options (configuring it here with the CLI off
  # would drop the CLI's tests from it); only a new one is configured, lean.
  if [[ ! -f $build/CMakeCache.txt ]]; then
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSQLLOCK_BUILD_CLI=OFF \
      -DSQLLOCK_BUILD_EXAMPLES=OFF >/dev/null
  fi
  cmake --build "$build" -j 2 --target fault_worker fault_proxy
fi

work=$(mktemp -d /tmp/sqllock-fault.XXXXXX)
chmod 755 "$work"
started=()
cleanup() {
  local s
  for s in "${started[@]}"; do
    case $s in
      postgresql) "$root/scripts/postgresql-server.sh" stop "$work/pg" >/dev/null 2>&1 || true ;;
      mysql) "$root/scripts/mariadb-server.sh" stop "$work/my" >/dev/null 2>&1 || true ;;
    esac
  done
  if [[ ${SQLLOCK_FAULT_KEEP_LOGS:-0} == 1 || $status -ne 0 ]]; then
    echo "run.sh: logs kept in $work" >&2
  else
    rm -rf "$work"
  fi
}
status=0
trap cleanup EXIT

status=0
for b in "${backends[@]}"; do
  out=$work/$b
  mkdir -p "$out"
  case $b in
    sqlite)
      url="sqlite:$out/fault.db"; admin=""; restart=""; crash=""
      ;;
    postgresql)
      if [[ -z ${SQLLOCK_TEST_POSTGRESQL_URL:-} ]]; then
        "$root/scripts/postgresql-server.sh" start "$work/pg"
        started+=(postgresql)
        # shellcheck disable=SC1091
        source "$work/pg/env.sh"
      fi
      url=$SQLLOCK_TEST_POSTGRESQL_URL; admin=${SQLLOCK_TEST_POSTGRESQL_ADMIN_URL:-}
      restart=${SQLLOCK_TEST_POSTGRESQL_RESTART:-}; crash=${SQLLOCK_TEST_POSTGRESQL_CRASH:-}
      ;;
    mysql)
      if [[ -z ${SQLLOCK_TEST_MYSQL_URL:-} ]]; then
        "$root/scripts/mariadb-server.sh" start "$work/my"
        started+=(mysql)
        # shellcheck disable=SC1091
        source "$work/my/env.sh"
      fi
      url=$SQLLOCK_TEST_MYSQL_URL; admin=${SQLLOCK_TEST_MYSQL_ADMIN_URL:-}
      restart=${SQLLOCK_TEST_MYSQL_RESTART:-}; crash=${SQLLOCK_TEST_MYSQL_CRASH:-}
      ;;
  esac
  if ! python3 "$root/tests/fault/fault_driver.py" --backend "$b" --url "$url" --admin-url "$admin" \
      --restart-cmd "$restart" --crash-cmd "$crash" --worker "$worker" --proxy "$proxy" --duration "$duration" --out "$out" "${extra[@]}"; then
    status=1
  fi
done
exit $status
