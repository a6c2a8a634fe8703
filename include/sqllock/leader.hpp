// Leader election (Curator's LeaderLatch) on a lease lock: the leader is the holder of the lease
// of the election's name, renewed by the watchdog; its fencing token numbers its term.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>

#include "sqllock/client.hpp"
#include "sqllock/export.hpp"

namespace sqllock {

/// Block until this caller leads `election` (a lock name), for at most `timeout` (a timeout too
/// large to represent waits without bound). The returned lease is the leadership: its fencing token
/// numbers the term (strictly increasing from term to term), `options.on_lost` tells the leader
/// that it stopped leading, and releasing it (or its destructor) steps down. Throws acquire_timeout
/// (naming the current leader) or cancelled (`stop`), like client::acquire_for.
SQLLOCK_EXPORT lease_guard await_leadership(client& c, std::string_view election, std::chrono::milliseconds timeout,
                                            const lease_options& options = {}, std::stop_token stop = {});

/// Who leads `election` now, as the database shows it (`holder` is the leader's label,
/// client_options::holder_id); std::nullopt when nobody holds a live lease of it.
SQLLOCK_EXPORT std::optional<lock_info> current_leader(client& c, std::string_view election);

/// Why a leader_latch's leadership ended.
enum class leadership_end {
  lost,    ///< the lease was lost (taken over, released by force, not renewed in time)
  closed,  ///< the latch was closed or destroyed
};

/// How a leader_latch takes part.
struct SQLLOCK_EXPORT leader_latch_options {
  /// The leadership lease (ttl, max_hold ...). Its own on_lost / on_at_risk are called too.
  lease_options lease;
  /// Called when this participant becomes leader, with the term's fencing token.
  std::function<void(std::int64_t fencing_token)> on_elected;
  /// Called once per term when this participant stops leading: on loss, no later than the moment
  /// another participant could be elected; on close, before the lease is released.
  std::function<void(std::int64_t fencing_token, leadership_end why)> on_revoked;
  /// Pause after an error (e.g. the database unreachable) before trying again.
  std::chrono::milliseconds retry_delay{1000};
};

/// A participant in an election that keeps trying in a background thread: it waits for the lease
/// of `election`, leads while it holds it, and after losing it takes part again. on_elected and
/// on_revoked are never called concurrently, what they throw is ignored, and they must return quickly: on loss, on_revoked runs on
/// the client's watchdog or deadline thread; otherwise they run on the latch's thread. They must
/// not call into the latch. The client must outlive the latch; use one client (or, with
/// holder_scope::per_thread, one latch per client) per participant. Not movable.
class SQLLOCK_EXPORT leader_latch {
 public:
  /// Join `election` (a lock name) through `c`; campaigns at once (see leader_latch_options).
  leader_latch(client& c, std::string election, leader_latch_options options = {});
  leader_latch(const leader_latch&) = delete;
  leader_latch& operator=(const leader_latch&) = delete;
  /// close().
  ~leader_latch();

  /// The election's name.
  const std::string& election() const noexcept;
  /// True while this participant leads: between on_elected and on_revoked, and only while the
  /// term's lease is usable() (lease_guard::usable): past its loss point or max_hold by this
  /// process's clock it is false already, before the client's deadline thread, which may run
  /// late, reports the loss (on_revoked).
  bool is_leader() const noexcept;
  /// The current term's fencing token while is_leader(), else 0.
  std::int64_t fencing_token() const noexcept;
  /// Wait up to `timeout` for this participant to lead (is_leader()); true if it leads.
  bool await_leadership(std::chrono::milliseconds timeout) const;
  /// Leave the election: stop trying, step down (on_revoked with leadership_end::closed, then the
  /// lease is released) and join the background thread. Idempotent; never throws.
  void close() noexcept;

 private:
  struct shared;
  std::shared_ptr<shared> state_;
  std::jthread thread_;  // last: stopped and joined first
};

}  // namespace sqllock
