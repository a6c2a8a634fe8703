// The lease engine behind sqllock::client: acquire (re-entry, FIFO waiting), release, renew, and the
// units that own the state (lease book, wait queues, release outbox, renewer).
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/event_sink.hpp"
#include "core/lease_book.hpp"
#include "core/release_outbox.hpp"
#include "core/renewer.hpp"
#include "core/wait_queue.hpp"

namespace sqllock::detail {

/// One per client; shared with every lease guard (a guard may outlive its client). The units each
/// own their synchronization; the engine holds no lock of its own and never calls a unit while
/// another unit's lock is held, so there is no lock order to remember.
class lease_engine final : public wake_sink, public std::enable_shared_from_this<lease_engine> {
 public:
  lease_engine(std::unique_ptr<backend> db, const client_options& options);
  ~lease_engine() override;
  lease_engine(const lease_engine&) = delete;
  lease_engine& operator=(const lease_engine&) = delete;

  backend& db() noexcept { return *db_; }
  const client_options& options() const noexcept { return options_; }
  /// The client's label (client_options::holder_id, or "host:pid:random").
  const std::string& label() const noexcept { return label_; }

  /// Acquire `name`: re-enter this scope's live lease without a statement, else try the database
  /// once (timeout 0), up to `timeout`, or without bound (nullopt), queueing FIFO behind this
  /// client's other waiters. Returns nullptr when not acquired and !throw_on_timeout.
  std::shared_ptr<lease_state> acquire(std::string_view name, const lease_options& options,
                                       std::optional<std::chrono::milliseconds> timeout, std::stop_token stop,
                                       bool throw_on_timeout);
  /// Acquire one of the `permits` permits of semaphore `name` (a counting semaphore): each permit is
  /// a lease of its own (a lock row under permit_row_name(name, slot)), tried from a random slot
  /// on; never re-enters a permit this client holds. `permits` must match the number stored with
  /// the name at its first use (invalid_argument naming both otherwise, before anything changes).
  /// Waits like acquire(): the head of this client's queue for the semaphore polls with back-off,
  /// woken at once by a local release of any permit. nullptr when not acquired and !throw_on_timeout.
  std::shared_ptr<lease_state> acquire_permit(std::string_view name, int permits, const lease_options& options,
                                              std::optional<std::chrono::milliseconds> timeout, std::stop_token stop,
                                              bool throw_on_timeout);
  /// Reader-writer leases (see rw_name.hpp for the rows). The writer takes the writer row (an
  /// ordinary lease: also its intent, so new readers stay away), then waits until no live reader row
  /// of the name is left; on timeout or cancel while draining it releases the writer row. A reader
  /// takes its scope's reader row, then reads the writer row: live and not this scope's (a
  /// downgrade) means it releases its row and waits for the writer to go. Each step commits before
  /// the next read (store, then check, on both sides), so a reader and a writer never both pass.
  /// Re-entry per scope: a scope holding the write lock re-enters it (and may take the read lock;
  /// a re-entry while another thread of the scope has not yet passed the row's check checks too);
  /// a scope holding the read lock re-enters it without waiting (even behind a waiting writer), and
  /// asking for the write lock throws upgrade_refused at once.
  std::shared_ptr<lease_state> acquire_write(std::string_view name, const lease_options& options,
                                             std::optional<std::chrono::milliseconds> timeout, std::stop_token stop,
                                             bool throw_on_timeout);
  std::shared_ptr<lease_state> acquire_read(std::string_view name, const lease_options& options,
                                            std::optional<std::chrono::milliseconds> timeout, std::stop_token stop,
                                            bool throw_on_timeout);
  /// Drop a hold; the last hold of an acquisition releases it in the database. A no-op when the
  /// hold is already finished. Throws lease_lost when the owner check fails. `by`: the caller's own
  /// bound, at least one answer's time (release_floor) from now unless !floor_by; a bound already
  /// passed then sends nothing on the caller's lane: the outbox sends it (connection_lost).
  void release(lease_state& hold, std::optional<steady::time_point> by = std::nullopt, bool floor_by = true);
  /// Renew now (explicit lease_guard::renew()).
  void renew(lease_state& hold);
  /// `hold` may be relied on now (lease_guard::usable): not finished, and its acquisition usable by
  /// the book's rule (not lost, not released, before its loss point), the rule every hand-out obeys.
  bool usable(const lease_state& hold) const noexcept;

  std::optional<lock_info> inspect(const std::string& name);
  /// The live writer or reader row of the reader-writer lease `name` that ends last, if any.
  std::optional<lock_info> inspect_read_write(std::string_view name);
  std::optional<lock_info> inspect_semaphore(std::string_view name);
  std::vector<lock_info> list_locks();
  bool force_release(const std::string& name);

