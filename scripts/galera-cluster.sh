#!/usr/bin/env bash
# Throwaway 3-node MariaDB Galera cluster on loopback, for tests and benchmarks (writes DIR/env.sh).
#
#   start DIR         install what is missing (mariadb-server, galera-4, rsync for the state
#                     transfer), initialise node 1 in DIR/n1 and bootstrap the cluster with it
#                     (--wsrep-new-cluster), create the test database and users, join nodes 2 and 3
#                     (DIR/n2, DIR/n3: full state transfer by rsync), wait until all 3 are Synced
#   kill-node DIR N   kill -9 of node N (nothing else: the other two keep the quorum)
#   start-node DIR N  start node N again; it rejoins (incremental state transfer from the others'
#                     gcache) and is waited for until Synced with a cluster of 3
#   stop DIR          stop every node and remove DIR
#
# Each node listens on 127.0.0.1 with its own SQL, group-communication (gcomm), IST and SST port.
# The nodes keep MariaDB's defaults for durability except innodb_flush_log_at_trx_commit = 1, which
# sqllock requires (see docs/mysql.md "Galera").
#
# DIR/env.sh exports:
#   SQLLOCK_TEST_GALERA_URL1..3         mysql://sqllock:...@127.0.0.1:PORT/sqllock_test, one per node
#   SQLLOCK_TEST_GALERA_ADMIN_URL1..3   an account with every privilege, one per node
#   SQLLOCK_TEST_GALERA_KILL            a command: kill -9 of node N ("$SQLLOCK_TEST_GALERA_KILL 2")
#   SQLLOCK_TEST_GALERA_START           a command: start node N again and wait until it is Synced
set -euo pipefail

die() { echo "galera-cluster.sh: $*" >&2; exit 1; }
usage() { die "usage: $0 start DIR | stop DIR | kill-node DIR N | start-node DIR N"; }

