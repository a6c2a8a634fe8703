// Leader election: the blocking API and leader_latch, a participant that keeps trying in a thread.
#include "sqllock/leader.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>

#include "sqllock/parse.hpp"

namespace sqllock {

using std::chrono::milliseconds;

lease_guard await_leadership(client& c, std::string_view election, milliseconds timeout,
                             const lease_options& options, std::stop_token stop) {
  return c.acquire_for(election, timeout, options, std::move(stop));
}

std::optional<lock_info> current_leader(client& c, std::string_view election) {
  auto info = c.inspect(election);
  if (!info || info->time_left.count() <= 0) return std::nullopt;
  return info;
}

/// What the latch's thread and the lease's on_lost (another thread) share. `callback_m` is held
/// while a user callback runs and across the state change it reports, so callbacks never overlap
/// and come in order; `m` guards the term fields and is never held while a callback runs, so
/// await_leadership() keeps its timeout whatever a callback does. Lock order: callback_m, m,
/// current_m; nothing holding any of them calls into the client (on_lost may be called from
/// inside the client).
struct leader_latch::shared {
  client* c = nullptr;
  std::string election;
  leader_latch_options options;

  std::mutex callback_m;
  std::mutex m;
  std::condition_variable_any cv;
  std::uint64_t term = 0;       ///< the term being tried for or held
  std::uint64_t lost_term = 0;  ///< the last term whose lease was reported lost
  std::atomic<bool> leading{false};
  std::atomic<std::int64_t> token{0};
  /// The term's lease while leading (it lives on the latch thread's stack); guarded by current_m,
  /// which is taken after m where both are, and never held while calling a callback.
  std::mutex current_m;
  const lease_guard* current = nullptr;

  /// Leading, and the term's lease usable() now: lost() (and so on_revoked) waits for the client's
  /// deadline thread, which may run late; past the lease's loss point or max_hold it leads no more.
  bool leads_now() noexcept {
    if (!leading.load()) return false;
    std::lock_guard lk(current_m);
    return current != nullptr && current->usable();
  }

  /// A user callback; what it throws is dropped, so that no callback can leave the latch
  /// believing it leads, stop its thread (std::terminate) or skip the step that follows it.
  template <class F, class... A>
  static void call_quietly(const F& f, A&&... args) noexcept {
    if (!f) return;
    try {
      f(std::forward<A>(args)...);
    } catch (...) {
    }
  }

  /// The lease of `t` was lost: end that term's leadership now.
  void lose(std::uint64_t t) {
    std::lock_guard cb(callback_m);
    std::optional<std::int64_t> revoked;
    {
      std::lock_guard lk(m);
      if (lost_term < t) lost_term = t;
      if (t == term && leading.exchange(false)) revoked = token.exchange(0);
      cv.notify_all();
    }
    // The next term's on_elected waits for callback_m: it comes after this.
    if (revoked) call_quietly(options.on_revoked, *revoked, leadership_end::lost);
  }

  /// One term: wait for the lease, lead until it is lost or `stop`, step down.
  void take_part(const std::shared_ptr<shared>& self, std::stop_token stop) {
    std::uint64_t my_term;
    {
      std::lock_guard lk(m);
      my_term = ++term;
    }
    lease_options lease = options.lease;
    lease.on_lost = [weak = std::weak_ptr<shared>(self), my_term, user = options.lease.on_lost](
                        const std::string& name, std::int64_t tok) {
      // Leadership ends first, whatever the user's own on_lost then does (it may throw).
      if (auto s = weak.lock()) s->lose(my_term);
      if (user) user(name, tok);
    };
    lease_guard g;
    try {
      g = c->acquire(election, lease, stop);
    } catch (const cancelled&) {
      return;
    } catch (const std::exception&) {
      std::unique_lock lk(m);
      cv.wait_for(lk, stop, options.retry_delay, [] { return false; });
      return;
    }
    {
      std::unique_lock cb(callback_m);
      std::unique_lock lk(m);
      // usable(), not !lost(): lost() waits for the client's deadline thread, which may run late,
      // so a lease already past its loss point or its max_hold would still pass. Such a term is
      // no leadership; its loss is reported soon (below), then the latch campaigns again.
      // on_elected first, then is_leader(): it is true between on_elected and on_revoked, so a
      // caller that sees it may rely on what on_elected set up for the term. A loss meanwhile
      // waits for callback_m (lose()), then reports the term's on_revoked after this on_elected.
      if (lost_term < my_term && g.usable()) {
        lk.unlock();
        call_quietly(options.on_elected, g.fencing_token());
        lk.lock();
        token = g.fencing_token();
        {
          std::lock_guard ck(current_m);
          current = &g;
        }
        leading = true;
        cv.notify_all();
      }
      cb.unlock();
      cv.wait(lk, stop, [&] { return lost_term >= my_term; });
      lk.unlock();
      std::lock_guard cb_again(callback_m);
      std::optional<std::int64_t> revoked;
      {
        std::lock_guard lk_again(m);
        {
          std::lock_guard ck(current_m);
          current = nullptr;
        }
        if (leading.exchange(false)) revoked = token.exchange(0);  // closed while leading
      }
      // Step down before the release.
      if (revoked) call_quietly(options.on_revoked, *revoked, leadership_end::closed);
    }
    try {
      g.release();
    } catch (const std::exception&) {
      // lost meanwhile: nothing left to release
    }
  }
};

leader_latch::leader_latch(client& c, std::string election, leader_latch_options options)
    : state_(std::make_shared<shared>()) {
  validate_lock_name(election);
  validate_ttl(options.lease.ttl);
  if (options.retry_delay.count() < 0) throw invalid_argument("leader_latch: negative retry_delay");
  state_->c = &c;
  state_->election = std::move(election);
  state_->options = std::move(options);
  thread_ = std::jthread([s = state_](std::stop_token stop) {
    while (!stop.stop_requested()) s->take_part(s, stop);
  });
}

leader_latch::~leader_latch() { close(); }

void leader_latch::close() noexcept {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

const std::string& leader_latch::election() const noexcept { return state_->election; }
bool leader_latch::is_leader() const noexcept { return state_->leads_now(); }
std::int64_t leader_latch::fencing_token() const noexcept { return state_->leads_now() ? state_->token.load() : 0; }

bool leader_latch::await_leadership(milliseconds timeout) const {
  std::unique_lock lk(state_->m);
  timeout = std::clamp(timeout, milliseconds(0), milliseconds(std::chrono::hours(24 * 3650)));
  return state_->cv.wait_for(lk, timeout, [&] { return state_->leads_now(); });
}

}  // namespace sqllock
