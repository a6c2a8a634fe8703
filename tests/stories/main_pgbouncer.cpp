// The story tests through PgBouncer in transaction mode (URL from scripts/pgbouncer-server.sh, with
// sqllock's pooler options on it; missing: failure). The backend is PostgreSQL.
#include <cstdlib>
#include <iostream>

#include "story_fixture.hpp"

int main(int argc, char** argv) {
  const char* url = std::getenv("SQLLOCK_TEST_PGBOUNCER_URL");
  if (!url || !*url) {
    std::cerr << "stories_pgbouncer: SQLLOCK_TEST_PGBOUNCER_URL is not set; start PgBouncer with "
                 "scripts/pgbouncer-server.sh (scripts/test-all.sh does). This is a failure, not a skip.\n";
    return 2;
  }
  return stories::run_stories(argc, argv, {.name = "postgresql", .url = url});
}
