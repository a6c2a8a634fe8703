#!/usr/bin/env bash
# Throwaway PgBouncer (transaction pooling) in front of a running test PostgreSQL:
# start DIR PG_ENV | stop DIR (writes DIR/env.sh).
#
#   scripts/postgresql-server.sh start /tmp/pg
#   scripts/pgbouncer-server.sh start /tmp/pgb /tmp/pg/env.sh   # on a free loopback port
#   . /tmp/pgb/env.sh     # SQLLOCK_TEST_PGBOUNCER_URL (with sqllock's pooler options), ..._PLAIN_URL
#   scripts/pgbouncer-server.sh stop /tmp/pgb                   # stop and remove DIR
#
# The server address, user and password come from SQLLOCK_TEST_POSTGRESQL_URL in PG_ENV (the file
# written by postgresql-server.sh). PgBouncer refuses to run as root, so when run as root it runs
# as the system user sqllock-test (created if missing) through `runuser`, like the PostgreSQL
# cluster. The Debian package pgbouncer is installed with apt-get, and only when missing.
#
# SQLLOCK_PGBOUNCER_POOL_SIZE sets the server connections per user/database (default 4),
# SQLLOCK_PGBOUNCER_POOL_MODE the pool mode (default transaction; session and statement for trying).
set -euo pipefail

die() {
  echo "pgbouncer-server.sh: $*" >&2
  exit 1
}

usage() {
  echo "usage: $0 start DIR PG_ENV | stop DIR" >&2
  exit 64
}

