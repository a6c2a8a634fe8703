// The conformance suite against SQLite: a fresh database file per run, removed after it with the
// files SQLite and the library keep beside it. Child processes share the parent's file.
#include <unistd.h>

#include <filesystem>

#include "conformance/fixture.hpp"

int main(int argc, char** argv) {
  if (const char* child = std::getenv("SQLLOCK_TEST_SQLITE_URL"))
    return sqllock_test::run_suite(argc, argv, {.name = "sqlite", .url = child, .whole_database_row_locks = true});
  const auto path = std::filesystem::temp_directory_path() / ("sqllock-conformance-" + std::to_string(getpid()) + ".db");
  const std::string url = "sqlite:" + path.string();
  setenv("SQLLOCK_TEST_SQLITE_URL", url.c_str(), 1);  // children share the parent's database
  const int rc = sqllock_test::run_suite(argc, argv, {.name = "sqlite", .url = url, .whole_database_row_locks = true});
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal", "-sqllock-wait"})
    std::filesystem::remove(path.string() + suffix, ec);
  return rc;
}
