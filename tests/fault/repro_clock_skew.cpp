// Reproducer: on SQLite a holder whose wall clock runs ahead leaves a lease that outlives it by the skew.
//
//   repro_clock_skew hold URL NAME   acquire NAME with a 2 s TTL and die without releasing (_exit)
//   repro_clock_skew take URL NAME   try to acquire NAME within 5 s; print the outcome and time left
//
// repro_clock_skew.sh runs `hold` under libfaketime (+1h) and `take` with the true clock.
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <string>

#include "sqllock/sqllock.hpp"

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  if (argc != 4) {
    std::cerr << "usage: repro_clock_skew hold|take URL NAME\n";
    return 2;
  }
  const std::string mode = argv[1];
  try {
    auto c = sqllock::connect(argv[2], {.require_schema = false});
    c.migrate();
    if (mode == "hold") {
      sqllock::lease_options o;
      o.ttl = 2s;
      auto g = c.try_acquire(argv[3], o);
      std::cout << "hold: " << (g ? "acquired token " + std::to_string(g->fencing_token()) : "not acquired") << '\n';
      std::cout.flush();
      _exit(g ? 0 : 1);  // the holder dies: its lease must end 2 s later
    }
    auto t0 = std::chrono::steady_clock::now();
    auto g = c.try_acquire_for(argv[3], 5s);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    if (g) {
      std::cout << "take: acquired after " << ms << " ms (correct)\n";
      return 0;
    }
    auto info = c.inspect(argv[3]);
    std::cout << "take: NOT acquired within 5 s of a 2 s lease whose holder is dead; the lease has "
              << (info ? info->time_left.count() : 0) << " ms left\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "repro_clock_skew: " << e.what() << '\n';
    return 2;
  }
}
