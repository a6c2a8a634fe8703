// MySQL transactions: statements, optimistic CAS and FOR UPDATE row locks, owned or adopted.
#include <cppconn/connection.h>
#include <cppconn/exception.h>

#include <algorithm>
#include <cctype>
#include <string_view>
#include <map>
#include <optional>
#include <variant>

#include "mysql/mysql_connection.hpp"
#include "sqllock/error.hpp"
#include "sqllock/mysql.hpp"

namespace sqllock::detail::mysql {
namespace {

/// A usable index for lock_rows: its name (forced by the statement), whether the key column
/// holds text, and the table's engine.
struct usable_index {
  std::string name;
  bool text_column = false;
  std::string engine;
  bool numeric_column = false;
};

/// Text MariaDB/MySQL read as a number whole: [+-]digits[.digits][e[+-]digits], nothing around it.
bool number_text(std::string_view s) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t from = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i - from;
  };
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  std::size_t mantissa = digits();
  if (i < s.size() && s[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

/// Positive answers of the InnoDB-trap check, per schema/table/column, for the whole process.
/// (A negative answer is asked again: the application may add the index. A forced index that is
/// gone, renamed or on another server, is asked again too.)
struct index_cache {
  std::mutex mutex;
  std::map<std::string, usable_index> usable;
  std::map<std::string, bool> numeric;  ///< schema.table.column: holds numbers (cas, fenced_update)
};
index_cache& indexes() {
  static index_cache cache;
  return cache;
}

constexpr int max_wait_s = 31536000;  // innodb_lock_wait_timeout's and lock_wait_timeout's maximum

/// A name read from the server's catalog (an index name may hold any character), quoted.
std::string quote_catalog_name(const std::string& name) {
  std::string out = "`";
  for (char c : name) out += c == '`' ? std::string("``") : std::string(1, c);
  return out + "`";
}

bool equals_ignore_case(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](char x, char y) { return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y)); });
}

/// Split "schema.table" into its parts (validated identifiers; no quotes inside).
std::pair<std::string, std::string> split_table(const std::string& table) {
  const auto dot = table.find('.');
  if (dot == std::string::npos) return {std::string(), table};
  return {table.substr(0, dot), table.substr(dot + 1)};
}

class mysql_session final : public session {
 public:
  // Owned: a pooled connection, autocommit off; the transaction starts with the first statement.
  mysql_session(std::shared_ptr<connection_pool> pool, std::unique_ptr<connection> conn, const client_options& client)
      : pool_(std::move(pool)), conn_(std::move(conn)), log_options_(client) {}
  // Adopted: the application's connection and transaction.
  explicit mysql_session(std::unique_ptr<connection> conn) : conn_(std::move(conn)), adopted_(true) {}

  ~mysql_session() override { rollback(); }

  void commit() override {
    require_active("commit");
    if (adopted_) {
      finish();
      return;
    }
    try {
      // COMMIT as a statement: sql::Connection::commit() of Connector/C++ 1.1 ignores a failed
      // COMMIT (e.g. the connection died first), which would report a rolled-back write as durable.
      conn_->run_simple("COMMIT", "commit");
    } catch (const error&) {
      if (!conn_->broken()) roll_back_quietly();
      finish();
      throw;
    }
    finish();
  }

  void rollback() noexcept override {
    if (state_ == state::finished) return;
    if (!adopted_ && conn_ && !conn_->broken()) {
      try {
        conn_->run_simple("ROLLBACK", "rollback");
      } catch (const std::exception& e) {
        conn_->mark_broken();
        log_message(log_options_, log_level::warning,
                    std::string("mysql rollback failed: ") + redact_server_message(e.what()));
      } catch (...) {
        conn_->mark_broken();
      }
    }
    finish();
  }

  std::int64_t execute(std::string_view sql, const std::vector<value>& params) override {
    require_active("execute");
    user_statements_ = true;
    try {
      return conn_->execute(sql, params, "execute");
    } catch (const error& e) {
      after_error(e);
      throw;
    }
  }

  result_rows query(std::string_view sql, const std::vector<value>& params) override {
    require_active("query");
    user_statements_ = true;
    try {
      return conn_->query(sql, params, "query");
    } catch (const error& e) {
      after_error(e);
      throw;
    }
  }

