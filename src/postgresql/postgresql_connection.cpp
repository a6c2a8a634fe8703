// libpq plumbing for the PostgreSQL backend: connecting, running statements, values and rows.
#include <poll.h>

#include <cerrno>

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "core/url.hpp"
#include "postgresql/postgresql_connection.hpp"

namespace sqllock::detail::pg {

void validate_conninfo(const database_url& url) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(driver_uri(url).c_str(), &err);
  if (opts) {
    PQconninfoFree(opts);
    return;
  }
  std::string reason = err ? err : "unparsable connection URL";
  if (err) PQfreemem(err);
  while (!reason.empty() && (reason.back() == '\n' || reason.back() == ' ')) reason.pop_back();
  scrub_secrets(reason, url);
  throw invalid_argument("invalid PostgreSQL URL " + url.redacted() + ": " + reason);
}

namespace {

void forward_notice(void* arg, const char* message) {
  if (!arg || !message) return;
  std::string m = message;
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  log_message(*static_cast<const client_options*>(arg), log_level::debug, "postgresql: " + m);
}

}  // namespace

bool idle_connection_alive(PGconn* conn) {
  for (int i = 0; i < 4; ++i) {
    if (PQstatus(conn) != CONNECTION_OK) return false;
    pollfd p{PQsocket(conn), POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return true;  // nothing pending
    if (!PQconsumeInput(conn)) return false;
  }
  return PQstatus(conn) == CONNECTION_OK;
}

namespace {

// libpq's message spans lines ("...failed: Connection refused\n\tIs the server running...").
std::string one_line(const char* text) {
  std::string reason;
  for (char c : std::string(text ? text : "")) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
    if (c == ' ' && (reason.empty() || reason.back() == ' ')) continue;
    reason += c;
  }
  while (!reason.empty() && reason.back() == ' ') reason.pop_back();
  return reason;
}

}  // namespace

// TCP keepalives on the server's side of every connection of sqllock: a client machine that dies
// or is cut off while a transaction of sqllock holds row locks (a guarded transaction's lease
// row, lock_rows) is noticed by the server after about 30 s (15 s idle, then 3 probes 5 s apart)
// instead of the kernel's default of over two hours, so that transaction is rolled back and the
// next holder can take over. A live client's kernel answers the probes whatever the process does.
constexpr std::string_view keepalive_options =
    "-c tcp_keepalives_idle=15 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3";

conn_ptr connect(const conn_target& target, const client_options* log, std::chrono::milliseconds timeout) {
  // Options before "dbname" are defaults: the URL's own settings override them. The connection
  // is made without blocking so that `timeout` bounds it (libpq's connect_timeout does not apply
  // to PQconnectPoll; a URL's own connect_timeout is honoured through conn_target).
  const bool send_options = !target.startup_options_refused->load();
  const std::string startup_options =
      (target.pin_read_committed ? "-c default_transaction_isolation=read\\ committed " : "") +
      std::string(keepalive_options);
  const char* keys[] = {"fallback_application_name", "client_encoding", send_options ? "options" : "dbname",
                        send_options ? "dbname" : nullptr, nullptr};
  const char* values[] = {"sqllock", "UTF8", send_options ? startup_options.c_str() : target.url.c_str(),
                          send_options ? target.url.c_str() : nullptr, nullptr};
  conn_ptr conn(PQconnectStartParams(keys, values, 1));
  if (!conn)
    throw connection_lost("postgresql: out of memory connecting", std::string(backend_name), "08006", "connect");
  PQsetNoticeProcessor(conn.get(), forward_notice, const_cast<client_options*>(log));
  const auto limit = std::min(timeout, target.connect_timeout);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  PostgresPollingStatusType st = PGRES_POLLING_WRITING;
  while (PQstatus(conn.get()) != CONNECTION_BAD && st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      throw connection_lost("postgresql: cannot connect to " + target.redacted + ": no answer within " +
                                std::to_string(limit.count()) + " ms",
                            std::string(backend_name), "08006", "connect");
    }
    pollfd p{PQsocket(conn.get()), static_cast<short>(st == PGRES_POLLING_READING ? POLLIN : POLLOUT), 0};
    if (p.fd >= 0 && ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 60000))) == 0) continue;
    st = PQconnectPoll(conn.get());
  }
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    std::string reason = one_line(PQerrorMessage(conn.get()));
    scrub_secrets(reason, target.source);
    if (send_options && reason.find("unsupported startup parameter") != std::string::npos) {
      // A pooler that tracks only a few startup parameters (PgBouncer): go without ours.
      target.startup_options_refused->store(true);
      if (log)
        log_message(*log, log_level::info,
                    "postgresql: the server refused startup options (a pooler?); connecting without them (lease "
                    "statements retry serialization failures; the pooler's own keepalives apply)");
      return connect(
          target, log,
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
    }
    // libpq keeps no SQLSTATE for a failed connection; the server's refusal of our credentials
    // (28P01 invalid_password, 28000 invalid_authorization_specification) is told by libpq's own
    // test and the server's message, so callers can tell it from an unreachable server.
    const char* code = "08006";
    if (PQconnectionNeedsPassword(conn.get()) || reason.find("password authentication failed") != std::string::npos) {
      code = "28P01";
    } else if (reason.find("authentication failed") != std::string::npos ||
               reason.find("no pg_hba.conf entry") != std::string::npos) {
      code = "28000";
    }
    throw connection_lost("postgresql: cannot connect to " + target.redacted + ": " + reason, std::string(backend_name),
                          code, "connect");
  }
  return conn;
}

