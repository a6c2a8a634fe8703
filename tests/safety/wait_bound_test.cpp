// Safety: a bounded wait keeps its bound when the network to the server is cut during the wait.
// The fault harness (issue 11) saw a 3 s wait return after 5.2 s under a partition: on
// PostgreSQL the waiter's UNLISTEN at the end of the wait went into the partition and held the
// caller for its own 2 s bound.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

#include "safety/safety_fixture.hpp"

using namespace std::chrono_literals;
using namespace sqllock_safety;

TEST(Partition, AWaitCutOffMidwayKeepsItsBound) {
  for (const auto cut_after : {100ms, 700ms}) {
    SCOPED_TRACE("partition " + std::to_string(cut_after.count()) + " ms into a 1 s wait");
    auto proxy = make_proxy();
    auto a = sqllock::connect(proxy->wrap_url(hooks().url));
    auto b = make_client();
    const auto name = unique_name("waitcut");
    auto held = b.try_acquire(name, {.ttl = 10s});
    ASSERT_TRUE(held);
    std::jthread cutter([&] {
      std::this_thread::sleep_for(cut_after);
      proxy->blackhole();
    });
    const auto t0 = clock::now();
    try {
      EXPECT_FALSE(a.try_acquire_for(name, 1000ms));
    } catch (const sqllock::connection_lost&) {
      // Also fine: the database could not be reached within the bound.
    }
    // The stated bound: timeout plus the last statement's answer (250 ms), and slack for a busy
    // machine.
    EXPECT_LT(ms_since(t0), 1000 + 250 + 300);
    cutter.join();
    proxy->pass();
    proxy->cut_silenced();
  }
}

// A bounded wait keeps its bound while its client's wake-up connection is slow to open: PostgreSQL's
// waker connected (up to 2 s) and sent LISTEN (up to 2 s) inside the waiter's call, whatever the
// waiter's own deadline (an 800 ms wait took 3.1 s behind a 200 ms delay).
TEST(Partition, ABoundedWaitKeepsItsBoundWhileItsWakeUpConnectionIsSlow) {
  auto proxy = make_proxy();
  auto a = sqllock::connect(proxy->wrap_url(hooks().url));
  auto b = make_client();
  const auto name = unique_name("slow_watch");
  auto held = b.try_acquire(name, {.ttl = 30s});
  ASSERT_TRUE(held);
  {
    auto warm = a.try_acquire(unique_name("slow_watch_warm"));  // the lease statements are prepared
    ASSERT_TRUE(warm);
  }
  proxy->delay(200ms);  // one round trip: 400 ms; opening a connection: several
  const auto w0 = clock::now();
  try {
    EXPECT_FALSE(a.try_acquire_for(name, 800ms));  // the first try answers "held" in time
  } catch (const sqllock::connection_lost&) {
    // Also fine: the database could not be reached within the bound.
  }
  EXPECT_LT(ms_since(w0), 800 + 250 + 250);
  proxy->pass();
}

// A multi-lock's bound holds when it gives back what it took into a partition: acquire_all took
// the set's first names, waited for the last until its deadline, and then released the others
// into the partition. The release was bounded only by that lease's loss point (up to its TTL), so
// the call returned seconds past its bound (the fault harness saw 3.2 s past a 3 s bound); then
// each release waited for an answer of its own (release's floor of 250 ms each), so the overrun
// grew with the size of the set (2245 ms for a 1 s wait with four names taken) instead of staying
// within one answer for the whole give-back.
TEST(Partition, AMultiLockGivingBackIntoAPartitionKeepsItsBound) {
  for (const std::size_t size : {2u, 5u}) {
    SCOPED_TRACE("a set of " + std::to_string(size) + " names");
    auto proxy = make_proxy();
    auto a = sqllock::connect(proxy->wrap_url(hooks().url), {.notifications = false});
    auto b = make_client();
    std::vector<std::string> names;
    for (std::size_t i = 0; i < size; ++i) names.push_back(unique_name("multi_cut_" + std::to_string(i)));
    std::sort(names.begin(), names.end());
    auto held = b.try_acquire(names.back(), {.ttl = 30s});  // the last of the set is busy
    ASSERT_TRUE(held);
    std::jthread cutter([&] {
      std::this_thread::sleep_for(600ms);
      proxy->blackhole();
    });
    const auto t0 = clock::now();
    try {
      EXPECT_FALSE(sqllock::try_acquire_all(a, names, 1000ms, {.ttl = 8s}));
    } catch (const sqllock::connection_lost&) {
      // Also fine: the database could not be reached within the bound.
    }
    // The stated bound: timeout, plus the last statement's answer (250 ms), plus one answer for the
    // give-back of the whole set (250 ms), and slack for a busy machine.
    EXPECT_LT(ms_since(t0), 1000 + 250 + 250 + 400);
    cutter.join();
    proxy->pass();
    proxy->cut_silenced();  // the connections that lost bytes are reset, as TCP would in the end
    // Nothing of the set is left taken until its TTL (8 s): the releases not sent in time are sent
    // in the background once the network is back (about 240 ms).
    const auto h0 = clock::now();
    for (std::size_t i = 0; i + 1 < names.size(); ++i) {
      EXPECT_TRUE(b.try_acquire_for(names[i], 4000ms)) << names[i] << " left taken";
    }
    EXPECT_LT(ms_since(h0), 4000);
  }
}

