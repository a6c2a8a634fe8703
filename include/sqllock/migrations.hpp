// Schema-migration runner: applies a directory of NNNN_name.sql files once each, under a lease lock.
#pragma once

#include "sqllock/export.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sqllock/client.hpp"
#include "sqllock/parse.hpp"

namespace sqllock {

/// How migrate_directory runs.
struct SQLLOCK_EXPORT migrate_options {
  /// History table (validated identifier, optionally schema.table). Also names the lease:
  /// "sqllock:migrations:<history_table>".
  std::string history_table = "sqllock_migrations";
  /// How long to wait for another migrator's lease before throwing acquire_timeout.
  std::chrono::milliseconds wait{std::chrono::minutes(5)};
  /// Lease duration; the watchdog renews it at about a third, so a killed migrator's lease is
  /// free again at most this long after it died.
  std::chrono::milliseconds lock_ttl{std::chrono::seconds(30)};
  /// An applied version whose file is gone: false (default) only reports it in
  /// migrate_report::missing_files (the command prints a warning); true throws migration_failed
  /// before anything is applied.
  bool fail_on_missing_files = false;
  /// Apply at most this many pending migrations (0: all).
  int max_migrations = 0;
  /// Called before each migration is applied (version, file name); for progress output.
  std::function<void(std::int64_t version, const std::string& file)> on_start;
  /// Test hook: called inside each migration after its statements ran, before its commit.
  std::function<void(std::int64_t version)> before_commit;
};

/// One row of the history table.
struct SQLLOCK_EXPORT migration_record {
  std::int64_t version = 0;  ///< the number its file name starts with
  std::string name;      ///< file name, e.g. "0003_add_orders.sql"
  std::string checksum;  ///< SHA-256 of the file's bytes, 64 lowercase hex digits
  /// "applied"; on MySQL also "running" (interrupted), "failed" (error kept) and "resolved"
  /// (marked applied by resolve_migration after a human fixed the schema).
  std::string status;
  std::int64_t duration_ms = 0;  ///< how long it ran
  std::string applied_by;  ///< the holder id of the lease that applied it
  std::string applied_at;  ///< database clock, as the database prints it
  std::string error;       ///< the error text of a failed migration
};

/// What a run did.
struct SQLLOCK_EXPORT migrate_report {
  std::vector<migration_record> applied;   ///< applied by this run, in order
  std::int64_t current_version = 0;        ///< highest applied (or resolved) version afterwards
  std::vector<std::string> missing_files;  ///< applied versions whose file is gone ("0002_x.sql")
  std::int64_t fencing_token = 0;          ///< of the migration lease this run held
};

/// A migration file found in a directory.
struct SQLLOCK_EXPORT migration_file {
  std::int64_t version = 0;  ///< the number its file name starts with
  std::string name;  ///< file name
  std::filesystem::path path;  ///< where it was found
  std::string checksum;  ///< SHA-256 hex of the bytes
  std::string text;  ///< its contents
};

/// Read the migration files of `dir`: names `<digits>_<name>.sql` (e.g. 0001_init.sql), ordered by
/// version. Other files are ignored; a duplicate version, a version of 0, or an unreadable
/// directory throws invalid_argument naming the file.
SQLLOCK_EXPORT std::vector<migration_file> read_migration_directory(const std::filesystem::path& dir);

/// Apply the pending migrations of `dir` in version order, each exactly once, under the lease
/// "sqllock:migrations:<history_table>" (renewed by the watchdog; a crashed migrator's lease
/// expires after lock_ttl, no session lock is used). Creates the lock tables (if missing) and the
/// history table.
///
/// Each migration starts only while the lease is held: its first transaction checks the lease on
/// the database and keeps the lease's row locked until it commits (transaction::require_lease),
/// so no other migrator takes the lease over meanwhile; a lease found lost is taken again and the
/// plan redone. PostgreSQL and SQLite: a migration's statements and its history row commit in one
/// transaction, or nothing does. MySQL/MariaDB (DDL commits implicitly): a "running" row is
/// committed first; a failure turns it into "failed" with the error text, and a run refuses to go
/// past a failed or interrupted ("running") version until resolve_migration is called.
///
/// Throws: checksum_mismatch (an applied file changed; names the file), migration_failed (a
/// statement failed, or a failed/interrupted version blocks the run, or a version below the
/// highest applied one is pending, or fail_on_missing_files), invalid_argument (bad directory,
/// file name or history table), acquire_timeout (another migrator held the lease past `wait`),
/// lease_lost (the lease was lost between migrations, taken again and lost again, three rounds
/// without progress; nothing of the current one committed on PostgreSQL/SQLite), and the usual
/// database errors. A lease found gone (or not answered) only by the final release, once every
/// pending migration committed, is no error: the report says what was applied.
SQLLOCK_EXPORT migrate_report migrate_directory(client& c, const std::filesystem::path& dir, const migrate_options& options = {});

/// What resolve_migration does with a failed (or interrupted) MySQL migration.
enum class migration_resolution {
  applied,  ///< a human completed the schema change by hand: record it as applied ("resolved")
  retry,    ///< a human undid its partial effects: forget the row so the next run applies it again
};

/// Mark a failed or interrupted migration as resolved (`sqllock migrate --dir DIR --resolve V`) or
/// forget it for a retry (`--retry V`), under the migration lease. With `applied`, the checksum of
/// the file now in `dir` is stored. Throws migration_failed when the version is not failed or
/// running, invalid_argument when the file is missing (for `applied`).
SQLLOCK_EXPORT migration_record resolve_migration(client& c, const std::filesystem::path& dir, std::int64_t version,
                                   migration_resolution resolution, const migrate_options& options = {});

/// The history table's rows by version (empty when the table does not exist yet). On SQLite every
/// sqllock transaction takes the write lock, so this waits (up to the 5 s busy timeout, then
/// lock_not_available) while a migration is being applied.
SQLLOCK_EXPORT std::vector<migration_record> migration_history(client& c, const migrate_options& options = {});

/// Split a script into statements for `d`, honouring '...' and "..." strings (with doubled-quote
/// escapes; MySQL also backslash escapes), `...` identifiers (MySQL, SQLite), [...] (SQLite), -- and # (MySQL) line
/// comments,
/// /* */ comments (nested in PostgreSQL), PostgreSQL dollar quoting ($$...$$, $tag$...$tag$),
/// SQLite CREATE TRIGGER ... BEGIN ... END bodies, and MySQL `DELIMITER xx` lines.
/// Statements are returned trimmed, without the terminating delimiter; empty ones and
/// comment-only ones are dropped. Throws invalid_argument on an unterminated string, comment or
/// dollar quote (the message gives the line).
SQLLOCK_EXPORT std::vector<std::string> split_sql_statements(std::string_view script, dialect d);

/// SHA-256 of `data` as 64 lowercase hex digits (the migration checksum).
SQLLOCK_EXPORT std::string sha256_hex(std::string_view data);

}  // namespace sqllock
