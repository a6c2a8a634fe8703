#!/usr/bin/env bash
# Throwaway MariaDB server for tests and CI: start DIR | stop DIR | restart DIR (writes DIR/env.sh).
#
#   start DIR    install what is missing (Debian mariadb-server, libmysqlcppconn-dev), initialise a
#                data directory in DIR, start mariadbd on a free loopback port with its own socket,
#                pid file and error log in DIR, create the test database and users, write DIR/env.sh
#   restart DIR  stop the server of DIR (clean shutdown) and start it again on the same port, data kept
#   crash DIR    kill -9 the server of DIR and start it again (InnoDB crash recovery), same port and data
#   stop DIR     stop the server of DIR and remove DIR
#
# DIR/env.sh exports:
#   SQLLOCK_TEST_MYSQL_URL          mysql://sqllock:...@127.0.0.1:PORT/sqllock_test
#   SQLLOCK_TEST_MYSQL_ADMIN_URL    an account with every privilege (KILL of any connection)
#   SQLLOCK_TEST_MYSQL_SOCKET       the server's unix socket (root without password through it)
#   SQLLOCK_TEST_MYSQL_RESTART      a command that restarts this server
#   SQLLOCK_TEST_MYSQL_CRASH        a command that kills the server (kill -9) and starts it again
#   SQLLOCK_TEST_MYSQL_SSL_CA       the CA that signed the server's certificate (the server offers TLS
#                                   with a certificate for 127.0.0.1 and localhost, made with openssl
#                                   at start; plain connections stay allowed)
#   SQLLOCK_TEST_MYSQL_SSL_CERT     a client certificate signed by that CA, and its key in
#   SQLLOCK_TEST_MYSQL_SSL_KEY
#   SQLLOCK_TEST_MYSQL_X509_URL     an account that must present such a certificate (REQUIRE X509)
set -euo pipefail

die() { echo "mariadb-server.sh: $*" >&2; exit 1; }

usage() { die "usage: $0 start|stop|restart|crash DIR"; }

