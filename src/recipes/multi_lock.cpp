// Multi-lock: all-or-nothing acquisition of a sorted, de-duplicated set of lease locks.
#include "sqllock/multi_lock.hpp"

#include <algorithm>
#include <exception>

#include "core/guard_access.hpp"
#include "sqllock/parse.hpp"

namespace sqllock {

using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

namespace {

/// A wait longer than this is a wait without bound (as the lease engine treats it).
constexpr milliseconds unbounded_wait = std::chrono::hours(24 * 3650);
/// A give-back at or past the deadline still gets one answer's time (lease_guard::release(bound)'s
/// floor), once for the whole set.
constexpr milliseconds give_back_floor{250};

std::vector<std::string> sorted_set(const std::vector<std::string>& names) {
  if (names.empty()) throw invalid_argument("multi-lock: the set of names is empty");
  for (const auto& n : names) validate_lock_name(n);
  std::vector<std::string> out(names);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

/// Releases the leases taken so far, last first. Never throws. Unbounded (the guard's destructor),
/// each release is the guard's own, whose failure goes to the client's log. Bounded (acquire_all's
/// give-back of a set it did not get), the whole give-back waits only for what is left of the call's
/// deadline, and at least one answer's time (give_back_floor) for the set, not one per name: into a
/// partition a set of n names overran its bound by n answers. A release not answered by then, or
/// whose turn comes after it, is sent by the client in the background, and its failure reaches the
/// user as the lease's statement_error or lost event.
void give_back(std::vector<lease_guard>& taken, bool bounded = false, steady::time_point deadline = {}) noexcept {
  const auto by = std::max(deadline, steady::now() + give_back_floor);
  while (!taken.empty()) {
    if (bounded) {
      try {
        detail::guard_access::release_by(taken.back(), by);
      } catch (...) {
        // Lost (the owner check failed) or unanswered (re-sent): the set is not held either way.
      }
    }
    taken.pop_back();
  }
}

}  // namespace

multi_lease_guard& multi_lease_guard::operator=(multi_lease_guard&& other) noexcept {
  if (this != &other) {
    multi_lease_guard old(std::move(*this));
    leases_ = std::move(other.leases_);
    other.leases_.clear();
  }
  return *this;
}

multi_lease_guard::~multi_lease_guard() { give_back(leases_); }

std::vector<std::string> multi_lease_guard::names() const {
  std::vector<std::string> out;
  out.reserve(leases_.size());
  for (const auto& g : leases_) out.push_back(g.name());
  return out;
}

const lease_guard& multi_lease_guard::lease(std::string_view name) const {
  for (const auto& g : leases_) {
    if (g.name() == name) return g;
  }
  throw invalid_argument("multi_lease_guard: no lease of that name in the set");
}

std::vector<std::int64_t> multi_lease_guard::fencing_tokens() const {
  std::vector<std::int64_t> out;
  out.reserve(leases_.size());
  for (const auto& g : leases_) out.push_back(g.fencing_token());
  return out;
}

bool multi_lease_guard::lost() const noexcept {
  return std::any_of(leases_.begin(), leases_.end(), [](const lease_guard& g) { return g.lost(); });
}

bool multi_lease_guard::usable() const noexcept {
  return !leases_.empty() && std::all_of(leases_.begin(), leases_.end(), [](const lease_guard& g) { return g.usable(); });
}

bool multi_lease_guard::owns() const noexcept {
  return !leases_.empty() && std::all_of(leases_.begin(), leases_.end(), [](const lease_guard& g) { return g.owns(); });
}

namespace {
/// Calls f on every element of [first, last), then rethrows the first exception any call threw:
/// one failure does not leave the rest untried.
template <class It, class F>
void for_each_then_rethrow_first(It first, It last, F f) {
  std::exception_ptr error;
  for (; first != last; ++first) {
    try {
      f(*first);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}
}  // namespace

void multi_lease_guard::renew() {
  for_each_then_rethrow_first(leases_.begin(), leases_.end(), [](lease_guard& l) { l.renew(); });
}

void multi_lease_guard::release() {
  // In reverse order of acquisition; the set is cleared even when a release throws.
  std::vector<lease_guard> leases = std::move(leases_);
  leases_.clear();
  for_each_then_rethrow_first(leases.rbegin(), leases.rend(), [](lease_guard& l) { l.release(); });
}

multi_lease_guard acquire_all(client& c, const std::vector<std::string>& names, milliseconds timeout,
                              const lease_options& options, std::stop_token stop) {
  if (timeout.count() < 0) throw invalid_argument("acquire_all: negative timeout");
  const auto set = sorted_set(names);
  const bool bounded = timeout < unbounded_wait;
  const auto deadline = steady::now() + (bounded ? timeout : unbounded_wait);
  for (;;) {
    std::vector<lease_guard> taken;
    taken.reserve(set.size());
    try {
      for (const auto& name : set) {
        if (!bounded) {
          taken.push_back(c.acquire(name, options, stop));
          continue;
        }
        // One deadline for the set: each name gets what is left of it (at least one try).
        const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady::now());
        taken.push_back(c.acquire_for(name, std::max(left, milliseconds(0)), options, stop));
      }
    } catch (...) {
      give_back(taken, bounded, deadline);
      throw;
    }
    // A lease taken early may have been lost while a later name was waited for (it expired
    // unrenewed, or was taken over): the set is not held. Give it all back and try again within
    // the deadline, so that the caller never gets a set with a lost lease in it. Lost by the
    // engine's own rule (usable: past its loss point counts), not only once the deadline thread,
    // which may run late, has reported it (lost()): the engine never hands out such a lease either.
    const auto lost = std::find_if(taken.begin(), taken.end(), [](const lease_guard& g) { return !g.usable(); });
    if (lost == taken.end()) {
      multi_lease_guard out;
      out.leases_ = std::move(taken);
      return out;
    }
    const std::string lost_name = lost->name();
    give_back(taken, bounded, deadline);
    if (stop.stop_requested()) throw cancelled("acquire_all: cancelled");
    if (bounded && steady::now() >= deadline) {
      throw acquire_timeout("acquire_all: the lease of '" + lost_name +
                                "' was lost while the other names were waited for, and the deadline has passed",
                            lost_name, "", milliseconds(0), std::string(c.backend_name()));
    }
  }
}

std::optional<multi_lease_guard> try_acquire_all(client& c, const std::vector<std::string>& names,
                                                 milliseconds timeout, const lease_options& options,
                                                 std::stop_token stop) {
  try {
    return acquire_all(c, names, timeout, options, std::move(stop));
  } catch (const acquire_timeout&) {
    return std::nullopt;
  }
}

}  // namespace sqllock
