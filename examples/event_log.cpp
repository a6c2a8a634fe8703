// Example: every lease event as one logfmt line on stderr (for a log shipper).
//   example_event_log [URL]   (default sqlite:sqllock.db; run `sqllock migrate` first)
#include <sqllock/sqllock.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  const char* url = argc > 1 ? argv[1] : "sqlite:sqllock.db";
  std::mutex out_mu;  // events come from the caller's thread and from the watchdog
  try {
    sqllock::client_options options;
    options.on_event = [&out_mu](const sqllock::lease_event& e) {
      char line[512];
      std::snprintf(line, sizeof line,
                    "event=%.*s backend=%.*s name=\"%.*s\" token=%lld holder=\"%.*s\" waited_ms=%lld held_ms=%lld "
                    "ttl_ms=%lld time_left_ms=%lld",
                    static_cast<int>(sqllock::to_string(e.kind).size()), sqllock::to_string(e.kind).data(),
                    static_cast<int>(e.backend.size()), e.backend.data(), static_cast<int>(e.name.size()),
                    e.name.data(), static_cast<long long>(e.fencing_token), static_cast<int>(e.holder.size()),
                    e.holder.data(), static_cast<long long>(e.waited.count()), static_cast<long long>(e.held.count()),
                    static_cast<long long>(e.ttl.count()), static_cast<long long>(e.time_left.count()));
      std::string text = line;
      if (!e.statement.empty()) text += " statement=" + std::string(e.statement) + " code=" + std::string(e.code);
      if (!e.reason.empty()) text += " reason=\"" + std::string(e.reason) + "\"";
      std::lock_guard lk(out_mu);
      std::cerr << text << "\n";
    };
    options.log = [&out_mu](sqllock::log_level level, std::string_view msg) {
      if (level < sqllock::log_level::warning) return;
      std::lock_guard lk(out_mu);
      std::cerr << "log=warning msg=\"" << msg << "\"\n";
    };
    auto client = sqllock::connect(url, options);
    auto lease = client.acquire_for("event-log-demo", 5s, {.ttl = 300ms});
    std::this_thread::sleep_for(400ms);  // the watchdog renews at about a third of the TTL
    lease.release();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
