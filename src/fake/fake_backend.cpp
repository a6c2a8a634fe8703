// The fake backend: the lock table's rules of sql/*/lease_*.sql, in memory.
#include "fake/fake_backend.hpp"

#include <algorithm>
#include <tuple>
#include <thread>

namespace sqllock::detail {

using std::chrono::milliseconds;

namespace {
milliseconds ms_between(steady::time_point a, steady::time_point b) {
  return std::chrono::duration_cast<milliseconds>(b - a);
}
}  // namespace

void fake_backend::lose_answers(fake_op op, int n) {
  std::lock_guard lk(mu_);
  lose_[op] += n;
}
void fake_backend::fail(fake_op op, int n) {
  std::lock_guard lk(mu_);
  fail_[op] += n;
}
void fake_backend::hang(fake_op op, int n) {
  std::lock_guard lk(mu_);
  hang_[op] += n;
}
void fake_backend::conflict(fake_op op, int n) {
  std::lock_guard lk(mu_);
  conflict_[op] += n;
}
void fake_backend::heal(fake_op op) {
  std::lock_guard lk(mu_);
  for (auto* counts : {&lose_, &fail_, &hang_, &conflict_}) counts->erase(op);
  delay_.erase(op);
  answer_delay_.erase(op);
}
void fake_backend::delay(fake_op op, milliseconds d) {
  std::lock_guard lk(mu_);
  delay_[op] = d;
}
void fake_backend::delay_answer(fake_op op, milliseconds d) {
  std::lock_guard lk(mu_);
  answer_delay_[op] = d;
}
milliseconds fake_backend::answer_delay(fake_op op) const {
  std::lock_guard lk(mu_);
  milliseconds d{0};
  for (auto key : {op, fake_op::any}) {
    if (key == fake_op::any && op == fake_op::read) continue;
    if (auto it = answer_delay_.find(key); it != answer_delay_.end()) d = std::max(d, it->second);
  }
  return d;
}
void fake_backend::occupy_lane(milliseconds d) {
  std::lock_guard lk(mu_);
  lane_busy_until_ = steady::now() + d;
}
int fake_backend::count(fake_op op) const {
  std::lock_guard lk(mu_);
  auto it = counts_.find(op);
  return it == counts_.end() ? 0 : it->second;
}

fake_backend::fault fake_backend::before(fake_op op, steady::time_point deadline) {
  count_statement();
  milliseconds d{0};
  fault f = fault::none;
  {
    std::lock_guard lk(mu_);
    ++counts_[op];
    ++counts_[fake_op::any];
    for (auto key : {op, fake_op::any}) {
      if (auto it = delay_.find(key); it != delay_.end()) d = std::max(d, it->second);
      if (f == fault::none && hang_[key] > 0) {
        --hang_[key];
        f = fault::hang;
      } else if (f == fault::none && fail_[key] > 0) {
        --fail_[key];
        f = fault::fail;
      } else if (f == fault::none && lose_[key] > 0) {
        --lose_[key];
        f = fault::lose;
      } else if (f == fault::none && conflict_[key] > 0) {
        --conflict_[key];
        f = fault::conflict;
      }
    }
  }
  if (f == fault::hang) {
    std::this_thread::sleep_until(deadline);
    return f;
  }
  if (d.count() > 0) {
    std::this_thread::sleep_until(std::min(deadline, steady::now() + d));
    if (steady::now() >= deadline) return fault::hang;
  }
  return f;
}

void fake_backend::no_answer(const char* statement) {
  throw connection_lost(std::string("fake ") + statement + ": no answer", "fake", "", statement);
}

int fake_backend::schema_version() {
  std::lock_guard lk(db_->mu);
  return db_->schema_version;
}

int fake_backend::migrate() {
  std::lock_guard lk(db_->mu);
  // As the real backends: steps up to the newest known version, nothing above it.
  db_->schema_version = std::max(db_->schema_version, required_schema_version);
  return db_->schema_version;
}

acquire_outcome fake_backend::acquire(const acquire_request& req) {
  steady::time_point busy;
  {
    std::lock_guard lk(mu_);
    busy = lane_busy_until_;
  }
  if (busy > req.lane_until()) {
    std::this_thread::sleep_until(req.lane_until());
    return {};  // the lane stayed busy: not acquired now, nothing sent
  }
  std::this_thread::sleep_until(busy);
  const auto started = steady::now();
  const auto answer_after = answer_delay(fake_op::acquire);
  const auto f = before(fake_op::acquire, req.deadline);
  if (f == fault::fail || f == fault::hang) no_answer("lease_acquire");
  if (f == fault::conflict) {
    throw serialization_failure("fake lease_acquire: could not serialize access (rolled back)", "fake", "40001",
                                "lease_acquire");
  }
  acquire_outcome out;
  {
    std::lock_guard lk(db_->mu);
    const auto now = steady::now();
    auto [it, fresh] = db_->rows.try_emplace(req.name);
    auto& r = it->second;
    const bool free = r.holder.empty() || r.expires_at <= now;
    const bool same = !r.holder.empty() && r.owner == req.owner && r.expires_at > now;
    if (fresh || free || same) {
      if (!same && !req.fence.empty()) {
        // The name's fence (a row without holder): created above every token of the name's rows,
        // else advanced by one; the acquisition takes its value.
        auto f = db_->rows.find(req.fence);
        if (f == db_->rows.end()) {
          std::int64_t top = 0;
          for (auto i = db_->rows.lower_bound(req.fence_lo); i != db_->rows.end() && i->first < req.fence_hi; ++i) {
            top = std::max(top, i->second.token);
          }
          f = db_->rows.try_emplace(req.fence).first;
          f->second.token = top;
        }
        r.token = ++f->second.token;
        r.acquired_at = now;
        r.expires_at = now + req.ttl;
      } else if (!same) {
        r.token = fresh ? 1 : r.token + 1;
        r.acquired_at = now;
        r.expires_at = now + req.ttl;
      } else {
        r.expires_at = std::max(r.expires_at, now + req.ttl);
      }
      r.holder = req.holder;
      r.owner = req.owner;
      out.acquired = true;
      out.token = r.token;
    } else {
      out.holder = r.holder;
      out.time_left = std::max(milliseconds(0), ms_between(now, r.expires_at));
    }
  }
  std::this_thread::sleep_for(answer_after);
  if (f == fault::lose) no_answer("lease_acquire");
  out.started = started;
  return out;
}

std::vector<std::size_t> fake_backend::renew(std::span<const renew_item> items, steady::time_point deadline) {
  const auto answer_after = answer_delay(fake_op::renew);
  const auto f = before(fake_op::renew, deadline);
  if (f == fault::fail || f == fault::hang) no_answer("lease_renew");
  std::vector<std::size_t> matched;
  {
    std::lock_guard lk(db_->mu);
    const auto now = steady::now();
    for (std::size_t i = 0; i < items.size(); ++i) {
      auto it = db_->rows.find(items[i].lease.name);
      if (it == db_->rows.end()) continue;
      auto& r = it->second;
      if (r.holder.empty() || r.owner != items[i].lease.owner || r.token != items[i].lease.token || r.expires_at <= now)
        continue;
      r.expires_at = std::max(r.expires_at, now + items[i].ttl);
      matched.push_back(i);
    }
  }
  std::this_thread::sleep_for(answer_after);
  if (f == fault::lose) no_answer("lease_renew");
  return matched;
}

release_outcome fake_backend::release(const release_request& req, lane) {
  const auto answer_after = answer_delay(fake_op::release);
  const auto f = before(fake_op::release, req.deadline);
  if (f == fault::fail || f == fault::hang) no_answer("lease_release");
  if (f == fault::conflict) {
    throw deadlock_detected("fake lease_release: deadlock found, transaction rolled back", "fake", "40P01",
                            "lease_release");
  }
  bool released = false;
  {
    std::lock_guard lk(db_->mu);
    const auto now = steady::now();
    auto it = db_->rows.find(req.lease.name);
    if (it != db_->rows.end()) {
      auto& r = it->second;
      if (!r.holder.empty() && r.owner == req.lease.owner && (req.lease.token == 0 || r.token == req.lease.token)) {
        released = true;
        // Hand-over (a fair lease): the lowest live ticket of another owner takes the row.
        const fake_database::ticket* next = nullptr;
        if (req.hand_over) {
          for (const auto& [seq, t] : db_->queue) {
            if (t.name == req.lease.name && t.owner != req.lease.owner && t.expires_at > now) {
              next = &t;
              break;
            }
          }
        }
        if (next) {
          r.holder = next->holder;
          r.owner = next->owner;
          r.token += 1;
          r.acquired_at = now;
          r.expires_at = now + next->ttl;
        } else if (r.acquired_at + req.min_hold > now) {
          r.expires_at = r.acquired_at + req.min_hold;
        } else {
          r.holder.clear();
          r.owner.clear();
          r.expires_at = now;
        }
      }
    }
  }
  if (req.hand_over) {
    std::lock_guard lk(db_->mu);
    std::erase_if(db_->queue, [&](const auto& e) { return e.second.owner == req.lease.owner; });
  }
  std::this_thread::sleep_for(answer_after);
  if (f == fault::lose) no_answer("lease_release");
  return released;
}

queue_outcome fake_backend::queue_poll(const queue_request& req) {
  steady::time_point busy;
  {
    std::lock_guard lk(mu_);
    busy = lane_busy_until_;
  }
  if (busy > req.lane_until()) {
    std::this_thread::sleep_until(req.lane_until());
    if (req.lane_until() >= req.deadline) no_answer("queue_poll");  // busy to the statement's deadline
    return {};  // the lane stayed busy past its bound: nothing sent, poll again
  }
  std::this_thread::sleep_until(busy);
  const auto answer_after = answer_delay(fake_op::queue);
  const auto f = before(fake_op::queue, req.deadline);
  if (f == fault::fail || f == fault::hang) no_answer("queue_poll");
  if (f == fault::conflict) {
    throw serialization_failure("fake queue_poll: could not serialize access (rolled back)", "fake", "40001",
                                "queue_poll");
  }
  queue_outcome out;
  {
    std::lock_guard lk(db_->mu);
    const auto now = steady::now();
    std::erase_if(db_->queue, [&](const auto& e) {
      return e.second.name == req.name && e.second.owner != req.owner && e.second.expires_at + milliseconds(10000) <= now;
    });
    for (auto& [seq, t] : db_->queue) {
      if (t.owner == req.owner) {
        if (req.refresh) t.expires_at = now + req.ttl;
        out.seq = seq;
      }
    }
    if (out.seq == 0 && !req.refresh) {  // the ticket is gone
      std::this_thread::sleep_for(answer_after);
      return out;
    }
    if (out.seq == 0) {
      out.seq = db_->next_seq++;
      db_->queue[out.seq] = {req.name, req.holder, req.owner, req.ttl, now, now + req.ttl};
    }
    std::string live_holder;
    if (auto it = db_->rows.find(req.name);
        it != db_->rows.end() && !it->second.holder.empty() && it->second.expires_at > now) {
      live_holder = it->second.owner;
      if (live_holder == req.owner) {  // handed over: its token and time left
        out.token = it->second.token;
        out.time_left = std::chrono::duration_cast<milliseconds>(it->second.expires_at - now);
      }
    }
    for (const auto& [seq, t] : db_->queue) {
      if (seq < out.seq && t.name == req.name && t.expires_at > now && t.owner != live_holder) ++out.ahead;
    }
    out.mine = live_holder == req.owner;
  }
  std::this_thread::sleep_for(answer_after);
  if (f == fault::lose) no_answer("queue_poll");
  return out;
}

void fake_backend::queue_leave(const std::string& owner, steady::time_point deadline) {
  const auto answer_after = answer_delay(fake_op::queue);
  const auto f = before(fake_op::queue, deadline);
  if (f == fault::fail || f == fault::hang) no_answer("queue_leave");
  {
    std::lock_guard lk(db_->mu);
    std::erase_if(db_->queue, [&](const auto& e) { return e.second.owner == owner; });
  }
  std::this_thread::sleep_for(answer_after);
  if (f == fault::lose) no_answer("queue_leave");
}

std::vector<queue_waiter> fake_backend::list_queue() {
  std::lock_guard lk(db_->mu);
  const auto now = steady::now();
  std::vector<queue_waiter> out;
  for (const auto& [seq, t] : db_->queue) {
    if (t.expires_at <= now) continue;
    auto it = db_->rows.find(t.name);
    if (it != db_->rows.end() && it->second.owner == t.owner && !it->second.holder.empty() && it->second.expires_at > now) {
      continue;
    }
    out.push_back({t.name, t.holder, seq, ms_between(t.enqueued_at, now), ms_between(now, t.expires_at)});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return std::tie(a.name, a.seq) < std::tie(b.name, b.seq); });
  return out;
}

