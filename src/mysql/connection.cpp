// MySQL connections: connecting from the URL, prepared statements with bound values, the idle pool.
#include <cppconn/connection.h>
#include <cppconn/datatype.h>
#include <cppconn/driver.h>
#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/resultset_metadata.h>
#include <cppconn/statement.h>

#include <cstdio>
#include <cstdlib>
#include <limits>

#include "mysql/mysql_internal.hpp"
#include "sqllock/error.hpp"

namespace sqllock::detail::mysql {
namespace {

constexpr std::size_t max_cached_statements = 48;

sql::Driver& driver() {
  // get_driver_instance() is not safe to race on first use; a function-local static is.
  static sql::Driver* const d = get_driver_instance();
  return *d;
}

int parse_int_param(const std::string& key, const std::string& text, int lo, int hi) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || end == nullptr || *end != '\0' || v < lo || v > hi) {
    throw invalid_argument("mysql URL parameter " + key + " must be a whole number from " +
                           std::to_string(lo) + " to " + std::to_string(hi));
  }
  return static_cast<int>(v);
}

}  // namespace

connect_params make_connect_params(const database_url& url) {
  connect_params p;
  p.url = url;
  for (const auto& [key, val] : url.params) {
    if (key == "connect_timeout") {
      p.connect_timeout_s = parse_int_param(key, val, 1, 3600);
    } else if (key == "socket") {
      if (val.empty()) throw invalid_argument("mysql URL parameter socket must name a path");
    } else {
      throw invalid_argument("unknown mysql URL parameter '" + key +
                             "' (known: connect_timeout, socket)");
    }
  }
  return p;
}

std::unique_ptr<sql::Connection> open_connection(const connect_params& params, bool found_rows,
                                                 int read_timeout_s) {
  const database_url& url = params.url;
  sql::ConnectOptionsMap props;
  props["hostName"] = sql::SQLString(url.host.empty() ? std::string("localhost") : url.host);
  props["port"] = url.port > 0 ? url.port : 3306;
  props["userName"] = sql::SQLString(url.user);
  props["password"] = sql::SQLString(url.password);
  if (!url.database.empty()) props["schema"] = sql::SQLString(url.database);
  if (auto it = url.params.find("socket"); it != url.params.end()) {
    props["socket"] = sql::SQLString(it->second);
  }
  props["OPT_CONNECT_TIMEOUT"] = params.connect_timeout_s;
  if (read_timeout_s > 0) {
    props["OPT_READ_TIMEOUT"] = read_timeout_s;
    props["OPT_WRITE_TIMEOUT"] = read_timeout_s;
  }
  props["OPT_RECONNECT"] = false;
  props["CLIENT_FOUND_ROWS"] = found_rows;
  props["OPT_CHARSET_NAME"] = sql::SQLString("utf8mb4");
  try {
    std::unique_ptr<sql::Connection> c(driver().connect(props));
    if (!c) throw connection_lost("mysql: cannot connect to " + url.redacted(), std::string(backend_name), "", "connect");
    return c;
  } catch (const sql::SQLException& e) {
    throw connection_lost("mysql: cannot connect to " + url.redacted() + ": " +
                              redact_server_message(e.what()) + " (error " +
                              std::to_string(e.getErrorCode()) + ")",
                          std::string(backend_name), std::to_string(e.getErrorCode()), "connect");
  }
}

connection::connection(std::unique_ptr<sql::Connection> owned)
    : owned_(std::move(owned)), conn_(owned_.get()) {}

connection::connection(sql::Connection* borrowed) : conn_(borrowed) {}

connection::~connection() {
  cache_.clear();  // statements first: they belong to the connection
  if (owned_) {
    try {
      owned_->close();
    } catch (...) {
    }
  }
}

void connection::fail(const sql::SQLException& e, std::string_view statement, bool lock_table) {
  bool lost = is_connection_error(e.getErrorCode());
  if (!lost && e.getErrorCode() == 0) {
    try {
      lost = conn_->isClosed();
    } catch (...) {
      lost = true;
    }
  }
  if (lost) {
    broken_ = true;
    cache_.clear();
  }
  map_error(e, statement, lock_table);
}

sql::PreparedStatement& connection::prepare(std::string_view sql, std::string_view statement,
                                            bool lock_table) {
  if (auto it = cache_.find(sql); it != cache_.end()) return *it->second;
  if (cache_.size() >= max_cached_statements) cache_.clear();
  try {
    std::unique_ptr<sql::PreparedStatement> ps(conn_->prepareStatement(sql::SQLString(std::string(sql))));
    auto& ref = *ps;
    cache_.emplace(std::string(sql), std::move(ps));
    return ref;
  } catch (const sql::SQLException& e) {
    fail(e, statement, lock_table);
  }
}