  /// A guarded transaction ended: renewals that were held off may be due.
  void guard_ended() { renewer_->poke(); }

  /// From the backend: `name` may have been released elsewhere.
  void wake(const std::string& name) noexcept override;

 private:
  /// The live row of [rows.first, rows.second) whose lease ends last, reported under `name`.
  std::optional<lock_info> live_under(std::string_view name, const std::pair<std::string, std::string>& rows);
  std::string next_owner();
  /// book_.add of an acquisition the database granted (its statement began at `started`): its first
  /// hold, or null (logged) when the answer came at or after the lease's loss point. The caller then
  /// counts the try as not acquired and frees the row by its owner id once the call ends without a
  /// lease, as for a try whose answer was lost: a later try of the same call re-sends that owner id
  /// and may find the row again as its own live lease, so no release of it may be pending meanwhile.
  /// Answered at or past `started` + max_hold, the hold would be over (lost, not usable()) before
  /// the caller gets it: throws lease_lost (naming `what`), recording nothing, and the call ends
  /// there, its row freed by owner id like a refused one. It is not tried again: each try would
  /// re-send the owner id, find its own row and extend it, and a database that answers slower than
  /// max_hold would so keep the name from everyone until the wait ran out (the reverted 99da586).
  /// `valid_for`: see lease_book::add (a fair lease started from the read of its hand-over).
  /// Callers mark the row as possibly held by this call's owner id before calling.
  std::shared_ptr<lease_state> record(const lease_ref& ref, std::uint64_t scope, steady::time_point started,
                                      const lease_options& options, const std::string& what,
                                      const std::shared_ptr<lease_engine>& self,
                                      std::optional<std::chrono::milliseconds> valid_for = std::nullopt);
  /// acquire() in fair mode, past re-entry: take a ticket, poll it (renewing it) until it is the
  /// lowest live one or the lock was handed to it, then take the lock with the same owner id.
  std::shared_ptr<lease_state> acquire_fair(const std::string& name, const lease_options& options,
                                            std::optional<std::chrono::milliseconds> timeout, std::stop_token stop,
                                            bool throw_on_timeout, steady::time_point start,
                                            steady::time_point deadline, std::uint64_t scope);
  /// Wake this client's fair waiters of `name` (a release here or elsewhere).
  void wake_fair(const std::string& name) noexcept;
  std::uint64_t current_scope() const;
  /// A lease was taken or extended: the renewer wakes by its renewal time (or its deadline).
  void schedule_renewal(const acquisition& a);
  /// Before acquiring `row`: send the outbox's pending releases of it (this client's earlier leases
  /// of the row whose release is still unanswered), so that the acquire does not find the row held
  /// by one of them; their waiters are woken.
  void flush_outbox_of(const std::string& row, std::chrono::milliseconds ttl, bool bounded,
                       steady::time_point deadline);
  /// acquire() on a lock-table row name already validated or derived (`display`: the user's name
  /// for acquire_timeout; `what`: how messages name it). `rw_of`: the reader-writer name whose
  /// writer or reader row `row` is (its token then comes from the name's fence row).
  std::shared_ptr<lease_state> acquire_row(const std::string& row, const std::string& display, const std::string& what,
                                           const lease_options& options,
                                           std::optional<std::chrono::milliseconds> timeout, std::stop_token stop,
                                           bool throw_on_timeout, const std::string& rw_of = {});
  /// Release a hold whose acquire is being abandoned; a failure is logged (an unanswered release is
  /// re-sent by the outbox, and the lease expires by its TTL in any case).
  void release_quietly(lease_state& hold, std::optional<steady::time_point> by = std::nullopt) noexcept;
  /// Renew one acquisition once on behalf of a caller; throws lease_lost / connection_lost.
  void renew_now(acquisition& a, std::chrono::milliseconds ttl, const char* statement);
  /// Debug line when an acquire starts waiting (`what`: a lock name or "a permit of ...").
  void log_waiting(const std::string& what, const std::string& holder, std::chrono::milliseconds time_left,
                   bool notified) const;

  std::unique_ptr<backend> db_;
  client_options options_;
  std::string label_;
  std::string nonce_;
  std::atomic<std::uint64_t> owner_seq_{0};
  std::shared_ptr<event_sink> events_;  ///< client_options::on_event (emit with no unit's lock held)

  /// Semaphore names whose stored permit count this client has checked (name -> permits).
  std::mutex semaphores_mu_;
  std::map<std::string, int> semaphores_;

  /// Fair waiters of this client: name -> their private wait-queue keys.
  std::mutex fair_mu_;
  std::multimap<std::string, std::string> fair_waiters_;

  lease_book book_;
  release_outbox outbox_;
  wait_queues queues_;
  watch_registry watches_;
  std::unique_ptr<renewer> renewer_;  // last: its threads use the units above
};

}  // namespace sqllock::detail
