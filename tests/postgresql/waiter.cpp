// Test helper process: waits for a lock with 5 s polls and reports when it got it (steady clock).
//   postgresql_test_waiter NAME   (URL from SQLLOCK_TEST_POSTGRESQL_URL)
// Prints "waiting" before the blocking acquire, then "acquired <steady ns> <token>".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "sqllock/sqllock.hpp"

int main(int argc, char** argv) {
  const char* url = std::getenv("SQLLOCK_TEST_POSTGRESQL_URL");
  if (argc != 2 || !url) {
    std::fprintf(stderr, "usage: SQLLOCK_TEST_POSTGRESQL_URL=... %s NAME\n", argv[0]);
    return 64;
  }
  try {
    sqllock::client_options options;
    // Polls so slow that only a notification explains a quick acquisition.
    options.poll_min = std::chrono::seconds(5);
    options.poll_max = std::chrono::seconds(5);
    auto c = sqllock::connect(url, options);
    std::printf("waiting\n");
    std::fflush(stdout);
    auto g = c.acquire_for(argv[1], std::chrono::seconds(30), {.ttl = std::chrono::seconds(10)});
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    std::printf("acquired %lld %lld\n",
                static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()),
                static_cast<long long>(g.fencing_token()));
    std::fflush(stdout);
    g.release();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "waiter: %s\n", e.what());
    return 1;
  }
}
