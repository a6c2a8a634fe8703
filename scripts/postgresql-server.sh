#!/usr/bin/env bash
# Throwaway PostgreSQL cluster for tests: start DIR | stop DIR | restart DIR | crash DIR (writes DIR/env.sh).
#
#   scripts/postgresql-server.sh start /tmp/pg    # initdb + start on a free loopback port
#   . /tmp/pg/env.sh                              # SQLLOCK_TEST_POSTGRESQL_URL, ..._ADMIN_URL, ...
#   scripts/postgresql-server.sh restart /tmp/pg  # fast restart, same port and data
#   scripts/postgresql-server.sh crash /tmp/pg    # kill -9 of every server process, then start (recovery)
#   scripts/postgresql-server.sh stop /tmp/pg     # stop and remove DIR
#
# The server refuses to run as root, so when run as root the cluster belongs to the system user
# sqllock-test (created if missing) and every server command runs through `runuser`. Missing
# Debian packages (postgresql, libpq-dev) are installed with apt-get, and only when missing.
set -euo pipefail

die() {
  echo "postgresql-server.sh: $*" >&2
  exit 1
}

usage() {
  echo "usage: $0 start|stop|restart|crash DIR" >&2
  exit 64
}

[[ $# -eq 2 ]] || usage
cmd=$1
dir=$2
[[ -n "$dir" && "$dir" != "/" ]] || die "refusing to use '$dir' as the cluster directory"

script_path=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
test_user=sqllock-test
app_user=sqllock
app_password=sqllock-test-pw
admin_user=postgres
admin_password=sqllock-admin-pw
db_name=sqllock


ensure_packages() {
  local missing=()
  find_bindir >/dev/null || missing+=(postgresql)
  if ! { [[ -f /usr/include/postgresql/libpq-fe.h ]] || pkg-config --exists libpq 2>/dev/null; }; then
    missing+=(libpq-dev)
  fi
  [[ ${#missing[@]} -eq 0 ]] && return 0
  command -v apt-get >/dev/null 2>&1 ||
    die "missing ${missing[*]} and apt-get is not available to install them"
  [[ $(id -u) -eq 0 ]] || die "missing ${missing[*]}; run as root or install them"
  echo "postgresql-server.sh: installing ${missing[*]}" >&2
  # The Debian package would start a system cluster; we only want the binaries, so service starts
  # are refused (policy-rc.d exit 101) while installing.
  export DEBIAN_FRONTEND=noninteractive
  local policy=/usr/sbin/policy-rc.d own_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1
  fi
  local ok=1
  apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || ok=0
  [[ $own_policy -eq 1 ]] && rm -f "$policy"
  [[ $ok -eq 1 ]] || die "apt-get install ${missing[*]} failed"
  find_bindir >/dev/null || die "PostgreSQL binaries not found after installing ${missing[*]}"
}

# as_owner, ensure_user, port_free, pick_port
# shellcheck source=lib/server-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/server-common.sh"
# find_bindir, own_server_dir, pg_initdb
# shellcheck source=lib/postgresql-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/postgresql-common.sh"

log_tail() {
  if [[ -f "$dir/postgresql.log" ]]; then
    echo "---- last lines of $dir/postgresql.log ----" >&2
    tail -n 40 "$dir/postgresql.log" >&2 || true
    echo "----" >&2
  fi
}

pg_ctl_start() {
  local bindir=$1
  # Readable by the tests even when they do not run as the cluster owner.
  touch "$dir/postgresql.log"
  [[ $(id -u) -eq 0 ]] && chown "$test_user" "$dir/postgresql.log"
  chmod 0644 "$dir/postgresql.log"
  if ! as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/postgresql.log" -w -t 60 start >/dev/null; then
    log_tail
    die "PostgreSQL did not start (see $dir/postgresql.log)"
  fi
}

psql_admin() {
  local bindir=$1
  shift
  PGPASSWORD=$admin_password "$bindir/psql" -X -q -v ON_ERROR_STOP=1 \
    -h 127.0.0.1 -p "$(cat "$dir/port")" -U "$admin_user" -d postgres "$@"
}

start() {
  ensure_packages
  local bindir
  bindir=$(find_bindir) || die "PostgreSQL server binaries (initdb, pg_ctl) not found"
  [[ -e "$dir/data" ]] && die "$dir/data already exists (stop it first)"
  ensure_user
  own_server_dir

  local port
  port=$(pick_port)
  echo "$port" >"$dir/port"
  pg_initdb "$dir/data"

  cat >>"$dir/data/postgresql.conf" <<EOF

# sqllock test cluster
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 200
shared_buffers = 64MB
fsync = on
synchronous_commit = on
log_destination = 'stderr'
logging_collector = off
log_min_messages = warning
log_min_error_statement = error
log_statement = 'none'
log_line_prefix = '%m [%p] %q%u@%d '
log_connections = off
log_disconnections = off
deadlock_timeout = 100ms
EOF

  pg_ctl_start "$bindir"

  psql_admin "$bindir" <<EOF || { log_tail; die "creating the test database failed"; }
CREATE ROLE "$app_user" LOGIN PASSWORD '$app_password';
CREATE DATABASE "$db_name" OWNER "$app_user";
EOF

  cat >"$dir/env.sh" <<EOF
# Written by $script_path start $dir
export SQLLOCK_TEST_POSTGRESQL_URL='postgresql://$app_user:$app_password@127.0.0.1:$port/$db_name'
export SQLLOCK_TEST_POSTGRESQL_ADMIN_URL='postgresql://$admin_user:$admin_password@127.0.0.1:$port/$db_name'
export SQLLOCK_TEST_POSTGRESQL_LOG='$dir/postgresql.log'
export SQLLOCK_TEST_POSTGRESQL_RESTART='$script_path restart $dir'
export SQLLOCK_TEST_POSTGRESQL_CRASH='$script_path crash $dir'
EOF
  echo "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') running on 127.0.0.1:$port; source $dir/env.sh" >&2
}

stop() {
  if [[ ! -d "$dir" ]]; then
    return 0
  fi
  local bindir
  if [[ -f "$dir/data/postmaster.pid" ]] && bindir=$(find_bindir); then
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -t 60 stop >/dev/null 2>&1 || {
      # Last resort: the postmaster pid from the pid file.
      local pid
      pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || true)
      [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null || true
    }
  fi
  rm -rf "$dir"
}

restart() {
  [[ -d "$dir/data" ]] || die "no cluster in $dir"
  local bindir
  bindir=$(find_bindir) || die "PostgreSQL server binaries not found"
  if ! as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/postgresql.log" -m fast -w -t 60 restart >/dev/null; then
    log_tail
    die "PostgreSQL did not restart (see $dir/postgresql.log)"
  fi
}

# A crash: SIGKILL of the postmaster and every server process (no checkpoint, no flush of what
# the WAL writer has not written yet), then a start that runs crash recovery.
crash() {
  [[ -d "$dir/data" ]] || die "no cluster in $dir"
  local bindir pid
  bindir=$(find_bindir) || die "PostgreSQL server binaries not found"
  pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || true)
  [[ -n "$pid" ]] || die "no postmaster running in $dir"
  kill_postmaster "$pid" || die "postmaster $pid or a child survived kill -9"
  pg_ctl_start "$bindir"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  restart) restart ;;
  crash) crash ;;
  *) usage ;;
esac
