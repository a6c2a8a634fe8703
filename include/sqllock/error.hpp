// Typed errors: one base carrying backend, SQLSTATE/vendor code and statement name, one type per case.
#pragma once

#include "sqllock/export.hpp"

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace sqllock {

/// Base of every error sqllock throws. Carries where it happened, never bound values or passwords.
class SQLLOCK_EXPORT error : public std::runtime_error {
 public:
  /// @param backend   "sqlite", "postgresql", "mysql" or "" when no database was involved
  /// @param code      SQLSTATE (PostgreSQL) or vendor error code as text (MySQL, SQLite); may be empty
  /// @param statement name of the sqllock statement that failed (e.g. "lease_acquire"); may be empty
  /// @param message   what happened, for humans (never bound values or passwords)
  error(const std::string& message, std::string backend = {}, std::string code = {},
        std::string statement = {});

  /// The backend that raised it, or "" for argument errors.
  const std::string& backend() const noexcept { return backend_; }
  /// SQLSTATE or vendor code as text, or "".
  const std::string& code() const noexcept { return code_; }
  /// The name of the statement that failed (never its bound values), or "".
  const std::string& statement() const noexcept { return statement_; }
  /// True when the same operation may succeed if the whole transaction is run again.
  virtual bool retryable() const noexcept { return false; }

 private:
  std::string backend_;
  std::string code_;
  std::string statement_;
};

/// Bad input: lock name, TTL, duration, URL, identifier, version. Nothing was changed.
class SQLLOCK_EXPORT invalid_argument : public error {
 public:
  /// @param message what was wrong with the input (names the argument)
  explicit invalid_argument(const std::string& message) : error(message) {}
};

/// The lock tables are not at the schema version this library needs: missing or older (run
/// `sqllock migrate`), or newer (schema_too_new).
class SQLLOCK_EXPORT schema_missing : public error {
 public:
  using error::error;
};

/// The lock tables are at a schema version newer than this library knows (client::
/// required_schema_version()): a newer sqllock migrated them, and this one's statements may no
/// longer mean what they did there. Thrown by connect() (unless client_options::require_schema is
/// off) and by client::migrate(), which changes nothing; upgrade this program's sqllock instead.
/// A schema_missing, so code that treats that as "the lock service is unusable" (the CLI: exit
/// 69) does so here too.
class SQLLOCK_EXPORT schema_too_new : public schema_missing {
 public:
  /// @param message  what was found (names both versions)
  /// @param backend  the backend that was asked, as backend()
  /// @param found    the schema version present in the database
  /// @param known    the newest schema version this library knows
  schema_too_new(const std::string& message, std::string backend, int found, int known)
      : schema_missing(message, std::move(backend), "", "schema_version"), found_(found), known_(known) {}
  /// The schema version present in the database.
  int found_version() const noexcept { return found_; }
  /// The newest schema version this library knows (client::required_schema_version()).
  int known_version() const noexcept { return known_; }

 private:
  int found_;
  int known_;
};

/// The database could not be reached, or the connection dropped (SQLSTATE class 08, MySQL 2006/2013).
class SQLLOCK_EXPORT connection_lost : public error {
 public:
  using error::error;
};

/// A blocking acquire gave up at its deadline. Carries who held the lock and for how long still.
class SQLLOCK_EXPORT acquire_timeout : public error {
 public:
  /// @param backend the backend that was asked ("sqlite", "postgresql", "mysql"), as backend()
  /// @param message   what happened
  /// @param lock_name the lock (or semaphore) that was not acquired
  /// @param holder    who held it at the last attempt ("" if unknown)
  /// @param time_left the holder's remaining lease time at the last attempt
  acquire_timeout(const std::string& message, std::string lock_name, std::string holder,
                  std::chrono::milliseconds time_left, std::string backend = {});
  /// The lock (or semaphore) that was not acquired.
  const std::string& lock_name() const noexcept { return lock_name_; }
  /// The holder seen at the last attempt ("" if unknown).
  const std::string& holder() const noexcept { return holder_; }
  /// The holder's remaining lease time seen at the last attempt.
  std::chrono::milliseconds time_left() const noexcept { return time_left_; }

 private:
  std::string lock_name_;
  std::string holder_;
  std::chrono::milliseconds time_left_;
};

/// A blocking acquire was cancelled through its stop token.
class SQLLOCK_EXPORT cancelled : public error {
 public:
  /// @param message what was cancelled
  explicit cancelled(const std::string& message) : error(message) {}
};

/// The lease expired and was taken over, or its row vanished, while it was believed held.
class SQLLOCK_EXPORT lease_lost : public error {
 public:
  using error::error;
};

/// The caller acts on a lease it no longer holds: renew() or transaction::require_lease() on a
/// guard that was already released. (A lease taken over by another client is lease_lost.)
class SQLLOCK_EXPORT not_holder : public error {
 public:
  using error::error;
};

/// A holder of the read lock of a reader-writer lease asked for its write lock (an upgrade). It
/// would wait for its own read lock forever, so it is refused at once and nothing changes; release
/// the read lock first. (The reverse, taking the read lock while holding the write lock, is allowed.)
class SQLLOCK_EXPORT upgrade_refused : public error {
 public:
  /// @param message which lock, and that its read lock is held by the caller
  explicit upgrade_refused(const std::string& message) : error(message) {}
};

/// A row lock could not be taken (NOWAIT, or the wait bound passed): PostgreSQL 55P03, MySQL 1205/3572.
class SQLLOCK_EXPORT lock_not_available : public error {
 public:
  using error::error;
};

/// A statement was cancelled by the server: PostgreSQL 57014 (statement timeout, or a cancel request
/// such as pg_cancel_backend), MySQL 1317 (KILL QUERY), 1969/3024 (a statement time limit).
class SQLLOCK_EXPORT query_canceled : public error {
 public:
  using error::error;
};

/// Base for failures that a fresh run of the whole transaction may cure.
class SQLLOCK_EXPORT retryable_error : public error {
 public:
  using error::error;
  bool retryable() const noexcept override { return true; }
};

/// The database chose this transaction as a deadlock victim (40P01, MySQL 1213, SQLite BUSY on upgrade).
class SQLLOCK_EXPORT deadlock_detected : public retryable_error {
 public:
  using retryable_error::retryable_error;
};

/// Serialization failure (40001).
class SQLLOCK_EXPORT serialization_failure : public retryable_error {
 public:
  using retryable_error::retryable_error;
};

/// An optimistic compare-and-swap found another version. Thrown by `cas_result::value()`;
/// `with_retry` runs the whole function again on it.
class SQLLOCK_EXPORT version_conflict : public retryable_error {
 public:
  using retryable_error::retryable_error;
};

/// A fenced write was refused: a writer with a newer fencing token has written the row.
class SQLLOCK_EXPORT fence_rejected : public error {
 public:
  /// @param message     what was refused
  /// @param newer_token the token already on the row
  fence_rejected(const std::string& message, std::int64_t newer_token) : error(message), newer_(newer_token) {}
  /// The token already on the row.
  std::int64_t newer_token() const noexcept { return newer_; }

 private:
  std::int64_t newer_;
};

/// `with_retry` gave up after its attempt bound. The last retryable error's text is in what().
class SQLLOCK_EXPORT retries_exhausted : public error {
 public:
  /// @param message  the last retryable error's text
  /// @param attempts the transaction runs made
  retries_exhausted(const std::string& message, int attempts);
  /// The transaction runs made before giving up.
  int attempts() const noexcept { return attempts_; }

 private:
  int attempts_;
};

/// Any other database error (syntax, constraint, permissions...).
class SQLLOCK_EXPORT database_error : public error {
 public:
  using error::error;
};

/// A migration could not be applied, or the migration history forbids going on (a failed or
/// interrupted MySQL migration awaiting `--resolve`, an out-of-order version, a removed file
/// under fail_on_missing_files). Nothing past the named version was applied.
class SQLLOCK_EXPORT migration_failed : public error {
 public:
  /// @param message what failed
  /// @param version the migration version concerned (0 if none)
  /// @param file    its file name ("" if none)
  migration_failed(const std::string& message, long long version, std::string file)
      : error(message), version_(version), file_(std::move(file)) {}
  /// The migration version concerned (0 if none).
  long long version() const noexcept { return version_; }
  /// Its file name ("" if none).
  const std::string& file() const noexcept { return file_; }

 private:
  long long version_;
  std::string file_;
};

/// An applied migration's file changed since it was applied (its SHA-256 differs).
class SQLLOCK_EXPORT checksum_mismatch : public migration_failed {
 public:
  using migration_failed::migration_failed;
};

}  // namespace sqllock
