// The SQLite waker (src/sqlite/sqlite_waker.cpp): a release in another process must wake the
// waiters of the name even when the lease was held for less than the 2 ms probe interval (fair
// mode's hand-over holds are that short; a lost wake-up left the lock idle until the waiter's
// ticket renewal, bench/RESULTS.md "Fair mode profile"). Two wakers on one file stand for two
// processes: their locks are open file description locks, which do not merge within a process.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/test_support.hpp"
#include "sqlite/sqlite_waker.hpp"

namespace {

struct counting_sink : sqllock::detail::wake_sink {
  std::atomic<int> wakes{0};
  void wake(const std::string&) noexcept override { wakes.fetch_add(1); }
};

}  // namespace

TEST(SqliteWaker, ShortHoldsInAnotherProcessWakeEveryTime) {
  const auto file = std::filesystem::temp_directory_path() /
                    ("sqllock-waker-test-" + std::to_string(getpid()) + "-sqllock-wait");
  std::filesystem::remove(file);
  {
    sqllock::detail::sqlite::waker holder(file.string());
    sqllock::detail::sqlite::waker waiter(file.string());
    counting_sink sink;
    waiter.set_sink(&sink);
    ASSERT_TRUE(waiter.watch("short"));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const int releases = 40;
    for (int i = 0; i < releases; ++i) {
      const std::string owner = "o" + std::to_string(i);
      holder.hold("short", owner);
      holder.drop(owner);  // held for microseconds, far less than the probe interval
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // Every release is counted, so the prober hears of each one on its next probe, whenever that
    // runs (late on a loaded machine): wait for the count, not a fixed 20 ms.
    sqllock_testing::eventually([&] { return sink.wakes.load() >= releases; }, std::chrono::seconds(3));
    EXPECT_GE(sink.wakes.load(), releases) << "releases that no waiter heard of";
    waiter.set_sink(nullptr);
  }
  std::filesystem::remove(file);
}
