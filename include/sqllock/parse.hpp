// Input validation shared by the library and the command: URLs, durations, lock names, identifiers.
#pragma once

#include "sqllock/export.hpp"

#include <chrono>
#include <map>
#include <string>
#include <string_view>

namespace sqllock {

/// A connection URL taken apart. The password is kept for the driver only; use redacted().
struct SQLLOCK_EXPORT database_url {
  /// The database a URL names.
  enum class kind { sqlite, postgresql, mysql };
  kind scheme = kind::sqlite;  ///< the database named (postgres://, mariadb:// included)
  std::string original;  ///< the URL as given (contains the password: never log it)
  std::string path;      ///< sqlite: the file path, or ":memory:"
  std::string user;  ///< user name (empty: the driver's default)
  std::string password;  ///< password (never log it; see redacted())
  std::string host;  ///< host name or address (empty: the driver's default)
  int port = 0;  ///< 0: the driver's default
  std::string database;  ///< database name
  std::map<std::string, std::string> params;  ///< query parameters, `sqllock_` options removed

  /// The URL with any password replaced by "***", safe for logs and messages.
  std::string redacted() const;
};

/// Parse a URL (see sqllock::connect). Throws invalid_argument with a message that never contains
/// the password.
SQLLOCK_EXPORT database_url parse_url(std::string_view url);

/// Parse "500ms", "30s", "5m", "1h" (a non-negative whole number and a unit). Throws invalid_argument.
SQLLOCK_EXPORT std::chrono::milliseconds parse_duration(std::string_view text);

/// Throws invalid_argument unless `name` is 1..255 bytes of valid UTF-8 without NUL.
SQLLOCK_EXPORT void validate_lock_name(std::string_view name);

/// Throws invalid_argument unless ttl is at least 1 ms (and at most 10 years).
SQLLOCK_EXPORT void validate_ttl(std::chrono::milliseconds ttl);

/// Throws invalid_argument unless `permits` is a counting semaphore's size: 1 to 10000.
SQLLOCK_EXPORT void validate_permits(int permits);

/// Throws invalid_argument unless `id` is an identifier sqllock will quote: [A-Za-z_][A-Za-z0-9_]*,
/// at most 63 bytes, optionally one "schema." prefix of the same form.
SQLLOCK_EXPORT void validate_identifier(std::string_view id);

/// Quote a validated identifier for a dialect: "x" (SQLite, PostgreSQL) or `x` (MySQL); each part
/// of schema.table is quoted on its own. Throws invalid_argument on an invalid identifier.
enum class dialect { sqlite, postgresql, mysql };
SQLLOCK_EXPORT std::string quote_identifier(std::string_view id, dialect d);

}  // namespace sqllock
