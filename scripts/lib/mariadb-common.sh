# Shell functions shared by the MariaDB throwaway-server scripts (mariadb-server.sh,
# galera-cluster.sh): finding and installing the server, the user it runs as (sourced; needs die()).
# shellcheck shell=bash

find_mariadbd() {
  local p
  for p in "$(command -v mariadbd 2>/dev/null || true)" /usr/sbin/mariadbd /usr/sbin/mysqld \
           /usr/libexec/mariadbd; do
    if [[ -n "$p" && -x "$p" ]]; then echo "$p"; return 0; fi
  done
  return 1
}

client_bin() {
  command -v mariadb 2>/dev/null || command -v mysql 2>/dev/null || return 1
}

# install_missing [EXTRA_PACKAGE...]: apt-get install what is missing of the server, the client,
# the connector and the extra packages (e.g. galera-4 rsync).
install_missing() {
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  find_mariadbd >/dev/null || missing+=(mariadb-server)
  command -v mariadb-install-db >/dev/null 2>&1 || command -v mysql_install_db >/dev/null 2>&1 ||
    missing+=(mariadb-server)
  client_bin >/dev/null || missing+=(mariadb-client)
  if ! dpkg -s libmysqlcppconn-dev >/dev/null 2>&1; then missing+=(libmysqlcppconn-dev); fi
  if [[ ${#missing[@]} -gt 0 ]]; then
    command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get to install them"
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    echo "$(basename "$0"): installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq >&2 || true
    # Debian's postinst would try to start a system service; policy-rc.d 101 forbids that.
    local policy=/usr/sbin/policy-rc.d created_policy=0
    if [[ ! -e $policy && $(id -u) -eq 0 ]]; then
      printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
    fi
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || {
      [[ $created_policy -eq 1 ]] && rm -f "$policy"
      die "apt-get install ${missing[*]} failed"
    }
    [[ $created_policy -eq 1 ]] && rm -f "$policy"
  fi
  find_mariadbd >/dev/null || die "mariadbd not found after installing mariadb-server"
}

run_user() {
  if [[ $(id -u) -eq 0 ]]; then echo root; else id -un; fi
}


# The SQL that creates the test database, the test user (its privileges on that database only)
# and the admin user (every privilege); needs $test_db, $test_user, $test_password, $admin_user,
# $admin_password.
test_accounts_sql() {
  cat <<EOF
DROP USER IF EXISTS ''@'localhost';
DROP USER IF EXISTS ''@'$(hostname)';
CREATE DATABASE IF NOT EXISTS \`$test_db\`;
CREATE USER IF NOT EXISTS '$test_user'@'%' IDENTIFIED BY '$test_password';
CREATE USER IF NOT EXISTS '$test_user'@'localhost' IDENTIFIED BY '$test_password';
GRANT ALL PRIVILEGES ON \`$test_db\`.* TO '$test_user'@'%';
GRANT ALL PRIVILEGES ON \`$test_db\`.* TO '$test_user'@'localhost';
CREATE USER IF NOT EXISTS '$admin_user'@'%' IDENTIFIED BY '$admin_password';
GRANT ALL PRIVILEGES ON *.* TO '$admin_user'@'%' WITH GRANT OPTION;
FLUSH PRIVILEGES;
EOF
}
