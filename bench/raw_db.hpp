// Plain driver connections (libpq, Connector/C++, sqlite3) for the baselines sqllock is compared to.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace bench {

using raw_row = std::vector<std::optional<std::string>>;

/// One connection in autocommit mode. Statements are written per dialect by the caller
/// (PostgreSQL: $1; MySQL and SQLite: ?), and hot-path statements are prepared once, the way
/// sqllock prepares its own.
class raw_db {
 public:
  virtual ~raw_db() = default;
  /// "postgresql", "mysql" or "sqlite".
  virtual std::string dialect() const = 0;
  /// Run one statement without parameters (DDL, SET, BEGIN, ...).
  virtual void exec(const std::string& sql) = 0;
  /// Prepare a statement; returns its handle for run().
  virtual int prepare(const std::string& sql) = 0;
  /// Run a prepared statement with text parameters; returns its rows (none for non-queries).
  virtual std::vector<raw_row> run(int stmt, const std::vector<std::string>& params = {}) = 0;
  /// Rows affected by the last run() of a non-query.
  virtual std::int64_t affected() const = 0;
  /// Unprepared query returning rows.
  std::vector<raw_row> query(const std::string& sql) { return run(prepare(sql)); }
};

/// Connect to a sqllock URL (postgresql://, mysql://, sqlite:) with the matching driver.
/// sqlite_synchronous: the PRAGMA synchronous of the connection ("NORMAL" like sqllock's lease
/// connection, "FULL" like its transaction connections).
std::unique_ptr<raw_db> open_raw(const std::string& url, const std::string& sqlite_synchronous = "NORMAL");

}  // namespace bench
