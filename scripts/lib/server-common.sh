# Shell functions shared by the throwaway-server scripts (sourced; needs $test_user and die()).
# shellcheck shell=bash

# Run a command as the owner of DIR (the test user when we are root, ourselves otherwise).
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u "$test_user" -- "$@"
  else
    "$@"
  fi
}

ensure_user() {
  [[ $(id -u) -eq 0 ]] || return 0
  if ! id -u "$test_user" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$test_user" ||
      die "cannot create system user $test_user"
  fi
}

port_free() {
  local p=$1
  if command -v ss >/dev/null 2>&1; then
    [[ -z $(ss -ltnH "sport = :$p" 2>/dev/null) ]]
  else
    ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null
  fi
}

pick_port() {
  local p _
  for _ in $(seq 1 200); do
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    if port_free "$p"; then
      echo "$p"
      return 0
    fi
  done
  die "no free loopback port found"
}

