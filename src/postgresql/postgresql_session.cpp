// PostgreSQL transactions: statements with `?` parameters, CAS and row locks, owned or adopted.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "core/sql_lexer.hpp"
#include "core/text.hpp"
#include "postgresql/postgresql_connection.hpp"
#include "sqllock/postgresql.hpp"

namespace sqllock::detail::pg {

std::pair<std::string, std::size_t> rewrite_placeholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 16);
  std::size_t count = 0;
  std::size_t i = 0;
  const std::size_t n = sql.size();
  while (i < n) {
    // Strings, quoted identifiers, comments and dollar-quoted bodies are copied untouched.
    if (const sql_span span = sql_span_at(sql, i, dialect::postgresql); span.kind != sql_span_kind::none) {
      out.append(sql.substr(i, span.length));
      i += span.length;
    } else if (sql[i] == '?') {
      out += '$';
      out += std::to_string(++count);
      ++i;
    } else {
      out += sql[i];
      ++i;
    }
  }
  return {std::move(out), count};
}

std::string timeout_text(std::chrono::milliseconds t) {
  // lock_timeout = 0 means "wait forever" in PostgreSQL; the smallest real bound is 1 ms. A bound
  // the setting cannot hold is no bound (a longer wait than 24.8 days), never an error.
  if (t.count() > std::numeric_limits<std::int32_t>::max()) return "0";
  return std::to_string(t.count() < 1 ? 1 : t.count()) + "ms";
}

namespace {

std::string quote(std::string_view id) { return quote_identifier(id, dialect::postgresql); }

std::int64_t affected_rows(const PGresult* r) {
  const char* s = PQcmdTuples(const_cast<PGresult*>(r));
  std::int64_t v = 0;
  if (s && *s) std::from_chars(s, s + std::char_traits<char>::length(s), v);
  return v;
}

/// A column's type as pg_attribute gives it: type oid and atttypmod (-1: no length or precision).
struct column_type {
  std::int64_t oid = 0;
  std::int64_t typmod = -1;
};

/// Column types of the user tables cas and fenced_update write, per database and table name, for
/// the whole process (refusing_bad_data). Never invalidated: a column whose type changed since
/// costs at worst a savepoint not needed, or a data error that aborts the transaction as before.
struct column_type_cache {
  std::mutex mutex;
  std::map<std::string, std::map<std::string, column_type>> tables;
};
column_type_cache& column_types() {
  static column_type_cache cache;
  return cache;
}

/// Whether the server's input of `v` (sent as text, see to_text) for a column of type `t` cannot
/// raise a data exception (class 22): so sure only for the common cases (numbers for number
/// columns, ASCII text for unbounded text columns); anything else may.
bool fits_surely(const value& v, const column_type& t) {
  constexpr std::int64_t int8 = 20, int2 = 21, int4 = 23, text = 25, float4 = 700, float8 = 701, bpchar = 1042,
                         varchar = 1043, numeric = 1700;
  const bool unbounded_text = t.oid == text || ((t.oid == varchar || t.oid == bpchar) && t.typmod < 0);
  if (std::holds_alternative<std::monostate>(v)) return true;
  if (const auto* n = std::get_if<std::int64_t>(&v)) {
    switch (t.oid) {
      case int8: case float4: case float8: return true;
      case int4: return *n >= std::numeric_limits<std::int32_t>::min() && *n <= std::numeric_limits<std::int32_t>::max();
      case int2: return *n >= std::numeric_limits<std::int16_t>::min() && *n <= std::numeric_limits<std::int16_t>::max();
      case numeric: return t.typmod < 0;
      default: return unbounded_text;
    }
  }
  if (std::holds_alternative<double>(v)) return t.oid == float8 || (t.oid == numeric && t.typmod < 0);
  const auto& s = std::get<std::string>(v);
  if (unbounded_text) {
    // ASCII without NUL: no encoding error is possible.
    return std::all_of(s.begin(), s.end(), [](char c) { return c > 0 && static_cast<unsigned char>(c) < 0x80; });
  }
  if (t.oid == int8 || t.oid == int4 || t.oid == int2) {
    std::int64_t n = 0;
    const char* b = s.data() + (!s.empty() && s[0] == '+' ? 1 : 0);
    const char* e = s.data() + s.size();
    if (b == e || (*b == '-' && (b + 1 == e || b != s.data()))) return false;  // "", "-", "+-1"
    const auto [end, ec] = std::from_chars(b, e, n);
    return ec == std::errc() && end == e && fits_surely(value(n), t);
  }
  return false;
}

class pg_session final : public session {
 public:
  // Owned: a connection with a transaction already begun, returned to `pool` at the end.
  pg_session(std::shared_ptr<connection_pool> pool, conn_ptr conn, client_options options)
      : pool_(std::move(pool)), owned_(std::move(conn)), conn_(owned_.get()), options_(std::move(options)) {}
  // Adopted: the application's connection and its current transaction, never ended or closed.
  explicit pg_session(PGconn* conn) : conn_(conn), adopted_(true) {}

