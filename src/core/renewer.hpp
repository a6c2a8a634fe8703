// The renewer: the watchdog thread that renews leases and re-sends lost releases, and the deadline
// thread that reports risk and loss at the local expiry estimate whatever I/O is in flight.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/backend.hpp"
#include "core/lease_book.hpp"
#include "core/release_outbox.hpp"
#include "core/wait_queue.hpp"

namespace sqllock::detail {

/// Two threads per client, started with the first lease:
/// - the watchdog renews every due lease in one batched statement on lane::watchdog (so it never
///   waits behind callers), each statement bounded by the earliest loss point of its batch, and
///   sends the outbox's releases;
/// - the deadline thread does no I/O at all: it sleeps until the next at-risk or loss point of any
///   lease and reports it (lost() becomes true, on_at_risk/on_lost run), so a holder learns of its
///   loss in time even while a statement hangs in a partition.
/// Neither holds its own mutex while calling another unit.
class renewer {
 public:
  renewer(lease_book& book, backend& db, release_outbox& outbox, wait_queues& queues, const client_options& options);
  ~renewer();
  renewer(const renewer&) = delete;
  renewer& operator=(const renewer&) = delete;

  /// Something changed (a pending release, a guard ended): start the threads if needed and have
  /// them look at their work again.
  void poke();
  /// A lease wants renewing at `renew_at` and its next risk or loss point is `deadline_at`: wake a
  /// thread only if that is earlier than what it already waits for (a thread that wakes for
  /// nothing just looks again), so that an acquire or release in a loop costs no thread switch.
  void schedule(steady::time_point renew_at, steady::time_point deadline_at);
  /// Where a failed renewal's statement_error events go (one per lease of the batch).
  void set_events(std::shared_ptr<const event_sink> events) { events_ = std::move(events); }

 private:
  void watchdog_loop();
  void report_error(std::exception_ptr failure, const renew_batch& batch) const noexcept;
  void log_renewals(const renew_batch& batch, const std::vector<std::size_t>& matched) const noexcept;
  void deadline_loop();

  lease_book& book_;
  backend& db_;
  release_outbox& outbox_;
  wait_queues& queues_;
  const client_options& options_;
  std::shared_ptr<const event_sink> events_;

  std::mutex mu_;  // guards the flags below; never held while calling another unit
  std::condition_variable watchdog_cv_;
  std::condition_variable deadline_cv_;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  // What each thread sleeps until (max: nothing, or not started); read by schedule().
  std::atomic<steady::rep> watchdog_until_{steady::time_point::max().time_since_epoch().count()};
  std::atomic<steady::rep> deadline_until_{steady::time_point::max().time_since_epoch().count()};
  std::atomic<bool> started_{false};
  std::thread watchdog_;
  std::thread deadline_;
};

}  // namespace sqllock::detail
