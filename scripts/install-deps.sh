#!/usr/bin/env bash
# Install the Debian packages sqllock needs that are missing (all by default; --minimal for the
# SQLite demo). Runs apt-get only when something is missing; uses sudo when not root.
set -euo pipefail

minimal=(cmake ninja-build g++ pkg-config libsqlite3-dev libcli11-dev libgtest-dev)
full=("${minimal[@]}" libpq-dev postgresql pgbouncer libmysqlcppconn-dev mariadb-server mariadb-client
      galera-4 rsync  # scripts/galera-cluster.sh (rsync: the state transfer to a joining node)
      openssl  # the test MariaDB server's throwaway TLS certificates (scripts/mariadb-server.sh)
      libbenchmark-dev faketime gnuplot-nox clang libclang-rt-14-dev
      groff-base man-db zsh  # the man page and completion tests (tests/cli/man_page_check.sh, completion_check.sh)
      doxygen)  # the API reference (tests/docs/api_reference_check.sh)

want=("${full[@]}")
[[ "${1:-}" == "--minimal" ]] && want=("${minimal[@]}")

missing=()
for p in "${want[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "install-deps.sh: installing ${missing[*]}" >&2
sudo=()
[[ $(id -u) -eq 0 ]] || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
# Server packages try to start their system services; that is refused in containers and not
# wanted anyway (tests start throwaway servers), so a policy-rc.d refusal is expected here.
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