  ~pg_session() override {
    if (!done_) rollback();
  }

  void commit() override {
    check_active("commit");
    if (adopted_) {
      done_ = true;
      return;
    }
    done_ = true;
    try {
      auto results = exec_simple(conn_, "COMMIT", "commit");
      // COMMIT of a transaction that had failed answers ROLLBACK instead of an error.
      if (!results.empty() && std::string_view(PQcmdStatus(results.back().get())) == "ROLLBACK") {
        finish();
        throw database_error(
            "postgresql commit: the transaction was rolled back because an "
            "earlier statement failed",
            std::string(backend_name), "25P02", "commit");
      }
    } catch (...) {
      finish();
      throw;
    }
    finish();
  }

  void rollback() noexcept override {
    if (done_) return;
    done_ = true;
    if (adopted_) return;
    try {
      if (PQstatus(conn_) == CONNECTION_OK) exec_simple(conn_, "ROLLBACK", "rollback");
    } catch (const std::exception& e) {
      log_message(options_, log_level::warning, e.what());
    }
    finish();
  }

  std::int64_t execute(std::string_view sql, const std::vector<value>& params) override {
    check_active("execute");
    auto r = run_user(sql, params, "execute");
    return affected_rows(r.get());
  }

  result_rows query(std::string_view sql, const std::vector<value>& params) override {
    check_active("query");
    auto r = run_user(sql, params, "query");
    return to_rows(r.get());
  }

  cas_result cas(const cas_request& request) override {
    check_active("cas");
    if (request.key.empty()) throw invalid_argument("cas: the key selects no row (empty key)");
    refuse_spaced_number_keys("cas", request.table, request.key);
    const std::string table = quote(request.table);
    const std::string version = quote(request.version_column);
    text_params params;
    std::string set_sql;
    for (const auto& [column, v] : request.set) {
      set_sql += quote(column) + " = $" + std::to_string(params.size() + 1) + ", ";
      params.push_back(to_text(v));
    }
    std::string where;
    text_params key_params;
    for (const auto& [column, v] : request.key) {
      if (!where.empty()) where += " AND ";
      where += quote(column) + " = $" + std::to_string(params.size() + 1);
      params.push_back(to_text(v));
    }
    const std::string sql = "UPDATE " + table + " SET " + set_sql + version + " = " + version + " + 1 WHERE " + where +
                            " AND " + version + " = $" + std::to_string(params.size() + 1) + " RETURNING " + version;
    params.push_back(std::to_string(request.expected_version));
    return refusing_bad_data("cas", request.table, request.key, request.set,
                             {request.version_column, value(request.expected_version)}, [&] {
      return cas_statements(request, table, version, sql, std::move(params));
    });
  }