[[ $# -eq 2 ]] || usage
cmd=$1
dir=$2
[[ -n "$dir" ]] || usage
mkdir_dir() { mkdir -p "$dir" && dir=$(cd "$dir" && pwd); }

script_path=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
# shellcheck source=lib/mariadb-common.sh
source "$(dirname "$script_path")/lib/mariadb-common.sh"
# shellcheck source=lib/server-common.sh
source "$(dirname "$script_path")/lib/server-common.sh"  # pick_port

test_db=sqllock_test
test_user=sqllock
test_password=sqllock_test_pw
admin_user=sqllock_admin
admin_password=sqllock_admin_pw
x509_user=sqllock_x509
x509_password=sqllock_x509_pw
marker=.sqllock-mariadb

server_pid() {
  [[ -f "$dir/mariadbd.pid" ]] || return 1
  local pid
  pid=$(cat "$dir/mariadbd.pid" 2>/dev/null) || return 1
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

log_tail() {
  echo "---- last lines of $dir/error.log ----" >&2
  tail -n 40 "$dir/error.log" >&2 2>/dev/null || echo "(no error log)" >&2
  echo "--------------------------------------" >&2
}

# make_certificates: a throwaway CA, a server certificate for 127.0.0.1/localhost and a client
# certificate, all in $dir/tls (openssl; readable only by the user the server runs as).
make_certificates() {
  local t="$dir/tls"
  mkdir -p "$t" && chmod 700 "$t"
  {
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=sqllock test CA" \
      -keyout "$t/ca-key.pem" -out "$t/ca.pem"
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$t/server-key.pem" -out "$t/server.csr"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$t/server.ext"
    openssl x509 -req -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca-key.pem" -CAcreateserial \
      -days 30 -extfile "$t/server.ext" -out "$t/server.pem"
    openssl req -newkey rsa:2048 -nodes -subj "/CN=sqllock test client" -keyout "$t/client-key.pem" \
      -out "$t/client.csr"
    openssl x509 -req -in "$t/client.csr" -CA "$t/ca.pem" -CAkey "$t/ca-key.pem" -CAcreateserial \
      -days 30 -out "$t/client.pem"
  } >"$t/openssl.log" 2>&1 || { cat "$t/openssl.log" >&2; die "making the test certificates failed"; }
}

# An account of the test database that can only log in over TLS with a client certificate.
x509_account_sql() {
  cat <<EOF
CREATE USER IF NOT EXISTS '$x509_user'@'%' IDENTIFIED BY '$x509_password' REQUIRE X509;
GRANT ALL PRIVILEGES ON \`$test_db\`.* TO '$x509_user'@'%';
FLUSH PRIVILEGES;
EOF
}

root_sql() {
  "$(client_bin)" --no-defaults --protocol=socket --socket="$dir/mysqld.sock" -uroot "$@"
}

launch() {
  local port=$1 mariadbd
  mariadbd=$(find_mariadbd)
  : >>"$dir/error.log"
  # --no-defaults: nothing from /etc/mysql; every setting is here.
  "$mariadbd" --no-defaults --user="$(run_user)" \
    --datadir="$dir/data" --socket="$dir/mysqld.sock" --pid-file="$dir/mariadbd.pid" \
    --log-error="$dir/error.log" --port="$port" --bind-address=127.0.0.1 --skip-name-resolve \
    --default-time-zone=+00:00 --character-set-server=utf8mb4 --collation-server=utf8mb4_bin \
    --innodb-buffer-pool-size=64M --max-connections=400 --skip-log-bin \
    --ssl-ca="$dir/tls/ca.pem" --ssl-cert="$dir/tls/server.pem" --ssl-key="$dir/tls/server-key.pem" \
    --tmpdir="$dir/tmp" </dev/null >>"$dir/error.log" 2>&1 &
  local pid=$! i
  echo "$pid" >"$dir/launcher.pid"
  for i in $(seq 1 300); do
    if ! kill -0 "$pid" 2>/dev/null; then
      log_tail
      die "mariadbd exited during start (port $port)"
    fi
    if root_sql -e 'SELECT 1' >/dev/null 2>&1; then
      echo "$port" >"$dir/port"
      return 0
    fi
    sleep 0.1
  done
  kill -TERM "$pid" 2>/dev/null || true
  log_tail
  die "mariadbd did not accept connections within 30 s"
}

shutdown_server() {
  local pid i
  pid=$(server_pid) || pid=$(cat "$dir/launcher.pid" 2>/dev/null || true)
  [[ -n "${pid:-}" ]] || return 0
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  echo "mariadb-server.sh: mariadbd $pid ignored SIGTERM for 30 s; killing it" >&2
  kill -KILL "$pid" 2>/dev/null || true
  sleep 0.5
}

write_env() {
  local port=$1
  cat >"$dir/env.sh" <<EOF
# Written by scripts/mariadb-server.sh for the throwaway server in $dir.
export SQLLOCK_TEST_MYSQL_URL='mysql://$test_user:$test_password@127.0.0.1:$port/$test_db'
export SQLLOCK_TEST_MYSQL_ADMIN_URL='mysql://$admin_user:$admin_password@127.0.0.1:$port/$test_db'
export SQLLOCK_TEST_MYSQL_SOCKET='$dir/mysqld.sock'
export SQLLOCK_TEST_MYSQL_RESTART='$script_path restart $dir'
export SQLLOCK_TEST_MYSQL_CRASH='$script_path crash $dir'
export SQLLOCK_TEST_MYSQL_SSL_CA='$dir/tls/ca.pem'
export SQLLOCK_TEST_MYSQL_SSL_CERT='$dir/tls/client.pem'
export SQLLOCK_TEST_MYSQL_SSL_KEY='$dir/tls/client-key.pem'
export SQLLOCK_TEST_MYSQL_X509_URL='mysql://$x509_user:$x509_password@127.0.0.1:$port/$test_db'
EOF
}

start() {
  install_missing openssl
  mkdir_dir
  if server_pid >/dev/null; then
    die "a server is already running in $dir (use restart or stop)"
  fi
  if [[ -d "$dir/data" && -f "$dir/port" ]]; then
    # Initialised before (e.g. after a crash): start it again with its data.
    mkdir -p "$dir/tmp"
    launch "$(cat "$dir/port")"
  else
    [[ -z "$(ls -A "$dir" 2>/dev/null)" ]] || die "$dir is not empty and holds no server of ours"
    touch "$dir/$marker"
    mkdir -p "$dir/data" "$dir/tmp"
    make_certificates
    local install_db
    install_db=$(command -v mariadb-install-db || command -v mysql_install_db)
    if ! "$install_db" --no-defaults --user="$(run_user)" --datadir="$dir/data" \
        --auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1; then
      tail -n 40 "$dir/install.log" >&2
      die "mariadb-install-db failed"
    fi
    local attempt port
    for attempt in 1 2 3; do
      port=$(pick_port)
      if (launch "$port"); then break; fi
      [[ $attempt -lt 3 ]] || die "could not start mariadbd"
      echo "mariadb-server.sh: retrying on another port" >&2
    done
    { test_accounts_sql; x509_account_sql; } | root_sql || { log_tail; die "creating the test database and users failed"; }
  fi
  write_env "$(cat "$dir/port")"
  echo "mariadb-server.sh: MariaDB running on 127.0.0.1:$(cat "$dir/port"); source $dir/env.sh" >&2
}

stop() {
  [[ -d "$dir" ]] || return 0
  dir=$(cd "$dir" && pwd)
  [[ -f "$dir/$marker" ]] || die "$dir was not created by this script; not touching it"
  shutdown_server
  rm -rf -- "$dir"
}

restart() {
  [[ -d "$dir" ]] || die "$dir does not exist"
  dir=$(cd "$dir" && pwd)
  [[ -f "$dir/$marker" && -f "$dir/port" ]] || die "$dir holds no server of ours"
  shutdown_server
  mkdir -p "$dir/tmp"
  launch "$(cat "$dir/port")"
}

# A crash: SIGKILL of mariadbd (nothing flushed that was not yet), then a start that runs InnoDB
# crash recovery, same port and data.
crash() {
  [[ -d "$dir" ]] || die "$dir does not exist"
  dir=$(cd "$dir" && pwd)
  [[ -f "$dir/$marker" && -f "$dir/port" ]] || die "$dir holds no server of ours"
  local pid i
  pid=$(server_pid) || pid=$(cat "$dir/launcher.pid" 2>/dev/null || true)
  if [[ -n "${pid:-}" ]]; then
    kill -KILL "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
  fi
  mkdir -p "$dir/tmp"
  launch "$(cat "$dir/port")"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  restart) restart ;;
  crash) crash ;;
  *) usage ;;
esac