bool fake_backend::force_release(const std::string& name) {
  std::lock_guard lk(db_->mu);
  auto it = db_->rows.find(name);
  if (it == db_->rows.end() || it->second.holder.empty()) return false;
  it->second.holder.clear();
  it->second.owner.clear();
  it->second.expires_at = steady::now();
  return true;
}

lock_info fake_backend::info(const std::string& name, const fake_database::row& r) const {
  lock_info i;
  i.name = name;
  i.holder = r.holder;
  i.owner = r.owner;
  i.fencing_token = r.token;
  i.hold_count = 1;
  i.time_left = ms_between(steady::now(), r.expires_at);
  return i;
}

std::optional<lock_info> fake_backend::inspect(const std::string& name, steady::time_point) {
  const auto answer_after = answer_delay(fake_op::read);
  std::optional<lock_info> out;
  {
    std::lock_guard lk(db_->mu);
    auto it = db_->rows.find(name);
    if (it != db_->rows.end() && !it->second.holder.empty()) out = info(name, it->second);
  }
  std::this_thread::sleep_for(answer_after);
  return out;
}

std::optional<int> fake_backend::semaphore_permits(const std::string& name, int permits, steady::time_point) {
  std::lock_guard lk(db_->mu);
  return db_->semaphores.try_emplace(name, permits).first->second;
}

std::vector<lock_info> fake_backend::list_locks() {
  std::lock_guard lk(db_->mu);
  std::vector<lock_info> out;
  const auto now = steady::now();
  for (const auto& [name, r] : db_->rows) {
    if (!r.holder.empty() && r.expires_at > now) out.push_back(info(name, r));
  }
  return out;
}

std::optional<lock_info> fake_backend::live_in_range(const std::string& lo, const std::string& hi, steady::time_point) {
  const auto answer_after = answer_delay(fake_op::read);
  std::optional<lock_info> best;
  {
    std::lock_guard lk(db_->mu);
    const auto now = steady::now();
    steady::time_point best_end{};
    for (auto it = db_->rows.lower_bound(lo); it != db_->rows.end() && it->first < hi; ++it) {
      const auto& [name, r] = *it;
      if (r.holder.empty() || r.expires_at <= now) continue;
      if (!best || r.expires_at > best_end) {
        best = info(name, r);
        best_end = r.expires_at;
      }
    }
  }
  std::this_thread::sleep_for(answer_after);
  return best;
}

std::unique_ptr<session> fake_backend::begin(const transaction_options&) {
  throw invalid_argument("the fake backend has no transactions");
}

}  // namespace sqllock::detail
