// The notice queue (see notice_queue.hpp).
#include "core/notice_queue.hpp"

#include <algorithm>

namespace sqllock::detail {

void notice_queue::push(std::vector<lease_notice>&& notices) {
  std::lock_guard lk(mu_);
  for (auto& n : notices) {
    if (n.kind == notice_kind::lost) {
      // Dropped, not erased: a callback is destroyed outside the lock (its captures are the user's).
      for (auto& e : pending_) {
        if (e.notice.lease == n.lease && (e.notice.kind == notice_kind::renewed || e.notice.kind == notice_kind::at_risk))
          e.dropped = true;
      }
    }
    pending_.push_back({std::move(n)});
  }
}

void notice_queue::deliver() noexcept {
  std::unique_lock lk(mu_);
  for (;;) {
    // The first pending notice of a lease none of whose notices runs: the rest of such a lease's
    // are left to the thread running it, which finds them here once its callback returned.
    const auto next = std::find_if(pending_.begin(), pending_.end(), [&](const entry& e) {
      return std::find(running_.begin(), running_.end(), e.notice.lease) == running_.end();
    });
    if (next == pending_.end()) return;
    entry e = std::move(*next);
    pending_.erase(next);
    const auto lease = e.notice.lease;
    running_.push_back(lease);
    lk.unlock();
    if (!e.dropped && e.notice.callback) {
      try {
        e.notice.callback(e.notice.name, e.notice.token);
      } catch (...) {
        // A callback that throws must not take the thread that runs it down.
      }
    }
    e = {};  // the callback is destroyed before the lock is taken again
    lk.lock();
    running_.erase(std::find(running_.begin(), running_.end(), lease));
  }
}

}  // namespace sqllock::detail
