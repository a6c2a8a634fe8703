// The release outbox: releases that did not complete (the answer was lost, the statement could not
// run in its bound or was rolled back), sent again until the database answers or the lease has
// certainly expired.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/backend.hpp"

namespace sqllock::detail {

/// True for a release that failed without changing anything, or without an answer (connection
/// lost, the row lock or the connection stayed busy past its bound, the server rolled the statement
/// back as a deadlock victim or serialization failure, or cancelled it): sending it again can only
/// free the acquisition it names, so it goes to the outbox instead of leaving the row held until
/// its TTL runs out. Other errors (a bad request, a missing table) would fail again the same way.
bool worth_sending_again(const std::exception& e) noexcept;

/// How long the outbox waits before sending again a release that failed with `e` (one that is
/// worth_sending_again) after `tries` earlier failures: 50 ms doubling to 1 s when the server
/// answered (busy, rolled back, cancelled), 250 ms doubling to 2 s when it did not.
std::chrono::milliseconds resend_pause(const std::exception& e, int tries) noexcept;

/// Pending releases. Each one names one acquisition by its unique owner id, so sending it twice, or
/// after the name was acquired again by anyone (this client included), can never free anything but
/// the acquisition it was meant for: the re-send is idempotent and needs no ordering. Owns its mutex
/// and never calls another unit while holding it; the I/O happens outside it.
class release_outbox {
 public:
  /// Queue a release; it is dropped once sent with an answer, or at `give_up_at` (by then the lease
  /// has expired in the database anyway). Given `held_off` (the count of transactions guarding the
  /// lease, acquisition::guards), it is not sent while that count is above 0: the engine's poke when
  /// a guard ends sends it.
  /// `leave_queue`: a fair release kept by min_hold (no hand-over); after the release, the owner's
  /// fair ticket is deleted too (backend::queue_leave), sent again the same way until answered.
  void add(release_request request, steady::time_point give_up_at,
           std::shared_ptr<const std::atomic<int>> held_off = nullptr, bool leave_queue = false);
  /// Only the deletion of `request.lease.owner`'s fair ticket is left to send: its release was
  /// answered, the queue_leave after it was not. Idempotent (one ticket per owner id, never reused).
  void add_leave(release_request request, steady::time_point give_up_at);

  /// Send the releases whose back-off is over, or, given `name`, every pending release of that
  /// name at once (its caller is about to acquire it), on `lane`; keeps those that got no answer
  /// for a later try. Neither the wait nor a send outlasts `until` (the caller's own deadline). Never throws. Returns the names whose lease this freed.
  std::vector<std::string> flush(backend& db, lane on, steady::time_point now,
                                 const std::optional<std::string>& name = std::nullopt,
                                 steady::time_point until = steady::time_point::max()) noexcept;

  /// When the next pending release is due (max when none).
  steady::time_point next_due() const;
  bool empty() const;
  /// True when a release of `name` is pending or being sent (the caller may flush it before
  /// acquiring; flush(name) first waits, bounded, for a send of that name in flight elsewhere).
  bool has(const std::string& name) const;

  void set_log(const client_options* options) { log_ = options; }

 private:
  struct entry {
    release_request request;
    steady::time_point give_up_at;
    steady::time_point next_try;
    int tries = 0;
    std::shared_ptr<const std::atomic<int>> held_off;  ///< not sent while above 0
    bool leave_queue = false;  ///< then delete the owner's fair ticket
    bool released = false;     ///< the release was answered: only the ticket's deletion is left
    bool waiting() const { return held_off && held_off->load() > 0; }
  };
  mutable std::mutex mu_;
  std::condition_variable sent_;       ///< notified when a batch in flight is done
  std::vector<entry> pending_;
  std::vector<std::string> in_flight_;  ///< names of the batch another thread is sending now
  const client_options* log_ = nullptr;
};

}  // namespace sqllock::detail
