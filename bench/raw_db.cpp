// Plain driver connections for the baselines: libpq, MySQL Connector/C++ 1.1 and sqlite3.
#include "raw_db.hpp"

#include <sqllock/parse.hpp>

#include <stdexcept>

#ifdef BENCH_HAVE_POSTGRESQL
#include <libpq-fe.h>
#endif
#ifdef BENCH_HAVE_MYSQL
#include <cppconn/connection.h>
#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/resultset_metadata.h>
#include <cppconn/statement.h>
#include <mysql_driver.h>
#endif
#ifdef BENCH_HAVE_SQLITE
#include <sqlite3.h>
#endif

namespace bench {

#ifdef BENCH_HAVE_POSTGRESQL
namespace {
class pg_raw final : public raw_db {
 public:
  explicit pg_raw(const std::string& url) : c_(PQconnectdb(url.c_str())) {
    if (PQstatus(c_) != CONNECTION_OK) {
      std::string m = PQerrorMessage(c_);
      PQfinish(c_);
      throw std::runtime_error("libpq connect failed: " + m);
    }
    PQsetNoticeProcessor(c_, [](void*, const char*) {}, nullptr);  // "table does not exist, skipping"
  }
  ~pg_raw() override { PQfinish(c_); }
  std::string dialect() const override { return "postgresql"; }

  void exec(const std::string& sql) override {
    PGresult* r = PQexec(c_, sql.c_str());
    check(r, sql);
    PQclear(r);
  }
  int prepare(const std::string& sql) override {
    const std::string name = "bench_" + std::to_string(next_++);
    PGresult* r = PQprepare(c_, name.c_str(), sql.c_str(), 0, nullptr);
    check(r, sql);
    PQclear(r);
    names_.push_back(name);
    texts_.push_back(sql);
    return static_cast<int>(names_.size()) - 1;
  }
  std::vector<raw_row> run(int stmt, const std::vector<std::string>& params) override {
    std::vector<const char*> v;
    for (const auto& p : params) v.push_back(p.c_str());
    PGresult* r = PQexecPrepared(c_, names_.at(static_cast<std::size_t>(stmt)).c_str(),
                                 static_cast<int>(v.size()), v.data(), nullptr, nullptr, 0);
    check(r, texts_[static_cast<std::size_t>(stmt)]);
    std::vector<raw_row> rows;
    for (int i = 0; i < PQntuples(r); ++i) {
      raw_row row;
      for (int j = 0; j < PQnfields(r); ++j)
        row.push_back(PQgetisnull(r, i, j) ? std::nullopt : std::optional<std::string>(PQgetvalue(r, i, j)));
      rows.push_back(std::move(row));
    }
    const char* t = PQcmdTuples(r);
    affected_ = (t && *t) ? std::stoll(t) : 0;
    PQclear(r);
    return rows;
  }
  std::int64_t affected() const override { return affected_; }

 private:
  void check(PGresult* r, const std::string& sql) {
    const auto st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return;
    std::string m = r ? PQresultErrorMessage(r) : PQerrorMessage(c_);
    if (r) PQclear(r);
    throw std::runtime_error("postgresql baseline statement failed: " + m + " in: " + sql.substr(0, 120));
  }
  PGconn* c_;
  int next_ = 0;
  std::vector<std::string> names_, texts_;
  std::int64_t affected_ = 0;
};
}  // namespace
#endif

#ifdef BENCH_HAVE_MYSQL
namespace {
class mysql_raw final : public raw_db {
 public:
  explicit mysql_raw(const sqllock::database_url& u) {
    sql::ConnectOptionsMap props;
    props["hostName"] = sql::SQLString(u.host.empty() ? std::string("localhost") : u.host);
    props["port"] = u.port > 0 ? u.port : 3306;
    props["userName"] = sql::SQLString(u.user);
    props["password"] = sql::SQLString(u.password);
    if (!u.database.empty()) props["schema"] = sql::SQLString(u.database);
    props["CLIENT_FOUND_ROWS"] = true;  // "matched" rows, as sqllock's lease connection counts them
    props["OPT_CHARSET_NAME"] = sql::SQLString("utf8mb4");
    try {
      c_.reset(sql::mysql::get_mysql_driver_instance()->connect(props));
      c_->setAutoCommit(true);
    } catch (const sql::SQLException& e) {
      throw std::runtime_error(std::string("mysql connect failed: ") + e.what());
    }
  }
  ~mysql_raw() override {
    stmts_.clear();
    c_.reset();
  }
  std::string dialect() const override { return "mysql"; }

