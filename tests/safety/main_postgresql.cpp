// The safety suite on PostgreSQL (a throwaway server of scripts/postgresql-server.sh).
#include <libpq-fe.h>

#include <cstdlib>
#include <stdexcept>

#include "safety/safety_fixture.hpp"

namespace {
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
}  // namespace

int main(int argc, char** argv) {
  const std::string admin_url = env("SQLLOCK_TEST_POSTGRESQL_ADMIN_URL");
  auto admin = [admin_url](const std::string& sql) {
    PGconn* c = PQconnectdb(admin_url.c_str());
    std::string error;
    if (PQstatus(c) != CONNECTION_OK) {
      error = PQerrorMessage(c);
    } else {
      PGresult* r = PQexec(c, sql.c_str());
      if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) error = PQerrorMessage(c);
      PQclear(r);
    }
    PQfinish(c);
    if (!error.empty()) throw std::runtime_error("admin: " + sql + ": " + error);
  };
  return sqllock_safety::run_suite(argc, argv,
                                   {.name = "postgresql",
                                    .url = env("SQLLOCK_TEST_POSTGRESQL_URL"),
                                    .admin_url = admin_url,
                                    .crash = env("SQLLOCK_TEST_POSTGRESQL_CRASH"),
                                    .admin = admin});
}
