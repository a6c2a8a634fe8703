#!/usr/bin/env bash
# Throwaway PostgreSQL primary + streaming standby on loopback, for failover tests (writes DIR/env.sh).
#
#   scripts/postgresql-replica.sh start DIR [sync|async]  # primary DIR/primary, standby DIR/standby
#   . DIR/env.sh          # SQLLOCK_TEST_REPLICA_URL (multi-host, target_session_attrs=read-write), ...
#   scripts/postgresql-replica.sh detach-standby DIR  # the standby stops receiving WAL (until promoted)
#   scripts/postgresql-replica.sh crash-primary DIR   # kill -9 of every primary server process (no restart)
#   scripts/postgresql-replica.sh promote DIR         # the standby becomes the primary (new timeline)
#   scripts/postgresql-replica.sh stop DIR            # stop both and remove DIR
#
# sync: synchronous_standby_names = 'standby', synchronous_commit = remote_apply on the primary, so
# a commit is acknowledged once the standby has applied it. async: no synchronous standby; a commit
# is acknowledged once flushed locally, and a failover can lose it.
#
# Runs the servers as the system user sqllock-test when run as root, like scripts/postgresql-server.sh
# (which must have installed the packages already, or this script installs nothing and fails).
set -euo pipefail

die() {
  echo "postgresql-replica.sh: $*" >&2
  exit 1
}

usage() {
  echo "usage: $0 start DIR [sync|async] | crash-primary DIR | detach-standby DIR | promote DIR | stop DIR" >&2
  exit 64
}

