// SQLite transactions: BEGIN IMMEDIATE (sent lazily), statements, CAS and whole-database "row locks".
#include <cctype>
#include <exception>

#include "core/text.hpp"
#include "sqlite/sqlite_connection.hpp"
#include "sqllock/sqlite.hpp"

namespace sqllock::detail::sqlite {

// A transaction on its own connection (or a borrowed one). BEGIN IMMEDIATE is sent lazily, so
// that a first lock_rows can apply its own wait bound and report "not available" as a result.
class sqlite_session final : public session {
 public:
  sqlite_session(sqlite3* db, std::function<void(sqlite3*, bool)> give_back, transaction_options options, bool borrowed,
                 client_options log_options)
      : db_(db),
        give_back_(std::move(give_back)),
        options_(options),
        borrowed_(borrowed),
        log_options_(std::move(log_options)) {}

  ~sqlite_session() override { rollback(); }

  void commit() override {
    if (finished_) throw invalid_argument("transaction already finished");
    finished_ = true;
    if (ended_by_error_) {
      hand_back(true);
      throw database_error("sqlite commit: the transaction was rolled back by an earlier error (" + ended_reason_ +
                               "); nothing was committed",
                           kind_name, "", "commit");
    }
    if (!borrowed_ && begun_) {
      int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) {
        // The error from the connection as COMMIT left it: the rollback changes its message, and
        // hand_back closes it.
        std::exception_ptr refused;
        try {
          throw_error(db_, rc, "commit");
        } catch (...) {
          refused = std::current_exception();
        }
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
        hand_back(false);
        std::rethrow_exception(refused);
      }
    }
    hand_back(true);
  }