// A permit wait keeps its bound when its first use of the semaphore's name in this client meets a
// partition: storing and reading the name's permit count waited for the caller lane without bound
// and ran with the 10 s I/O bound, whatever the wait's own deadline (and on a lost connection a
// waiting acquire threw at once instead of riding it out like its acquire statements).
TEST(Partition, APermitWaitWhoseFirstUseMeetsAPartitionKeepsItsBound) {
  auto proxy = make_proxy();
  auto a = sqllock::connect(proxy->wrap_url(hooks().url), {.notifications = false});
  auto b = make_client();
  const auto name = unique_name("permit_cut");
  auto held = b.try_acquire_permit(name, 1, {.ttl = 30s});  // the count is stored; its only permit taken
  ASSERT_TRUE(held);
  {
    auto warm = a.try_acquire(unique_name("permit_cut_warm"));  // a's connection is open
    ASSERT_TRUE(warm);
  }
  proxy->blackhole();
  const auto t0 = clock::now();
  try {
    EXPECT_FALSE(a.try_acquire_permit_for(name, 1, 1000ms));
  } catch (const sqllock::connection_lost&) {
    // Also fine: the database could not be reached within the bound.
  }
  EXPECT_LT(ms_since(t0), 1000 + 250 + 300);
  proxy->pass();
  proxy->cut_silenced();
}

// A reader-writer wait keeps its bound when the network is cut while it waits: the writer's look
// for live readers and the reader's look for a live writer waited for the caller lane without bound
// and ran with the 10 s I/O bound, whatever the wait's own deadline.
TEST(Partition, AReaderWriterWaitCutOffMidwayKeepsItsBound) {
  for (const bool writer_waits : {true, false}) {
    SCOPED_TRACE(writer_waits ? "a writer waiting for a reader" : "a reader waiting for a writer");
    auto proxy = make_proxy();
    auto a = sqllock::connect(proxy->wrap_url(hooks().url), {.notifications = false});
    auto b = make_client();
    const auto name = unique_name("rw_cut");
    auto held = writer_waits ? b.try_acquire_read(name, {.ttl = 30s}) : b.try_acquire_write(name, {.ttl = 30s});
    ASSERT_TRUE(held);
    std::jthread cutter([&] {
      std::this_thread::sleep_for(300ms);
      proxy->blackhole();
    });
    const auto t0 = clock::now();
    try {
      EXPECT_FALSE(writer_waits ? a.try_acquire_write_for(name, 1000ms, {.ttl = 8s})
                                : a.try_acquire_read_for(name, 1000ms, {.ttl = 8s}));
    } catch (const sqllock::connection_lost&) {
      // Also fine: the database could not be reached within the bound.
    }
    // The stated bound: timeout, plus the last statement's answer (250 ms), plus one answer for a
    // writer's give-back of its row (250 ms), and slack for a busy machine.
    EXPECT_LT(ms_since(t0), 1000 + 250 + 250 + 400);
    cutter.join();
    proxy->pass();
    proxy->cut_silenced();
  }
}