[[ $# -ge 2 && $# -le 3 ]] || usage
cmd=$1
dir=$2
mode=${3:-sync}
[[ -n "$dir" && "$dir" != "/" ]] || die "refusing to use '$dir' as the directory"
[[ "$mode" == sync || "$mode" == async ]] || usage

script_path=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
test_user=sqllock-test
app_user=sqllock
app_password=sqllock-test-pw
admin_user=postgres
admin_password=sqllock-admin-pw
repl_user=replicator
repl_password=sqllock-repl-pw
db_name=sqllock

# as_owner, ensure_user, port_free, pick_port
# shellcheck source=lib/server-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/server-common.sh"
# find_bindir, own_server_dir, pg_initdb
# shellcheck source=lib/postgresql-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/postgresql-common.sh"


log_tail() {
  local f
  for f in "$dir"/primary.log "$dir"/standby.log; do
    [[ -f "$f" ]] || continue
    echo "---- last lines of $f ----" >&2
    tail -n 30 "$f" >&2 || true
  done
}

pg_ctl_start() {  # pg_ctl_start NODE
  local node=$1
  touch "$dir/$node.log"
  [[ $(id -u) -eq 0 ]] && chown "$test_user" "$dir/$node.log"
  chmod 0644 "$dir/$node.log"
  if ! as_owner "$bindir/pg_ctl" -D "$dir/$node" -l "$dir/$node.log" -w -t 60 start >/dev/null; then
    log_tail
    die "PostgreSQL ($node) did not start (see $dir/$node.log)"
  fi
}

psql_admin() {  # psql_admin PORT [psql args...]
  local port=$1
  shift
  PGPASSWORD=$admin_password "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" \
    -U "$admin_user" -d postgres "$@"
}

start() {
  bindir=$(find_bindir) || die "PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup) not found; run scripts/postgresql-server.sh or scripts/install-deps.sh first"
  [[ -e "$dir/primary" || -e "$dir/standby" ]] && die "$dir already has a cluster (stop it first)"
  ensure_user
  own_server_dir
  local p1 p2
  p1=$(pick_port)
  p2=$(pick_port)
  [[ "$p1" != "$p2" ]] || p2=$(pick_port)
  echo "$p1" >"$dir/primary.port"
  echo "$p2" >"$dir/standby.port"
  echo "$mode" >"$dir/mode"
  pg_initdb "$dir/primary"

  # synchronous_standby_names is set once the standby streams (before, every commit would wait).
  local sync_commit=on
  [[ "$mode" == sync ]] && sync_commit=remote_apply
  cat >>"$dir/primary/postgresql.conf" <<EOF

# sqllock replication test cluster (primary; the standby copies this file and overrides the port)
listen_addresses = '127.0.0.1'
port = $p1
unix_socket_directories = '$dir'
max_connections = 100
shared_buffers = 32MB
fsync = on
wal_level = replica
max_wal_senders = 4
wal_keep_size = 64MB
hot_standby = on
synchronous_commit = $sync_commit
log_min_messages = warning
log_line_prefix = '%m [%p] %q%u@%d '
deadlock_timeout = 100ms
EOF
  echo "host replication $repl_user 127.0.0.1/32 scram-sha-256" >>"$dir/primary/pg_hba.conf"
  pg_ctl_start primary
  psql_admin "$p1" <<EOF || { log_tail; die "creating the roles and database failed"; }
CREATE ROLE "$app_user" LOGIN PASSWORD '$app_password';
CREATE ROLE "$repl_user" LOGIN REPLICATION PASSWORD '$repl_password';
CREATE DATABASE "$db_name" OWNER "$app_user";
EOF

  # The standby: a base backup with standby.signal and primary_conninfo (-R), named 'standby'.
  if ! PGPASSWORD=$repl_password as_owner env PGPASSWORD=$repl_password "$bindir/pg_basebackup" \
    -h 127.0.0.1 -p "$p1" -U "$repl_user" -D "$dir/standby" -R -X stream -c fast \
    >"$dir/basebackup.log" 2>&1; then
    cat "$dir/basebackup.log" >&2
    die "pg_basebackup failed"
  fi
  echo "port = $p2" >>"$dir/standby/postgresql.conf"
  # After the primary_conninfo that -R wrote, so this one (with the standby's name) wins.
  echo "primary_conninfo = 'host=127.0.0.1 port=$p1 user=$repl_user password=$repl_password application_name=standby'" \
    >>"$dir/standby/postgresql.auto.conf"
  pg_ctl_start standby
  # Wait until the primary sees the standby streaming (and, for sync, as its synchronous standby).
  local i state=""
  for i in $(seq 1 300); do
    state=$(psql_admin "$p1" -At -c "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'" || true)
    [[ -n "$state" ]] && break
    sleep 0.1
  done
  [[ -n "$state" ]] || { log_tail; die "the standby did not connect to the primary"; }
  if [[ "$mode" == sync ]]; then
    psql_admin "$p1" -c "ALTER SYSTEM SET synchronous_standby_names = 'standby'" -c "SELECT pg_reload_conf()" >/dev/null
    for i in $(seq 1 100); do
      state=$(psql_admin "$p1" -At -c "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'" || true)
      [[ "$state" == sync ]] && break
      sleep 0.1
    done
    [[ "$state" == sync ]] || { log_tail; die "the standby did not become synchronous"; }
  fi

  cat >"$dir/env.sh" <<EOF
# Written by $script_path start $dir $mode
export SQLLOCK_TEST_REPLICA_URL='postgresql://$app_user:$app_password@127.0.0.1:$p1,127.0.0.1:$p2/$db_name?target_session_attrs=read-write&connect_timeout=2'
export SQLLOCK_TEST_REPLICA_ADMIN_URL='postgresql://$admin_user:$admin_password@127.0.0.1:$p1,127.0.0.1:$p2/$db_name?target_session_attrs=read-write&connect_timeout=2'
export SQLLOCK_TEST_REPLICA_PRIMARY_ADMIN_URL='postgresql://$admin_user:$admin_password@127.0.0.1:$p1/$db_name'
export SQLLOCK_TEST_REPLICA_STANDBY_ADMIN_URL='postgresql://$admin_user:$admin_password@127.0.0.1:$p2/$db_name'
export SQLLOCK_TEST_REPLICA_MODE='$mode'
export SQLLOCK_TEST_REPLICA_CRASH_PRIMARY='$script_path crash-primary $dir'
export SQLLOCK_TEST_REPLICA_DETACH_STANDBY='$script_path detach-standby $dir'
export SQLLOCK_TEST_REPLICA_PROMOTE='$script_path promote $dir'
EOF
  echo "PostgreSQL primary on 127.0.0.1:$p1, $state standby on 127.0.0.1:$p2; source $dir/env.sh" >&2
}

crash_primary() {
  [[ -d "$dir/primary" ]] || die "no primary in $dir"
  local pid
  pid=$(head -n 1 "$dir/primary/postmaster.pid" 2>/dev/null || true)
  [[ -n "$pid" ]] || die "no primary postmaster running in $dir"
  kill_postmaster "$pid" || die "primary postmaster $pid or a child survived kill -9"
  # Its shared memory and socket are gone with it; the data directory stays for a look afterwards.
}

# The standby's walreceiver stops (primary_conninfo emptied, reloaded): what the primary commits
# from now on never reaches it, like a standby lagging behind at the moment of a crash. (Pausing
# replay is not enough: promotion replays everything already received.)
detach_standby() {
  [[ -d "$dir/standby" ]] || die "no standby in $dir"
  bindir=$(find_bindir) || die "PostgreSQL binaries not found"
  psql_admin "$(cat "$dir/standby.port")" -c "ALTER SYSTEM SET primary_conninfo = ''" -c "SELECT pg_reload_conf()" >/dev/null
  local i n=1
  for i in $(seq 1 200); do
    n=$(psql_admin "$(cat "$dir/primary.port")" -At -c "SELECT count(*) FROM pg_stat_replication" || echo 1)
    [[ "$n" == 0 ]] && return 0
    sleep 0.05
  done
  die "the standby still streams from the primary"
}

promote() {
  [[ -d "$dir/standby" ]] || die "no standby in $dir"
  bindir=$(find_bindir) || die "PostgreSQL binaries not found"
  if ! as_owner "$bindir/pg_ctl" -D "$dir/standby" -w -t 60 promote >/dev/null; then
    log_tail
    die "promotion failed"
  fi
}

stop() {
  [[ -d "$dir" ]] || return 0
  local node pid
  bindir=$(find_bindir) || bindir=""
  for node in standby primary; do
    [[ -f "$dir/$node/postmaster.pid" ]] || continue
    if [[ -n "$bindir" ]] && as_owner "$bindir/pg_ctl" -D "$dir/$node" -m immediate -w -t 60 stop >/dev/null 2>&1; then
      continue
    fi
    pid=$(head -n 1 "$dir/$node/postmaster.pid" 2>/dev/null || true)
    [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}

case "$cmd" in
  start) start ;;
  crash-primary) crash_primary ;;
  detach-standby) detach_standby ;;
  promote) promote ;;
  stop) stop ;;
  *) usage ;;
esac