[[ $# -ge 2 && $# -le 3 ]] || usage
cmd=$1
dir=$2
node=${3:-}
[[ -n "$dir" && "$dir" != "/" ]] || usage

script_path=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
# shellcheck source=lib/mariadb-common.sh
source "$(dirname "$script_path")/lib/mariadb-common.sh"
# shellcheck source=lib/server-common.sh
source "$(dirname "$script_path")/lib/server-common.sh"

test_db=sqllock_test
test_user=sqllock
test_password=sqllock_test_pw
admin_user=sqllock_admin
admin_password=sqllock_admin_pw
marker=.sqllock-galera
provider=/usr/lib/galera/libgalera_smm.so

# The nodes run as the mysql system user when we are root: the joiner's rsync daemon (state
# transfer) run as root would switch to user nobody, who cannot write the data directory.
node_user() {
  if [[ $(id -u) -eq 0 ]]; then echo mysql; else id -un; fi
}

ndir() { echo "$dir/n$1"; }
root_sql() {  # root_sql N args...
  local n=$1
  shift
  "$(client_bin)" --no-defaults --protocol=socket --socket="$(ndir "$n")/mysqld.sock" -uroot "$@"
}
node_pid() {
  local f
  f="$(ndir "$1")/mariadbd.pid"
  [[ -f "$f" ]] || f="$(ndir "$1")/launcher.pid"
  [[ -f "$f" ]] || return 1
  local pid
  pid=$(cat "$f" 2>/dev/null) || return 1
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}
# is_node N PID: PID runs node N (its command line names the node's directory). A stale pid file
# (a node killed and never restarted) may name a pid since reused by another process; stop
# signals only the node itself.
is_node() {
  local cmdline
  cmdline=$(tr '\0' ' ' <"/proc/$2/cmdline" 2>/dev/null) || return 1
  [[ "$cmdline" == *"$(ndir "$1")/"* ]]
}
port_of() { sed -n "${2}p" "$(ndir "$1")/ports"; }  # port_of N K: K=1 sql, 2 gcomm, 3 ist, 4 sst

log_tail() {
  echo "---- last lines of $(ndir "$1")/error.log ----" >&2
  tail -n 40 "$(ndir "$1")/error.log" >&2 2>/dev/null || echo "(no error log)" >&2
}

# launch N [--wsrep-new-cluster]: start node N's mariadbd in the background.
launch() {
  local n=$1 d members=() k
  shift
  d=$(ndir "$n")
  for k in 1 2 3; do members+=("127.0.0.1:$(port_of "$k" 2)"); done
  mkdir -p "$d/tmp" "$d/data"
  : >>"$d/error.log"
  chown -R "$(node_user)" "$d"
  # --no-defaults: nothing from /etc/mysql; every setting is here. Galera needs the row-based
  # binary log format and interleaved auto-increment locks; the binary log itself stays off.
  "$(find_mariadbd)" --no-defaults --user="$(node_user)" \
    --datadir="$d/data" --socket="$d/mysqld.sock" --pid-file="$d/mariadbd.pid" \
    --log-error="$d/error.log" --port="$(port_of "$n" 1)" --bind-address=127.0.0.1 --skip-name-resolve \
    --default-time-zone=+00:00 --character-set-server=utf8mb4 --collation-server=utf8mb4_bin \
    --innodb-buffer-pool-size=48M --max-connections=400 --skip-log-bin --tmpdir="$d/tmp" \
    --innodb-flush-log-at-trx-commit=1 --binlog-format=ROW --innodb-autoinc-lock-mode=2 \
    --wsrep-on=ON --wsrep-provider="$provider" --wsrep-cluster-name=sqllock_test \
    --wsrep-cluster-address="gcomm://$(IFS=,; echo "${members[*]}")" \
    --wsrep-node-name="n$n" --wsrep-node-address="127.0.0.1:$(port_of "$n" 2)" \
    --wsrep-provider-options="gmcast.listen_addr=tcp://127.0.0.1:$(port_of "$n" 2);ist.recv_addr=127.0.0.1:$(port_of "$n" 3);gcache.size=64M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S;evs.install_timeout=PT6S" \
    --wsrep-sst-method=rsync --wsrep-sst-receive-address="127.0.0.1:$(port_of "$n" 4)" \
    --wsrep-slave-threads=2 "$@" </dev/null >>"$d/error.log" 2>&1 &
  echo $! >"$d/launcher.pid"
}

# wait_synced N: node N answers, is Synced and sees a cluster of 3 (60 s at most).
wait_synced() {
  local n=$1 i out
  for i in $(seq 1 600); do
    if ! node_pid "$n" >/dev/null; then
      log_tail "$n"
      die "node $n exited during start"
    fi
    out=$(root_sql "$n" -N -B -e "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ('wsrep_local_state_comment','wsrep_cluster_size') ORDER BY VARIABLE_NAME" 2>/dev/null | tr '\n' ' ' || true)
    [[ "$out" == "3 Synced " ]] && return 0
    sleep 0.1
  done
  log_tail "$n"
  die "node $n did not reach Synced in a cluster of 3 within 60 s (last: $out)"
}

# wait_answers N: node N accepts SQL (bootstrapping node: a cluster of 1 is enough).
wait_answers() {
  local n=$1 i
  for i in $(seq 1 600); do
    node_pid "$n" >/dev/null || { log_tail "$n"; die "node $n exited during start"; }
    root_sql "$n" -N -B -e "SELECT 1" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  log_tail "$n"
  die "node $n did not accept connections within 60 s"
}

write_env() {
  local k
  {
    echo "# Written by scripts/galera-cluster.sh for the throwaway cluster in $dir."
    for k in 1 2 3; do
      echo "export SQLLOCK_TEST_GALERA_URL$k='mysql://$test_user:$test_password@127.0.0.1:$(port_of "$k" 1)/$test_db'"
      echo "export SQLLOCK_TEST_GALERA_ADMIN_URL$k='mysql://$admin_user:$admin_password@127.0.0.1:$(port_of "$k" 1)/$test_db'"
    done
    echo "export SQLLOCK_TEST_GALERA_KILL='$script_path kill-node $dir'"
    echo "export SQLLOCK_TEST_GALERA_START='$script_path start-node $dir'"
  } >"$dir/env.sh"
}

start() {
  install_missing galera-4 rsync
  [[ -f "$provider" ]] || die "$provider not found (package galera-4)"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [[ -z "$(ls -A "$dir" 2>/dev/null)" ]] || die "$dir is not empty (use stop first)"
  touch "$dir/$marker"
  local n used=() p k
  for n in 1 2 3; do
    mkdir -p "$(ndir "$n")"
    for k in 1 2 3 4; do
      while :; do
        p=$(pick_port)
        [[ " ${used[*]} " == *" $p "* ]] || break
      done
      used+=("$p")
      echo "$p" >>"$(ndir "$n")/ports"
    done
  done
  local install_db
  install_db=$(command -v mariadb-install-db || command -v mysql_install_db)
  if ! "$install_db" --no-defaults --user="$(node_user)" --datadir="$(ndir 1)/data" \
      --auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1; then
    tail -n 40 "$dir/install.log" >&2
    die "mariadb-install-db failed"
  fi
  launch 1 --wsrep-new-cluster
  wait_answers 1
  test_accounts_sql | root_sql 1 || { log_tail 1; die "creating the test database and users failed"; }
  # The joiners get everything (users, database) by a full state transfer from node 1.
  launch 2
  launch 3
  for n in 1 2 3; do wait_synced "$n"; done
  write_env
  echo "galera-cluster.sh: 3 nodes Synced on 127.0.0.1:$(port_of 1 1),$(port_of 2 1),$(port_of 3 1); source $dir/env.sh" >&2
}

check_dir() {
  [[ -d "$dir" ]] || die "$dir does not exist"
  dir=$(cd "$dir" && pwd)
  [[ -f "$dir/$marker" ]] || die "$dir was not created by this script; not touching it"
}

check_node() { [[ "$node" == 1 || "$node" == 2 || "$node" == 3 ]] || usage; }

kill_node() {
  check_dir
  check_node
  local pid i
  pid=$(node_pid "$node") || die "node $node is not running"
  kill -KILL "$pid"
  for i in $(seq 1 100); do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$(ndir "$node")/mariadbd.pid" "$(ndir "$node")/launcher.pid"
      return 0
    fi
    sleep 0.05
  done
  die "node $node ($pid) survived kill -9"
}

start_node() {
  check_dir
  check_node
  ! node_pid "$node" >/dev/null || die "node $node is running already"
  rm -f "$(ndir "$node")/mariadbd.pid" "$(ndir "$node")/mysqld.sock"
  launch "$node"
  wait_synced "$node"
}

stop() {
  [[ -d "$dir" ]] || return 0
  dir=$(cd "$dir" && pwd)
  [[ -f "$dir/$marker" ]] || die "$dir was not created by this script; not touching it"
  local n pid i
  for n in 3 2 1; do
    pid=$(node_pid "$n") || continue
    is_node "$n" "$pid" || continue
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 300); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf -- "$dir"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  kill-node) kill_node ;;
  start-node) start_node ;;
  *) usage ;;
esac
