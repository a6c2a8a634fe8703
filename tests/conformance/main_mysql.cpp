// The conformance suite against MariaDB/MySQL (URL from scripts/mariadb-server.sh).
#include <cstdlib>

#include "conformance/fixture.hpp"

int main(int argc, char** argv) {
  const char* url = std::getenv("SQLLOCK_TEST_MYSQL_URL");
  return sqllock_test::run_suite(argc, argv, {.name = "mysql", .url = url ? url : ""});
}