  cas_result cas_statements(const cas_request& request, const std::string& table, const std::string& version,
                            const std::string& sql, text_params params) {
    auto r = exec_params(conn_, sql, params, "cas");
    cas_result out;
    if (PQntuples(r.get()) > 0) {
      out.outcome = cas_result::status::applied;
      out.version = field_int(r.get(), 0, 0);
      return out;
    }
    // Nothing matched: tell a version conflict from a missing row.
    params.pop_back();
    text_params key_only(params.end() - static_cast<std::ptrdiff_t>(request.key.size()), params.end());
    std::string check_where;
    for (std::size_t i = 0; i < request.key.size(); ++i) {
      if (!check_where.empty()) check_where += " AND ";
      check_where += quote(request.key[i].first) + " = $" + std::to_string(i + 1);
    }
    auto c = exec_params(conn_, "SELECT " + version + " FROM " + table + " WHERE " + check_where + " LIMIT 1", key_only,
                         "cas_check");
    if (PQntuples(c.get()) > 0) {
      out.outcome = cas_result::status::conflict;
      out.version = field_int(c.get(), 0, 0);
    } else {
      out.outcome = cas_result::status::missing;
      out.version = 0;
    }
    return out;
  }

  bool require_lease(std::string_view table, const lease_ref& lease) override {
    check_active("require_lease");
    if (PQtransactionStatus(conn_) != PQTRANS_INTRANS) {
      throw invalid_argument(
          "require_lease on an adopted PostgreSQL connection needs the application's transaction "
          "(BEGIN first): outside one, the lock on the lease row ends with the statement");
    }
    const std::string sql =
        render_sql(embedded_sql(sqllock::dialect::postgresql, "lease_guard"), table, sqllock::dialect::postgresql);
    auto r = exec_params(conn_, sql, {lease.name, lease.owner, std::to_string(lease.token)}, "lease_guard");
    return PQntuples(r.get()) > 0;
  }

  fenced_update_result fenced_update(const fenced_update_request& request) override {
    check_active("fenced_update");
    refuse_spaced_number_keys("fenced_update", request.table, request.key);
    const std::string table = quote(request.table);
    const std::string fence = quote(request.fence_column);
    text_params params;
    std::string sql = "UPDATE " + table + " SET ";
    for (const auto& [column, v] : request.set) {
      sql += quote(column) + " = $" + std::to_string(params.size() + 1) + ", ";
      params.push_back(to_text(v));
    }
    params.push_back(std::to_string(request.token));
    const std::string token_param = "$" + std::to_string(params.size()) + "::bigint";
    sql += fence + " = " + token_param;
    std::string where;
    text_params key_params;
    for (const auto& [column, v] : request.key) {
      if (!where.empty()) where += " AND ";
      where += quote(column) + " = $" + std::to_string(params.size() + 1);
      params.push_back(to_text(v));
      key_params.push_back(to_text(v));
    }
    sql += " WHERE " + where + " AND coalesce(" + fence + ", 0) <= " + token_param;
    return refusing_bad_data("fenced_update", request.table, request.key, request.set,
                             {request.fence_column, value(request.token)}, [&] {
      return fenced_update_statements(request, table, fence, sql, params, key_params);
    });
  }

  fenced_update_result fenced_update_statements(const fenced_update_request& request, const std::string& table,
                                                const std::string& fence, const std::string& sql,
                                                const text_params& params, const text_params& key_params) {
    auto r = exec_params(conn_, sql, params, "fenced_update");
    if (affected_rows(r.get()) > 0) return {fenced_update_result::status::applied, request.token};
    std::string check_where;
    for (std::size_t i = 0; i < request.key.size(); ++i) {
      if (!check_where.empty()) check_where += " AND ";
      check_where += quote(request.key[i].first) + " = $" + std::to_string(i + 1);
    }
    auto c =
        exec_params(conn_, "SELECT coalesce(" + fence + ", 0) FROM " + table + " WHERE " + check_where + " LIMIT 1",
                    key_params, "fenced_update_check");
    if (PQntuples(c.get()) == 0) return {fenced_update_result::status::missing, 0};
    return {fenced_update_result::status::rejected, field_int(c.get(), 0, 0)};
  }

