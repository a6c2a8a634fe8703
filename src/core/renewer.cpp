// The watchdog (renewals, release re-sends) and the deadline thread (risk and loss, no I/O).
#include "core/renewer.hpp"

#include <algorithm>

namespace sqllock::detail {

namespace {
// Set on a renewer thread when a callback it ran destroyed the renewer (the last guard of a closed
// client): the thread was detached and must not touch the renewer again.
thread_local bool renewer_gone = false;
}  // namespace

renewer::renewer(lease_book& book, backend& db, release_outbox& outbox, wait_queues& queues,
                 const client_options& options)
    : book_(book), db_(db), outbox_(outbox), queues_(queues), options_(options) {}

renewer::~renewer() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  watchdog_cv_.notify_all();
  deadline_cv_.notify_all();
  for (auto* t : {&watchdog_, &deadline_}) {
    if (!t->joinable()) continue;
    if (t->get_id() == std::this_thread::get_id()) {
      t->detach();
      renewer_gone = true;
    } else {
      t->join();
    }
  }
}

void renewer::poke() {
  {
    std::lock_guard lk(mu_);
    if (stopping_) return;
    ++generation_;
    if (!watchdog_.joinable()) watchdog_ = std::thread([this] { watchdog_loop(); });
    if (!deadline_.joinable()) deadline_ = std::thread([this] { deadline_loop(); });
    started_ = true;
  }
  watchdog_cv_.notify_all();
  deadline_cv_.notify_all();
}

void renewer::schedule(steady::time_point renew_at, steady::time_point deadline_at) {
  // Threads that wait for something earlier will look at this one then (they recompute).
  if (started_.load() && renew_at.time_since_epoch().count() >= watchdog_until_.load() &&
      deadline_at.time_since_epoch().count() >= deadline_until_.load())
    return;
  poke();
}

void renewer::report_error(std::exception_ptr failure, const renew_batch& batch) const noexcept {
  try {
    std::rethrow_exception(failure);
  } catch (const error& e) {
    for (const auto& item : batch.items) events_->emit_error(e, item.lease.name, item.lease.token);
  } catch (...) {
  }
}

void renewer::log_renewals(const renew_batch& batch, const std::vector<std::size_t>& matched) const noexcept {
  try {
    for (auto i : matched) {
      if (i >= batch.items.size()) continue;
      const auto& item = batch.items[i];
      log_message(options_, log_level::debug,
                  "renewed '" + item.lease.name + "' (token " + std::to_string(item.lease.token) + ") for " +
                      std::to_string(item.ttl.count()) + "ms");
    }
  } catch (...) {
  }
}

void renewer::watchdog_loop() {
  for (;;) {
    {
      std::uint64_t seen;
      {
        std::lock_guard lk(mu_);
        if (stopping_) return;
        seen = generation_;
      }
      const auto changes = book_.changes();
      const auto next = std::min(book_.next_renewal(), outbox_.next_due());
      std::unique_lock lk(mu_);
      if (stopping_) return;
      // Publish the wake-up time first, then look for additions made meanwhile: an addition either
      // sees this time (schedule() pokes if it is earlier) or is seen here (and we look again).
      watchdog_until_ = next.time_since_epoch().count();
      if (book_.changes() != changes) continue;
      if (steady::now() < next && generation_ == seen) {
        if (next == steady::time_point::max()) {
          watchdog_cv_.wait(lk, [&] { return stopping_ || generation_ != seen; });
        } else {
          watchdog_cv_.wait_until(lk, next, [&] { return stopping_ || generation_ != seen; });
        }
        continue;  // look again: leases may have come, gone, or be due now
      }
    }
    auto batch = book_.due(steady::now());
    if (!batch.items.empty()) {
      const auto t0 = steady::now();
      std::vector<std::size_t> matched;
      std::string failure;
      std::exception_ptr error_seen;
      try {
        matched = db_.renew(batch.items, batch.deadline);
      } catch (const std::exception& e) {
        failure = e.what();
        if (events_ && events_->enabled()) error_seen = std::current_exception();
      }
      if (!failure.empty() && error_seen) report_error(error_seen, batch);
      if (failure.empty() && options_.log) log_renewals(batch, matched);
      book_.renewed(batch, matched, t0, !failure.empty(), failure);
      if (renewer_gone) return;
    }
    if (const auto now = steady::now(); now >= outbox_.next_due()) {
      // Bounded by the next renewal (at least 100 ms): a re-send into a connection a partition left
      // silent would otherwise hold this lane up to io_timeout (10 s), and the leases still held,
      // whose renewals wait behind it, were lost after the network was back. Unanswered by then,
      // the release is kept and sent again after the renewals. And by 1 s whatever is held: with no
      // lease left to renew, a re-send into a partition held the client's destructor, which joins
      // this thread, for io_timeout (sqllock run exited 10 to 20 s after its command ended).
      const auto until = std::clamp(book_.next_renewal(), now + std::chrono::milliseconds(100),
                                    now + std::chrono::milliseconds(1000));
      for (const auto& name : outbox_.flush(db_, lane::watchdog, now, std::nullopt, until)) queues_.wake(name);
    }
  }
}

void renewer::deadline_loop() {
  for (;;) {
    {
      std::uint64_t seen;
      {
        std::lock_guard lk(mu_);
        if (stopping_) return;
        seen = generation_;
      }
      const auto changes = book_.changes();
      const auto next = book_.next_deadline();
      std::unique_lock lk(mu_);
      if (stopping_) return;
      deadline_until_ = next.time_since_epoch().count();  // as in watchdog_loop
      if (book_.changes() != changes) continue;
      if (steady::now() < next && generation_ == seen) {
        if (next == steady::time_point::max()) {
          deadline_cv_.wait(lk, [&] { return stopping_ || generation_ != seen; });
        } else {
          deadline_cv_.wait_until(lk, next, [&] { return stopping_ || generation_ != seen; });
        }
        continue;
      }
    }
    book_.expire(steady::now());
    if (renewer_gone) return;
  }
}

}  // namespace sqllock::detail
