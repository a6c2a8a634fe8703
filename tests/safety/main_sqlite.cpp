// The safety suite on SQLite (a database file of its own).
#include <unistd.h>

#include "safety/safety_fixture.hpp"

int main(int argc, char** argv) {
  const std::string path = "/tmp/sqllock-safety-" + std::to_string(getpid()) + ".db";
  const int rc = sqllock_safety::run_suite(argc, argv, {.name = "sqlite", .url = "sqlite:" + path});
  for (const char* suffix : {"", "-wal", "-shm", "-sqllock-wait"}) unlink((path + suffix).c_str());
  return rc;
}
