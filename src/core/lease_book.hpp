// The lease book: what this client holds (acquisitions in the database) and the holds on them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.hpp"
#include "core/event_sink.hpp"
#include "core/notice_queue.hpp"

namespace sqllock::detail {

class lease_engine;

/// How long before the local expiry estimate a lease is reported lost: a twentieth of its TTL, at
/// most 500 ms, so that scheduling delays on a loaded machine still report it in time, plus a
/// hundredth of its TTL, so that a database clock running up to 1% (10,000 ppm) faster than this
/// process's monotonic clock cannot end the lease before it is reported lost.
std::chrono::milliseconds loss_margin(std::chrono::milliseconds ttl) noexcept;

/// One acquisition: a lock row that names this client's owner id. Identity fields never change;
/// the rest is guarded by the lease_book's mutex, except the atomics.
struct acquisition {
  std::uint64_t id = 0;
  lease_ref ref;       ///< name, owner (unique to this acquisition), token
  std::string holder;  ///< the client's label
  std::uint64_t scope = 0;
  steady::time_point started;  ///< start of the acquire statement (this process's monotonic clock)
  /// Acquired in fair mode (lease_options::fair): its release hands the lock to the next ticket.
  bool fair = false;

  /// Start of the last successful acquire or renew + its TTL, in steady_clock ticks: until then
  /// nobody else can take the lease over. Read without the lock by guards.
  std::atomic<steady::rep> valid_until{0};
  std::atomic<bool> lost{false};
  /// Open transactions guarding this lease (transaction::require_lease). Where the guard's row lock
  /// also holds renewals off (MySQL, SQLite), the watchdog leaves a guarded lease out of its batches
  /// so that it does not wait on the row, and the batch with it.
  std::atomic<int> guards{0};
  /// A reader-writer row passed its check (acquire_write: the readers drained; acquire_read: no
  /// writer but this scope's own): only then may another thread of a per_client scope re-enter it
  /// without checking itself (between storing the row and its check, a reader or a writer of
  /// another client may still hold).
  std::atomic<bool> rw_checked{false};

  // Guarded by lease_book::mu_:
  std::chrono::milliseconds last_ttl{0};  ///< the TTL valid_until was computed with
  steady::time_point next_renew;
  bool at_risk_reported = false;
  bool released = false;  ///< the last hold is gone
  int holds = 0;          ///< live holds (a hold past its max_hold included, until it is dropped)
  int kept_holds = 0;     ///< live holds not reported lost alone: the last one's drop releases
  int auto_renew_holds = 0;  ///< live holds that renew, not past their max_hold
  std::chrono::milliseconds min_hold{0};  ///< longest min_hold asked by any hold
  /// Where max_hold ends the whole acquisition: the latest end of its live holds (max if one has
  /// no max_hold). A hold's max_hold bounds that hold only (lease_state::end).
  steady::time_point hard_end = steady::time_point::max();
  steady::time_point next_hold_end = steady::time_point::max();  ///< earliest end of a hold not yet reported lost
  std::vector<std::weak_ptr<struct lease_state>> hold_list;  ///< for on_lost / on_at_risk

  steady::time_point valid_until_time() const noexcept {
    return steady::time_point(steady::duration(valid_until.load(std::memory_order_acquire)));
  }
};

/// One hold: what a lease_guard owns. Several holds may share one acquisition (re-entry).
struct lease_state {
  std::shared_ptr<lease_engine> engine;  ///< keeps the engine alive while the guard lives
  std::shared_ptr<acquisition> acq;
  lease_options options;
  steady::time_point started;   ///< when this hold was taken (for max_hold)
  std::int64_t hold_count = 1;  ///< holds of the acquisition right after this one was taken
  /// A semaphore permit: the semaphore's name and the permit's slot (0-based); -1 for a lock.
  std::string semaphore;
  int permit = -1;
  /// A reader-writer lease's hold: the lock's name and its side ('r' read, 'w' write); 0 otherwise.
  std::string rw_name;
  char rw_side = 0;
  std::atomic<bool> finished{false};
  /// This hold alone was reported lost: its max_hold passed while other holds keep the acquisition
  /// (the acquisition's own loss is acq->lost).
  std::atomic<bool> lost{false};