  cas_result cas(const cas_request& request) override {
    require_active("cas");
    const std::string table = quote_identifier(request.table, dialect::mysql);
    const std::string version = quote_identifier(request.version_column, dialect::mysql);
    if (request.key.empty()) throw invalid_argument("cas: the key must name at least one column");
    refuse_text_keys_on_number_columns("cas", request.table, request.key);
    std::string sql = "UPDATE " + table + " SET ";
    std::vector<value> params;
    for (const auto& [column, v] : request.set) {
      const std::string c = quote_identifier(column, dialect::mysql);
      if (c == version) throw invalid_argument("cas: the version column cannot be assigned");
      sql += c + " = ?, ";
      params.push_back(v);
    }
    sql += version + " = " + version + " + 1";
    std::string where;
    std::vector<value> key_params;
    for (const auto& [column, v] : request.key) {
      where += (where.empty() ? " WHERE " : " AND ") + quote_identifier(column, dialect::mysql) + " = ?";
      key_params.push_back(v);
    }
    sql += where + " AND " + version + " = ?";
    params.insert(params.end(), key_params.begin(), key_params.end());
    params.emplace_back(request.expected_version);
    try {
      // The version is always incremented, so the row always changes; the session connection also
      // has CLIENT_FOUND_ROWS (and an adopted one may not): either way 1 means the CAS applied.
      if (conn_->execute(sql, params, "cas") >= 1) {
        return cas_result{cas_result::status::applied, request.expected_version + 1};
      }
      // Not applied: read the current version with a locking read (the latest committed version,
      // not this transaction's snapshot).
      // MariaDB spells it LOCK IN SHARE MODE; MySQL 8 deprecates that for FOR SHARE.
      const std::string read = "SELECT " + version + " FROM " + table + where +
                               (conn_->traits().mariadb ? " LOCK IN SHARE MODE" : " FOR SHARE");
      result_rows rows = conn_->query(read, key_params, "cas");
      if (rows.empty()) return cas_result{cas_result::status::missing, 0};
      const auto& v = rows[0][0];
      std::int64_t found = 0;
      try {
        found = v ? std::stoll(*v) : 0;
      } catch (const std::exception&) {
        throw invalid_argument("cas: version column " + request.version_column + " does not hold an integer");
      }
      return cas_result{cas_result::status::conflict, found};
    } catch (const error& e) {
      after_error(e);
      throw;
    }
  }

  bool require_lease(std::string_view table, const lease_ref& lease) override {
    require_active("require_lease");
    try {
      if (adopted_) {
        // Outside a transaction the shared lock would end with the statement (MariaDB tells).
        bool in_transaction = true;
        try {
          result_rows t = conn_->query("SELECT @@in_transaction", {}, "require_lease");
          in_transaction = t.empty() || !t[0][0] || *t[0][0] != "0";
        } catch (const database_error&) {
          // MySQL 8 has no @@in_transaction: trust the application.
        }
        if (!in_transaction) {
          throw invalid_argument(
              "require_lease on an adopted MySQL connection needs the application's transaction "
              "(START TRANSACTION first): outside one, the lock on the lease row ends with the statement");
        }
      }
      const std::string sql =
          render_sql(embedded_sql(sqllock::dialect::mysql, "lease_guard"), table, sqllock::dialect::mysql);
      return !conn_->query(sql, {lease.name, lease.owner, lease.token}, "lease_guard", true).empty();
    } catch (const error& e) {
      after_error(e);
      throw;
    }
  }

  fenced_update_result fenced_update(const fenced_update_request& request) override {
    require_active("fenced_update");
    refuse_text_keys_on_number_columns("fenced_update", request.table, request.key);
    const std::string table = quote_identifier(request.table, dialect::mysql);
    const std::string fence = quote_identifier(request.fence_column, dialect::mysql);
    std::string sql = "UPDATE " + table + " SET ";
    std::vector<value> params;
    for (const auto& [column, v] : request.set) {
      sql += quote_identifier(column, dialect::mysql) + " = ?, ";
      params.push_back(v);
    }
    sql += fence + " = ?";
    params.emplace_back(request.token);
    std::string where;
    std::vector<value> key_params;
    for (const auto& [column, v] : request.key) {
      where += (where.empty() ? " WHERE " : " AND ") + quote_identifier(column, dialect::mysql) + " = ?";
      key_params.push_back(v);
    }
    sql += where + " AND COALESCE(" + fence + ", 0) <= ?";
    params.insert(params.end(), key_params.begin(), key_params.end());
    params.emplace_back(request.token);
    try {
      if (conn_->execute(sql, params, "fenced_update") >= 1)
        return {fenced_update_result::status::applied, request.token};
      // Nothing changed: refused, missing, or (a connection without CLIENT_FOUND_ROWS) matched with
      // nothing to change. A locking read of the latest committed fence tells.
      const std::string read = "SELECT COALESCE(" + fence + ", 0) FROM " + table + where + " LOCK IN SHARE MODE";
      result_rows rows = conn_->query(read, key_params, "fenced_update");
      if (rows.empty()) return {fenced_update_result::status::missing, 0};
      const std::int64_t found = rows[0][0] ? std::stoll(*rows[0][0]) : 0;
      if (found > request.token) return {fenced_update_result::status::rejected, found};
      return {fenced_update_result::status::applied, request.token};
    } catch (const error& e) {
      after_error(e);
      throw;
    }
  }