  void rollback() noexcept override {
    if (finished_) return;
    finished_ = true;
    bool healthy = true;
    if (!borrowed_ && begun_) {
      int rc = sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) {
        healthy = false;
        log_message(log_options_, log_level::error, std::string("sqlite: rollback failed: ") + sqlite3_errmsg(db_));
      }
    }
    hand_back(healthy);
  }

  std::int64_t execute(std::string_view sql, const std::vector<value>& params) override {
    return statement("execute", [&] {
      ensure_begun(options_.lock_timeout);
      auto s = prepare(db_, sql, "execute", false);
      statement_run run(db_, s.get(), "execute");
      run.bind_all(params);
      while (run.step()) {
      }
      return sqlite3_changes64(db_);
    });
  }

  result_rows query(std::string_view sql, const std::vector<value>& params) override {
    return statement("query", [&] {
      ensure_begun(options_.lock_timeout);
      auto s = prepare(db_, sql, "query", false);
      statement_run run(db_, s.get(), "query");
      run.bind_all(params);
      return run.all();
    });
  }

  // "UPDATE table SET c1 = ?, c2 = ?, " with its values, and "k1 = ? AND k2 = ?" with its keys:
  // the shared start of cas() and fenced_update() (the caller appends its own column and WHERE).
  struct keyed_update_parts {
    std::string sql;
    std::vector<value> params;
    std::string where;
    std::vector<value> key_params;
  };
  template <class Set, class Key>
  static keyed_update_parts keyed_update(const std::string& table, const Set& set, const Key& key) {
    keyed_update_parts u{"UPDATE " + table + " SET ", {}, {}, {}};
    for (const auto& [col, v] : key) {
      u.where += (u.where.empty() ? "" : " AND ") + quote_identifier(col, dialect::sqlite) + " = ?";
      u.key_params.push_back(v);
    }
    for (const auto& [col, v] : set) {
      u.sql += quote_identifier(col, dialect::sqlite) + " = ?, ";
      u.params.push_back(v);
    }
    return u;
  }

  cas_result cas(const cas_request& r) override {
    return statement("cas", [&] { return cas_in(r); });
  }

  cas_result cas_in(const cas_request& r) {
    for (const auto& [column, v] : r.key) refuse_spaced_number_key("cas", r.table, column, v);
    ensure_begun(options_.lock_timeout);
    const std::string table = quote_identifier(r.table, dialect::sqlite);
    const std::string version = quote_identifier(r.version_column, dialect::sqlite);
    auto [sql, params, where, key_params] = keyed_update(table, r.set, r.key);
    sql += version + " = " + version + " + 1 WHERE " + where + " AND " + version + " = ? RETURNING " + version;
    params.insert(params.end(), key_params.begin(), key_params.end());
    params.push_back(r.expected_version);
    {
      auto s = prepare(db_, sql, "cas_update", false);
      statement_run run(db_, s.get(), "cas_update");
      run.bind_all(params);
      if (run.step()) return {cas_result::status::applied, run.int_at(0)};
    }
    auto s = prepare(db_, "SELECT " + version + " FROM " + table + " WHERE " + where, "cas_read", false);
    statement_run run(db_, s.get(), "cas_read");
    run.bind_all(key_params);
    if (run.step()) return {cas_result::status::conflict, run.int_at(0)};
    return {cas_result::status::missing, 0};
  }

  bool require_lease(std::string_view table, const lease_ref& lease) override {
    return statement("require_lease", [&] { return require_lease_in(table, lease); });
  }

  bool require_lease_in(std::string_view table, const lease_ref& lease) {
    if (borrowed_) {
      // The application owns the transaction: it must already hold the write lock.
      if (sqlite3_txn_state(db_, nullptr) != SQLITE_TXN_WRITE) {
        throw invalid_argument(
            "require_lease on an adopted SQLite connection needs the application's transaction to hold the write "
            "lock (BEGIN IMMEDIATE): only then can no other connection take the lease over before it ends");
      }
    } else {
      ensure_begun(options_.lock_timeout);
    }
    const std::string sql =
        render_sql(embedded_sql(sqllock::dialect::sqlite, "lease_guard"), table, sqllock::dialect::sqlite);
    auto s = prepare(db_, sql, "lease_guard", false, true);
    statement_run run(db_, s.get(), "lease_guard");
    run.bind(1, lease.name);
    run.bind(2, lease.owner);
    run.bind(3, lease.token);
    return run.step(true);
  }

  fenced_update_result fenced_update(const fenced_update_request& r) override {
    return statement("fenced_update", [&] { return fenced_update_in(r); });
  }

  fenced_update_result fenced_update_in(const fenced_update_request& r) {
    for (const auto& [column, v] : r.key) refuse_spaced_number_key("fenced_update", r.table, column, v);
    ensure_begun(options_.lock_timeout);
    const std::string table = quote_identifier(r.table, dialect::sqlite);
    const std::string fence = quote_identifier(r.fence_column, dialect::sqlite);
    auto [sql, params, where, key_params] = keyed_update(table, r.set, r.key);
    sql += fence + " = ? WHERE " + where + " AND coalesce(" + fence + ", 0) <= ? RETURNING " + fence;
    params.push_back(r.token);
    params.insert(params.end(), key_params.begin(), key_params.end());
    params.push_back(r.token);
    {
      auto s = prepare(db_, sql, "fenced_update", false);
      statement_run run(db_, s.get(), "fenced_update");
      run.bind_all(params);
      if (run.step()) return {fenced_update_result::status::applied, r.token};
    }
    auto s = prepare(db_, "SELECT coalesce(" + fence + ", 0) FROM " + table + " WHERE " + where, "fenced_update_check",
                     false);
    statement_run run(db_, s.get(), "fenced_update_check");
    run.bind_all(key_params);
    if (run.step()) return {fenced_update_result::status::rejected, run.int_at(0)};
    return {fenced_update_result::status::missing, 0};
  }

  row_lock_result lock_rows(const row_lock_request& r) override {
    return statement("lock_rows", [&] { return lock_rows_in(r); });
  }

  row_lock_result lock_rows_in(const row_lock_request& r) {
    if (borrowed_) {
      // The application owns the transaction: it must already hold the write lock.
      if (sqlite3_txn_state(db_, nullptr) != SQLITE_TXN_WRITE) {
        throw invalid_argument(
            "lock_rows on an adopted SQLite connection needs the application's transaction to hold the write "
            "lock (BEGIN IMMEDIATE)");
      }
    }
    for (const auto& k : r.keys) refuse_spaced_number_key("lock_rows", r.table, r.key_column, k);
    if (!borrowed_ && !begun_) {
      std::optional<std::chrono::milliseconds> wait = options_.lock_timeout;
      if (r.mode != lock_wait::wait) wait = std::chrono::milliseconds(0);
      if (r.timeout) wait = r.mode == lock_wait::wait ? *r.timeout : std::chrono::milliseconds(0);
      try {
        ensure_begun(wait);
      } catch (const lock_not_available&) {
        // SQLite locks the whole database: nothing is free, so SKIP LOCKED yields no rows.
        if (r.mode == lock_wait::skip_locked) return {row_lock_result::status::acquired, {}};
        return {row_lock_result::status::not_available, {}};
      }
    }
    const std::string key = quote_identifier(r.key_column, dialect::sqlite);
    std::string cols;
    for (const auto& c : r.columns) cols += (cols.empty() ? "" : ", ") + quote_identifier(c, dialect::sqlite);
    if (cols.empty()) cols = key;
    std::string in;
    for (std::size_t i = 0; i < r.keys.size(); ++i) in += i ? ", ?" : "?";
    auto s = prepare(db_,
                     "SELECT " + cols + " FROM " + quote_identifier(r.table, dialect::sqlite) + " WHERE " + key +
                         " IN (" + in + ") ORDER BY " + key,
                     "lock_rows", false);
    statement_run run(db_, s.get(), "lock_rows");
    run.bind_all(r.keys);
    return {row_lock_result::status::acquired, run.all()};
  }

 private:
  /// A key given as text with space around a number (" 1") for a column of numeric affinity (its
  /// declared type has INT, or none of CHAR, CLOB, TEXT, BLOB and is not empty): SQLite would read
  /// it as the number and select row 1, but a key is an exact value. Refused (invalid_argument)
  /// before anything is written or locked. The column's type is looked up only for such a key.
  void refuse_spaced_number_key(const std::string& what, const std::string& table_id, const std::string& column,
                                const value& key) {
    const auto* text = std::get_if<std::string>(&key);
    if (text == nullptr || !space_around(*text)) return;
    const auto dot = table_id.find('.');
    const bool qualified = dot != std::string::npos;
    auto s = prepare(db_,
                     qualified ? "SELECT type FROM pragma_table_info(?1, ?3) WHERE name = ?2 COLLATE NOCASE"
                               : "SELECT type FROM pragma_table_info(?1) WHERE name = ?2 COLLATE NOCASE",
                     "column_type", false);
    statement_run run(db_, s.get(), "column_type");
    run.bind(1, qualified ? table_id.substr(dot + 1) : table_id);
    run.bind(2, column);
    if (qualified) run.bind(3, table_id.substr(0, dot));
    if (!run.step()) return;  // no such column: the statement says so
    std::string type = run.text_at(0).value_or("");
    for (auto& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const auto has = [&](const char* part) { return type.find(part) != std::string::npos; };
    const bool numeric = has("INT") || !(type.empty() || has("CHAR") || has("CLOB") || has("TEXT") || has("BLOB"));
    if (!numeric) return;
    throw invalid_argument(spaced_number_key_refusal(what, column, table_id));
  }

  /// Runs one statement of this transaction. A failed statement may have ended the transaction on
  /// its own (SQLite rolls all of it back for INSERT OR ROLLBACK, a table's ON CONFLICT ROLLBACK,
  /// RAISE(ROLLBACK), SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM ...), leaving the connection in
  /// autocommit mode: every later statement would then commit on its own, outside the write lock
  /// and any lease guard. Such a transaction refuses every later statement and its commit.
  template <class F>
  auto statement(const char* what, F&& f) -> decltype(f()) {
    if (ended_by_error_) {
      throw database_error(std::string("sqlite ") + what + ": the transaction was rolled back by an earlier error (" +
                               ended_reason_ + "); nothing was committed",
                           kind_name, "", what);
    }
    // Borrowed: the application's transaction, open or not before this statement.
    const bool was_open = borrowed_ && !sqlite3_get_autocommit(db_);
    try {
      return f();
    } catch (const error& e) {
      if ((borrowed_ ? was_open : begun_) && sqlite3_get_autocommit(db_)) {
        ended_by_error_ = true;
        ended_reason_ = e.what();
        begun_ = false;  // nothing left to roll back
      }
      throw;
    }
  }

  void ensure_begun(std::optional<std::chrono::milliseconds> wait) {
    if (finished_) throw invalid_argument("transaction already finished");
    if (borrowed_ || begun_) return;
    const int rc = begin_immediate(db_, wait.value_or(default_busy_timeout).count());
    if (rc != SQLITE_OK) {
      if ((rc & 0xff) == SQLITE_BUSY) {
        throw lock_not_available("sqlite: the database is write-locked by another connection (BEGIN IMMEDIATE)",
                                 kind_name, std::to_string(rc), "begin_immediate");
      }
      throw_error(db_, rc, "begin_immediate");
    }
    begun_ = true;
  }

  void hand_back(bool healthy) noexcept {
    if (give_back_) give_back_(db_, healthy);
    give_back_ = nullptr;
  }

  sqlite3* db_;
  std::function<void(sqlite3*, bool)> give_back_;
  transaction_options options_;
  bool borrowed_;
  client_options log_options_;
  bool begun_ = false;
  bool finished_ = false;
  bool ended_by_error_ = false;  ///< a failed statement rolled the whole transaction back
  std::string ended_reason_;
};

std::unique_ptr<session> make_session(sqlite3* db, std::function<void(sqlite3*, bool)> give_back,
                                      const transaction_options& options, const client_options& log_options) {
  return std::make_unique<sqlite_session>(db, std::move(give_back), options, false, log_options);
}

}  // namespace sqllock::detail::sqlite

namespace sqllock {

transaction adopt(sqlite3* connection) {
  if (!connection) throw invalid_argument("adopt: null sqlite3 handle");
  // The lease statements' clock, for require_lease in the application's transaction.
  detail::sqlite::register_clock(connection);
  return transaction(std::make_unique<detail::sqlite::sqlite_session>(connection, nullptr, transaction_options{}, true,
                                                                      client_options{}));
}

}  // namespace sqllock