  /// Where this hold's max_hold ends it (max: none).
  steady::time_point end() const noexcept {
    return options.max_hold.count() > 0 ? started + options.max_hold : steady::time_point::max();
  }
};

/// Renewals due now: the items for backend::renew and the acquisitions they belong to.
struct renew_batch {
  std::vector<renew_item> items;
  std::vector<std::shared_ptr<acquisition>> acquisitions;
  steady::time_point deadline = steady::time_point::max();  ///< the earliest loss point among them
};

/// Every acquisition of the client and its holds, under one mutex inside which no other unit's lock
/// is taken but the notice queue's (a leaf): methods return what to do (statements) instead of
/// doing it. The methods that decide notices (renewed, expire, mark_lost) queue them under the
/// mutex, in the order decided, and run them after it (notice_queue::deliver): a callback may
/// destroy the book (the last guard of a closed client), and they touch nothing of it after.
class lease_book {
 public:
  /// A new hold on this scope's live acquisition of `name`, if there is one (re-entry: no
  /// statement). `extend` is set when the new hold needs the lease longer than it is known to last
  /// and will not be renewed (auto_renew off): the caller renews it once.
  std::shared_ptr<lease_state> reenter(const std::string& name, std::uint64_t scope, const lease_options& options,
                                       const std::shared_ptr<lease_engine>& engine, steady::time_point now,
                                       bool& extend);

  /// Another scope of this client (another thread, with holder_scope::per_thread) holds a live lease
  /// of `name`: the database would refuse, so the caller answers "not acquired" without a
  /// statement. Returns the time left by this process's clock.
  std::optional<std::chrono::milliseconds> held_elsewhere_here(const std::string& name, steady::time_point now) const;

  /// This client (any scope) has an acquisition of `name` that is neither released nor lost: a
  /// semaphore's acquire skips that permit instead of re-entering it.
  bool holds_name(const std::string& name) const;

  /// Scope `scope` of this client has a live acquisition of `name` (as reenter() would find it:
  /// not lost, not about to be reported lost at `now`).
  bool holds_live_in_scope(const std::string& name, std::uint64_t scope, steady::time_point now) const;

  /// `a` may be handed to a caller at `now`: neither reported lost nor released, and before its loss
  /// point and its max_hold (a lease recorded earlier whose next statement was answered late may be
  /// past them; the deadline thread, which reports both, may run late).
  bool usable(const acquisition& a, steady::time_point now) const;
  /// The same for one hold: its acquisition is usable() and the hold itself is not finished nor
  /// past its own max_hold.
  bool usable(const lease_state& hold, steady::time_point now) const;

  /// Record a new acquisition (the acquire statement started at `started`) and its first hold.
  /// Returns null, recording nothing, when the answer came at or after the lease's loss point
  /// (`started` + TTL - loss_margin): by this client's own rule the lease is already lost, and
  /// another client may take it at any moment, so it must never be handed to the caller (a slow
  /// answer under a loaded server once returned such a lease 148 ms after its on_lost had run).
  /// `now` is the caller's reading of the clock, so its own checks (max_hold) and this one judge
  /// the same instant.
  /// `valid_for`: the lease is known to last only that long from `started` (a fair lease read
  /// after its hand-over, still at the ticket's TTL): its loss point follows from it and it is due
  /// for renewal (to options.ttl) at once. Unset: options.ttl.
  std::shared_ptr<lease_state> add(lease_ref ref, std::string holder, std::uint64_t scope, steady::time_point started,
                                   const lease_options& options, const std::shared_ptr<lease_engine>& engine,
                                   steady::time_point now = steady::now(),
                                   std::optional<std::chrono::milliseconds> valid_for = std::nullopt);

  /// Drop a hold. Returns the release to send when it was the acquisition's last hold (nullopt for
  /// an inner hold: the lease stays). A hold is dropped at most once. Other holds already past their
  /// max_hold, which a late deadline thread has not yet reported, keep nothing: they are marked lost
  /// here and their on_lost notices queued, not run on this thread (its caller may hold a lock an
  /// on_lost takes); `notices_queued` then says the deadline thread is to be woken to run them.
  std::optional<release_request> drop(lease_state& hold, bool& notices_queued);

