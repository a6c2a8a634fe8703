// The lease book: acquisitions, holds, re-entry, renewal schedule and loss/risk deadlines.
#include "core/lease_book.hpp"

#include <algorithm>

namespace sqllock::detail {

using std::chrono::milliseconds;

milliseconds loss_margin(milliseconds ttl) noexcept {
  const auto ms = std::max(ttl, milliseconds(0));
  // Scheduling delays: a twentieth, at most 500 ms. Clock rates: the database server's clock (it
  // computes the expiry) may run up to 1% faster than this process's monotonic clock (it counts
  // valid_until), so a lease can end ttl / 100 earlier than counted here: that part has no cap.
  return std::min(ms / 20, milliseconds(500)) + ms / 100;
}

namespace {

steady::rep ticks(steady::time_point t) { return t.time_since_epoch().count(); }

// Recompute what the live holds of an acquisition ask for; called with the book's lock held. A
// hold past its max_hold (reported lost alone) still counts as a hold until it is dropped, but
// asks for nothing more.
void recompute(acquisition& a) {
  a.holds = 0;
  a.kept_holds = 0;
  a.auto_renew_holds = 0;
  a.hard_end = steady::time_point::min();
  a.next_hold_end = steady::time_point::max();
  auto& list = a.hold_list;
  list.erase(std::remove_if(list.begin(), list.end(),
                            [](const std::weak_ptr<lease_state>& w) {
                              auto h = w.lock();
                              return !h || h->finished.load();
                            }),
             list.end());
  for (const auto& w : list) {
    auto h = w.lock();
    if (!h) continue;
    ++a.holds;
    a.min_hold = std::max(a.min_hold, h->options.min_hold);
    a.hard_end = std::max(a.hard_end, h->end());
    if (h->lost.load()) continue;
    ++a.kept_holds;
    if (h->options.auto_renew) ++a.auto_renew_holds;
    a.next_hold_end = std::min(a.next_hold_end, h->end());
  }
  if (a.holds == 0) a.hard_end = steady::time_point::max();
}

}  // namespace

std::shared_ptr<lease_state> lease_book::reenter(const std::string& name, std::uint64_t scope,
                                                 const lease_options& options,
                                                 const std::shared_ptr<lease_engine>& engine, steady::time_point now,
                                                 bool& extend) {
  extend = false;
  std::lock_guard lk(mu_);
  auto it = by_scope_.find({name, scope});
  if (it == by_scope_.end()) return nullptr;
  auto a = it->second;
  const auto until = a->valid_until_time();
  // About to be reported lost (its loss point or max_hold): not a lease to re-enter (the deadline
  // thread reports it).
  if (!live_at(*a, now)) return nullptr;
  auto h = std::make_shared<lease_state>();
  h->engine = engine;
  h->acq = a;
  h->options = options;
  h->started = now;
  a->hold_list.push_back(h);
  recompute(*a);
  h->hold_count = a->holds;
  ++changes_;
  // A re-entry never shortens the lease; one that will not be renewed but needs it longer than it
  // is known to last gets one extension from the caller.
  extend = !options.auto_renew && until < now + options.ttl;
  return h;
}

std::shared_ptr<lease_state> lease_book::add(lease_ref ref, std::string holder, std::uint64_t scope,
                                             steady::time_point started, const lease_options& options,
                                             const std::shared_ptr<lease_engine>& engine, steady::time_point now,
                                             std::optional<milliseconds> valid_for) {
  const milliseconds ttl = valid_for ? std::min(*valid_for, options.ttl) : options.ttl;
  if (now >= started + ttl - loss_margin(ttl)) return nullptr;
  auto a = std::make_shared<acquisition>();
  a->ref = std::move(ref);
  a->holder = std::move(holder);
  a->scope = scope;
  a->started = started;
  a->fair = options.fair;
  a->valid_until.store(ticks(started + ttl), std::memory_order_release);
  a->last_ttl = ttl;
  // A lease known to last less than its TTL (a fair hand-over read, at the ticket's TTL) is renewed
  // on the usual schedule of what it has, a third of it, and the renewal asks for its full TTL: a
  // hold shorter than that (the common case of a fair queue) is released before any renewal, so
  // the hand-over's is the only commit of the cycle.
  a->next_renew = started + ttl / 3;
  auto h = std::make_shared<lease_state>();
  h->engine = engine;
  h->acq = a;
  h->options = options;
  h->started = started;
  std::lock_guard lk(mu_);
  a->id = next_id_++;
  a->hold_list.push_back(h);
  recompute(*a);
  h->hold_count = a->holds;
  live_[a->id] = a;
  by_scope_[{a->ref.name, scope}] = a;
  by_name_[a->ref.name] = a;
  ++changes_;
  return h;
}

std::optional<milliseconds> lease_book::held_elsewhere_here(const std::string& name, steady::time_point now) const {
  std::lock_guard lk(mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  const auto& a = *it->second;
  const auto until = a.valid_until_time();
  if (a.lost.load() || now >= until - loss_margin(a.last_ttl)) return std::nullopt;  // ask the database
  return std::chrono::duration_cast<milliseconds>(until - now);
}

bool lease_book::holds_live_in_scope(const std::string& name, std::uint64_t scope, steady::time_point now) const {
  std::lock_guard lk(mu_);
  auto it = by_scope_.find({name, scope});
  if (it == by_scope_.end()) return false;
  return live_at(*it->second, now);
}

bool lease_book::usable(const acquisition& a, steady::time_point now) const {
  std::lock_guard lk(mu_);
  return live_at(a, now);
}

bool lease_book::usable(const lease_state& hold, steady::time_point now) const {
  std::lock_guard lk(mu_);
  return !hold.finished.load() && !hold.lost.load() && now < hold.end() && live_at(*hold.acq, now);
}

bool lease_book::holds_name(const std::string& name) const {
  std::lock_guard lk(mu_);
  auto it = by_name_.find(name);
  return it != by_name_.end() && !it->second->lost.load();
}

void lease_book::forget_locked(acquisition& a) {
  live_.erase(a.id);
  auto it = by_scope_.find({a.ref.name, a.scope});
  if (it != by_scope_.end() && it->second.get() == &a) by_scope_.erase(it);
  auto n = by_name_.find(a.ref.name);
  if (n != by_name_.end() && n->second.get() == &a) by_name_.erase(n);
}

std::optional<release_request> lease_book::drop(lease_state& hold, bool& notices_queued) {
  notices_queued = false;
  if (hold.finished.exchange(true)) return std::nullopt;
  auto& a = *hold.acq;
  std::lock_guard lk(mu_);
  recompute(a);
  // A hold past its max_hold keeps nothing, reported or not: with the deadline thread late it was
  // still counted, and the last other hold's drop left the row taken until its TTL ran out. It is
  // ended here as the deadline thread would have, its on_lost left to that thread.
  if (const auto now = steady::now(); a.kept_holds > 0 && !a.lost.load() && now >= a.next_hold_end) {
    std::vector<lease_notice> notices;
    end_holds_locked(a, now, notices);
    if (!notices.empty()) {
      notices_->push(std::move(notices));
      queued_notices_.store(true);
      notices_queued = true;
    }
  }
  // A hold reported lost alone (its max_hold passed while others kept the lease) keeps nothing: when
  // the last other hold goes, the lease is released, not left to run out its TTL.
  if (a.kept_holds > 0 || a.released) return std::nullopt;
  a.released = true;
  forget_locked(a);
  release_request r;
  r.lease = a.ref;
  r.min_hold = a.min_hold;
  // A fair lease hands the lock over in its release, unless min_hold keeps it held past the release.
  r.hand_over = a.fair && a.min_hold.count() == 0;
  return r;
}

renew_batch lease_book::due(steady::time_point now) {
  renew_batch batch;
  std::lock_guard lk(mu_);
  for (auto& [id, a] : live_) {
    if (a->auto_renew_holds == 0 || a->next_renew > now + a->last_ttl / 6) continue;
    if (skip_guarded_ && a->guards.load() > 0) continue;
    // Each renewing hold asks for its TTL, up to its own max_hold; the longest ask is renewed, so
    // a hold's max_hold never shortens the lease of the others.
    milliseconds ttl{0};
    for (const auto& w : a->hold_list) {
      auto h = w.lock();
      if (!h || h->finished.load() || h->lost.load() || !h->options.auto_renew) continue;
      auto ask = h->options.ttl;
      if (const auto end = h->end(); end != steady::time_point::max()) {
        ask = std::min(ask, std::chrono::duration_cast<milliseconds>(end - now));
      }
      ttl = std::max(ttl, ask);
    }
    if (ttl.count() <= 0) continue;  // every renewing hold is past its max_hold: expire() reports it
    const auto loss_at = a->valid_until_time() - loss_margin(a->last_ttl);
    if (loss_at <= now) continue;  // too late to renew: expire() reports it
    batch.items.push_back({a->ref, ttl});
    batch.acquisitions.push_back(a);
    batch.deadline = std::min(batch.deadline, loss_at);
  }
  return batch;
}

void lease_book::renewed(const renew_batch& batch, const std::vector<std::size_t>& matched, steady::time_point t0,
                         bool failed, const std::string& why) {
  std::vector<bool> ok(batch.items.size(), false);
  for (auto i : matched) {
    if (i < ok.size()) ok[i] = true;
  }
  std::vector<lease_notice> notices;
  const auto now = steady::now();
  std::unique_lock lk(mu_);
  for (std::size_t i = 0; i < batch.items.size(); ++i) {
    auto& a = *batch.acquisitions[i];
    if (a.lost.load() || a.released) continue;
    const auto ttl = batch.items[i].ttl;
    if (failed) {
      a.next_renew = now + std::clamp(a.last_ttl / 10, milliseconds(5), milliseconds(1000));
    } else if (ok[i] && now >= a.valid_until_time() - loss_margin(a.last_ttl)) {
      // Answered at or past the loss point, where expire() reports the lease lost (the deadline
      // thread may run late) and usable() has said so: it stays lost, or usable() and a leader
      // latch's is_leader() would turn true again after being false.
      lost_locked(a, "the renewal was answered after the lease's loss point", notices);
    } else if (ok[i]) {
      const auto until = t0 + ttl;
      if (until > a.valid_until_time()) {
        a.valid_until.store(ticks(until), std::memory_order_release);
        a.last_ttl = ttl;
      }
      a.next_renew = t0 + ttl / 3;
      a.at_risk_reported = false;
      if (events_ && events_->enabled()) {
        notices.push_back(
            {events_->later(event_kind::renewed, {.ttl = ttl}), a.ref.name, a.ref.token, a.id, notice_kind::renewed});
      }
    } else {
      lost_locked(a, "the owner check failed on renewal (expired and taken over, or released by force)", notices);
    }
  }
  if (failed && log_) log_message(*log_, log_level::warning, "lease renewal failed, retrying: " + why);
  deliver(std::move(notices), lk);
}

void lease_book::deliver(std::vector<lease_notice>&& notices, std::unique_lock<std::mutex>& lk) {
  // Notices drop() queued for the deadline thread run with these (expire() is that thread's call).
  const bool queued = queued_notices_.exchange(false);
  if (notices.empty() && !queued) return;
  const auto queue = notices_;  // kept: once a callback ran, the book may be gone
  if (!notices.empty()) queue->push(std::move(notices));
  lk.unlock();
  queue->deliver();
}

void lease_book::lost_locked(acquisition& a, const std::string& why, std::vector<lease_notice>& notices) {
  if (a.lost.exchange(true)) return;
  forget_locked(a);
  if (log_) {
    log_message(*log_, log_level::warning,
                "lease '" + a.ref.name + "' (token " + std::to_string(a.ref.token) + ") lost: " + why);
  }
  if (events_ && events_->enabled()) {
    const auto held = std::chrono::duration_cast<milliseconds>(steady::now() - a.started);
    notices.push_back(
        {events_->later(event_kind::lost, {.held = held}, why), a.ref.name, a.ref.token, a.id, notice_kind::lost});
  }
  for (const auto& w : a.hold_list) {
    auto h = w.lock();
    // A hold reported lost alone (its max_hold) was told already.
    if (h && !h->finished.load() && !h->lost.load() && h->options.on_lost)
      notices.push_back({h->options.on_lost, a.ref.name, a.ref.token, a.id, notice_kind::lost});
  }
}

void lease_book::end_holds_locked(acquisition& a, steady::time_point now, std::vector<lease_notice>& notices) {
  for (const auto& w : a.hold_list) {
    auto h = w.lock();
    if (!h || h->finished.load() || h->lost.load() || now < h->end()) continue;
    h->lost.store(true);
    if (log_) {
      log_message(*log_, log_level::warning,
                  "a hold of lease '" + a.ref.name + "' (token " + std::to_string(a.ref.token) +
                      ") lost: its max_hold was reached; the lease stays with its other holds");
    }
    if (h->options.on_lost)
      notices.push_back({h->options.on_lost, a.ref.name, a.ref.token, a.id, notice_kind::hold_lost});
  }
  recompute(a);
}

void lease_book::mark_lost(acquisition& a, const std::string& why) {
  std::vector<lease_notice> notices;
  std::unique_lock lk(mu_);
  lost_locked(a, why, notices);
  deliver(std::move(notices), lk);
}

void lease_book::expire(steady::time_point now) {
  std::vector<lease_notice> notices;
  std::unique_lock lk(mu_);
  std::vector<std::shared_ptr<acquisition>> all;
  all.reserve(live_.size());
  for (auto& [id, a] : live_) all.push_back(a);
  for (auto& a : all) expire_locked(*a, now, notices);
  deliver(std::move(notices), lk);
}

void lease_book::expire(acquisition& a, steady::time_point now) {
  std::vector<lease_notice> notices;
  std::unique_lock lk(mu_);
  if (!a.lost.load() && !a.released) expire_locked(a, now, notices);
  deliver(std::move(notices), lk);
}

void lease_book::expire_locked(acquisition& a, steady::time_point now, std::vector<lease_notice>& notices) {
  const auto until = a.valid_until_time();
  if (now >= a.hard_end) {
    lost_locked(a, "max_hold reached: the lease is no longer renewed", notices);
    return;
  }
  if (now >= until - loss_margin(a.last_ttl)) {
    lost_locked(a, "not renewed in time: by this process's clock the lease may expire in the database now", notices);
    return;
  }
  // Some holds past their max_hold, others keeping the acquisition: those are lost alone.
  if (now >= a.next_hold_end) end_holds_locked(a, now, notices);
  if (!a.at_risk_reported && now >= until - a.last_ttl / 3) {
    a.at_risk_reported = true;
    if (log_) {
      log_message(*log_, log_level::warning,
                  "lease '" + a.ref.name + "' (token " + std::to_string(a.ref.token) +
                      ") at risk: less than a third of its TTL left and not renewed");
    }
    if (events_ && events_->enabled()) {
      const auto left = std::chrono::duration_cast<milliseconds>(until - now);
      notices.push_back({events_->later(event_kind::at_risk, {.time_left = left}), a.ref.name, a.ref.token, a.id,
                         notice_kind::at_risk});
    }
    for (const auto& w : a.hold_list) {
      auto h = w.lock();
      if (h && !h->finished.load() && !h->lost.load() && h->options.on_at_risk)
        notices.push_back({h->options.on_at_risk, a.ref.name, a.ref.token, a.id, notice_kind::at_risk});
    }
  }
}

steady::time_point lease_book::next_renewal() const {
  auto t = steady::time_point::max();
  std::lock_guard lk(mu_);
  for (const auto& [id, a] : live_) {
    if (a->auto_renew_holds > 0) t = std::min(t, a->next_renew);
  }
  return t;
}

steady::time_point lease_book::next_deadline() const {
  if (queued_notices_.load()) return steady::time_point::min();  // drop() queued notices to run
  auto t = steady::time_point::max();
  std::lock_guard lk(mu_);
  for (const auto& [id, a] : live_) {
    const auto until = a->valid_until_time();
    t = std::min({t, a->hard_end, a->next_hold_end});
    t = std::min(t, until - loss_margin(a->last_ttl));
    if (!a->at_risk_reported) t = std::min(t, until - a->last_ttl / 3);
  }
  return t;
}

std::pair<steady::time_point, steady::time_point> lease_book::times_of(const acquisition& a) const {
  std::lock_guard lk(mu_);
  const auto until = a.valid_until_time();
  auto deadline = std::min({a.hard_end, a.next_hold_end, until - loss_margin(a.last_ttl)});
  if (!a.at_risk_reported) deadline = std::min(deadline, until - a.last_ttl / 3);
  return {a.auto_renew_holds > 0 ? a.next_renew : steady::time_point::max(), deadline};
}

steady::time_point lease_book::loss_point(const acquisition& a) const {
  std::lock_guard lk(mu_);
  return a.valid_until_time() - loss_margin(a.last_ttl);
}

bool lease_book::live_at(const acquisition& a, steady::time_point now) const {
  // expire() reports the acquisition lost at the first of these two points; a caller asking before
  // the deadline thread ran (late on a loaded machine) gets the same answer.
  return !a.released && !a.lost.load() && now < a.hard_end && now < a.valid_until_time() - loss_margin(a.last_ttl);
}

int lease_book::holds_of(const std::string& owner) const {
  std::lock_guard lk(mu_);
  for (const auto& [id, a] : live_) {
    if (a->ref.owner == owner) return a->holds;
  }
  return 0;
}

}  // namespace sqllock::detail
