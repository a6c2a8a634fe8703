// The release outbox: idempotent re-sends of releases (and abandoned acquires) whose answer was lost.
#include "core/release_outbox.hpp"

#include <algorithm>

namespace sqllock::detail {

bool worth_sending_again(const std::exception& e) noexcept {
  return dynamic_cast<const connection_lost*>(&e) || dynamic_cast<const lock_not_available*>(&e) ||
         dynamic_cast<const retryable_error*>(&e) || dynamic_cast<const query_canceled*>(&e);
}

using std::chrono::milliseconds;

milliseconds resend_pause(const std::exception& e, int tries) noexcept {
  // Without an answer the server may be down or restarting: start at 250 ms. With one (busy, rolled
  // back, cancelled) it is up, and the conflict that lost the release is usually over in moments:
  // start at 50 ms. Either way doubling, so a release that keeps losing (a row other transactions
  // keep deadlocking on, a server that stays busy) is not sent 20 times a second until it gives up;
  // capped, so once the conflict ends the row is freed within a second (two without an answer).
  const bool answered = dynamic_cast<const connection_lost*>(&e) == nullptr;
  const milliseconds first = answered ? milliseconds(50) : milliseconds(250);
  const milliseconds cap = answered ? milliseconds(1000) : milliseconds(2000);
  return std::min(first * (1 << std::min(tries, 5)), cap);
}

void release_outbox::add(release_request request, steady::time_point give_up_at,
                         std::shared_ptr<const std::atomic<int>> held_off, bool leave_queue) {
  std::lock_guard lk(mu_);
  pending_.push_back({std::move(request), give_up_at, steady::now(), 0, std::move(held_off), leave_queue});
}

void release_outbox::add_leave(release_request request, steady::time_point give_up_at) {
  std::lock_guard lk(mu_);
  pending_.push_back({std::move(request), give_up_at, steady::now(), 0, nullptr, true, true});
}

std::vector<std::string> release_outbox::flush(backend& db, lane on, steady::time_point now,
                                               const std::optional<std::string>& name,
                                               steady::time_point until) noexcept {
  struct done_guard {  // the batch leaves in_flight_ however its sends end, after any re-queueing
    release_outbox& o;
    const std::vector<std::string>& names;
    ~done_guard() {
      {
        std::lock_guard lk(o.mu_);
        for (const auto& n : names) {
          if (auto it = std::find(o.in_flight_.begin(), o.in_flight_.end(), n); it != o.in_flight_.end()) {
            o.in_flight_.erase(it);
          }
        }
      }
      o.sent_.notify_all();
    }
  };
  std::vector<std::string> freed;
  std::vector<entry> batch;
  std::vector<std::string> sending;
  try {
    done_guard done{*this, sending};
    {
      std::unique_lock lk(mu_);
      if (name) {
        // The watchdog may be sending this very release right now: wait for its answer (each send
        // is bounded by io_timeout), so the caller does not find the name still held by itself.
        sent_.wait_until(lk, std::min(now + io_timeout, until), [&] {
          return std::find(in_flight_.begin(), in_flight_.end(), *name) == in_flight_.end();
        });
        now = steady::now();
        if (now >= until) return freed;  // the caller's time is up: the watchdog sends it later
      }
      auto keep = std::partition(pending_.begin(), pending_.end(), [&](const entry& e) {
        // A caller about to acquire this very name re-sends now, whatever the back-off says: it
        // makes a round trip anyway, and the lease is free the moment the server is reachable.
        // A release held off by an open guarded transaction waits for it, whoever asks.
        const bool take = e.give_up_at <= now ||
                          (!e.waiting() && (name ? e.request.lease.name == *name : e.next_try <= now));
        return !take;
      });
      batch.assign(std::make_move_iterator(keep), std::make_move_iterator(pending_.end()));
      pending_.erase(keep, pending_.end());
      sending.reserve(batch.size());
      in_flight_.reserve(in_flight_.size() + batch.size());
      for (const auto& e : batch) {
        sending.push_back(e.request.lease.name);
        in_flight_.push_back(e.request.lease.name);
      }
    }
    std::vector<entry> retry;
    for (auto& e : batch) {
      if (e.give_up_at <= now) continue;  // the lease has expired by now: nothing left to free
      auto request = e.request;
      request.deadline = std::min({now + io_timeout, e.give_up_at, until});
      try {
        if (!e.released && db.release(request, on)) {
          freed.push_back(e.request.lease.name);
          if (log_) {
            log_message(
                *log_, log_level::info,
                "lock '" + e.request.lease.name + "': a release that did not complete was sent again and applied");
          }
        }
        e.released = true;
        if (e.leave_queue) {
          db.queue_leave(e.request.lease.owner, request.deadline);
          // The ticket ahead of the name's waiters is gone: wake them as for a release.
          if (freed.empty() || freed.back() != e.request.lease.name) freed.push_back(e.request.lease.name);
        }
      } catch (const std::exception& ex) {
        if (worth_sending_again(ex)) {
          e.next_try = steady::now() + resend_pause(ex, e.tries);
          ++e.tries;
          retry.push_back(std::move(e));
          continue;
        }
        if (log_) {
          log_message(
              *log_, log_level::warning,
              "lock '" + e.request.lease.name + "': dropping a " + (e.released ? "fair ticket's deletion" : "release") +
                  " that could not be sent again: " + ex.what());
        }
      }
    }
    if (!retry.empty()) {
      std::lock_guard lk(mu_);
      for (auto& e : retry) pending_.push_back(std::move(e));
    }
  } catch (...) {
    // Out of memory: the leases expire by their TTL.
  }
  return freed;
}

steady::time_point release_outbox::next_due() const {
  std::lock_guard lk(mu_);
  auto t = steady::time_point::max();
  for (const auto& e : pending_) t = std::min(t, e.waiting() ? e.give_up_at : std::min(e.next_try, e.give_up_at));
  return t;
}

bool release_outbox::empty() const {
  std::lock_guard lk(mu_);
  return pending_.empty();
}

bool release_outbox::has(const std::string& name) const {
  std::lock_guard lk(mu_);
  return std::any_of(pending_.begin(), pending_.end(), [&](const entry& e) { return e.request.lease.name == name; }) ||
         std::find(in_flight_.begin(), in_flight_.end(), name) != in_flight_.end();
}

}  // namespace sqllock::detail
