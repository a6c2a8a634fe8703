// The idle connections a backend keeps for its next transactions, one implementation for all.
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace sqllock::detail {

/// At most `max_idle` idle connections (any movable handle), newest first. take() hands out one
/// that `alive` accepts (the others are dropped, closed by their destructor); give_back() keeps a
/// connection if there is room. Thread-safe; `alive` runs outside the lock.
template <class Conn>
class idle_pool {
 public:
  explicit idle_pool(std::size_t max_idle = 2) : max_idle_(max_idle) {}

  template <class Alive>
  std::optional<Conn> take(Alive&& alive) {
    for (;;) {
      std::optional<Conn> c;
      {
        std::lock_guard lk(mu_);
        if (idle_.empty()) return std::nullopt;
        c.emplace(std::move(idle_.back()));
        idle_.pop_back();
      }
      if (alive(*c)) return c;
    }
  }

  void give_back(Conn c) {
    std::lock_guard lk(mu_);
    if (idle_.size() < max_idle_) idle_.push_back(std::move(c));
  }

 private:
  std::size_t max_idle_;
  std::mutex mu_;
  std::vector<Conn> idle_;
};

}  // namespace sqllock::detail