namespace {

void bind(sql::PreparedStatement& ps, const std::vector<value>& params) {
  unsigned int i = 1;
  for (const value& v : params) {
    if (std::holds_alternative<std::monostate>(v)) {
      ps.setNull(i, sql::DataType::SQLNULL);
    } else if (const auto* n = std::get_if<std::int64_t>(&v)) {
      ps.setInt64(i, *n);
    } else if (const auto* d = std::get_if<double>(&v)) {
      ps.setDouble(i, *d);
    } else {
      ps.setString(i, sql::SQLString(std::get<std::string>(v)));
    }
    ++i;
  }
}

/// Whether a prepared statement produces a result set (its result metadata has columns).
bool returns_rows(sql::PreparedStatement& ps) {
  sql::ResultSetMetaData* meta = ps.getMetaData();  // owned by the statement
  return meta != nullptr && meta->getColumnCount() > 0;
}

result_rows read_rows(sql::ResultSet& rs) {
  result_rows rows;
  sql::ResultSetMetaData* meta = rs.getMetaData();  // owned by the result set
  const unsigned int n = meta->getColumnCount();
  while (rs.next()) {
    result_row row;
    row.columns.reserve(n);
    for (unsigned int c = 1; c <= n; ++c) {
      if (rs.isNull(c)) {
        row.columns.emplace_back(std::nullopt);
      } else {
        row.columns.emplace_back(rs.getString(c).asStdString());
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

std::int64_t connection::execute(std::string_view sql, const std::vector<value>& params,
                                 std::string_view statement, bool lock_table) {
  sql::PreparedStatement& ps = prepare(sql, statement, lock_table);
  try {
    bind(ps, params);
    last_used_ = std::chrono::steady_clock::now();
    if (returns_rows(ps)) {
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      std::int64_t n = 0;
      while (rs && rs->next()) ++n;
      return n;
    }
    // Prepared statements have no getUpdateCount() in Connector/C++ 1.1; executeUpdate() returns
    // mysql_stmt_affected_rows().
    const int n = ps.executeUpdate();
    return n < 0 ? 0 : n;
  } catch (const sql::SQLException& e) {
    fail(e, statement, lock_table);
  }
}

result_rows connection::query(std::string_view sql, const std::vector<value>& params,
                              std::string_view statement, bool lock_table) {
  sql::PreparedStatement& ps = prepare(sql, statement, lock_table);
  try {
    bind(ps, params);
    last_used_ = std::chrono::steady_clock::now();
    // execute(), not the prepare-time metadata: MariaDB announces no columns for
    // INSERT ... RETURNING until it runs.
    if (!ps.execute()) return {};
    std::unique_ptr<sql::ResultSet> rs(ps.getResultSet());
    if (!rs) return {};
    return read_rows(*rs);
  } catch (const sql::SQLException& e) {
    fail(e, statement, lock_table);
  }
}

void connection::run_simple(std::string_view sql, std::string_view statement) {
  try {
    last_used_ = std::chrono::steady_clock::now();
    std::unique_ptr<sql::Statement> st(conn_->createStatement());
    st->execute(sql::SQLString(std::string(sql)));
  } catch (const sql::SQLException& e) {
    fail(e, statement, false);
  }
}

const server_traits& connection::traits() {
  if (!traits_) {
    result_rows rows = query(statement_text("server_traits", "sqllock_locks"), {}, "server_traits");
    server_traits t;
    if (!rows.empty() && rows[0].size() >= 3) {
      const auto& v = rows[0][0];
      t.mariadb = v && v->find("MariaDB") != std::string::npos;
      if (v) std::sscanf(v->c_str(), "%d.%d", &t.major, &t.minor);
      t.rollback_on_timeout = rows[0][1] && (*rows[0][1] == "1" || *rows[0][1] == "ON");
      t.database = rows[0][2].value_or("");
    }
    traits_ = std::move(t);
  }
  return *traits_;
}

std::unique_ptr<connection> connection_pool::take() {
  for (;;) {
    std::unique_ptr<connection> c;
    {
      std::lock_guard lock(mutex_);
      if (idle_.empty()) break;
      c = std::move(idle_.back());
      idle_.pop_back();
    }
    // A connection that idled may have been dropped by the server (restart, wait_timeout).
    if (std::chrono::steady_clock::now() - c->last_used() < std::chrono::seconds(2)) return c;
    bool ok = false;
    try {
      ok = c->raw().isValid();
    } catch (...) {
      ok = false;
    }
    if (ok) return c;
    c->mark_broken();
  }
  auto raw = open_connection(params_, /*found_rows=*/true, /*read_timeout_s=*/0);
  try {
    raw->setAutoCommit(false);
  } catch (const sql::SQLException& e) {
    map_error(e, "begin");
  }
  return std::make_unique<connection>(std::move(raw));
}

void connection_pool::give_back(std::unique_ptr<connection> c) noexcept {
  if (!c || c->broken()) return;
  std::lock_guard lock(mutex_);
  if (idle_.size() < 2) idle_.push_back(std::move(c));
  // else: destroyed (closed) here
}

}  // namespace sqllock::detail::mysql