// A wait ending at its deadline keeps its bound while another waiter of its client starts watching
// its own name through a slow network. The client's registry of watched names held its lock across
// that waiter's watch (on PostgreSQL a LISTEN on the wake-up connection), and the wait that ended
// could not unregister its own name until the LISTEN was answered. The fault soak saw two 3 s waits
// of one process return after 5.3 and 5.9 s, at the same instant, in a partition.
TEST(Partition, AWaitEndsInTimeWhileAnotherWaiterOfItsClientStartsWatchingThroughASlowNetwork) {
  auto proxy = make_proxy();
  auto a = sqllock::connect(proxy->wrap_url(hooks().url));
  auto b = make_client();
  const auto x = unique_name("watch_slow_x");
  const auto y = unique_name("watch_slow_y");
  auto hx = b.try_acquire(x, {.ttl = 30s});
  auto hy = b.try_acquire(y, {.ttl = 30s});
  ASSERT_TRUE(hx && hy);
  {
    auto warm = a.try_acquire(unique_name("watch_slow_warm"));  // the lease statements are prepared
    ASSERT_TRUE(warm);
  }
  std::atomic<long long> waited{-1};
  std::jthread first([&] {  // waits for x, its name watched before the network slows down
    const auto t0 = clock::now();
    try {
      EXPECT_FALSE(a.try_acquire_for(x, 2000ms));
    } catch (const sqllock::connection_lost&) {
      // Also fine: the database could not be reached within the bound.
    }
    waited = ms_since(t0);
  });
  std::this_thread::sleep_for(300ms);
  proxy->delay(700ms);  // a round trip: 1.4 s
  // The second waiter's first try, then its watch of y (a LISTEN), each take a slow round trip: the
  // watch is under way when the first wait ends.
  std::jthread second([&] {
    try {
      (void)a.try_acquire_for(y, 4000ms);
    } catch (const sqllock::error&) {
    }
  });
  first.join();
  // The stated bound: timeout plus the last statement's answer (250 ms), and slack for a busy machine.
  EXPECT_LT(waited.load(), 2000 + 250 + 300);
  proxy->pass();
  second.join();
}

// A permit wait that cannot reach the database while it stores the semaphore's permit count sleeps
// poll_min between tries; a stop request during that sleep ends the call at once. It slept on
// (std::this_thread::sleep_until) and saw the request only after poll_min.
TEST(Partition, APermitWaitRetryingItsFirstUseEndsWhenStoppedDuringItsPause) {
  auto proxy = make_proxy();
  std::mutex mu;
  std::condition_variable cv;
  int retries = 0;
  sqllock::client_options o{.notifications = false, .poll_min = 60s, .poll_max = 60s};
  o.log = [&](sqllock::log_level, std::string_view m) {
    if (m.find("storing the permit count") == std::string_view::npos || m.find("will be retried") == std::string_view::npos) {
      return;
    }
    std::lock_guard lk(mu);
    ++retries;
    cv.notify_all();
  };
  auto a = sqllock::connect(proxy->wrap_url(hooks().url), o);
  {
    auto warm = a.try_acquire(unique_name("permit_stop_warm"));  // a's connection is open
    ASSERT_TRUE(warm);
  }
  proxy.reset();  // the server is unreachable: connections are reset and refused
  std::stop_source stop;
  std::atomic<bool> cancelled{false};
  std::atomic<bool> ended{false};
  std::jthread waiter([&] {
    try {
      auto g = a.acquire_permit(unique_name("permit_stop"), 2, {.ttl = 10s}, stop.get_token());
    } catch (const sqllock::cancelled&) {
      cancelled = true;
    } catch (const std::exception& e) {
      std::cerr << "unexpected: " << e.what() << "\n";
    }
    ended = true;
  });
  {
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, 20s, [&] { return retries > 0; })) << "the first try of the count never failed";
  }
  std::this_thread::sleep_for(200ms);  // past the log line, into the pause (not an assertion)
  const auto t0 = clock::now();
  stop.request_stop();
  waiter.join();
  EXPECT_TRUE(cancelled);
  EXPECT_TRUE(ended);
  // A wake-up claim with a generous bound: far under the 60 s pause it slept through before.
  EXPECT_LT(ms_since(t0), 10000);
}
