// The story tests against MariaDB/MySQL (URL from scripts/mariadb-server.sh; missing: failure).
#include <cstdlib>

#include "story_fixture.hpp"

int main(int argc, char** argv) {
  const char* url = std::getenv("SQLLOCK_TEST_MYSQL_URL");
  return stories::run_stories(argc, argv, {.name = "mysql", .url = url ? url : ""});
}
