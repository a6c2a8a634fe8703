// The conformance suite against PostgreSQL (URL from scripts/postgresql-server.sh).
#include <cstdlib>

#include "conformance/fixture.hpp"

int main(int argc, char** argv) {
  const char* url = std::getenv("SQLLOCK_TEST_POSTGRESQL_URL");
  return sqllock_test::run_suite(argc, argv, {.name = "postgresql", .url = url ? url : ""});
}
