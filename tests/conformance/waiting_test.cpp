// Conformance: try/timeout/cancel semantics, in-process FIFO hand-off, cross-process wake and takeover.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <atomic>
#include <mutex>
#include <stop_token>
#include <thread>

#include "conformance/fixture.hpp"

using namespace std::chrono_literals;
using namespace sqllock_test;

namespace {
bool wait_for_file(const std::string& path, std::chrono::milliseconds limit) {
  auto start = clock::now();
  while (clock::now() - start < limit) {
    std::ifstream f(path);
    std::string line;
    if (f && std::getline(f, line) && !line.empty()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}
std::string temp_path(const std::string& tag) {
  return (std::filesystem::temp_directory_path() / unique_name(tag)).string();
}
}  // namespace

TEST(Waiting, TryAcquireForGivesUpAtItsTimeout) {
  auto a = make_client();
  auto b = make_client();
  auto name = unique_name("try_for");
  auto g = a.try_acquire(name);
  ASSERT_TRUE(g);
  auto start = clock::now();
  EXPECT_FALSE(b.try_acquire_for(name, 300ms));
  auto took = ms_since(start);
  EXPECT_GE(took, 290);
  EXPECT_LT(took, 3000);
}

TEST(Waiting, AcquireForThrowsATimeoutThatNamesTheHolder) {
  auto a = make_client();
  auto b = make_client();
  auto name = unique_name("acquire_for");
  auto g = a.try_acquire(name);
  ASSERT_TRUE(g);
  try {
    b.acquire_for(name, 100ms);
    FAIL() << "acquired a held lock";
  } catch (const sqllock::acquire_timeout& e) {
    EXPECT_EQ(e.holder(), a.holder_id());
    EXPECT_EQ(e.lock_name(), name);
    EXPECT_GT(e.time_left(), 20s);
    EXPECT_NE(std::string(e.what()).find(a.holder_id()), std::string::npos) << e.what();
  }
}

TEST(Waiting, ZeroTimeoutIsASingleTry) {
  auto a = make_client();
  auto b = make_client();
  auto name = unique_name("zero");
  auto g = a.try_acquire(name);
  auto before = b.statement_count();
  EXPECT_FALSE(b.try_acquire_for(name, 0ms));
  EXPECT_LE(b.statement_count() - before, 2u);
}

TEST(Waiting, AcquireForWithZeroTimeoutTriesOnceAndNamesTheHolder) {
  auto a = make_client();
  auto b = make_client();
  auto name = unique_name("zero_throw");
  auto g = a.try_acquire(name);
  ASSERT_TRUE(g);
  auto before = b.statement_count();
  try {
    b.acquire_for(name, 0ms);
    FAIL() << "acquired a held lock";
  } catch (const sqllock::acquire_timeout& e) {
    EXPECT_EQ(e.holder(), a.holder_id());
  }
  EXPECT_LE(b.statement_count() - before, 2u);  // one acquire (+ one local read of the holder on SQLite)
}

TEST(Waiting, ALocalReleaseWakesTheWaiterAtOnce) {
  auto c = make_client(events_only_options());
  auto name = unique_name("local_wake");
  std::atomic<bool> holding{false};
  std::atomic<clock::rep> released_at{0};
  std::thread holder([&] {
    auto g = c.try_acquire(name);
    holding = g.has_value();
    std::this_thread::sleep_for(300ms);
    released_at = clock::now().time_since_epoch().count();
    g->release();
  });
  while (!holding) std::this_thread::sleep_for(1ms);
  auto h = c.acquire_for(name, 20s);  // the poll interval is 5 s: only the local wake explains speed
  auto acquired_at = clock::now().time_since_epoch().count();
  holder.join();
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(clock::duration(acquired_at - released_at));
  EXPECT_LT(waited.count(), 1000);
  EXPECT_GT(h.fencing_token(), 0);
}

TEST(Waiting, AcquireIsCancelledThroughItsStopToken) {
  auto a = make_client();
  auto b = make_client(events_only_options());
  auto name = unique_name("cancel");
  auto g = a.try_acquire(name);
  std::stop_source stop;
  std::thread t([&] {
    std::this_thread::sleep_for(150ms);
    stop.request_stop();
  });
  auto start = clock::now();
  EXPECT_THROW(b.acquire(name, {}, stop.get_token()), sqllock::cancelled);
  t.join();
  EXPECT_LT(ms_since(start), 3000);
  // The cancelled waiter left no trace: the holder is unchanged and the queue is gone.
  EXPECT_EQ(a.inspect(name)->holder, a.holder_id());
}

TEST(Waiting, LocalWaitersAreServedFirstInFirstOut) {
  auto c = make_client();
  auto name = unique_name("fifo");
  auto g = c.try_acquire(name);
  ASSERT_TRUE(g);
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto h = c.acquire_for(name, 30s);
      {
        std::lock_guard lk(mu);
        order.push_back(i);
      }
      std::this_thread::sleep_for(20ms);
    });
    std::this_thread::sleep_for(100ms);  // queue them in a known order
  }
  g->release();
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(Waiting, AWaiterInAnotherProcessIsWokenByTheRelease) {
  if (!hooks().cross_process_wake) GTEST_FAIL() << hooks().name << " has no cross-process wake-up event";
  auto name = unique_name("xproc_wake");
  auto ready = temp_path("ready");
  int pid = spawn_child("hold", {name, "30000", "600", ready});
  ASSERT_TRUE(wait_for_file(ready, 20s));
  // Through a transaction pooler there is no LISTEN (no session state): the waiter learns of the
  // release by polling, so it runs with the default poll interval (at most 250 ms) instead.
  if (hooks().transaction_pooler)
    std::cout << "[ NOTE     ] transaction pooler: no wake-up event, the default polling must hand over\n";
  auto c = make_client(hooks().transaction_pooler ? sqllock::client_options{} : events_only_options());
  auto start = clock::now();
  auto g = c.acquire_for(name, 30s);
  auto waited = ms_since(start);
  EXPECT_EQ(wait_child(pid), 0);
  // The holder releases after about 600 ms; with 5 s polls only the wake-up event explains this.
  EXPECT_LT(waited, 2500);
  std::filesystem::remove(ready);
}

TEST(Waiting, ADeadHoldersLeaseIsTakenOverAfterItExpires) {
  auto name = unique_name("crash");
  auto ready = temp_path("ready");
  int pid = spawn_child("hold", {name, "700", "-1", ready});
  ASSERT_TRUE(wait_for_file(ready, 20s));
  EXPECT_EQ(wait_child(pid), 128 + SIGKILL);
  std::int64_t dead_token = 0;
  {
    std::ifstream f(ready);
    f >> dead_token;
  }
  auto c = make_client();
  auto start = clock::now();
  auto g = c.acquire_for(name, 20s);
  EXPECT_GT(g.fencing_token(), dead_token);
  EXPECT_LT(ms_since(start), 5000);
  std::filesystem::remove(ready);
}
