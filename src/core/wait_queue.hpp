// The wait queue: FIFO tickets per lock name among this client's waiters, wake-up events, and the
// pure back-off function that decides how long the head of a queue sleeps between tries.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stop_token>
#include <string>

#include "core/backend.hpp"

namespace sqllock::detail {

/// What the head of a queue saw at its last try, for the back-off.
struct backoff_state {
  int polls = 0;    ///< tries since the last event while a live holder was known
  int unknown = 0;  ///< consecutive tries that named no live holder
};

/// How long to sleep before the next try (pure: the caller draws the random number).
/// - A live holder is known and the database will wake us (events): uniformly in
///   [poll_max/2, poll_max], polling being only the safety net.
/// - A live holder is known, no events: [b/2, b] with b = min(poll_max, poll_min * 2^polls).
/// - No live holder was named (the name was freed between statements, or the database was busy):
///   no event will come, so retry soon: b = poll_min doubling at most twice.
/// Never past the holder's lease end (time_left + 1 ms). `uniform01` is in [0, 1).
std::chrono::milliseconds next_poll_delay(backoff_state& state, bool holder_known, std::chrono::milliseconds time_left,
                                          bool events, std::chrono::milliseconds poll_min,
                                          std::chrono::milliseconds poll_max, double uniform01);

/// FIFO wait queues, one per name that has local waiters. Only the head of a queue tries the
/// database; the others sleep until they become head (no in-process herd). Owns its mutex and
/// never calls another unit while holding it.
class wait_queues {
 public:
  struct queue;
  /// A place in the queue of one name; leaves it (waking the next) when destroyed.
  class ticket {
   public:
    ticket(wait_queues& owner, std::string name);
    ~ticket();
    ticket(const ticket&) = delete;
    ticket& operator=(const ticket&) = delete;
    const std::string& name() const noexcept { return name_; }

    /// Wait until this ticket is the head of its queue. False at the deadline; throws cancelled
    /// when `stop` is requested.
    bool wait_until_head(std::stop_token stop, steady::time_point deadline);
    /// Events seen so far (compare before and after a try).
    std::uint64_t events() const;
    /// Sleep until `until`, an event after `events_before`, or `stop` (throws cancelled).
    void sleep(std::stop_token stop, steady::time_point until, std::uint64_t events_before);

   private:
    wait_queues& owner_;
    std::string name_;
    std::shared_ptr<queue> q_;
    std::uint64_t id_;
  };

  /// True when `name` has waiters queued.
  bool has_waiters(const std::string& name) const;
  /// Something was released: wake the waiters of `name` (the head tries again at once).
  void wake(const std::string& name) noexcept;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<queue>> queues_;
  std::uint64_t next_id_ = 1;
};

/// Counts the local waiters of each name and tells the backend to watch a name while it has any.
/// Its mutex guards the counts only: the backend's watch() and unwatch() are called without it
/// (the backend counts them per name, so their order does not matter).
class watch_registry {
 public:
  explicit watch_registry(backend& db, const client_options& options) : db_(db), options_(options) {}
  /// A waiter starts waiting on `name` until `until`; true when the backend will wake it by an
  /// event. Returns by `until` (see backend::watch).
  bool add(const std::string& name, steady::time_point until);
  void remove(const std::string& name);

 private:
  struct entry {
    int waiters = 0;
    bool events = false;
    bool watching = false;  ///< the first waiter's backend watch() is under way
  };
  backend& db_;
  const client_options& options_;
  std::mutex mu_;
  std::condition_variable watched_;  ///< a watch() under way has answered
  std::map<std::string, entry> names_;
};

}  // namespace sqllock::detail
