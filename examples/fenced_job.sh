#!/bin/sh
# A job run under `sqllock run` that writes with a fenced update, so that the database refuses the
# write of a holder whose lease was lost (a paused or partitioned job that wakes up after another
# node took the lock over): every write carries the lease's fencing token ($SQLLOCK_FENCE), and a
# row only accepts a token at least as large as the last one that wrote it.
#
#   sqllock run --url "$LOCKS_URL" --name nightly-report -- \
#       examples/fenced_job.sh postgresql 42 "report of $(date +%F)" "$DATA_URL"
#   sqllock run --url "$LOCKS_URL" --name nightly-report -- \
#       examples/fenced_job.sh mysql 42 "report of $(date +%F)" -h db1 -u app appdb
#
# Arguments: DIALECT (postgresql or mysql), ROW ID (an integer), the VALUE to write, then the
# client's connection arguments (psql: a URL or conninfo string; mysql: its options and database).
# Keep passwords out of the command line: ~/.pgpass or PGPASSWORD, ~/.my.cnf or MYSQL_PWD.
# The table (FENCED_TABLE, default job_results) has a fence column:
#
#   CREATE TABLE job_results (id BIGINT PRIMARY KEY, value TEXT NOT NULL,
#                             fence BIGINT NOT NULL DEFAULT 0);
#
# Exit codes: 0 written; 3 refused, a newer holder has written the row (or the row is missing);
# 2 usage; the client's code when it failed.
#
# Nothing the caller passes is pasted into SQL as text: psql gets the values as variables (-v) and
# quotes them itself (:'value'); for mysql, which has no client-side variables, the token and id
# are checked to be integers and the value travels hex-encoded (UNHEX('...')).
set -eu

die() {
  echo "fenced_job: $*" >&2
  exit 2
}

[ $# -ge 3 ] || die "usage: fenced_job.sh postgresql|mysql ID VALUE [client connection arguments...]"
dialect=$1
id=$2
value=$3
shift 3
table=${FENCED_TABLE:-job_results}
fence=${SQLLOCK_FENCE:-}

case $fence in '' | *[!0-9]*) die "SQLLOCK_FENCE is not set to a token: run this under 'sqllock run'" ;; esac
case $id in '' | *[!0-9]*) die "ID must be a non-negative integer, not '$id'" ;; esac
case $table in [A-Za-z_]*) ;; *) die "FENCED_TABLE: not an identifier" ;; esac
case $table in *[!A-Za-z0-9_]*) die "FENCED_TABLE: not an identifier" ;; esac

case $dialect in
postgresql)
  # One statement: the update and the count of rows it changed. The quoted here-document keeps the
  # shell away from the SQL; psql substitutes :'x' as a quoted literal and :"x" as an identifier.
  written=$(psql -X -q -A -t -v ON_ERROR_STOP=1 -v table="$table" -v id="$id" -v value="$value" \
    -v fence="$fence" "$@" <<'SQL'
WITH written AS (
  UPDATE :"table" SET value = :'value', fence = :'fence'::bigint
   WHERE id = :'id'::bigint AND fence <= :'fence'::bigint
  RETURNING 1)
SELECT count(*) FROM written;
SQL
  )
  ;;
mysql)
  # MySQL's affected-row count leaves out rows written with the values they already had, so the row
  # is locked and its fence read first, in the same transaction as the update.
  value_hex=$(printf '%s' "$value" | od -An -v -tx1 | tr -d ' \n')
  written=$(mysql --batch --skip-column-names "$@" <<SQL
START TRANSACTION;
SELECT fence INTO @old_fence FROM \`$table\` WHERE id = $id FOR UPDATE;
UPDATE \`$table\` SET value = CONVERT(UNHEX('$value_hex') USING utf8mb4), fence = $fence
 WHERE id = $id AND fence <= $fence;
SELECT COALESCE(@old_fence <= $fence, 0);
COMMIT;
SQL
  )
  ;;
*) die "DIALECT must be postgresql or mysql, not '$dialect'" ;;
esac

if [ "$written" != 1 ]; then
  echo "fenced_job: write to row $id refused: a holder with a newer token than $fence has written it" \
    "(or the row does not exist); this holder's lease was lost" >&2
  exit 3
fi
echo "fenced_job: row $id written with fence $fence"