  /// Renewals due at `now` (each acquisition that renews and whose next renewal falls within the
  /// next sixth of its TTL), batched. Each renewing hold asks for its TTL, cut to its max_hold; the
  /// longest is renewed. A hold past its max_hold asks for nothing.
  renew_batch due(steady::time_point now);
  /// Outcome of a renewal batch that started at t0: matched items are valid until t0 + ttl, the
  /// others are lost (notices run). `failed`: no answer (retry soon, until the deadline).
  void renewed(const renew_batch& batch, const std::vector<std::size_t>& matched, steady::time_point t0, bool failed,
               const std::string& why);

  /// Report loss or risk at `now`: at-risk once less than a third of the TTL is left, lost at the
  /// local expiry estimate minus loss_margin, or once every hold is past its max_hold; a hold past
  /// its own max_hold while others keep the acquisition is reported lost alone. The notices are run.
  void expire(steady::time_point now);
  /// The same for `a` alone, at once: for a caller about to act on it (an explicit renew) while
  /// the deadline thread, which may run late, has not come round.
  void expire(acquisition& a, steady::time_point now);
  /// Where `a` is reported lost by this process's clock unless renewed first: its local expiry
  /// estimate minus loss_margin (another client may take it over soon after).
  steady::time_point loss_point(const acquisition& a) const;
  /// Mark one acquisition lost (owner check failed, or its lease ran out); the notices are run.
  void mark_lost(acquisition& a, const std::string& why);

  /// When the watchdog should next look: the earliest due renewal (auto-renewing, live); due()
  /// then batches every renewal due within the next sixth of its TTL with it.
  steady::time_point next_renewal() const;
  /// When the deadline thread should next look: the earliest at-risk or loss point.
  steady::time_point next_deadline() const;

  /// Counts additions (new acquisitions and holds): a thread that computed its next wake-up before
  /// an addition looks again (see renewer::schedule).
  std::uint64_t changes() const noexcept { return changes_.load(); }

  /// When `a` next wants renewing (max: it does not) and its next risk or loss point.
  std::pair<steady::time_point, steady::time_point> times_of(const acquisition& a) const;

  /// Live holds of the acquisition whose owner id is `owner` (0 if it is not ours).
  int holds_of(const std::string& owner) const;

  /// Where loss reasons and the like are logged.
  void set_log(const client_options* options) { log_ = options; }
  /// Where renewed / at_risk / lost events go (queued as notices, run after the lock).
  void set_events(std::shared_ptr<const event_sink> events) { events_ = std::move(events); }
  /// Leave leases with an open guarded transaction out of renewal batches.
  void set_skip_guarded(bool skip) { skip_guarded_ = skip; }

 private:
  /// `a` is neither released nor lost and `now` is before its loss_point() and its hard_end
  /// (max_hold), where expire() reports it lost: the one rule behind usable(), reenter() and
  /// holds_live_in_scope(). The caller holds mu_.
  bool live_at(const acquisition& a, steady::time_point now) const;
  void lost_locked(acquisition& a, const std::string& why, std::vector<lease_notice>& notices);
  /// Report lost, alone, each hold of `a` past its max_hold at `now` (others keep `a`).
  void end_holds_locked(acquisition& a, steady::time_point now, std::vector<lease_notice>& notices);
  /// expire() of one live acquisition; the caller holds mu_.
  void expire_locked(acquisition& a, steady::time_point now, std::vector<lease_notice>& notices);
  /// Queue notices decided under `lk` (held), release it, and run them: the caller's last use of
  /// the book, which a callback may destroy.
  void deliver(std::vector<lease_notice>&& notices, std::unique_lock<std::mutex>& lk);
  void forget_locked(acquisition& a);

  mutable std::mutex mu_;
  std::map<std::uint64_t, std::shared_ptr<acquisition>> live_;  ///< not released, not lost
  std::map<std::pair<std::string, std::uint64_t>, std::shared_ptr<acquisition>> by_scope_;
  std::map<std::string, std::shared_ptr<acquisition>> by_name_;  ///< a client holds a name at most once
  std::uint64_t next_id_ = 1;
  std::atomic<std::uint64_t> changes_{0};
  /// Notices queued by drop() for the deadline thread: next_deadline() is now until expire() runs them.
  std::atomic<bool> queued_notices_{false};
  const client_options* log_ = nullptr;
  std::shared_ptr<const event_sink> events_;
  bool skip_guarded_ = false;
  std::shared_ptr<notice_queue> notices_ = std::make_shared<notice_queue>();
};

}  // namespace sqllock::detail
