// The MySQL backend's one error-mapping function, plus small text helpers (redaction, time units).
#include <cppconn/exception.h>

#include "core/backend.hpp"
#include "mysql/mysql_connection.hpp"
#include "sqllock/error.hpp"

namespace sqllock::detail::mysql {

bool is_connection_error(int code) noexcept {
  switch (code) {
    case 1053:  // ER_SERVER_SHUTDOWN
    // "Got error N during COMMIT": the commit may or may not have happened (on Galera the other
    // nodes can have applied the write set when this node left the primary component). Unknown
    // outcome, like a lost connection: the engine cleans up an acquire it cannot confirm and
    // re-sends a release.
    case 1180:  // ER_ERROR_DURING_COMMIT
    case 1927:  // MariaDB ER_CONNECTION_KILLED
    case 2002:  // CR_CONNECTION_ERROR
    case 2003:  // CR_CONN_HOST_ERROR
    case 2006:  // CR_SERVER_GONE_ERROR
    case 2013:  // CR_SERVER_LOST
    case 2055:  // CR_SERVER_LOST_EXTENDED
    case 4031:  // MySQL 8 ER_CLIENT_INTERACTION_TIMEOUT
      return true;
    default:
      return false;
  }
}

std::string redact_server_message(std::string_view message) {
  // Server texts quote values ("Duplicate entry 'x' for key", "near '...'") and identifiers
  // ("Unknown database 'acc'", "Table 'db.t' doesn't exist", "for user 'u'@'h'"). Values are
  // dropped; identifiers stay, since they are what the reader has to fix. A quoted part is an
  // identifier when the word before it names one (or it follows '@' or '.' of one). A quote opens
  // only after a non-alphanumeric character and closes only before one, so the apostrophe in
  // "doesn't" stays text.
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  auto names_identifier = [&](std::size_t quote_at) {
    if (quote_at > 0 && (message[quote_at - 1] == '@' || message[quote_at - 1] == '.')) return true;
    std::size_t end = quote_at;
    while (end > 0 && message[end - 1] == ' ') --end;
    std::size_t begin = end;
    while (begin > 0 && alnum(message[begin - 1])) --begin;
    std::string word;
    for (char c : message.substr(begin, end - begin)) word += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    for (std::string_view w : {"database", "table", "column", "key", "schema", "user", "index", "view", "procedure",
                               "function", "constraint", "in", "tablespace", "sequence", "trigger"}) {
      if (word == w) return true;
    }
    return false;
  };
  std::string out;
  out.reserve(message.size());
  for (std::size_t i = 0; i < message.size(); ++i) {
    const char c = message[i];
    const bool quote = c == '\'' || c == '"' || c == '`';
    if (!quote || (i > 0 && alnum(message[i - 1]))) {
      out += c;
      continue;
    }
    std::size_t end = i + 1;
    while (end < message.size() &&
           !(message[end] == c && (end + 1 == message.size() || !alnum(message[end + 1])))) {
      ++end;
    }
    if (end < message.size() && names_identifier(i)) {
      out.append(message.substr(i, end - i + 1));
      i = end;
      continue;
    }
    out += c;
    out += '?';
    if (end >= message.size()) break;  // unterminated: everything after the quote is dropped
    out += c;
    i = end;
  }
  return out;
}

void map_error(const sql::SQLException& e, std::string_view statement, bool lock_table_statement) {
  const int code = e.getErrorCode();
  const std::string name(backend_name);
  const std::string code_text = std::to_string(code);
  const std::string stmt(statement);
  std::string detail = redact_server_message(e.what());
  std::string where = "mysql " + stmt + ": ";
  std::string suffix = " (error " + code_text;
  if (!e.getSQLState().empty()) suffix += ", SQLSTATE " + e.getSQLState();
  suffix += ")";

  switch (code) {
    case 1205:  // ER_LOCK_WAIT_TIMEOUT (also MariaDB NOWAIT / WAIT n)
    case 3572:  // MySQL 8 ER_LOCK_NOWAIT
      throw lock_not_available(where + "lock not available: " + detail + suffix, name, code_text,
                               stmt);
    case 1213:  // ER_LOCK_DEADLOCK: InnoDB rolled back the whole transaction
      throw deadlock_detected(where + "deadlock, transaction rolled back: " + detail + suffix,
                              name, code_text, stmt);
    case 1317:  // ER_QUERY_INTERRUPTED (KILL QUERY)
    case 1969:  // MariaDB ER_STATEMENT_TIMEOUT (max_statement_time)
    case 3024:  // MySQL ER_QUERY_TIMEOUT (max_execution_time)
      throw query_canceled(where + "statement cancelled: " + detail + suffix, name, code_text,
                           stmt);
    default:
      break;
  }
  if (is_connection_error(code)) {
    throw connection_lost(where + "connection lost: " + detail + suffix, name, code_text, stmt);
  }
  if (lock_table_statement && (code == 1146 || code == 1054)) {
    // ER_NO_SUCH_TABLE / ER_BAD_FIELD_ERROR on the lock tables: not migrated (or too old).
    throw schema_missing(where + "the lock tables are missing or too old; run `sqllock migrate`" +
                             suffix,
                         name, code_text, stmt);
  }
  if (code == 0) {
    // Driver-side failure without a server code (e.g. the connection was already closed).
    throw database_error(where + detail, name, "", stmt);
  }
  throw database_error(where + detail + suffix, name, code_text, stmt);
}

std::chrono::milliseconds floor_ms(std::int64_t us) noexcept {
  std::int64_t ms = us / 1000;
  if (us % 1000 != 0 && us < 0) --ms;
  return std::chrono::milliseconds(ms);
}

int whole_seconds_up(std::chrono::milliseconds ms, int cap) noexcept {
  if (ms.count() <= 0) return 0;
  // Rounded up without adding first: milliseconds::max() would overflow.
  const auto s = ms.count() / 1000 + (ms.count() % 1000 > 0 ? 1 : 0);
  return s > cap ? cap : static_cast<int>(s);
}

std::string statement_text(std::string_view name, std::string_view table) {
  return render_sql(embedded_sql("mysql", name), table, dialect::mysql);
}

}  // namespace sqllock::detail::mysql
