// An in-memory backend implementing the whole seam, with switches for lost answers, delays and
// failures: the engine's unit tests run against it, and it shows a new backend's author what to do.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/backend.hpp"

namespace sqllock::detail {

/// The lock table of a fake database, shared by every fake_backend made with it (several clients
/// of one "server"). Its clock is steady_clock (the database clock of the fake).
struct fake_database {
  struct row {
    std::string holder;  ///< "" when free
    std::string owner;
    std::int64_t token = 0;
    steady::time_point acquired_at;
    steady::time_point expires_at;
  };
  std::mutex mu;
  std::map<std::string, row> rows;
  std::map<std::string, int> semaphores;  ///< semaphore name -> permits
  /// The fair queue: tickets by seq (increasing), as migration 0004's table.
  struct ticket {
    std::string name, holder, owner;
    std::chrono::milliseconds ttl{0};
    steady::time_point enqueued_at, expires_at;
  };
  std::map<std::int64_t, ticket> queue;
  std::int64_t next_seq = 1;
  int schema_version = required_schema_version;
};

/// Which statements a switch applies to. `any`: the lease statements (acquire, renew, release,
/// queue); `read`: inspect and live_in_range (only delay_answer applies to them).
enum class fake_op { acquire, renew, release, queue, any, read };

/// The seam in memory. Switches (thread-safe):
/// - lose_answers(op, n): the next n statements of op are applied, then throw connection_lost;
/// - fail(op, n): the next n statements of op are not applied and throw connection_lost;
/// - hang(op, n): the next n statements of op block until their deadline, are not applied, and
///   throw connection_lost (a partition);
/// - delay(op, d): every statement of op takes d before it is applied (bounded by its deadline);
/// - delay_answer(op, d): every statement of op is applied, then its answer takes d, whatever its
///   deadline (an answer the backend's deadline did not catch: a loaded server answering at the
///   last moment, the client descheduled between the answer and its use); the delay is taken when
///   the statement starts, so a heal() during it changes only the statements after;
/// - conflict(op, n): the next n statements of op (acquire, queue_poll) are not applied and throw serialization_failure
///   (the server rolled them back: SERIALIZABLE's 40001, a Galera certification conflict); a
///   release throws deadlock_detected (an InnoDB deadlock victim after the backend's reruns);
/// - heal(op): the pending lose/fail/hang/conflict counts and the delays of op are dropped (the
///   database answers normally again);
/// - occupy_lane(d): the callers' lane stays busy for d from now (other threads' statements ahead
///   in the queue): an acquire or a queue poll waits for it until its lane deadline, and answers
///   "not acquired" (seq 0) without touching the table when it is still busy then.
/// Counters: statements of each op.
class fake_backend final : public backend {
 public:
  explicit fake_backend(std::shared_ptr<fake_database> db) : db_(std::move(db)) {}

  void lose_answers(fake_op op, int n);
  void fail(fake_op op, int n);
  void hang(fake_op op, int n);
  void delay(fake_op op, std::chrono::milliseconds d);
  void delay_answer(fake_op op, std::chrono::milliseconds d);
  void conflict(fake_op op, int n);
  void heal(fake_op op);
  void occupy_lane(std::chrono::milliseconds d);
  int count(fake_op op) const;

  sqllock::dialect dialect() const noexcept override { return sqllock::dialect::sqlite; }
  int schema_version() override;
  int migrate() override;
  acquire_outcome acquire(const acquire_request& request) override;
  std::vector<std::size_t> renew(std::span<const renew_item> items, steady::time_point deadline) override;
  release_outcome release(const release_request& request, lane on) override;
  bool force_release(const std::string& name) override;
  std::optional<lock_info> inspect(const std::string& name, steady::time_point deadline) override;
  std::optional<lock_info> live_in_range(const std::string& lo, const std::string& hi,
                                         steady::time_point deadline) override;
  std::vector<lock_info> list_locks() override;
  std::optional<int> semaphore_permits(const std::string& name, int permits, steady::time_point deadline) override;
  queue_outcome queue_poll(const queue_request& request) override;
  bool handed_lease_from_poll() const noexcept override { return true; }
  void queue_leave(const std::string& owner, steady::time_point deadline) override;
  std::vector<queue_waiter> list_queue() override;
  std::unique_ptr<session> begin(const transaction_options& options) override;

 private:
  enum class fault { none, lose, fail, hang, conflict };
  /// Counts the statement, applies delay, and says which fault (if any) this one gets.
  fault before(fake_op op, steady::time_point deadline);
  [[noreturn]] void no_answer(const char* statement);
  /// The delay_answer of op (and of `any`, for a lease statement), read when the statement starts.
  std::chrono::milliseconds answer_delay(fake_op op) const;
  lock_info info(const std::string& name, const fake_database::row& r) const;

  std::shared_ptr<fake_database> db_;
  mutable std::mutex mu_;  // the switches and counters
  std::map<fake_op, int> lose_, fail_, hang_, conflict_, counts_;
  std::map<fake_op, std::chrono::milliseconds> delay_, answer_delay_;
  steady::time_point lane_busy_until_{};
};

}  // namespace sqllock::detail