result_ptr await_result(PGconn* c, std::string_view statement, std::chrono::steady_clock::time_point deadline) {
  result_ptr result;
  for (;;) {
    while (PQisBusy(c)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) {
        throw connection_lost("postgresql " + std::string(statement) + ": no answer in time; the connection is closed",
                              std::string(backend_name), "08006", std::string(statement));
      }
      pollfd p{PQsocket(c), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 60000))) < 0 && errno != EINTR)
        throw_error(c, nullptr, statement);
      if (!PQconsumeInput(c)) throw_error(c, nullptr, statement);
    }
    PGresult* r = PQgetResult(c);
    if (!r) break;
    // One command: one result, and later ones are only end markers, except an error after it:
    // the implicit transaction of a statement commits after the statement answered (extended
    // protocol: at Sync), and a commit that fails (SERIALIZABLE's 40001 at commit, a deferred
    // constraint) sends its error after the statement's rows. That error is the outcome: nothing
    // was applied, whatever the rows said.
    const auto st = PQresultStatus(r);
    if (!result || (st == PGRES_FATAL_ERROR &&
                    PQresultStatus(result.get()) != PGRES_FATAL_ERROR)) {
      result.reset(r);
    } else {
      PQclear(r);
    }
  }
  if (!result) throw_error(c, nullptr, statement);
  return result;
}

result_ptr exec_params_until(PGconn* c, std::string_view sql, const text_params& params, std::string_view statement,
                             std::chrono::steady_clock::time_point deadline) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  const std::string text(sql);
  if (!PQsendQueryParams(c, text.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0))
    throw_error(c, nullptr, statement);
  auto r = await_result(c, statement, deadline);
  const auto st = PQresultStatus(r.get());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) throw_error(c, r.get(), statement);
  return r;
}

void exec_simple_until(PGconn* c, std::string_view sql, std::string_view statement,
                       std::chrono::steady_clock::time_point deadline) {
  const std::string text(sql);
  if (!PQsendQuery(c, text.c_str())) throw_error(c, nullptr, statement);
  auto r = await_result(c, statement, deadline);
  const auto st = PQresultStatus(r.get());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) throw_error(c, r.get(), statement);
}

result_ptr exec_params(PGconn* conn, std::string_view sql, const text_params& params, std::string_view statement) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  const std::string text(sql);
  result_ptr r(
      PQexecParams(conn, text.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0));
  if (!r) throw_error(conn, nullptr, statement);
  const auto st = PQresultStatus(r.get());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) throw_error(conn, r.get(), statement);
  return r;
}

std::vector<result_ptr> exec_simple(PGconn* conn, std::string_view sql, std::string_view statement) {
  const std::string text(sql);
  if (!PQsendQuery(conn, text.c_str())) throw_error(conn, nullptr, statement);
  std::vector<result_ptr> results;
  result_ptr failed;
  while (PGresult* raw = PQgetResult(conn)) {
    result_ptr r(raw);
    const auto st = PQresultStatus(raw);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY) {
      if (!failed) failed = std::move(r);
      continue;
    }
    results.push_back(std::move(r));
  }
  if (failed) throw_error(conn, failed.get(), statement);
  if (PQstatus(conn) == CONNECTION_BAD) throw_error(conn, nullptr, statement);
  return results;
}

std::optional<std::string> to_text(const value& v) {
  return std::visit(
      [](const auto& x) -> std::optional<std::string> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return std::nullopt;
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          return std::to_string(x);
        } else if constexpr (std::is_same_v<T, double>) {
          if (std::isnan(x)) return std::string("NaN");
          if (std::isinf(x)) return std::string(x > 0 ? "Infinity" : "-Infinity");
          char buf[64];
          auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
          (void)ec;
          return std::string(buf, end);
        } else {
          return x;
        }
      },
      v);
}

std::string array_literal(const std::vector<std::optional<std::string>>& elements) {
  std::string out = "{";
  bool first = true;
  for (const auto& e : elements) {
    if (!first) out += ',';
    first = false;
    if (!e) {
      out += "NULL";
      continue;
    }
    out += '"';
    for (char c : *e) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

std::string channel_for(std::string_view table, std::string_view name) {
  std::uint64_t h = fnv1a(table);
  h = fnv1a(std::string_view("\0", 1), h);
  h = fnv1a(name, h);
  char buf[32];
  std::snprintf(buf, sizeof buf, "sqllock_%016" PRIx64, h);
  return buf;
}

std::string field_text(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return {};
  return std::string(PQgetvalue(r, row, col), static_cast<std::size_t>(PQgetlength(r, row, col)));
}

std::int64_t field_int(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return 0;
  const char* s = PQgetvalue(r, row, col);
  std::int64_t v = 0;
  std::from_chars(s, s + PQgetlength(r, row, col), v);
  return v;
}

std::optional<std::string> field_opt(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return std::nullopt;
  return field_text(r, row, col);
}

result_rows to_rows(const PGresult* r) {
  result_rows rows;
  const int n = PQntuples(r);
  const int cols = PQnfields(r);
  rows.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    result_row row;
    row.columns.reserve(static_cast<std::size_t>(cols));
    for (int c = 0; c < cols; ++c) row.columns.push_back(field_opt(r, i, c));
    rows.push_back(std::move(row));
  }
  return rows;
}

connection_pool::~connection_pool() = default;

std::pair<conn_ptr, bool> connection_pool::take() {
  if (auto c = idle_.take([](conn_ptr& p) { return idle_connection_alive(p.get()); })) return {std::move(*c), true};
  return {connect(target_, &options_), false};
}

void connection_pool::give_back(conn_ptr conn) noexcept {
  if (!conn || PQstatus(conn.get()) != CONNECTION_OK || PQtransactionStatus(conn.get()) != PQTRANS_IDLE) return;
  try {
    idle_.give_back(std::move(conn));
  } catch (...) {
    // Out of memory: the connection is closed instead.
  }
}

}  // namespace sqllock::detail::pg