[[ $# -ge 2 ]] || usage
cmd=$1
dir=$2
pg_env=${3:-}
[[ -n "$dir" && "$dir" != "/" ]] || die "refusing to use '$dir' as the pgbouncer directory"

script_path=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
test_user=sqllock-test
pool_size=${SQLLOCK_PGBOUNCER_POOL_SIZE:-4}
[[ "$pool_size" =~ ^[1-9][0-9]*$ ]] || die "SQLLOCK_PGBOUNCER_POOL_SIZE must be a positive number"
pool_mode=${SQLLOCK_PGBOUNCER_POOL_MODE:-transaction}
[[ "$pool_mode" =~ ^(session|transaction|statement)$ ]] ||
  die "SQLLOCK_PGBOUNCER_POOL_MODE must be session, transaction or statement"

find_pgbouncer() {
  local p
  for p in "$(command -v pgbouncer 2>/dev/null || true)" /usr/sbin/pgbouncer /usr/bin/pgbouncer; do
    if [[ -n "$p" && -x "$p" ]]; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

ensure_packages() {
  find_pgbouncer >/dev/null && return 0
  command -v apt-get >/dev/null 2>&1 || die "pgbouncer is missing and apt-get is not available to install it"
  [[ $(id -u) -eq 0 ]] || die "pgbouncer is missing; run as root or install it (scripts/install-deps.sh)"
  echo "pgbouncer-server.sh: installing pgbouncer" >&2
  # The Debian package would start a system pgbouncer; service starts are refused while installing.
  export DEBIAN_FRONTEND=noninteractive
  local policy=/usr/sbin/policy-rc.d own_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1
  fi
  local ok=1
  apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends pgbouncer >&2 || ok=0
  [[ $own_policy -eq 1 ]] && rm -f "$policy"
  [[ $ok -eq 1 ]] || die "apt-get install pgbouncer failed"
  find_pgbouncer >/dev/null || die "pgbouncer not found after installing it"
}

# as_owner, ensure_user, port_free, pick_port
# shellcheck source=lib/server-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/server-common.sh"

# %XX-decoding of one URL component.
url_decode() {
  local s=${1//+/%2B}
  printf '%b' "${s//%/\\x}"
}

# "user:password@host:port/db" parts of a postgresql:// URL into the globals pg_*.
parse_pg_url() {
  local url=$1 rest userinfo hostport
  [[ "$url" =~ ^postgres(ql)?://(.*)$ ]] || die "SQLLOCK_TEST_POSTGRESQL_URL is not a postgresql:// URL"
  rest=${BASH_REMATCH[2]}
  rest=${rest%%\?*}
  [[ "$rest" == *@* ]] || die "SQLLOCK_TEST_POSTGRESQL_URL has no user (user:password@host:port/db expected)"
  userinfo=${rest%@*}
  rest=${rest##*@}
  hostport=${rest%%/*}
  pg_db=$(url_decode "${rest#*/}")
  [[ "$rest" == */* && -n "$pg_db" ]] || die "SQLLOCK_TEST_POSTGRESQL_URL names no database"
  pg_user=$(url_decode "${userinfo%%:*}")
  [[ "$userinfo" == *:* ]] || die "SQLLOCK_TEST_POSTGRESQL_URL has no password"
  pg_password=$(url_decode "${userinfo#*:}")
  pg_host=${hostport%:*}
  pg_port=5432
  [[ "$hostport" == *:* ]] && pg_port=${hostport##*:}
  [[ "$pg_port" =~ ^[0-9]+$ ]] || die "SQLLOCK_TEST_POSTGRESQL_URL has a bad port"
  [[ "$pg_user$pg_password$pg_db$pg_host" != *'"'* ]] || die "double quotes in the PostgreSQL URL are not supported"
}

log_tail() {
  if [[ -f "$dir/pgbouncer.log" ]]; then
    echo "---- last lines of $dir/pgbouncer.log ----" >&2
    tail -n 40 "$dir/pgbouncer.log" >&2 || true
    echo "----" >&2
  fi
}

start() {
  [[ -n "$pg_env" ]] || usage
  [[ -r "$pg_env" ]] || die "cannot read $pg_env (start PostgreSQL with scripts/postgresql-server.sh first)"
  local pg_url
  # shellcheck disable=SC1090
  pg_url=$(source "$pg_env" && echo "${SQLLOCK_TEST_POSTGRESQL_URL:-}")
  [[ -n "$pg_url" ]] || die "$pg_env does not set SQLLOCK_TEST_POSTGRESQL_URL"
  parse_pg_url "$pg_url"

  ensure_packages
  local bin
  bin=$(find_pgbouncer) || die "pgbouncer not found"
  [[ -e "$dir/pgbouncer.ini" ]] && die "$dir/pgbouncer.ini already exists (stop it first)"
  ensure_user
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [[ $(id -u) -eq 0 ]]; then
    chown "$test_user" "$dir"
    chmod 0755 "$dir"
    as_owner test -w "$dir" || die "user $test_user cannot write to $dir (choose a directory under /tmp)"
  fi

  local port
  port=$(pick_port)
  echo "$port" >"$dir/port"

  # The password in plain text: PgBouncer then speaks SCRAM both to the clients and to the server.
  (
    umask 077
    printf '"%s" "%s"\n' "$pg_user" "$pg_password" >"$dir/userlist.txt"
  )
  cat >"$dir/pgbouncer.ini" <<EOF
; Written by $script_path start $dir $pg_env
[databases]
$pg_db = host=$pg_host port=$pg_port dbname=$pg_db

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $dir/userlist.txt
pool_mode = $pool_mode
default_pool_size = $pool_size
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 1000
max_db_connections = $pool_size
server_check_delay = 0
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
log_connections = 0
log_disconnections = 0
admin_users =
EOF
  touch "$dir/pgbouncer.log"
  chmod 0644 "$dir/pgbouncer.ini" "$dir/pgbouncer.log"
  if [[ $(id -u) -eq 0 ]]; then
    chown "$test_user" "$dir/userlist.txt" "$dir/pgbouncer.ini" "$dir/pgbouncer.log" "$dir/port"
  fi

  # Room for max_client_conn clients and the server connections (the soft limit is often 1024).
  if ! as_owner sh -c 'ulimit -n 4096 2>/dev/null; exec "$@"' sh "$bin" -d -q "$dir/pgbouncer.ini" 2>"$dir/start.err"; then
    cat "$dir/start.err" >&2
    log_tail
    die "pgbouncer did not start (see $dir/pgbouncer.log)"
  fi
  rm -f "$dir/start.err"
  local _
  for _ in $(seq 1 100); do
    port_free "$port" || break
    sleep 0.1
  done
  if port_free "$port"; then
    log_tail
    die "pgbouncer is not listening on 127.0.0.1:$port after 10 s"
  fi

  local enc_user enc_password
  enc_user=$(printf '%s' "$pg_url" | sed -E 's|^postgres(ql)?://([^:@]*):.*$|\2|')
  enc_password=$(printf '%s' "$pg_url" | sed -E 's|^postgres(ql)?://[^:@]*:(.*)@[^@]*$|\2|')
  local base="postgresql://$enc_user:$enc_password@127.0.0.1:$port/$pg_db"
  cat >"$dir/env.sh" <<EOF
# Written by $script_path start $dir $pg_env
# PgBouncer $("$bin" --version | awk 'NR==1{print $2}'), pool_mode=$pool_mode, $pool_size server connections, in front of $pg_host:$pg_port
export SQLLOCK_TEST_PGBOUNCER_URL='$base?sqllock_prepared_statements=off&sqllock_notifications=off'
export SQLLOCK_TEST_PGBOUNCER_PLAIN_URL='$base'
export SQLLOCK_TEST_PGBOUNCER_LOG='$dir/pgbouncer.log'
export SQLLOCK_TEST_PGBOUNCER_POOL_SIZE=$pool_size
EOF
  echo "PgBouncer running on 127.0.0.1:$port (pool_mode=$pool_mode, $pool_size server connections to $pg_host:$pg_port); source $dir/env.sh" >&2
}

stop() {
  [[ -d "$dir" ]] || return 0
  local pid
  pid=$(cat "$dir/pgbouncer.pid" 2>/dev/null || true)
  if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true  # immediate shutdown
    local _
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
