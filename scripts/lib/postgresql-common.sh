# Shell functions shared by the PostgreSQL server scripts (sourced after server-common.sh; needs
# $test_user, $admin_user, $admin_password and die()).
# shellcheck shell=bash

# The directory of the server binaries (initdb, pg_ctl, pg_basebackup): pg_config's, else the
# newest /usr/lib/postgresql/*/bin, else /usr/local/pgsql/bin or /usr/bin. Fails when none has them.
find_bindir() {
  local d candidates=()
  if command -v pg_config >/dev/null 2>&1; then
    candidates+=("$(pg_config --bindir 2>/dev/null || true)")
  fi
  # shellcheck disable=SC2207
  candidates+=($(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r) /usr/local/pgsql/bin /usr/bin)
  for d in "${candidates[@]}"; do
    if [[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" && -x "$d/pg_basebackup" ]]; then
      echo "$d"
      return 0
    fi
  done
  return 1
}

# own_server_dir: create $dir, make it absolute, and (as root) give it to the test user, readable
# by everyone (the tests read its env.sh and logs); dies when the test user cannot write there.
own_server_dir() {
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [[ $(id -u) -eq 0 ]]; then
    chown "$test_user" "$dir"
    chmod 0755 "$dir"
    as_owner test -w "$dir" || die "user $test_user cannot write to $dir (choose a directory under /tmp)"
  fi
}

# pg_initdb DATA: a new cluster in DATA owned by the test user, with the admin role's password
# (scram-sha-256 for local and host connections); the password file is removed at once.
pg_initdb() {
  local data=$1 pwfile=$dir/.pwfile
  echo "$admin_password" >"$pwfile"
  [[ $(id -u) -eq 0 ]] && chown "$test_user" "$pwfile"
  chmod 0600 "$pwfile"
  if ! as_owner "$bindir/initdb" -D "$data" -U "$admin_user" --pwfile="$pwfile" \
    --auth-local=scram-sha-256 --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 \
    >"$dir/initdb.log" 2>&1; then
    rm -f "$pwfile"
    cat "$dir/initdb.log" >&2
    die "initdb failed"
  fi
  rm -f "$pwfile"
}
