// The one place SQLite result codes become typed sqllock errors.
#include "sqlite/sqlite_connection.hpp"

namespace sqllock::detail::sqlite {

void throw_error(sqlite3* db, int rc, const std::string& statement, bool on_lock_table) {
  const int primary = rc & 0xff;
  std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  std::string text = "sqlite: " + statement + ": " + msg;
  std::string code = std::to_string(rc);
  switch (primary) {
    case SQLITE_BUSY:
      if (rc == SQLITE_BUSY_SNAPSHOT) throw serialization_failure(text, kind_name, code, statement);
      throw lock_not_available(text, kind_name, code, statement);
    case SQLITE_LOCKED:
      throw deadlock_detected(text, kind_name, code, statement);
    case SQLITE_INTERRUPT:
      throw query_canceled(text, kind_name, code, statement);
    case SQLITE_CANTOPEN:
    case SQLITE_NOTADB:
    case SQLITE_IOERR:
      throw connection_lost(text, kind_name, code, statement);
    case SQLITE_READONLY:
      throw invalid_argument("sqlite: " + statement + ": the database is read-only here: " + msg);
    case SQLITE_ERROR:
      if (on_lock_table && msg.find("no such table") != std::string::npos) {
        throw schema_missing("sqlite: the lock tables are missing: run `sqllock migrate` first", kind_name, code,
                             statement);
      }
      break;
    default:
      break;
  }
  throw database_error(text, kind_name, code, statement);
}

}  // namespace sqllock::detail::sqlite