  row_lock_result lock_rows(const row_lock_request& request) override {
    check_active("lock_rows");
    const std::string table = quote(request.table);
    const std::string key = quote(request.key_column);
    std::string columns;
    if (request.columns.empty()) {
      columns = key;
    } else {
      for (const auto& c : request.columns) {
        if (!columns.empty()) columns += ", ";
        columns += quote(c);
      }
    }
    row_lock_result out;
    if (request.keys.empty()) {
      out.outcome = row_lock_result::status::acquired;
      return out;
    }
    std::vector<std::optional<std::string>> keys;
    keys.reserve(request.keys.size());
    for (const auto& k : request.keys) keys.push_back(to_text(k));

    std::string sql = "SELECT " + columns + " FROM " + table + " WHERE " + key + " = ANY($1) ORDER BY " + key +
                      (request.strength == lock_strength::no_key_update ? " FOR NO KEY UPDATE" : " FOR UPDATE");
    if (request.mode == lock_wait::nowait) sql += " NOWAIT";
    if (request.mode == lock_wait::skip_locked) sql += " SKIP LOCKED";

    // A savepoint keeps the transaction usable when the lock is not available (55P03), and
    // scopes the per-statement lock_timeout: rolling back to it restores the setting too.
    const bool in_tx = PQtransactionStatus(conn_) == PQTRANS_INTRANS;
    if (!in_tx) {
      // Only an adopted connection can be outside a transaction: its row locks would end with the
      // statement, so "acquired" would be a lie. Nothing is locked or changed.
      throw invalid_argument(
          "lock_rows on an adopted PostgreSQL connection needs the application's transaction "
          "(BEGIN first): outside one, row locks end with the statement");
    }
    for (const auto& k : request.keys) refuse_spaced_number_key("lock_rows", request.table, request.key_column, k);
    const bool bounded = request.mode == lock_wait::wait && request.timeout.has_value();
    // The bound is the statement's: lock_timeout bounds each lock wait on its own (rows locked by
    // transactions that end one after the other would each get the whole bound), so
    // statement_timeout bounds the statement as a whole; whichever ends it, the rows were not
    // available in time.
    std::optional<std::pair<std::string, std::string>> old_timeouts;
    if (in_tx) exec_simple(conn_, "SAVEPOINT sqllock_lock_rows", "lock_rows");
    if (bounded) {
      auto r = exec_params(conn_,
                           "SELECT current_setting('lock_timeout'), current_setting('statement_timeout'), "
                           "set_config('lock_timeout', $1, $2::boolean), set_config('statement_timeout', $1, $2::boolean)",
                           {timeout_text(*request.timeout), std::string(in_tx ? "true" : "false")}, "lock_rows_timeout");
      old_timeouts.emplace(field_text(r.get(), 0, 0), field_text(r.get(), 0, 1));
    }
    auto not_available = [&] {
      if (in_tx) {
        exec_simple(conn_, "ROLLBACK TO SAVEPOINT sqllock_lock_rows; RELEASE SAVEPOINT sqllock_lock_rows", "lock_rows");
      } else if (old_timeouts) {
        restore_timeouts(*old_timeouts, false);
      }
      out.outcome = row_lock_result::status::not_available;
      out.rows.clear();
      return out;
    };
    const auto sent = std::chrono::steady_clock::now();
    try {
      auto r = exec_params(conn_, sql, {array_literal(keys)}, "lock_rows");
      out.outcome = row_lock_result::status::acquired;
      out.rows = to_rows(r.get());
    } catch (const lock_not_available&) {
      return not_available();
    } catch (const database_error& e) {
      // Rolled back to the savepoint, the lock wait bound goes with it.
      refuse_data_exception(e, "sqllock_lock_rows",
                            "lock_rows: a key does not fit the type of column " + request.key_column + " of table " +
                                request.table,
                            "give the keys as that type. No lock was taken");
    } catch (const query_canceled&) {
      // 57014 is statement_timeout and also a cancel request (pg_cancel_backend, an administrator's);
      // only the message, localized, tells them apart. The server starts the statement's timer after
      // `sent` and it never fires early, so a 57014 before the bound has passed on this clock is a
      // cancel: it stays query_canceled. (A cancel arriving in the last instant, once the bound has
      // passed here but before the server's timer fired, is taken for the bound running out.) The
      // server's clock may run up to 1% fast against this one (loss_margin assumes as much), so the
      // bound counts as passed from 99% of it, less 1 ms.
      const auto passed_from = *request.timeout - *request.timeout / 100 - std::chrono::milliseconds(1);
      if (!bounded || std::chrono::steady_clock::now() - sent < passed_from) throw;
      return not_available();  // the statement's bound ran out
    }
    if (in_tx) exec_simple(conn_, "RELEASE SAVEPOINT sqllock_lock_rows", "lock_rows");
    if (old_timeouts) restore_timeouts(*old_timeouts, in_tx);
    return out;
  }

