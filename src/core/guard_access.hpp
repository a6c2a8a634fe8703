// The recipes built on the public client (the multi-lock): what they need of a lease_guard beyond
// its public API.
#pragma once

#include "core/lease_book.hpp"
#include "core/lease_engine.hpp"
#include "sqllock/client.hpp"

namespace sqllock::detail {

struct guard_access {
  /// Release `g`, waiting for the answer until `by` at most, without lease_guard::release(bound)'s
  /// floor of one answer per call: several releases share one bound (a multi-lock giving back its
  /// set). Once `by` has passed nothing is sent on the caller's lane: the client's outbox sends it
  /// in the background, and this throws connection_lost. A no-op on a finished or empty guard.
  static void release_by(lease_guard& g, steady::time_point by) {
    if (!g.state_ || g.state_->finished.load()) return;
    g.state_->engine->release(*g.state_, by, false);
  }
};

}  // namespace sqllock::detail