  row_lock_result lock_rows(const row_lock_request& request) override {
    require_active("lock_rows");
    const std::string table = quote_identifier(request.table, dialect::mysql);
    const std::string key = quote_identifier(request.key_column, dialect::mysql);
    std::string columns;
    for (const auto& c : request.columns) {
      columns += (columns.empty() ? "" : ", ") + quote_identifier(c, dialect::mysql);
    }
    if (columns.empty()) columns = key;
    try {
      usable_index index = check_index(request.table, request.key_column, false, request.keys);
      if (request.keys.empty()) return row_lock_result{row_lock_result::status::acquired, {}};

      // The index is forced: left to itself the optimizer may scan the whole table (many keys, a
      // small table), and InnoDB would lock every row it scanned.
      std::string prefix = "SELECT " + columns + " FROM " + table + " FORCE INDEX (";
      std::string tail = ") WHERE " + key + " IN (";
      for (std::size_t i = 0; i < request.keys.size(); ++i) tail += i ? ", ?" : "?";
      // MySQL has no FOR NO KEY UPDATE: both strengths are FOR UPDATE.
      tail += ") ORDER BY " + key + " FOR UPDATE";
      std::string before;  // the statement's bound, on MariaDB
      int restore_timeout = -1;
      bool statement_bound = false;  // max_statement_time ends the statement (1969, query_canceled)
      switch (request.mode) {
        case lock_wait::nowait:
          tail += " NOWAIT";
          break;
        case lock_wait::skip_locked:
          tail += " SKIP LOCKED";
          break;
        case lock_wait::wait:
          if (request.timeout) {
            const int s = whole_seconds_up(*request.timeout, max_wait_s);
            if (conn_->traits().mariadb) {
              // WAIT n bounds each row's lock wait on its own (rows locked by transactions that
              // end one after the other would each get the whole bound); max_statement_time bounds
              // the statement as a whole. Whichever ends it, the rows were not available in time.
              before = "SET STATEMENT max_statement_time = " + std::to_string(s) + " FOR ";
              tail += " WAIT " + std::to_string(s);
              statement_bound = true;
            } else if (s == 0) {
              tail += " NOWAIT";
            } else {
              // MySQL 8 has no WAIT n: bound this statement through the session variable.
              restore_timeout = conn_->lock_timeout_s;
              set_lock_timeout(s);
            }
          }
          break;
      }
      row_lock_result result;
      try {
        try {
          auto statement = [&] {
            return before + prefix + quote_catalog_name(index.name) + tail;
          };
          try {
            result.rows = conn_->query(statement(), request.keys, "lock_rows");
          } catch (const database_error& e) {
            if (e.code() != "1176") throw;  // ER_KEY_DOES_NOT_EXITS: the cached index is gone
            index = check_index(request.table, request.key_column, true, request.keys);
            result.rows = conn_->query(statement(), request.keys, "lock_rows");
          }
        } catch (const query_canceled& e) {
          // Only the statement's bound running out (1969, ER_STATEMENT_TIMEOUT) means the rows were
          // not available in time; a KILL QUERY (1317) is a cancellation and stays one.
          if (!statement_bound || e.code() != "1969") throw;
          // InnoDB rolled back only this statement.
          throw lock_not_available(e.what(), std::string(backend_name), e.code(), "lock_rows");
        }
        result.outcome = row_lock_result::status::acquired;
      } catch (const lock_not_available&) {
        if (restore_timeout >= 0) set_lock_timeout(restore_timeout);
        // InnoDB rolled back only this statement: the transaction stays usable, unless the server
        // runs with innodb_rollback_on_timeout, which rolled back all of it.
        if (conn_->traits().rollback_on_timeout) {
          state_ = state::aborted;
          throw;
        }
        return row_lock_result{row_lock_result::status::not_available, {}};
      }
      if (restore_timeout >= 0) set_lock_timeout(restore_timeout);
      return result;
    } catch (const invalid_argument&) {
      throw;
    } catch (const error& e) {
      after_error(e);
      throw;
    }
  }