 private:
  /// A class 22 error (data exception: 22P02 a value that is no text form of its column's type,
  /// 22003 one out of its range) of statements run in `savepoint` is bad input, refused like any
  /// other: rolled back to the savepoint (and released), so the transaction and its earlier work
  /// stay as they were, then invalid_argument "<refusal> (SQLSTATE c); <cure>". Any other error
  /// propagates unchanged. Call it only while handling `e`.
  [[noreturn]] void refuse_data_exception(const database_error& e, const std::string& savepoint,
                                          const std::string& refusal, const std::string& cure) {
    if (!e.code().starts_with("22")) throw;
    if (!savepoint.empty()) {
      exec_simple(conn_, "ROLLBACK TO SAVEPOINT " + savepoint + "; RELEASE SAVEPOINT " + savepoint, "savepoint");
    }
    throw invalid_argument(refusal + " (SQLSTATE " + e.code() + "); " + cure);
  }

  /// Runs `statements` (a write to one row chosen by `key`, setting `set`) in a savepoint of their
  /// own when the connection is in a transaction, so that a key or value of the wrong type for its
  /// column (text that is no number, or a number out of range, for a bigint column) is an
  /// invalid_argument that writes nothing and leaves the transaction usable (refuse_data_exception)
  /// instead of aborting it.
  /// The savepoint costs two round trips, so it is taken only when some value may not fit
  /// (fits_surely, with the table's column types looked up once per process): numbers for number
  /// columns and ASCII text for text columns, the common case, go without one. `checked` adds the
  /// statement's other parameters (the version or fence column and its value).
  template <class Statements>
  std::invoke_result_t<Statements&> refusing_bad_data(const std::string& what, const std::string& table_id,
                                                      const std::vector<std::pair<std::string, value>>& key,
                                                      const std::vector<std::pair<std::string, value>>& set,
                                                      const std::pair<std::string, value>& checked,
                                                      Statements&& statements) {
    const bool in_transaction = PQtransactionStatus(conn_) == PQTRANS_INTRANS;
    const bool surely = in_transaction && all_fit_surely(table_id, key, set, checked);
    const std::string savepoint = in_transaction && !surely ? "sqllock_" + what : "";
    if (!savepoint.empty()) exec_simple(conn_, "SAVEPOINT " + savepoint, what);
    try {
      auto out = statements();
      if (!savepoint.empty()) exec_simple(conn_, "RELEASE SAVEPOINT " + savepoint, what);
      return out;
    } catch (const database_error& e) {
      if (surely) throw;  // a type changed since it was cached: the transaction is aborted, as it says
      auto columns = [](const std::vector<std::pair<std::string, value>>& pairs) {
        std::string out;
        for (const auto& p : pairs) out += (out.empty() ? "" : ", ") + p.first;
        return out;
      };
      refuse_data_exception(e, savepoint,
                            what + ": a value does not fit the type of its column (key column " + columns(key) +
                                (set.empty() ? "" : "; set column " + columns(set)) + " of table " + table_id + ")",
                            "give each key and value as its column's type. Nothing was written");
    }
  }

