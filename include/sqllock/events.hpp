// Lease events: what a client reports to client_options::on_event (for metrics and logs).
#pragma once

#include "sqllock/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <string_view>

namespace sqllock {

/// What happened to a lease (see lease_event).
enum class event_kind {
  acquired,         ///< a new acquisition in the database (not a reentrant hold); `waited` is set
  renewed,          ///< the watchdog or lease_guard::renew() extended the lease; `ttl` is set
  at_risk,          ///< less than a third of the TTL left by the local estimate (before on_at_risk)
  lost,             ///< the lease is lost (before on_lost); `held` is set, `reason` says why
  released,         ///< the last hold was released in the database; `held` is set
  statement_error,  ///< a lease statement failed (its effect may be unknown); `statement`, `code`, `reason` set
};

/// "acquired", "renewed", "at_risk", "lost", "released" or "statement_error".
SQLLOCK_EXPORT std::string_view to_string(event_kind kind) noexcept;

/// One event of a client's leases. The views are valid only during the on_event call: copy what
/// you keep. Fields that do not apply to a kind are empty or zero.
struct lease_event {
  event_kind kind = event_kind::acquired;  ///< what happened
  std::string_view backend;    ///< "sqlite", "postgresql" or "mysql"
  std::string_view name;       ///< the lock's name; for a semaphore permit, the semaphore's name
  int permit = -1;             ///< a semaphore permit's slot, -1 for a lock
  std::int64_t fencing_token = 0;  ///< the acquisition's fencing token (0 for a failed acquire)
  std::string_view holder;     ///< the client's label (client_options::holder_id)
  std::chrono::milliseconds waited{0};  ///< acquired: from the acquire call to the acquisition
  std::chrono::milliseconds held{0};    ///< released, lost: from the acquisition to the event
  std::chrono::milliseconds ttl{0};     ///< acquired, renewed: the TTL granted
  std::chrono::milliseconds time_left{0};  ///< at_risk: time left by this process's clock
  std::string_view statement;  ///< statement_error: e.g. "lease_acquire", "lease_renew", "lease_release"
  std::string_view code;       ///< statement_error: SQLSTATE (PostgreSQL) or errno/vendor code, may be empty
  std::string_view reason;     ///< lost, statement_error: a message for humans
};

/// Receives lease events, never while sqllock holds a lock of its own: a hook may call back into the
/// client (inspect, list_locks, try_acquire, release a guard) without deadlocking.
/// - acquired, released, statement_error: called from the thread that caused the event (the caller
///   of acquire or release, or the watchdog).
/// - renewed, at_risk, lost (and lease_options::on_at_risk, on_lost): told per lease one at a time,
///   in the order the client decided them, by the thread that decided them (the watchdog, the
///   deadline thread, or a caller's renew() or release()) or another of these that is telling such
///   notices at that moment. While one of a lease's notices is being told, its next ones wait for
///   that call to return and are told by the same thread (so the call that found a loss may return
///   before its lost event). An at_risk or renewed not yet told when its lease is lost is no longer
///   true and is dropped: nothing of a lease comes after its lost.
/// A hook should return quickly and never wait: a hook run by the watchdog delays every renewal
/// behind it, so a waiting acquire there can cost leases, and a hook that waits delays the later
/// notices of its lease, on_lost included (lease_guard::lost() is true at once). An exception thrown
/// by a hook is caught and reported to client_options::log (warning); the operation goes on unaffected.
/// With no hook set, events cost one branch: nothing is allocated or locked.
using event_callback = std::function<void(const lease_event&)>;

}  // namespace sqllock