  void exec(const std::string& q) override {
    try {
      std::unique_ptr<sql::Statement> s(c_->createStatement());
      s->execute(q);
      // Drain any result set so the connection stays usable.
      do {
        std::unique_ptr<sql::ResultSet> rs(s->getResultSet());
      } while (s->getMoreResults());
    } catch (const sql::SQLException& e) {
      throw std::runtime_error(std::string("mysql baseline statement failed: ") + e.what() + " in: " + q.substr(0, 120));
    }
  }
  int prepare(const std::string& q) override {
    try {
      stmts_.emplace_back(c_->prepareStatement(q));
      texts_.push_back(q);
      // Connector/C++ 1.1 has no update count after execute(): pick the call by statement kind.
      const auto first = q.substr(0, q.find_first_of(" \n("));
      is_query_.push_back(first == "SELECT" || first == "WITH" || first == "SHOW");
    } catch (const sql::SQLException& e) {
      throw std::runtime_error(std::string("mysql prepare failed: ") + e.what() + " in: " + q.substr(0, 120));
    }
    return static_cast<int>(stmts_.size()) - 1;
  }
  std::vector<raw_row> run(int stmt, const std::vector<std::string>& params) override {
    auto& s = stmts_.at(static_cast<std::size_t>(stmt));
    std::vector<raw_row> rows;
    try {
      for (std::size_t i = 0; i < params.size(); ++i) s->setString(static_cast<unsigned>(i + 1), params[i]);
      if (is_query_.at(static_cast<std::size_t>(stmt))) {
        std::unique_ptr<sql::ResultSet> rs(s->executeQuery());
        const auto n = rs->getMetaData()->getColumnCount();
        while (rs->next()) {
          raw_row row;
          for (unsigned j = 1; j <= n; ++j)
            row.push_back(rs->isNull(j) ? std::nullopt : std::optional<std::string>(std::string(rs->getString(j))));
          rows.push_back(std::move(row));
        }
        affected_ = 0;
      } else {
        affected_ = static_cast<std::int64_t>(s->executeUpdate());
      }
    } catch (const sql::SQLException& e) {
      throw std::runtime_error(std::string("mysql baseline statement failed: ") + e.what() + " in: " +
                               texts_[static_cast<std::size_t>(stmt)].substr(0, 120));
    }
    return rows;
  }
  std::int64_t affected() const override { return affected_; }

 private:
  std::unique_ptr<sql::Connection> c_;
  std::vector<std::unique_ptr<sql::PreparedStatement>> stmts_;
  std::vector<std::string> texts_;
  std::vector<bool> is_query_;
  std::int64_t affected_ = 0;
};
}  // namespace
#endif

#ifdef BENCH_HAVE_SQLITE
namespace {
class sqlite_raw final : public raw_db {
 public:
  sqlite_raw(const std::string& path, const std::string& synchronous) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK) {
      std::string m = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close_v2(db_);
      throw std::runtime_error("sqlite open failed: " + m);
    }
    sqlite3_busy_timeout(db_, 5000);  // sqllock's default
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=" + synchronous);
  }
  ~sqlite_raw() override {
    for (auto* s : stmts_) sqlite3_finalize(s);
    sqlite3_close_v2(db_);
  }
  std::string dialect() const override { return "sqlite"; }

  void exec(const std::string& q) override {
    char* err = nullptr;
    if (sqlite3_exec(db_, q.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string m = err ? err : sqlite3_errmsg(db_);
      sqlite3_free(err);
      throw std::runtime_error("sqlite baseline statement failed: " + m + " in: " + q.substr(0, 120));
    }
  }
  int prepare(const std::string& q) override {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v3(db_, q.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string("sqlite prepare failed: ") + sqlite3_errmsg(db_) + " in: " + q.substr(0, 120));
    stmts_.push_back(s);
    return static_cast<int>(stmts_.size()) - 1;
  }
  std::vector<raw_row> run(int stmt, const std::vector<std::string>& params) override {
    sqlite3_stmt* s = stmts_.at(static_cast<std::size_t>(stmt));
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    for (std::size_t i = 0; i < params.size(); ++i)
      sqlite3_bind_text(s, static_cast<int>(i + 1), params[i].c_str(), -1, SQLITE_TRANSIENT);
    std::vector<raw_row> rows;
    for (;;) {
      const int rc = sqlite3_step(s);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) {
        std::string m = sqlite3_errmsg(db_);
        sqlite3_reset(s);
        throw std::runtime_error("sqlite baseline statement failed: " + m);
      }
      raw_row row;
      for (int j = 0; j < sqlite3_column_count(s); ++j) {
        const auto* t = sqlite3_column_text(s, j);
        row.push_back(t ? std::optional<std::string>(reinterpret_cast<const char*>(t)) : std::nullopt);
      }
      rows.push_back(std::move(row));
    }
    affected_ = sqlite3_changes(db_);
    sqlite3_reset(s);
    return rows;
  }
  std::int64_t affected() const override { return affected_; }

 private:
  sqlite3* db_ = nullptr;
  std::vector<sqlite3_stmt*> stmts_;
  std::int64_t affected_ = 0;
};
}  // namespace
#endif

std::unique_ptr<raw_db> open_raw(const std::string& url, const std::string& sqlite_synchronous) {
  const auto u = sqllock::parse_url(url);
  switch (u.scheme) {
    case sqllock::database_url::kind::postgresql:
#ifdef BENCH_HAVE_POSTGRESQL
      return std::make_unique<pg_raw>(u.original);
#else
      break;
#endif
    case sqllock::database_url::kind::mysql:
#ifdef BENCH_HAVE_MYSQL
      return std::make_unique<mysql_raw>(u);
#else
      break;
#endif
    case sqllock::database_url::kind::sqlite:
#ifdef BENCH_HAVE_SQLITE
      return std::make_unique<sqlite_raw>(u.path, sqlite_synchronous);
#else
      break;
#endif
  }
  (void)sqlite_synchronous;
  throw std::runtime_error("backend of " + u.redacted() + " not built into the benchmark");
}

}  // namespace bench