  /// Owned sessions: apply the transaction's lock_timeout to the connection.
  void start(const transaction_options& options) {
    const int wanted = options.lock_timeout ? std::max(1, whole_seconds_up(*options.lock_timeout, max_wait_s)) : 0;
    if (wanted != conn_->lock_timeout_s) set_lock_timeout(wanted);
  }

 private:
  enum class state { active, aborted, finished };

  void set_lock_timeout(int seconds) {
    if (seconds > 0) {
      conn_->execute(statement_text("session_lock_timeout", "sqllock_locks"), {static_cast<std::int64_t>(seconds)},
                     "session_lock_timeout");
    } else {
      conn_->execute(statement_text("session_lock_timeout_default", "sqllock_locks"), {}, "session_lock_timeout");
    }
    conn_->lock_timeout_s = seconds;
  }

  void require_active(const char* what) {
    if (state_ == state::active) return;
    if (state_ == state::aborted) {
      throw database_error(std::string("mysql ") + what +
                               ": the transaction was rolled back by an "
                               "earlier error (" +
                               abort_reason_ + "); nothing was committed",
                           std::string(backend_name), "", what);
    }
    throw database_error(std::string("mysql ") + what + ": the transaction has ended", std::string(backend_name), "",
                         what);
  }

  /// Bookkeeping after a mapped error of a statement in this transaction.
  void after_error(const error& e) {
    if (dynamic_cast<const connection_lost*>(&e)) {
      conn_->mark_broken();
      mark_aborted(e);
    } else if (dynamic_cast<const deadlock_detected*>(&e)) {
      // InnoDB already rolled back the whole transaction.
      if (!adopted_) roll_back_quietly();
      mark_aborted(e);
    } else if (dynamic_cast<const lock_not_available*>(&e)) {
      // InnoDB rolled back only the statement (or all, with innodb_rollback_on_timeout): roll back
      // the rest explicitly so no half transaction lingers. An adopted transaction belongs to the
      // application, which decides.
      if (!adopted_) {
        roll_back_quietly();
        mark_aborted(e);
      }
    }
  }

  void mark_aborted(const error& e) {
    state_ = state::aborted;
    abort_reason_ = e.code().empty() ? std::string("error") : "error " + e.code();
  }

  void roll_back_quietly() noexcept {
    try {
      conn_->run_simple("ROLLBACK", "rollback");
    } catch (...) {
      conn_->mark_broken();
    }
  }

  void finish() noexcept {
    state_ = state::finished;
    if (!conn_) return;
    if (adopted_) {
      conn_.reset();  // borrowed: nothing is closed
    } else if (pool_) {
      // The application's statements may have set the session's wait bound (MySQL has no SET
      // LOCAL): unknown, so the next transaction on this connection sets its own.
      if (user_statements_) conn_->lock_timeout_s = -1;
      pool_->give_back(std::move(conn_));
    } else {
      conn_.reset();
    }
  }

  /// The index lock_rows forces, from the cache unless `fresh`; refuses (invalid_argument) a
  /// column without one, number keys on a text column, and text keys that are no number on a
  /// number column.
  usable_index check_index(const std::string& table_id, const std::string& column, bool fresh,
                           const std::vector<value>& keys) {
    usable_index index = find_index(table_id, column, fresh);
    if (!equals_ignore_case(index.engine, "InnoDB")) {
      throw invalid_argument("lock_rows: table " + table_id + " uses the " + index.engine +
                             " engine, which keeps no row lock past the statement (only InnoDB does); "
                             "no lock was taken");
    }
    if (index.text_column) {
      for (const auto& k : keys) {
        if (std::holds_alternative<std::int64_t>(k) || std::holds_alternative<double>(k)) {
          throw invalid_argument("lock_rows: column " + column + " of table " + table_id +
                                 " holds text and a key is a number: compared as numbers, no index "
                                 "serves the lookup and InnoDB would lock every row; give the keys as text. "
                                 "No lock was taken");
        }
      }
    }
    if (index.numeric_column) {
      for (const auto& k : keys) {
        if (const auto* text = std::get_if<std::string>(&k); text && !number_text(*text)) {
          refuse_text_key_on_number_column("lock_rows", column, table_id, "No lock was taken");
        }
      }
    }
    return index;
  }

