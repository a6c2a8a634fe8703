// Helpers shared by the test programs.
#include "test_support.hpp"

#include <unistd.h>

#include <atomic>
#include <exception>
#include <iostream>
#include <random>
#include <thread>

#include "sqllock/sqllock.hpp"

namespace sqllock_testing {

std::string unique_name(const std::string& prefix) {
  static std::atomic<int> counter{0};
  static const std::string run = [] {
    std::random_device rd;
    return std::to_string(getpid()) + "_" + std::to_string(rd() % 100000);
  }();
  return prefix + "_" + run + "_" + std::to_string(counter++);
}

int prepare_database(const std::string& url, const std::string& program) {
  try {
    sqllock::client_options options;
    options.require_schema = false;
    auto c = sqllock::connect(url, options);
    c.migrate();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << program << ": cannot prepare the database: " << e.what() << "\n";
    return 2;
  }
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

}  // namespace sqllock_testing
