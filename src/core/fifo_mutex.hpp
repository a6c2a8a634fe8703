// A mutex that hands ownership over in arrival order, for a connection many threads take turns on.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>

namespace sqllock::detail {

/// A queue lock: threads own it in the order they asked for it, and an unlock hands ownership to
/// the next waiter directly, waking that one thread only. std::mutex makes no such promise (a
/// thread that releases and re-locks at once usually wins, so 16 threads looping on one connection
/// starved each other for seconds), and a ticket lock with one shared condition variable wakes
/// every waiter at every hand-over (a herd that took the CPU from the thread doing the I/O). A
/// waiter may give up at a deadline. Meets TimedLockable: std::lock_guard and std::unique_lock work.
class fifo_mutex {
 public:
  void lock() {
    std::unique_lock lk(mu_);
    if (!locked_ && queue_.empty()) {
      locked_ = true;
      return;
    }
    waiter w;
    queue_.push_back(&w);
    w.cv.wait(lk, [&] { return w.granted; });
  }

  bool try_lock() {
    std::lock_guard lk(mu_);
    if (locked_ || !queue_.empty()) return false;
    locked_ = true;
    return true;
  }

  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    std::unique_lock lk(mu_);
    if (!locked_ && queue_.empty()) {
      locked_ = true;
      return true;
    }
    waiter w;
    queue_.push_back(&w);
    if (w.cv.wait_until(lk, deadline, [&] { return w.granted; })) return true;
    queue_.erase(std::find(queue_.begin(), queue_.end(), &w));  // not granted: still queued
    return false;
  }

  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return try_lock_until(std::chrono::steady_clock::now() + d);
  }

  void unlock() {
    std::lock_guard lk(mu_);
    if (queue_.empty()) {
      locked_ = false;
      return;
    }
    // Hand over: the lock stays taken, now by the first waiter. Notified under mu_, so the waiter
    // (and its condition variable, on its stack) cannot be gone yet.
    waiter* next = queue_.front();
    queue_.pop_front();
    next->granted = true;
    next->cv.notify_one();
  }

  /// How many threads wait for the lock now (for tests and diagnostics).
  std::size_t waiting() {
    std::lock_guard lk(mu_);
    return queue_.size();
  }

 private:
  struct waiter {
    std::condition_variable cv;
    bool granted = false;
  };
  std::mutex mu_;
  bool locked_ = false;
  std::deque<waiter*> queue_;
};

}  // namespace sqllock::detail