  /// A key given as text that is no number, for a column that holds numbers, would be read as 0 or
  /// as its leading digits and select another row (`WHERE id = 'two'` is `WHERE id = 0`): refused
  /// (invalid_argument) before anything is written, as lock_rows refuses it. The column's type is
  /// looked up only for such a key, and cached.
  void refuse_text_keys_on_number_columns(const char* what, const std::string& table_id,
                                          const std::vector<std::pair<std::string, value>>& key) {
    for (const auto& [column, v] : key) {
      const auto* text = std::get_if<std::string>(&v);
      if (text == nullptr || number_text(*text)) continue;
      auto [schema, table] = split_table(table_id);
      if (schema.empty()) schema = conn_->traits().database;
      const std::string cache_key = schema + '.' + table + '.' + column;
      std::optional<bool> numeric;
      {
        std::lock_guard lock(indexes().mutex);
        if (auto it = indexes().numeric.find(cache_key); it != indexes().numeric.end()) numeric = it->second;
      }
      if (!numeric) {
        result_rows rows;
        try {
          rows = conn_->query(statement_text("column_numeric", "sqllock_locks"), {schema, table, column},
                              "column_numeric");
        } catch (const error& e) {
          after_error(e);
          throw;
        }
        if (rows.empty()) continue;  // no such column: the statement says so
        numeric = rows[0][0] && *rows[0][0] != "0";
        std::lock_guard lock(indexes().mutex);
        indexes().numeric[cache_key] = *numeric;
      }
      if (*numeric) refuse_text_key_on_number_column(what, column, table_id, "Nothing was written");
    }
  }

  /// The refusal of a key given as text that is no number (number_text) for a column that holds
  /// numbers (lock_rows, cas, fenced_update); `outcome` says what was not done.
  [[noreturn]] static void refuse_text_key_on_number_column(const std::string& what, const std::string& column,
                                                            const std::string& table_id, const char* outcome) {
    throw invalid_argument(what + ": column " + column + " of table " + table_id +
                           " holds numbers and a key is text that is no number: it would be read as 0 or as its "
                           "leading digits and select another row; give the keys as numbers. " + outcome);
  }

  usable_index find_index(const std::string& table_id, const std::string& column, bool fresh) {
    auto [schema, table] = split_table(table_id);
    if (schema.empty()) schema = conn_->traits().database;
    if (schema.empty()) {
      throw invalid_argument("lock_rows: no database selected; name the table as schema.table");
    }
    const std::string cache_key = schema + '.' + table + '.' + column;
    if (!fresh) {
      std::lock_guard lock(indexes().mutex);
      if (auto it = indexes().usable.find(cache_key); it != indexes().usable.end()) return it->second;
    }
    result_rows rows =
        conn_->query(statement_text("index_check", "sqllock_locks"), {schema, table, column}, "index_check");
    const bool usable = !rows.empty() && rows[0][0];
    if (!usable) {
      std::lock_guard lock(indexes().mutex);
      indexes().usable.erase(cache_key);
      throw invalid_argument("lock_rows: column " + column + " of table " + table_id +
                             " is not the first column of a unique or primary index; InnoDB would "
                             "lock every scanned row (and block inserts), so no lock was taken");
    }
    usable_index index{*rows[0][0], rows[0][1] && *rows[0][1] != "0", rows[0][2].value_or(""),
                       rows[0][3] && *rows[0][3] != "0"};
    std::lock_guard lock(indexes().mutex);
    indexes().usable[cache_key] = index;
    return index;
  }

  std::shared_ptr<connection_pool> pool_;
  std::unique_ptr<connection> conn_;
  client_options log_options_;
  bool adopted_ = false;
  bool user_statements_ = false;  ///< execute() or query() ran the application's SQL
  state state_ = state::active;
  std::string abort_reason_;
};

}  // namespace

std::unique_ptr<session> make_owned_session(std::shared_ptr<connection_pool> pool, const transaction_options& options,
                                            const client_options& client) {
  std::unique_ptr<connection> c = pool->take();
  auto s = std::make_unique<mysql_session>(pool, std::move(c), client);
  s->start(options);  // on failure the session's destructor rolls back and returns the connection
  return s;
}

std::unique_ptr<session> make_adopted_session(sql::Connection* c) {
  if (c == nullptr) throw invalid_argument("sqllock::adopt: null sql::Connection");
  return std::make_unique<mysql_session>(std::make_unique<connection>(c));
}

}  // namespace sqllock::detail::mysql

namespace sqllock {

transaction adopt(sql::Connection* connection) { return transaction(detail::mysql::make_adopted_session(connection)); }

}  // namespace sqllock
