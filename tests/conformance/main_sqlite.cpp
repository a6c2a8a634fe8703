// The conformance suite against SQLite: a fresh database file per run.
#include <unistd.h>

#include <filesystem>

#include "conformance/fixture.hpp"

int main(int argc, char** argv) {
  const char* child = std::getenv("SQLLOCK_TEST_SQLITE_URL");
  std::string url;
  if (child) {
    url = child;
  } else {
    auto path = std::filesystem::temp_directory_path() / ("sqllock-conformance-" + std::to_string(getpid()) + ".db");
    url = "sqlite:" + path.string();
    setenv("SQLLOCK_TEST_SQLITE_URL", url.c_str(), 1);  // children share the parent's database
  }
  return sqllock_test::run_suite(argc, argv, {.name = "sqlite", .url = url, .whole_database_row_locks = true});
}
