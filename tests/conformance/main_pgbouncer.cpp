// The conformance suite through PgBouncer in transaction mode (URL from scripts/pgbouncer-server.sh,
// with sqllock_prepared_statements=off&sqllock_notifications=off on it).
#include <cstdlib>
#include <iostream>

#include "conformance/fixture.hpp"

int main(int argc, char** argv) {
  const char* url = std::getenv("SQLLOCK_TEST_PGBOUNCER_URL");
  if (!url || !*url) {
    std::cerr << "conformance_pgbouncer: SQLLOCK_TEST_PGBOUNCER_URL is not set; start PgBouncer with "
                 "scripts/pgbouncer-server.sh (scripts/test-all.sh does). This is a failure, not a skip.\n";
    return 2;
  }
  // The backend is PostgreSQL (errors name it); what differs is the pooler in between.
  return sqllock_test::run_suite(argc, argv, {.name = "postgresql", .url = url, .transaction_pooler = true});
}
