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

# port_free P: nothing on this machine uses TCP port P, neither a listener nor either end of a
# connection (a client's local port blocks a later bind to it just the same).
port_free() {
  local p=$1
  if command -v ss >/dev/null 2>&1; then
    [[ -z $(ss -tanH "( sport = :$p or dport = :$p )" 2>/dev/null) ]]
  else
    ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null
  fi
}

# port_range: the range our servers' ports are drawn from, "LOW HIGH", kept outside the kernel's
# ephemeral range (net.ipv4.ip_local_port_range). A port picked inside it was free when picked,
# but any outgoing connection (a test client, a Galera node talking to another) may take it as its
# local port before a server restarted on it binds again: CI saw a Galera node's IST port taken
# that way, and the node could not rejoin after a kill.
port_range() {
  local lo=32768 hi=60999
  if [[ -r /proc/sys/net/ipv4/ip_local_port_range ]]; then
    read -r lo hi </proc/sys/net/ipv4/ip_local_port_range
  fi
  if (( lo - 1 - 10000 >= 2000 )); then
    echo "10000 $((lo - 1))"
  elif (( 65535 - hi - 1 >= 2000 )); then
    echo "$((hi + 1)) 65535"
  else
    echo "10000 65535"  # no room outside the ephemeral range: a collision stays possible
  fi
}

pick_port() {
  local p _ lo hi
  read -r lo hi < <(port_range)
  for _ in $(seq 1 200); do
    p=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo + 1)))
    if port_free "$p"; then
      echo "$p"
      return 0
    fi
  done
  die "no free loopback port found"
}


# kill_postmaster PID: kill -9 of a PostgreSQL postmaster and all its children, as a crash would.
# The postmaster is stopped (SIGSTOP) first: killed children make a running postmaster start new
# ones at once (its crash restart), and a child forked between the children's kill and the
# postmaster's would outlive it, hold the shared memory, and make the next start fail with
# "pre-existing shared memory block is still in use". Returns once every one of them is gone.
kill_postmaster() {
  local pid=$1 children i
  kill -STOP "$pid" 2>/dev/null || return 0
  children=$(pgrep -P "$pid" || true)
  # shellcheck disable=SC2086
  [[ -z "$children" ]] || kill -KILL $children 2>/dev/null || true
  kill -KILL "$pid" 2>/dev/null || true
  for i in $(seq 1 200); do
    local alive=0 c
    # The postmaster must be gone, reaped too (the next start refuses a data directory whose pid
    # file names a live pid); a child may stay a zombie until reaped: it holds no memory any more.
    kill -0 "$pid" 2>/dev/null && alive=1
    for c in $children; do
      if kill -0 "$c" 2>/dev/null && [[ $(awk '{print $3}' "/proc/$c/stat" 2>/dev/null) != Z ]]; then alive=1; fi
    done
    [[ $alive -eq 1 ]] || return 0
    sleep 0.05
  done
  echo "kill_postmaster: a process of postmaster $pid survived kill -9" >&2
  return 1
}
