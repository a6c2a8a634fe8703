#!/usr/bin/env bash
# sqllock's PostgreSQL lease statements against the ShedLock-style upsert + update, in one pgbench run.
#
#   bash bench/pgbench_statements.sh URL [SECONDS]
#
# URL: a PostgreSQL URL (e.g. $SQLLOCK_TEST_POSTGRESQL_URL). Creates two scratch tables
# (sqllock_pgb_locks through migrations/postgresql, sqllock_pgb_shedlock), runs four scripts
# interleaved at random by one pgbench client with prepared statements (-M prepared -r):
# sqllock_pair / shed_pair (acquire + release of a fresh name, each its own durable transaction)
# and the same inside BEGIN ... ROLLBACK (no commit flush: the statements' server cost and round
# trip only), prints per-statement latencies, and drops the tables. Not run by CI.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
url=${1:?usage: pgbench_statements.sh URL [SECONDS]}
seconds=${2:-20}
work=$(mktemp -d)
trap 'rm -rf "$work"; psql "$url" -qX -c "DROP TABLE IF EXISTS sqllock_pgb_locks, sqllock_pgb_locks_schema, sqllock_pgb_locks_semaphores, sqllock_pgb_shedlock" >/dev/null 2>&1 || true' EXIT

render() {  # render FILE: the statement on one line, comments removed, for table sqllock_pgb_locks
  sed -e 's/--.*$//' -e 's/{{locks_schema}}/sqllock_pgb_locks_schema/g' \
    -e 's/{{locks_semaphores}}/sqllock_pgb_locks_semaphores/g' -e 's/{{locks}}/sqllock_pgb_locks/g' "$1" | tr '\n' ' '
}
for m in "$root"/migrations/postgresql/*.sql; do
  render "$m" | psql "$url" -qX -v ON_ERROR_STOP=1 >/dev/null 2>&1
done
psql "$url" -qX -v ON_ERROR_STOP=1 -c "CREATE TABLE IF NOT EXISTS sqllock_pgb_shedlock (name varchar(64) PRIMARY KEY,
  lock_until timestamptz NOT NULL, locked_at timestamptz NOT NULL, locked_by varchar(255) NOT NULL)"

# $1 name, $2 holder, $3 owner, $4 ttl ms (acquire); $1 name, $2 owner, $3 token (0: any),
# $4 min_hold ms, $5 channel (release).
acquire=$(render "$root/sql/postgresql/lease_acquire.sql" |
  sed -e "s/\\\$1/('n' || :r)/g" -e "s/\\\$2/'holder'/g" -e "s/\\\$3/('o' || :r)/g" -e "s/\\\$4/30000/g")
release=$(render "$root/sql/postgresql/lease_release.sql" |
  sed -e "s/\\\$1/('n' || :r)/g" -e "s/\\\$2/('o' || :r)/g" -e "s/\\\$3/0/g" -e "s/\\\$4/0/g" -e "s/\\\$5/'sqllock_pgb'/g")
shed_acquire="INSERT INTO sqllock_pgb_shedlock (name, lock_until, locked_at, locked_by) VALUES (('s' || :r),
  clock_timestamp() + 30000 * interval '1 millisecond', clock_timestamp(), 'holder') ON CONFLICT (name) DO UPDATE
  SET lock_until = excluded.lock_until, locked_at = excluded.locked_at, locked_by = excluded.locked_by
  WHERE sqllock_pgb_shedlock.lock_until <= clock_timestamp()"
shed_release="UPDATE sqllock_pgb_shedlock SET lock_until = clock_timestamp() WHERE name = ('s' || :r) AND locked_by = 'holder'"
shed_acquire=$(tr '\n' ' ' <<<"$shed_acquire")

header='\set r random(1, 1000000000000)'
printf '%s\n%s;\n%s;\n' "$header" "$acquire" "$release" >"$work/sqllock_pair.sql"
printf '%s\n%s;\n%s;\n' "$header" "$shed_acquire" "$shed_release" >"$work/shed_pair.sql"
printf '%s\nBEGIN;\n%s;\n%s;\nROLLBACK;\n' "$header" "$acquire" "$release" >"$work/sqllock_pair_rb.sql"
printf '%s\nBEGIN;\n%s;\n%s;\nROLLBACK;\n' "$header" "$shed_acquire" "$shed_release" >"$work/shed_pair_rb.sql"
pgbench -n -M prepared -T "$seconds" -c 1 -r \
  -f "$work/sqllock_pair.sql@1" -f "$work/shed_pair.sql@1" -f "$work/sqllock_pair_rb.sql@1" -f "$work/shed_pair_rb.sql@1" \
  "$url" 2>&1 | grep -E '^SQL script|latency average|^ +[0-9.]+ +[0-9]+ ' | cut -c1-100
