// The one place where libpq failures become typed sqllock errors (SQLSTATE -> error class).
#include <string>
#include <string_view>

#include "postgresql/postgresql_connection.hpp"

namespace sqllock::detail::pg {

std::string sqlstate(const PGresult* result) {
  if (!result) return {};
  const char* s = PQresultErrorField(result, PG_DIAG_SQLSTATE);
  return s ? std::string(s) : std::string();
}

namespace {

bool session_ended(std::string_view state) {
  // Class 08: connection exception. 57P01..57P03: admin shutdown (pg_terminate_backend), crash
  // shutdown, cannot connect now. The server closes the connection after each of them.
  return state.starts_with("08") || state == "57P01" || state == "57P02" || state == "57P03";
}

std::string first_line(const char* text) {
  std::string s = text ? text : "";
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

bool connection_failed(PGconn* conn, const PGresult* result) {
  if (!conn || PQstatus(conn) == CONNECTION_BAD) return true;
  return session_ended(sqlstate(result));
}

void throw_error(PGconn* conn, const PGresult* result, std::string_view statement) {
  const std::string state = sqlstate(result);
  const bool lost = connection_failed(conn, result);

  // The server's primary message names tables, constraints and conditions; data exceptions
  // (class 22) may quote an offending input value, so only their SQLSTATE is reported.
  std::string text;
  if (state.starts_with("22")) {
    text = "invalid data for the statement";
  } else if (result) {
    const char* primary = PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
    text = primary ? first_line(primary) : first_line(PQresultErrorMessage(result));
  }
  if (text.empty() && conn) text = first_line(PQerrorMessage(conn));
  if (text.empty()) text = lost ? "connection lost" : "unknown error";

  std::string message = "postgresql";
  if (!statement.empty()) message += " " + std::string(statement);
  message += ": " + text;
  if (!state.empty()) message += " (SQLSTATE " + state + ")";

  const std::string name(statement);
  const std::string b(backend_name);
  if (lost) throw connection_lost(message, b, state.empty() ? "08006" : state, name);
  if (state == "55P03") throw lock_not_available(message, b, state, name);
  if (state == "40P01") throw deadlock_detected(message, b, state, name);
  if (state == "40001") throw serialization_failure(message, b, state, name);
  if (state == "57014") throw query_canceled(message, b, state, name);
  // A missing relation in one of sqllock's own statements means the lock tables are missing.
  if (state == "42P01" && (statement.starts_with("lease_") || statement.starts_with("schema_")))
    throw schema_missing(message + "; run `sqllock migrate`", b, state, name);
  throw database_error(message, b, state, name);
}

}  // namespace sqllock::detail::pg
