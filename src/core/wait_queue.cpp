// FIFO wait queues per lock name, wake-up events, the back-off function and the watch registry.
#include "core/wait_queue.hpp"

#include "core/permit_name.hpp"
#include "core/rw_name.hpp"

#include <algorithm>

namespace sqllock::detail {

using std::chrono::milliseconds;

milliseconds next_poll_delay(backoff_state& state, bool holder_known, milliseconds time_left, bool events,
                             milliseconds poll_min, milliseconds poll_max, double uniform01) {
  state.unknown = holder_known ? 0 : state.unknown + 1;
  milliseconds base;
  if (holder_known && events) {
    base = poll_max;
  } else {
    const int doublings = holder_known ? std::min(state.polls, 20) : std::min(state.unknown - 1, 2);
    base = std::min(poll_max, milliseconds(poll_min.count() << doublings));
  }
  const auto lo = base.count() / 2;
  auto pause = milliseconds(lo + static_cast<std::int64_t>(uniform01 * static_cast<double>(base.count() - lo + 1)));
  pause = std::min(pause, base);
  if (holder_known) {
    pause = std::min(pause, time_left + milliseconds(1));
    ++state.polls;
  }
  return std::max(pause, milliseconds(0));
}

struct wait_queues::queue {
  std::deque<std::uint64_t> tickets;  // FIFO; the front one tries the database
  std::uint64_t events = 0;           // bumped by every local release / backend wake
  std::condition_variable_any cv;
};

wait_queues::ticket::ticket(wait_queues& owner, std::string name) : owner_(owner), name_(std::move(name)) {
  std::lock_guard lk(owner_.mu_);
  auto& q = owner_.queues_[name_];
  if (!q) q = std::make_shared<queue>();
  q_ = q;
  id_ = owner_.next_id_++;
  q_->tickets.push_back(id_);
}

wait_queues::ticket::~ticket() {
  std::lock_guard lk(owner_.mu_);
  auto it = std::find(q_->tickets.begin(), q_->tickets.end(), id_);
  if (it != q_->tickets.end()) q_->tickets.erase(it);
  q_->cv.notify_all();  // the next one may now be head
  if (q_->tickets.empty()) {
    auto qi = owner_.queues_.find(name_);
    if (qi != owner_.queues_.end() && qi->second == q_) owner_.queues_.erase(qi);
  }
}

bool wait_queues::ticket::wait_until_head(std::stop_token stop, steady::time_point deadline) {
  std::unique_lock lk(owner_.mu_);
  const bool head = q_->cv.wait_until(lk, stop, deadline, [&] { return q_->tickets.front() == id_; });
  if (stop.stop_requested()) throw cancelled("acquire of lock '" + name_ + "' cancelled");
  return head;
}

std::uint64_t wait_queues::ticket::events() const {
  std::lock_guard lk(owner_.mu_);
  return q_->events;
}

void wait_queues::ticket::sleep(std::stop_token stop, steady::time_point until, std::uint64_t events_before) {
  std::unique_lock lk(owner_.mu_);
  q_->cv.wait_until(lk, stop, until, [&] { return q_->events != events_before; });
  if (stop.stop_requested()) throw cancelled("acquire of lock '" + name_ + "' cancelled");
}

bool wait_queues::has_waiters(const std::string& name) const {
  std::lock_guard lk(mu_);
  auto it = queues_.find(name);
  return it != queues_.end() && !it->second->tickets.empty();
}

void wait_queues::wake(const std::string& name) noexcept {
  std::optional<std::string> semaphore;  // a freed permit also wakes its semaphore's waiters
  std::optional<std::string> rw;         // a freed reader/writer row wakes the writer/readers waiting on it
  try {
    semaphore = permit_queue_of(name);
    rw = rw_queue_of(name);
  } catch (...) {
  }
  std::lock_guard lk(mu_);
  const std::string* const keys[] = {&name, semaphore ? &*semaphore : nullptr, rw ? &*rw : nullptr};
  for (const std::string* key : keys) {
    if (!key) continue;
    auto it = queues_.find(*key);
    if (it == queues_.end()) continue;
    ++it->second->events;
    it->second->cv.notify_all();
  }
}

// The backend's watch() may take a round trip (PostgreSQL: a LISTEN, up to the waiter's deadline):
// it is called without the lock, so that the other waiters' add() and remove() never wait for it
// (a wait that ended unregistered only after another waiter's LISTEN into a partition was answered:
// two 3 s waits returned after 5.3 and 5.9 s). The backend counts watches and unwatches of a name,
// so a watch and an unwatch of it racing here leave the same count in either order; a second
// waiter that comes while the first one's watch is under way waits for its answer up to its own
// deadline (polling, events false, if it has not come by then).
bool watch_registry::add(const std::string& name, steady::time_point until) {
  if (!options_.notifications) return false;
  {
    std::unique_lock lk(mu_);
    auto& e = names_[name];
    if (e.waiters++ > 0) {
      // The entry lives while this waiter counts in it (erased only when its waiters reach 0).
      watched_.wait_until(lk, until, [&] { return !e.watching; });
      return e.events;
    }
    e.events = false;
    e.watching = true;
  }
  bool events = false;
  try {
    events = db_.watch(name, until);
  } catch (const std::exception& ex) {
    log_message(options_, log_level::warning,
                std::string("could not watch lock for wake-ups (polling only): ") + ex.what());
  } catch (...) {
    // Polling only, as above; the waiters behind are let go below.
  }
  {
    std::lock_guard lk(mu_);
    // Still this waiter's entry: it is erased only by the remove() of its last waiter, this one too.
    if (auto it = names_.find(name); it != names_.end()) {
      it->second.events = events;
      it->second.watching = false;
    }
  }
  watched_.notify_all();
  return events;
}

void watch_registry::remove(const std::string& name) {
  if (!options_.notifications) return;
  {
    std::lock_guard lk(mu_);
    auto it = names_.find(name);
    if (it == names_.end() || --it->second.waiters > 0) return;
    names_.erase(it);
  }
  try {
    db_.unwatch(name);
  } catch (const std::exception& ex) {
    log_message(options_, log_level::warning, std::string("could not stop watching lock: ") + ex.what());
  }
}

}  // namespace sqllock::detail
