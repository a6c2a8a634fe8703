// When `run` stops CMD because its lease is not being renewed (run_command.cpp, supervisor.cpp).
#pragma once

#include <algorithm>
#include <chrono>

namespace sqllock_cli {

/// SIGKILL goes kill_margin before the local expiry estimate (guard.valid_until(): the start of the
/// last successful acquire or renew plus the TTL), SIGTERM term_lead before that: the grace, but at
/// most until a third of the TTL is left, so a healthy lease (renewed every third of its TTL) is
/// never stopped.
struct lease_timing {
  /// TTL/10 (at most 1 s) for scheduling delays, plus TTL/100 uncapped: the database's clock (it
  /// computes the expiry) may run up to 1% faster than this process's monotonic clock, as the
  /// library's loss margin assumes (docs/internals.md), so the lease can end TTL/100 before
  /// valid_until. Never less than the library's loss margin: a lease not renewed in time is
  /// stopped at the latest when the library reports it lost.
  std::chrono::milliseconds kill_margin;
  std::chrono::milliseconds term_lead;      ///< min(--grace, TTL/3 - kill_margin)
  std::chrono::milliseconds grace;          ///< --grace
  std::chrono::milliseconds publish_every;  ///< how often the supervisor learns the lease's end
};

inline lease_timing lease_timing_for(std::chrono::milliseconds ttl, std::chrono::milliseconds grace) {
  using std::chrono::milliseconds;
  lease_timing t{};
  const auto positive = std::max(ttl, milliseconds(0));
  t.kill_margin = std::min(positive / 10, milliseconds(1000)) + positive / 100;
  t.term_lead = std::clamp(grace, milliseconds(0), std::max(ttl / 3 - t.kill_margin, milliseconds(0)));
  t.grace = grace;
  t.publish_every = std::clamp(ttl / 6, milliseconds(10), milliseconds(5000));
  return t;
}

}  // namespace sqllock_cli
