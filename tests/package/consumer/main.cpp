// A downstream program using the installed sqllock: take and release a lease on SQLite in memory.
#include <sqllock/sqllock.hpp>

#include <iostream>

int main() {
  auto client = sqllock::connect("sqlite::memory:", {.require_schema = false});
  client.migrate();
  auto lease = client.try_acquire("consumer");
  if (!lease || lease->fencing_token() < 1) return 1;
  std::cout << "consumer acquired with fencing token " << lease->fencing_token() << "\n";
  return 0;
}
