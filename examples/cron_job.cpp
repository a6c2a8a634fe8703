// Example: a cron job that must run on exactly one host at a time, fenced by its token.
//   example_cron_job [URL]   (default sqlite:sqllock.db; run `sqllock migrate` first)
#include <sqllock/sqllock.hpp>

#include <chrono>
#include <iostream>
#include <thread>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  const char* url = argc > 1 ? argv[1] : "sqlite:sqllock.db";
  try {
    sqllock::client_options options;
    options.log = [](sqllock::log_level level, std::string_view msg) {
      if (level >= sqllock::log_level::warning) std::cerr << "sqllock: " << msg << "\n";
    };
    auto client = sqllock::connect(url, options);
    // Another host running the job? Then skip this round instead of piling up.
    auto lease = client.try_acquire("nightly-report", {.ttl = 30s});
    if (!lease) {
      auto info = client.inspect("nightly-report");
      std::cout << "skipped: running on " << (info ? info->holder : "?") << "\n";
      return 0;
    }
    std::cout << "running with fencing token " << lease->fencing_token() << "\n";
    for (int step = 0; step < 3; ++step) {
      if (lease->lost()) {  // the watchdog renews every ~10 s; it tells us if that failed
        std::cerr << "lease lost: stopping before doing more\n";
        return 1;
      }
      std::this_thread::sleep_for(100ms);  // ... a step of the job, writes stamped with the token ...
    }
    lease->release();
    std::cout << "done\n";
  } catch (const sqllock::error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
