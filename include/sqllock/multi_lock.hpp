// Multi-lock (Curator's InterProcessMultiLock): a set of lease locks acquired all or nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "sqllock/client.hpp"
#include "sqllock/export.hpp"

namespace sqllock {

/// The leases of a multi-lock, one per distinct name, in sorted name order. Move-only. Releases
/// every lease exactly once, in reverse order: explicitly, or in its destructor (which never
/// throws; a failed release goes to the client's log callback).
class SQLLOCK_EXPORT multi_lease_guard {
 public:
  multi_lease_guard() noexcept = default;
  /// Takes over the other guard's leases.
  multi_lease_guard(multi_lease_guard&&) noexcept = default;
  /// Releases this guard's leases (as its destructor does), then takes over the other's.
  multi_lease_guard& operator=(multi_lease_guard&& other) noexcept;
  multi_lease_guard(const multi_lease_guard&) = delete;
  multi_lease_guard& operator=(const multi_lease_guard&) = delete;
  ~multi_lease_guard();

  /// The distinct names, sorted (byte order), as they were acquired.
  std::vector<std::string> names() const;
  /// The number of leases (distinct names).
  std::size_t size() const noexcept { return leases_.size(); }
  /// The lease of the i-th name in sorted order.
  const lease_guard& operator[](std::size_t i) const { return leases_.at(i); }
  /// The lease of `name`; invalid_argument when the set has no such name.
  const lease_guard& lease(std::string_view name) const;
  /// The fencing token of each name, in sorted name order.
  std::vector<std::int64_t> fencing_tokens() const;
  /// True when any of the leases is lost.
  bool lost() const noexcept;
  /// True while every lease may be relied on now (lease_guard::usable: owned, not lost, before its
  /// loss point and its max_hold); false for an empty or finished guard.
  bool usable() const noexcept;
  /// True while the guard holds its leases (not released, not moved from, not empty).
  bool owns() const noexcept;
  /// owns().
  explicit operator bool() const noexcept { return owns(); }

  /// Renew every lease now (lease_guard::renew; the watchdog does this on its own), in name order.
  /// Every lease is tried even when one renewal throws; the first error (lease_lost,
  /// connection_lost) is then rethrown. A no-op when finished.
  void renew();
  /// Release every lease, in reverse name order. Every lease is released even when one release
  /// throws; the first error (lease_lost, connection_lost) is then rethrown. A no-op when finished.
  void release();

 private:
  friend multi_lease_guard acquire_all(client&, const std::vector<std::string>&, std::chrono::milliseconds,
                                       const lease_options&, std::stop_token);
  friend std::optional<multi_lease_guard> try_acquire_all(client&, const std::vector<std::string>&,
                                                          std::chrono::milliseconds, const lease_options&,
                                                          std::stop_token);
  std::vector<lease_guard> leases_;
};

/// Acquire every name of `names` or none: the names are de-duplicated and taken in sorted order
/// (so two multi-locks with overlapping sets never deadlock, whatever order they were given in),
/// each with `options`, all within ONE deadline `timeout` from the call (a timeout too large to
/// represent waits without bound). When a name is not acquired in time (acquire_timeout, naming
/// that name and its holder), `stop` is requested (cancelled), or any error occurs, the names
/// already taken are released, in reverse order, before the error is thrown. A lease taken early
/// that is no longer usable once the last name is taken (lease_guard::usable: lost, or past its
/// loss point or max_hold while the others were waited for, even if the deadline thread has not
/// reported it yet) makes it give every lease back and take the set again within the same deadline
/// (acquire_timeout naming that name when the deadline has passed): a returned set is usable().
/// Throws invalid_argument, acquiring nothing, for an empty set, a bad name or a negative timeout.
SQLLOCK_EXPORT multi_lease_guard acquire_all(client& c, const std::vector<std::string>& names,
                                             std::chrono::milliseconds timeout, const lease_options& options = {},
                                             std::stop_token stop = {});

/// Like acquire_all, but std::nullopt (with nothing held) when the set is not acquired in time.
SQLLOCK_EXPORT std::optional<multi_lease_guard> try_acquire_all(client& c, const std::vector<std::string>& names,
                                                                std::chrono::milliseconds timeout,
                                                                const lease_options& options = {},
                                                                std::stop_token stop = {});

}  // namespace sqllock
