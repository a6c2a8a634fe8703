#!/usr/bin/env bash
# pick_port (scripts/lib/server-common.sh) must never hand a throwaway server a port from the
# kernel's ephemeral range: a server restarted on such a port (a Galera node after kill-node, a
# crashed PostgreSQL or MariaDB) can find it taken as the local port of some outgoing connection.
# Draws 300 ports and checks each is outside net.ipv4.ip_local_port_range and free.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "pick_port_test: $*" >&2; exit 1; }
test_user=nobody
# shellcheck source=../../scripts/lib/server-common.sh
source "$here/../../scripts/lib/server-common.sh"

read -r eph_lo eph_hi </proc/sys/net/ipv4/ip_local_port_range
inside=0
for _ in $(seq 1 300); do
  p=$(pick_port)
  [[ "$p" =~ ^[0-9]+$ ]] || die "pick_port printed '$p'"
  (( p >= 1024 && p <= 65535 )) || die "port $p is not a usable port"
  if (( p >= eph_lo && p <= eph_hi )); then inside=$((inside + 1)); fi
done
if (( inside > 0 )); then
  die "$inside of 300 ports fell inside the ephemeral range $eph_lo-$eph_hi"
fi
echo "pick_port_test: 300 ports, none inside the ephemeral range $eph_lo-$eph_hi"
