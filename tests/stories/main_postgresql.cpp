// The story tests against PostgreSQL (URL from scripts/postgresql-server.sh; missing: failure).
#include <cstdlib>

#include "story_fixture.hpp"

int main(int argc, char** argv) {
  const char* url = std::getenv("SQLLOCK_TEST_POSTGRESQL_URL");
  return stories::run_stories(argc, argv, {.name = "postgresql", .url = url ? url : ""});
}