  bool all_fit_surely(const std::string& table_id, const std::vector<std::pair<std::string, value>>& key,
                      const std::vector<std::pair<std::string, value>>& set,
                      const std::pair<std::string, value>& checked) {
    const char* db = PQdb(conn_);
    const std::string cache_key = std::string(db ? db : "") + '\n' + table_id;
    auto all_fit = [&](const std::map<std::string, column_type>& types) {
      auto fits = [&](const std::pair<std::string, value>& p) {
        const auto it = types.find(p.first);
        return it != types.end() && fits_surely(p.second, it->second);
      };
      return std::all_of(key.begin(), key.end(), fits) && std::all_of(set.begin(), set.end(), fits) && fits(checked);
    };
    {
      std::lock_guard lock(column_types().mutex);
      if (auto it = column_types().tables.find(cache_key); it != column_types().tables.end()) return all_fit(it->second);
    }
    std::map<std::string, column_type> types;
    auto r = exec_params(conn_,
                         "SELECT a.attname, a.atttypid::int8, a.atttypmod FROM pg_attribute a "
                         "WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped",
                         {quote(table_id)}, "column_types");
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      column_type t;
      t.oid = std::stoll(field_text(r.get(), i, 1));
      t.typmod = std::stoll(field_text(r.get(), i, 2));
      types.emplace(field_text(r.get(), i, 0), t);
    }
    if (types.empty()) return false;  // no such table (yet): the statement says so
    const bool fit = all_fit(types);
    std::lock_guard lock(column_types().mutex);
    column_types().tables.insert_or_assign(cache_key, std::move(types));
    return fit;
  }

  /// A key given as text with space around it (" 1") for a column of a number type: bigint input
  /// would trim it and select row 1, but a key is an exact value. Refused (invalid_argument) before
  /// anything is written or locked. The column's type is looked up only for such a key.
  void refuse_spaced_number_key(const std::string& what, const std::string& table_id, const std::string& column,
                                const value& key) {
    const auto* text = std::get_if<std::string>(&key);
    if (text == nullptr || !space_around(*text)) return;
    auto r = exec_params(conn_,
                         "SELECT t.typcategory = 'N' FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
                         "WHERE a.attrelid = to_regclass($1) AND a.attname = $2 AND NOT a.attisdropped",
                         {quote(table_id), column}, "column_numeric");
    if (PQntuples(r.get()) == 0 || field_text(r.get(), 0, 0) != "t") return;  // not a number column
    throw invalid_argument(spaced_number_key_refusal(what, column, table_id));
  }

  void refuse_spaced_number_keys(const std::string& what, const std::string& table_id,
                                 const std::vector<std::pair<std::string, value>>& key) {
    for (const auto& [column, v] : key) refuse_spaced_number_key(what, table_id, column, v);
  }

  void check_active(const char* what) const {
    if (done_)
      throw error(std::string("postgresql ") + what + ": the transaction has ended", std::string(backend_name), {},
                  what);
  }

  result_ptr run_user(std::string_view sql, const std::vector<value>& params, const char* statement) {
    auto [text, count] = rewrite_placeholders(sql);
    if (count != params.size())
      throw invalid_argument(std::string(statement) + ": the statement has " + std::to_string(count) +
                             " placeholders but " + std::to_string(params.size()) + " values were given");
    text_params bound;
    bound.reserve(params.size());
    for (const auto& p : params) bound.push_back(to_text(p));
    return exec_params(conn_, text, bound, statement);
  }

  void restore_timeouts(const std::pair<std::string, std::string>& old, bool local) {
    exec_params(conn_, "SELECT set_config('lock_timeout', $1, $3::boolean), set_config('statement_timeout', $2, $3::boolean)",
                {old.first, old.second, std::string(local ? "true" : "false")}, "lock_rows_timeout");
  }

  void finish() noexcept {
    if (owned_ && pool_) pool_->give_back(std::move(owned_));
    owned_.reset();
  }

  std::shared_ptr<connection_pool> pool_;
  conn_ptr owned_;
  PGconn* conn_ = nullptr;
  bool adopted_ = false;
  bool done_ = false;
  client_options options_;
};

}  // namespace

std::unique_ptr<session> make_session(std::shared_ptr<connection_pool> pool, conn_ptr conn,
                                      const client_options& options) {
  return std::make_unique<pg_session>(std::move(pool), std::move(conn), options);
}

std::unique_ptr<session> make_adopted_session(PGconn* conn) { return std::make_unique<pg_session>(conn); }

}  // namespace sqllock::detail::pg

namespace sqllock {

transaction adopt(pg_conn* connection) {
  if (!connection) throw invalid_argument("adopt: the PGconn* is null");
  if (PQstatus(connection) != CONNECTION_OK) throw invalid_argument("adopt: the PGconn* is not connected");
  return transaction(detail::pg::make_adopted_session(connection));
}

}  // namespace sqllock
