// The lease engine: acquire with re-entry and FIFO waiting, release, renew, inspect, force release.
#include "core/lease_engine.hpp"

#include "core/permit_name.hpp"
#include "core/rw_name.hpp"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <stop_token>
#include <thread>
#include <tuple>

namespace sqllock::detail {

using std::chrono::milliseconds;

namespace {

/// "Forever": ten years, so that deadline arithmetic in the waits never overflows.
constexpr auto forever = std::chrono::hours(24 * 3650);
/// A bounded wait returns within its bound plus this (the last statement's answer).
constexpr milliseconds wait_grace{250};
/// A release that starts at or past its lease's loss point still gets this long to free the row
/// early (one answer, as wait_grace); unanswered, it is re-sent in the background.
constexpr milliseconds release_floor = wait_grace;

std::string random_hex(int bytes) {
  static const char digits[] = "0123456789abcdef";
  std::random_device rd;
  std::string out;
  for (int i = 0; i < bytes; i += 4) {
    std::uint32_t r = rd();
    for (int k = 0; k < 4 && i + k < bytes; ++k, r >>= 8) {
      out += digits[(r >> 4) & 15];
      out += digits[r & 15];
    }
  }
  return out;
}

std::string default_label() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "host");
  return std::string(host) + ":" + std::to_string(static_cast<long>(getpid())) + ":" + random_hex(8);
}

// A small per-process number for the calling thread, stable for its lifetime (never 0).
std::uint64_t thread_number() {
  static std::atomic<std::uint64_t> next{1};
  thread_local std::uint64_t mine = next.fetch_add(1);
  return mine;
}

std::string format_ms(milliseconds ms) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

/// When an acquire statement must have answered: before the lease it asks for would already be
/// reported lost, within io_timeout, and (for a bounded wait) shortly after the wait's deadline.
steady::time_point statement_deadline(steady::time_point t0, milliseconds ttl, bool bounded,
                                      steady::time_point wait_deadline) {
  const auto usable = ttl - loss_margin(ttl);
  auto d = t0 + std::min(usable.count() > 0 ? usable : ttl, io_timeout);
  if (bounded) d = std::min(d, std::max(wait_deadline, t0) + wait_grace);
  return d;
}

/// The lane deadline of an acquire started at `t0` that must answer by `deadline`. The backend waits
/// for its callers' lane (busy with this client's other threads) for at most the first half of the
/// budget and answers "not acquired" after it: a statement that starts never has less time left
/// than the wait took, instead of a sliver that no connect or round trip could meet (which closed
/// the connection for the threads behind it and was reported as connection_lost).
steady::time_point lane_deadline_of(steady::time_point t0, steady::time_point deadline) {
  return t0 + (deadline - t0) / 2;
}

/// Where the local clock of a lease just acquired starts: when the backend began the statement
/// (after waiting for its lane), never before the try began. The database computes the expiry
/// later still, so nobody can take the lease over before this + TTL; counting the wait for the lane
/// would only shorten the lease the holder believes it has.
steady::time_point lease_start(steady::time_point t0, const acquire_outcome& outcome) {
  return std::max(t0, outcome.started);
}

/// Runs `f` (which must not throw) when the scope ends, however it ends.
template <class F>
struct at_exit {
  F f;
  ~at_exit() { f(); }
};
template <class F>
at_exit(F) -> at_exit<F>;

/// A waiting acquire's last lost connection: at the deadline it is the error if it came before it
/// (a try cut short by the call's own deadline is "not acquired in time").
struct lost_try {
  std::exception_ptr error;
  steady::time_point at{};
  void rethrow_if_before(steady::time_point deadline) const {
    if (error && at < deadline) std::rethrow_exception(error);
  }
};

/// One try of an acquire (a plain lock, a semaphore's permits, a fair ticket and lease). A waiting
/// acquire (`waits`) rides out a lost connection (the backend reconnects; remembered in `lost`) and a
/// statement the server rolled back (a serialization failure, a deadlock or a Galera certification
/// conflict that outlasted the backend's own reruns: nothing was acquired and the server answers)
/// as "not acquired", tries again and at its deadline was simply not acquired in time, never that
/// rollback. A single try reports both.
template <class Try>
std::shared_ptr<lease_state> ride_out(Try&& attempt, bool waits, lost_try& lost, const client_options& log,
                                      const std::string& what) {
  try {
    return attempt();
  } catch (const connection_lost& e) {
    if (!waits) throw;
    lost.error = std::current_exception();
    lost.at = steady::now();
    log_message(log, log_level::info, what + " will be retried: " + e.what());
    return nullptr;
  } catch (const retryable_error& e) {
    if (!waits) throw;
    log_message(log, log_level::info, what + " will be retried: " + e.what());
    return nullptr;
  }
}

/// Sleeps until `until`, or throws cancelled(`what`) as soon as `stop` is requested.
void sleep_unless_stopped(const std::stop_token& stop, steady::time_point until, const std::string& what) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lk(mu);
  cv.wait_until(lk, stop, until, [] { return false; });
  if (stop.stop_requested()) throw cancelled(what);
}

/// The waiting loop of a plain lock and of a semaphore's permits: FIFO among this client's waiters
/// for `ticket`'s key; the head tries, then backs off (never past the lease end it saw, shorter
/// with `events` from the backend) until woken by a local release, cancelled (throws) or the
/// deadline (`give_up`).
template <class Try, class GiveUp>
std::shared_ptr<lease_state> poll_at_head(wait_queues::ticket& ticket, const std::stop_token& stop,
                                          steady::time_point deadline, Try&& try_once, GiveUp&& give_up,
                                          const acquire_outcome& last, const lost_try& lost, bool events,
                                          const client_options& options, const std::string& woken) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  backoff_state backoff;
  for (;;) {
    if (!ticket.wait_until_head(stop, deadline)) return give_up();
    const auto events_before = ticket.events();
    if (auto h = try_once()) return h;
    if (steady::now() >= deadline) return give_up();
    const bool holder_known = !last.holder.empty() && last.time_left.count() > 0;
    const auto pause = next_poll_delay(backoff, holder_known, last.time_left, events && !lost.error, options.poll_min,
                                       options.poll_max, uniform(rng));
    ticket.sleep(stop, std::min(deadline, steady::now() + pause), events_before);
    if (ticket.events() != events_before) {
      backoff.polls = 0;  // something was released: start over
      if (options.log) log_message(options, log_level::debug, woken);
    }
  }
}

}  // namespace

lease_engine::lease_engine(std::unique_ptr<backend> db, const client_options& options)
    : db_(std::move(db)),
      options_(options),
      label_(options.holder_id.empty() ? default_label() : options.holder_id),
      nonce_(random_hex(16)),
      events_(std::make_shared<event_sink>(options_, db_->kind(), label_)),
      watches_(*db_, options_),
      renewer_(std::make_unique<renewer>(book_, *db_, outbox_, queues_, options_)) {
  book_.set_log(&options_);
  book_.set_skip_guarded(!db_->renewals_pass_guards());
  outbox_.set_log(&options_);
  book_.set_events(events_);
  renewer_->set_events(events_);
  db_->set_wake_sink(this);
}

lease_engine::~lease_engine() {
  renewer_.reset();
  // A last, short try for releases whose answer was lost; the rest expire by their TTL. Each send
  // is bounded by `until` too: a connection opened into a partition otherwise waited io_timeout.
  const auto until = steady::now() + milliseconds(1000);
  while (!outbox_.empty() && steady::now() < until) {
    outbox_.flush(*db_, lane::caller, steady::now(), std::nullopt, until);
    if (outbox_.empty() || steady::now() >= until) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  db_->set_wake_sink(nullptr);
  db_.reset();
}

std::shared_ptr<lease_state> lease_engine::record(const lease_ref& ref, std::uint64_t scope, steady::time_point started,
                                                  const lease_options& options, const std::string& what,
                                                  const std::shared_ptr<lease_engine>& self,
                                                  std::optional<milliseconds> valid_for) {
  const auto now = steady::now();
  if (options.max_hold.count() > 0 && now >= started + options.max_hold) {
    const auto late = std::chrono::duration_cast<milliseconds>(now - started);
    log_message(options_, log_level::warning,
                "the acquire of " + what + " (token " + std::to_string(ref.token) + ") was answered " +
                    format_ms(late) + " after it started, at or past its max_hold: not used, released by owner id");
    throw lease_lost("the acquire of " + what + " was answered " + format_ms(late) +
                         " after it started, at or past its max_hold of " + format_ms(options.max_hold) +
                         ": the hold ended before it could be handed out; its row is released and the acquire is "
                         "not tried again (a max_hold shorter than the database's answer time can never be met)",
                     std::string(db_->kind()), "", "lease_acquire");
  }
  auto h = book_.add(ref, label_, scope, started, options, self, now, valid_for);
  if (!h) {
    log_message(options_, log_level::warning,
                "the acquire of '" + ref.name + "' (token " + std::to_string(ref.token) +
                    ") was answered after its lease's loss point: not used (released by owner id if the call ends without a lease)");
  }
  return h;
}

std::string lease_engine::next_owner() { return nonce_ + "." + std::to_string(++owner_seq_); }

void lease_engine::wake(const std::string& name) noexcept {
  queues_.wake(name);
  wake_fair(name);
}

void lease_engine::wake_fair(const std::string& name) noexcept {
  std::vector<std::string> keys;
  try {
    std::lock_guard lk(fair_mu_);
    for (auto [it, end] = fair_waiters_.equal_range(name); it != end; ++it) keys.push_back(it->second);
  } catch (...) {
    return;
  }
  for (const auto& k : keys) queues_.wake(k);
}

std::shared_ptr<lease_state> lease_engine::acquire(std::string_view name_view, const lease_options& options,
                                                   std::optional<milliseconds> timeout, std::stop_token stop,
                                                   bool throw_on_timeout) {
  validate_lock_name(name_view);
  const std::string name(name_view);
  return acquire_row(name, name, "lock '" + name + "'", options, timeout, std::move(stop), throw_on_timeout);
}

std::shared_ptr<lease_state> lease_engine::acquire_row(const std::string& name, const std::string& display,
                                                       const std::string& what, const lease_options& options,
                                                       std::optional<milliseconds> timeout, std::stop_token stop,
                                                       bool throw_on_timeout, const std::string& rw_of) {
  validate_ttl(options.ttl);
  if (options.max_hold.count() < 0 || options.min_hold.count() < 0) {
    throw invalid_argument("lease_options: max_hold and min_hold must not be negative");
  }
  if (timeout && timeout->count() < 0) throw invalid_argument("acquire: negative timeout");
  if (stop.stop_requested()) throw cancelled("acquire of " + what + " cancelled before it started");
  // Log lines name a plain lock as before ("acquired 'job'"), a derived row by what it is.
  const std::string logged = what.rfind("lock '", 0) == 0 ? what.substr(5) : what;
  const auto start = steady::now();
  const bool bounded = timeout.has_value() && timeout->count() > 0;
  const auto deadline = start + ((timeout && *timeout < forever) ? *timeout : milliseconds(forever));
  const std::uint64_t scope = options_.scope == holder_scope::per_thread ? thread_number() : 0;
  auto self = shared_from_this();

  // Re-entry: this scope already holds a live lease of the name. No statement, no queue.
  bool extend = false;
  if (auto h = book_.reenter(name, scope, options, self, start, extend)) {
    if (extend) {
      try {
        renew_now(*h->acq, options.ttl, "lease_acquire");
      } catch (...) {
        // Its hold goes as if released: when another thread released the outer hold meanwhile,
        // this is the last hold and its release must be sent, not dropped with the error.
        release_quietly(*h);
        throw;
      }
    }
    schedule_renewal(*h->acq);
    return h;
  }

  if (options.fair) return acquire_fair(name, options, timeout, std::move(stop), throw_on_timeout, start, deadline, scope);

  const std::string owner = next_owner();
  std::string fence, fence_lo, fence_hi;
  if (!rw_of.empty()) {
    fence = rw_fence_row(rw_of);
    std::tie(fence_lo, fence_hi) = rw_rows_range(rw_of);
  }
  acquire_outcome last;
  lost_try lost;
  // This call's owner id may hold the row: a try got no answer (it may have acquired the lease), or
  // was answered after its lease's loss point (record() refused it). Every try re-sends the owner
  // id, so a later try may find that row again as its own live lease and use it; a release of it is
  // therefore only sent once the call is over.
  bool may_hold = false;
  steady::time_point may_hold_at{};  // the start of the last such try
  bool done = false;

  // However this call ends without a lease, a lease this owner id may hold is freed (by owner id:
  // it cannot touch anything else).
  const at_exit abandon{[&]() noexcept {
    if (done || !may_hold) return;
    try {
      outbox_.add({{name, owner, 0}, milliseconds(0), {}}, may_hold_at + options.ttl + milliseconds(1000));
      renewer_->poke();
    } catch (...) {
    }
  }};

  const bool waits = !timeout || timeout->count() > 0;
  auto attempt = [&]() -> std::shared_ptr<lease_state> {
    if (auto left = waits ? book_.held_elsewhere_here(name, steady::now()) : std::nullopt) {
      // A waiter whose own client (another thread) holds the name: the database would say no, and
      // the release will wake it locally, so it polls nothing. (A single try still asks the
      // database: its round trip is what paces a caller that loops on try_acquire.)
      last = {};
      last.holder = label_;
      last.time_left = *left;
      lost.error = nullptr;
      return nullptr;
    }
    flush_outbox_of(name, options.ttl, bounded, deadline);
    const auto t0 = steady::now();
    acquire_request req{name,  label_,   owner, options.ttl, statement_deadline(t0, options.ttl, bounded, deadline),
                        fence, fence_lo, fence_hi};
    req.lane_deadline = lane_deadline_of(t0, req.deadline);
    req.no_lock_wait = !waits;
    try {
      last = db_->acquire(req);
    } catch (const connection_lost& e) {
      may_hold = true;
      may_hold_at = t0;
      last = {};
      events_->emit_error(e, name);
      throw;
    } catch (const error& e) {
      events_->emit_error(e, name);
      throw;
    }
    lost.error = nullptr;
    if (!last.acquired) return nullptr;
    // This owner holds the row: freed when the call ends without a lease (record() may refuse it,
    // or throw: answered past its max_hold), unless a later try uses it.
    may_hold = true;
    may_hold_at = t0;
    auto h = record({name, owner, last.token}, scope, lease_start(t0, last), options, what, self);
    if (!h) {  // answered after its loss point: a later try may find the row again
      last.acquired = false;
      return nullptr;
    }
    done = true;
    schedule_renewal(*h->acq);
    if (options_.log) {
      log_message(options_, log_level::debug,
                  "acquired " + logged + " (token " + std::to_string(last.token) + ") after " +
                      format_ms(std::chrono::duration_cast<milliseconds>(steady::now() - start)));
    }
    if (events_->enabled()) {
      events_->emit(event_kind::acquired, name, last.token,
                    {.waited = std::chrono::duration_cast<milliseconds>(steady::now() - start), .ttl = options.ttl});
    }
    return h;
  };
  auto give_up = [&]() -> std::shared_ptr<lease_state> {
    // A try cut short by this call's own deadline (a row lock held by a guarded transaction, a
    // slow server) is "not acquired in time"; a connection lost before it is an error.
    lost.rethrow_if_before(deadline);
    if (!throw_on_timeout) return nullptr;
    std::string msg = what + " not acquired within " + format_ms(timeout.value_or(milliseconds(0)));
    if (!last.holder.empty()) {
      msg += ": held by " + last.holder + ", " + format_ms(last.time_left) + " left on its lease";
    }
    throw acquire_timeout(msg, display, last.holder, last.time_left, std::string(db_->kind()));
  };
  auto try_once = [&] { return ride_out(attempt, waits, lost, options_, "acquire of " + logged); };

  if (!queues_.has_waiters(name) || !waits) {
    if (auto h = try_once()) return h;
    if (!waits || steady::now() >= deadline) return give_up();
  }

  wait_queues::ticket ticket(queues_, name);
  const bool events = watches_.add(name, deadline);
  if (options_.log) log_waiting(name, last.holder, last.time_left, events);
  struct unwatch_guard {
    watch_registry& w;
    const std::string& name;
    ~unwatch_guard() { w.remove(name); }
  } unwatch{watches_, name};
  return poll_at_head(ticket, stop, deadline, try_once, give_up, last, lost, events, options_,
                      "woken: '" + name + "' may have been released");
}

std::shared_ptr<lease_state> lease_engine::acquire_permit(std::string_view name_view, int permits,
                                                          const lease_options& options,
                                                          std::optional<milliseconds> timeout, std::stop_token stop,
                                                          bool throw_on_timeout) {
  validate_lock_name(name_view);
  validate_ttl(options.ttl);
  try {
    validate_permits(permits);
  } catch (const invalid_argument& e) {
    throw invalid_argument("semaphore '" + std::string(name_view) + "': " + e.what());
  }
  if (options.max_hold.count() < 0 || options.min_hold.count() < 0) {
    throw invalid_argument("lease_options: max_hold and min_hold must not be negative");
  }
  if (timeout && timeout->count() < 0) throw invalid_argument("acquire_permit: negative timeout");
  if (options.fair) throw invalid_argument("lease_options::fair is for locks, not semaphore permits");
  const std::string name(name_view);
  if (stop.stop_requested()) throw cancelled("acquire of a permit of semaphore '" + name + "' cancelled before it started");
  const auto start = steady::now();
  const auto deadline = start + ((timeout && *timeout < forever) ? *timeout : milliseconds(forever));
  const bool bounded = timeout.has_value() && timeout->count() > 0;
  const bool waits = !timeout || timeout->count() > 0;

  const std::uint64_t scope = options_.scope == holder_scope::per_thread ? thread_number() : 0;
  auto self = shared_from_this();
  const std::string owner = next_owner();
  acquire_outcome last;  // the last refusal seen (a holder and its time left)
  lost_try lost;
  // Permits whose acquire got no answer, or was answered after its loss point: each may be held
  // under this call's owner id, and is freed (by owner id) unless it is the one this call returns
  // (a later scan may find it again as its own live lease).
  std::vector<std::pair<std::string, steady::time_point>> may_hold;
  std::string acquired_row;
  const at_exit abandon{[&]() noexcept {
    bool any = false;
    for (const auto& [row, at] : may_hold) {
      if (row == acquired_row) continue;
      try {
        outbox_.add({{row, owner, 0}, milliseconds(0), {}}, at + options.ttl + milliseconds(1000));
        any = true;
      } catch (...) {
      }
    }
    if (any) renewer_->poke();
  }};

  thread_local std::minstd_rand rng{std::random_device{}()};
  // One pass over the permits from a random slot (spreads contention); nullptr when all are taken.
  auto scan = [&]() -> std::shared_ptr<lease_state> {
    const int first = static_cast<int>(std::uniform_int_distribution<int>(0, permits - 1)(rng));
    last = {};
    for (int i = 0; i < permits; ++i) {
      const int slot = (first + i) % permits;
      const std::string row = permit_row_name(name, slot);
      if (book_.holds_name(row)) continue;  // a permit of this client: never re-entered
      flush_outbox_of(row, options.ttl, bounded, deadline);
      const auto t0 = steady::now();
      acquire_request req{row, label_, owner, options.ttl, statement_deadline(t0, options.ttl, bounded, deadline)};
      req.lane_deadline = lane_deadline_of(t0, req.deadline);
      req.no_lock_wait = !waits;
      acquire_outcome got;
      try {
        got = db_->acquire(req);
      } catch (const connection_lost& e) {
        may_hold.emplace_back(row, t0);
        events_->emit_error(e, row);
        throw;
      } catch (const error& e) {
        events_->emit_error(e, row);
        throw;
      }
      lost.error = nullptr;
      if (!got.acquired) {
        if (!got.holder.empty() && (last.holder.empty() || got.time_left < last.time_left)) last = got;
        continue;
      }
      // Held under this owner id: freed when the call ends, unless it is the permit returned.
      may_hold.emplace_back(row, t0);
      auto h = record({row, owner, got.token}, scope, lease_start(t0, got), options,
                      "permit " + std::to_string(slot) + " of semaphore '" + name + "'", self);
      if (!h) continue;  // answered after its loss point: a later scan may use it
      h->semaphore = name;
      h->permit = slot;
      acquired_row = row;
      schedule_renewal(*h->acq);
      if (options_.log) {
        log_message(options_, log_level::debug,
                    "acquired permit " + std::to_string(slot) + " of semaphore '" + name + "' (token " +
                        std::to_string(got.token) + ")");
      }
      if (events_->enabled()) {
        events_->emit(event_kind::acquired, row, got.token,
                      {.waited = std::chrono::duration_cast<milliseconds>(steady::now() - start), .ttl = options.ttl});
      }
      return h;
    }
    return nullptr;
  };
  auto try_once = [&] { return ride_out(scan, waits, lost, options_, "acquire of a permit of '" + name + "'"); };
  auto give_up = [&]() -> std::shared_ptr<lease_state> {
    lost.rethrow_if_before(deadline);
    if (!throw_on_timeout) return nullptr;
    std::string msg = "no permit of semaphore '" + name + "' (" + std::to_string(permits) + " permits) acquired within " +
                      format_ms(timeout.value_or(milliseconds(0)));
    if (!last.holder.empty()) {
      msg += ": all held, the soonest to end by " + last.holder + ", " + format_ms(last.time_left) + " left on its lease";
    }
    throw acquire_timeout(msg, name, last.holder, last.time_left, std::string(db_->kind()));
  };

  // The permit count is stored with the name at its first use; a different count changes nothing.
  // Storing it waits for the database's write lock (SQLite) no longer than an acquire statement
  // would: a try beside another connection's write transaction is refused within moments, a wait
  // keeps trying until its deadline.
  {
    int stored = 0;
    {
      std::lock_guard lk(semaphores_mu_);
      if (auto it = semaphores_.find(name); it != semaphores_.end()) stored = it->second;
    }
    while (stored == 0) {
      // Each try of the write is bounded like an acquire statement (on SQLite: the write lock is
      // waited for up to 50 ms, as by a lock's try, so two first uses at once both get through).
      // A waiting acquire rides out a lost connection or a rollback like its acquire statements,
      // until its deadline (give_up rethrows the loss then); a try reports it.
      std::optional<int> got;
      ride_out(
          [&]() -> std::shared_ptr<lease_state> {
            got = db_->semaphore_permits(name, permits, statement_deadline(steady::now(), options.ttl, bounded, deadline));
            return nullptr;
          },
          waits, lost, options_, "storing the permit count of semaphore '" + name + "'");
      if (got) {
        stored = *got;
        if (stored == 0) {
          throw schema_missing("semaphore '" + name + "' has no stored permit count (a read-only client cannot store it)",
                               std::string(db_->kind()), "", "semaphore_permits");
        }
        if (stored == permits) {
          std::lock_guard lk(semaphores_mu_);
          semaphores_[name] = stored;
        }
        break;
      }
      if (!waits || steady::now() >= deadline) return give_up();
      if (stop.stop_requested()) throw cancelled("acquire of a permit of semaphore '" + name + "' cancelled");
      // After a loss (which may come back at once: a refused connection), not in a tight loop; a
      // stop request ends the pause at once.
      if (lost.error) {
        sleep_unless_stopped(stop, std::min(deadline, steady::now() + options_.poll_min),
                             "acquire of a permit of semaphore '" + name + "' cancelled");
      }
    }
    if (stored != permits) {
      throw invalid_argument("semaphore '" + name + "' has " + std::to_string(stored) + " permits; asked with " +
                             std::to_string(permits) + " (the number of permits is fixed at the name's first use)");
    }
  }

  const std::string key = permit_queue_key(name);
  if (!queues_.has_waiters(key) || !waits) {
    if (auto h = try_once()) return h;
    if (!waits || steady::now() >= deadline) return give_up();
  }
  // Waiting: FIFO among this client's waiters for the semaphore; the head polls the permits with
  // back-off (never past the soonest lease end it saw) and is woken at once when this client frees
  // a permit. Other clients' releases are found by polling.
  wait_queues::ticket ticket(queues_, key);
  if (options_.log) log_waiting("a permit of semaphore '" + name + "'", last.holder, last.time_left, false);
  return poll_at_head(ticket, stop, deadline, try_once, give_up, last, lost, false, options_,
                      "woken: a permit of '" + name + "' was released here");
}

std::shared_ptr<lease_state> lease_engine::acquire_fair(const std::string& name, const lease_options& options,
                                                        std::optional<milliseconds> timeout, std::stop_token stop,
                                                        bool throw_on_timeout, steady::time_point start,
                                                        steady::time_point deadline, std::uint64_t scope) {
  const milliseconds ticket_ttl = options.fair_ticket_ttl;
  if (ticket_ttl < milliseconds(100) || ticket_ttl > milliseconds(forever)) {
    throw invalid_argument("lease_options: fair_ticket_ttl must be at least 100 ms");
  }
  const bool bounded = timeout.has_value() && timeout->count() > 0;
  const bool waits = !timeout || timeout->count() > 0;
  auto self = shared_from_this();
  const std::string owner = next_owner();
  // The ticket is renewed by every poll: four polls per ticket TTL at the least.
  const milliseconds refresh = std::max(milliseconds(20), ticket_ttl / 4);

  acquire_outcome last;
  queue_outcome place;
  lost_try lost;
  bool entered = false;  // a ticket may exist (a poll was sent)
  bool done = false;

  // However this call ends without a lease, its ticket is deleted and a lease handed to it (or
  // taken by an unanswered acquire) is released, handing the lock on: one owner-checked statement.
  const at_exit abandon{[&]() noexcept {
    if (done || !entered) return;
    // Bounded like the wait's other statements (a leave after a bounded wait must not hold the call
    // up to io_timeout under a partition); unanswered, it goes to the outbox below.
    const auto now = steady::now();
    release_request req{{name, owner, 0}, milliseconds(0), std::min(now + io_timeout, std::max(deadline, now) + wait_grace), true};
    try {
      db_->release(req, lane::caller);
      queues_.wake(name);
      wake_fair(name);
    } catch (...) {
      try {
        outbox_.add(req, steady::now() + std::max(options.ttl, options.fair_ticket_ttl) + milliseconds(1000));
        renewer_->poke();
      } catch (...) {
      }
    }
  }};

  auto give_up = [&]() -> std::shared_ptr<lease_state> {
    lost.rethrow_if_before(deadline);
    if (!throw_on_timeout) return nullptr;
    std::string msg = "lock '" + name + "' not acquired (fair) within " + format_ms(timeout.value_or(milliseconds(0)));
    if (place.ahead > 0) msg += ": " + std::to_string(place.ahead) + " waiter(s) ahead";
    if (!last.holder.empty()) {
      msg += std::string(place.ahead > 0 ? ", " : ": ") + "held by " + last.holder + ", " + format_ms(last.time_left) +
             " left on its lease";
    }
    throw acquire_timeout(msg, name, last.holder, last.time_left);
  };

  // One poll of the ticket and, when it is first in line (or was handed the lock), one acquire
  // with the same owner id: a lease handed over is found as this owner's live lease, extended to
  // now + ttl and returned with its token.
  // A poll renews the ticket (a write) when a quarter of its TTL has passed since the last renewal;
  // a wake-up in between only reads where the waiter stands.
  // A waiter its last poll found first in line (place.ahead == 0) and that a release has woken since
  // (`handover_due`) expects the lock handed to it: it sends the acquire alone, without reading the
  // queue first, so the hand-over costs the new holder one round trip. The acquire is the same
  // owner-checked statement either way: it finds this owner's live lease (handed over) and extends
  // it, or takes nothing from a live holder; only a free or expired row, which a first-in-line
  // waiter takes after its poll anyway, is taken without a fresh look at the queue. Not handed
  // over yet (a wake-up for something else): back off as first in line; the ticket is renewed on
  // its schedule by a poll.
  // Where the backend can (handed_lease_from_poll) and the lease renews itself, the hand-over is
  // learnt from a read instead: the poll that finds the row handed to this owner answers its token
  // and time left, and the lease starts from that read, committing nothing (the hand-over committed
  // the token durably); its current expiry is the ticket's, so its loss point is computed from the
  // time left read, and the watchdog extends it to options.ttl on that shorter lease's schedule. A
  // waiter woken first in line then sends that read alone (a renewal poll as due, like any poll).
  const bool read_handover = options.auto_renew && db_->handed_lease_from_poll();
  steady::time_point renewed{};
  bool handover_due = false;
  auto attempt = [&]() -> std::shared_ptr<lease_state> {
    const auto t0 = steady::now();
    entered = true;
    const bool refresh_now = place.seq == 0 || t0 - renewed >= refresh / 2;
    const bool direct = handover_due && !refresh_now && place.ahead == 0 && !read_handover;
    handover_due = false;
    if (!direct) {
      queue_request q{name, label_, owner, ticket_ttl, statement_deadline(t0, ticket_ttl, bounded, deadline),
                      place.seq, refresh_now};
      q.lane_deadline = lane_deadline_of(t0, q.deadline);
      place = db_->queue_poll(q);
      if (refresh_now && place.seq != 0) renewed = t0;
      lost.error = nullptr;
      if (place.seq == 0 || (place.ahead > 0 && !place.mine)) {
        last = {};
        return nullptr;
      }
    }
    flush_outbox_of(name, options.ttl, bounded, deadline);
    if (read_handover && !direct && place.mine && place.token > 0) {
      // Taken from the read; with too little left of it by the loss-point rule (record() refuses
      // it), the acquire below extends it instead (the same owner-checked statement as without
      // the read).
      if (auto h = record({name, owner, place.token}, scope, t0, options, "lock '" + name + "'", self,
                          place.time_left)) {
        last = {};
        last.acquired = true;
        last.token = place.token;
        done = true;
        schedule_renewal(*h->acq);  // at a third of the time left: the watchdog extends it to options.ttl
        if (options_.log) {
          log_message(options_, log_level::debug,
                      "acquired '" + name + "' (fair, token " + std::to_string(place.token) +
                          ", handed over, read at " + format_ms(place.time_left) + " left) after " +
                          format_ms(std::chrono::duration_cast<milliseconds>(steady::now() - start)));
        }
        return h;
      }
    }
    const auto t1 = steady::now();
    acquire_request req{name, label_, owner, options.ttl, statement_deadline(t1, options.ttl, bounded, deadline)};
    req.lane_deadline = lane_deadline_of(t1, req.deadline);
    req.fair = true;
    last = db_->acquire(req);
    if (direct) lost.error = nullptr;
    if (!last.acquired) return nullptr;
    auto h = record({name, owner, last.token}, scope, lease_start(t1, last), options, "lock '" + name + "'", self);
    if (!h) {  // answered too late: the next try may use it; `abandon` hands it on otherwise
      last.acquired = false;
      return nullptr;
    }
    done = true;
    schedule_renewal(*h->acq);
    if (options_.log) {
      log_message(options_, log_level::debug,
                  "acquired '" + name + "' (fair, token " + std::to_string(last.token) + ", " +
                      (direct ? "woken at the front" : place.mine ? "handed over" : "first in line") + ") after " +
                      format_ms(std::chrono::duration_cast<milliseconds>(steady::now() - start)));
    }
    return h;
  };
  auto try_once = [&] { return ride_out(attempt, waits, lost, options_, "fair acquire of '" + name + "'"); };

  // Woken by releases (local, or the backend's events for the name): only a waiter that counts
  // itself first in line polls at once; the others keep their ticket-renewal schedule.
  const std::string key = std::string("\x01" "fair\x01", 6) + owner;
  wait_queues::ticket wake_ticket(queues_, key);
  {
    std::lock_guard lk(fair_mu_);
    fair_waiters_.emplace(name, key);
  }
  struct unregister_guard {
    lease_engine& e;
    const std::string& name;
    const std::string& key;
    ~unregister_guard() {
      std::lock_guard lk(e.fair_mu_);
      for (auto [it, end] = e.fair_waiters_.equal_range(name); it != end; ++it) {
        if (it->second == key) {
          e.fair_waiters_.erase(it);
          break;
        }
      }
    }
  } unregister{*this, name, key};
  const bool events = waits && watches_.add(name, deadline);
  struct unwatch_guard {
    watch_registry& w;
    const std::string& name;
    bool on;
    ~unwatch_guard() {
      if (on) w.remove(name);
    }
  } unwatch{watches_, name, waits};

  thread_local std::minstd_rand rng{std::random_device{}()};
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  backoff_state backoff;
  for (;;) {
    const auto events_before = wake_ticket.events();
    if (auto h = try_once()) return h;
    if (!waits || steady::now() >= deadline) return give_up();
    const auto polled = steady::now();
    // First in line (the lock held by someone else, or not yet seen free): back off like a plain
    // waiter; further back: renew the ticket on schedule, or sooner when woken often enough to be next.
    milliseconds pause = refresh;
    if (!lost.error && place.ahead == 0) {
      const bool holder_known = !last.holder.empty() && last.time_left.count() > 0;
      pause = std::min(refresh, next_poll_delay(backoff, holder_known, last.time_left, events, options_.poll_min,
                                                options_.poll_max, uniform(rng)));
    } else if (!events) {
      pause = std::min(refresh, options_.poll_max);
    } else if (lost.error) {
      pause = std::min(refresh, options_.poll_min * 4);
    }
    std::int64_t ahead = place.ahead;
    auto seen = events_before;
    for (;;) {
      const auto until = std::min(deadline, polled + pause);
      if (steady::now() >= until) break;
      try {
        wake_ticket.sleep(stop, until, seen);
      } catch (const cancelled&) {
        throw cancelled("fair acquire of lock '" + name + "' cancelled");
      }
      const auto now_events = wake_ticket.events();
      if (now_events == seen) break;  // the pause is over
      // First in line at the last poll: this release most likely handed the lock over.
      if (place.ahead == 0 && !lost.error) handover_due = true;
      ahead -= static_cast<std::int64_t>(now_events - seen);
      seen = now_events;
      if (ahead <= 0) {
        backoff.polls = 0;
        break;
      }
    }
  }
}

void lease_engine::schedule_renewal(const acquisition& a) {
  const auto [renew_at, deadline_at] = book_.times_of(a);
  renewer_->schedule(renew_at, deadline_at);
}

void lease_engine::flush_outbox_of(const std::string& row, milliseconds ttl, bool bounded, steady::time_point deadline) {
  if (!outbox_.has(row)) return;
  const auto now = steady::now();
  for (const auto& n : outbox_.flush(*db_, lane::caller, now, row, statement_deadline(now, ttl, bounded, deadline))) {
    queues_.wake(n);
  }
}

std::uint64_t lease_engine::current_scope() const {
  return options_.scope == holder_scope::per_thread ? thread_number() : 0;
}

void lease_engine::release_quietly(lease_state& hold, std::optional<steady::time_point> by) noexcept {
  try {
    release(hold, by);
  } catch (const std::exception& e) {
    log_message(options_, log_level::info, std::string("release of an abandoned acquisition: ") + e.what());
  } catch (...) {
  }
}

namespace {
/// Watching a name for wake-ups while it lives.
struct watch_hold {
  watch_registry& registry;
  std::string name;
  bool events;
  watch_hold(watch_registry& r, std::string n, steady::time_point until)
      : registry(r), name(std::move(n)), events(registry.add(name, until)) {}
  ~watch_hold() { registry.remove(name); }
  watch_hold(const watch_hold&) = delete;
  watch_hold& operator=(const watch_hold&) = delete;
};

/// The part of a bounded wait still left (nullopt: unbounded), never negative.
std::optional<milliseconds> remaining(std::optional<milliseconds> timeout, steady::time_point deadline) {
  if (!timeout) return std::nullopt;
  if (timeout->count() == 0) return milliseconds(0);
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady::now());
  return std::max(left, milliseconds(1));
}

/// A reader-writer check's look at the other side (acquire_write: the reader rows; acquire_read:
/// the writer row). Where a guarded transaction can outlive its lease (guards_hold_off_readers()):
/// a locking read that does not wait, one statement when no row is locked; on a locked row (a
/// guard, a renewal, another check) a plain read (the other side live: wait for it as ever, not
/// for its transactions), and only when that finds none live a locking read that waits for the
/// lock to go (a guarded transaction commits first). Elsewhere the plain read alone.
/// `plain_first`: a poll of a wait that saw the other side live last time reads plainly first and
/// locks only when that finds none live: no row lock while the other side is live and visible (a
/// row lock on PostgreSQL writes the row's xmax: every poll was a write transaction flushed to
/// disk). `plain()` and `locking(mode)` are the two reads; `live(row)` tells a live holder.
template <class Plain, class Locking, class Live>
std::optional<lock_info> look_after_guards(const backend& db, bool plain_first, Plain plain, Locking locking,
                                           Live live) {
  if (!db.guards_hold_off_readers()) return plain();
  if (!plain_first) {
    try {
      return locking(lock_wait::nowait);
    } catch (const lock_not_available&) {
      // A row is locked: look plainly, then wait for the lock if none is live.
    }
  }
  if (auto r = plain(); live(r)) return r;
  return locking(lock_wait::wait);
}

/// What acquire_read and acquire_write check and compute before anything is sent.
struct rw_call {
  std::string name;
  std::string what;  ///< "the read lock of 'x'" / "the write lock of 'x'"
  steady::time_point start;
  steady::time_point deadline;
  bool waits;
  bool bounded;  ///< a wait with a finite, non-zero timeout
  /// A row given back (a timeout, a step aside, an error) is sent within the wait's bound;
  /// unanswered, the outbox sends it again. None for an unbounded wait.
  std::optional<steady::time_point> give_back_by;
  /// A read of the wait besides its acquires, bounded like an acquire statement of the wait (a
  /// partition ends it by then).
  steady::time_point read_deadline(milliseconds ttl) const {
    return statement_deadline(steady::now(), ttl, bounded, deadline);
  }
};

rw_call begin_rw(std::string_view name_view, const lease_options& options, const std::optional<milliseconds>& timeout,
                 const std::stop_token& stop, const std::string& side) {
  validate_lock_name(name_view);
  if (options.fair) throw invalid_argument("lease_options::fair is for plain locks, not read-write leases");
  validate_ttl(options.ttl);
  if (timeout && timeout->count() < 0) throw invalid_argument("acquire_" + side + ": negative timeout");
  rw_call c{std::string(name_view), "", steady::now(), {}, !timeout || timeout->count() > 0,
            timeout.has_value() && timeout->count() > 0, std::nullopt};
  c.what = "the " + side + " lock of '" + c.name + "'";
  if (stop.stop_requested()) throw cancelled("acquire of " + c.what + " cancelled before it started");
  c.deadline = c.start + ((timeout && *timeout < forever) ? *timeout : milliseconds(forever));
  if (c.bounded) c.give_back_by = c.deadline + wait_grace;
  return c;
}
}  // namespace

std::shared_ptr<lease_state> lease_engine::acquire_write(std::string_view name_view, const lease_options& options,
                                                         std::optional<milliseconds> timeout, std::stop_token stop,
                                                         bool throw_on_timeout) {
  const rw_call call = begin_rw(name_view, options, timeout, stop, "write");
  const std::string& name = call.name;
  const std::string& what = call.what;
  const auto start = call.start;
  const auto deadline = call.deadline;
  const bool waits = call.waits;
  const auto& give_back_by = call.give_back_by;
  const std::uint64_t scope = current_scope();
  const std::string wrow = rw_writer_row(name);
  const std::string own_reader = rw_reader_row(name, nonce_, scope);

  // An upgrade would wait for this scope's own read lock forever: refused before anything changes.
  if (!book_.holds_live_in_scope(wrow, scope, start) && book_.holds_live_in_scope(own_reader, scope, start)) {
    throw upgrade_refused("the read lock of '" + name + "' is held by this " +
                          (options_.scope == holder_scope::per_thread ? "thread" : "client") +
                          ": release it before asking for the write lock (an upgrade would deadlock)");
  }

  std::shared_ptr<lease_state> w;
  try {
    w = acquire_row(wrow, name, what, options, timeout, stop, throw_on_timeout, name);
  } catch (const cancelled&) {
    throw cancelled("acquire of " + what + " cancelled");
  }
  if (!w) return nullptr;
  w->rw_name = name;
  w->rw_side = 'w';
  // Re-entered after its readers drained: nothing to wait for. Re-entered while the first hold's
  // thread (a per_client scope) still waits for them: this hold waits for them too, or a reader
  // and a writer would both hold.
  if (w->hold_count > 1 && w->acq->rw_checked.load()) return w;

  // The writer row is ours (and keeps new readers away); wait for the readers that came before.
  auto [lo, hi] = rw_reader_range(name);
  std::optional<lock_info> reader;
  std::exception_ptr last_error;
  std::optional<wait_queues::ticket> ticket;
  thread_local std::minstd_rand rng{std::random_device{}()};
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  backoff_state backoff;
  try {
    for (;;) {
      const auto events_before = ticket ? ticket->events() : 0;
      try {
        // This scope's own read lock (taken after this write lock by another thread of a per_client
        // scope: a downgrade) is no reader to wait for: look on either side of it.
        // A poll after a live reader was seen reads plainly first (no row lock while it lives).
        const bool polling = reader.has_value();
        const auto by = [&] { return call.read_deadline(options.ttl); };
        const auto look = [&](const std::string& from, const std::string& to) {
          return look_after_guards(
              *db_, polling, [&] { return db_->live_in_range(from, to, by()); },
              [&](lock_wait mode) { return db_->live_in_range_after_guards(from, to, mode, by()); },
              [](const std::optional<lock_info>& r) { return r.has_value(); });
        };
        if (book_.holds_live_in_scope(own_reader, scope, steady::now())) {
          std::string after = own_reader;
          ++after.back();  // reader rows of one name all have the same length: none lies between
          reader = look(lo, own_reader);
          if (!reader) reader = look(after, hi);
        } else {
          reader = look(lo, hi);
        }
        last_error = nullptr;
        // No reader left, or another thread of this scope saw them drain meanwhile (a reader seen
        // since stores its row, sees this writer row and steps aside).
        if ((!reader || w->acq->rw_checked.load()) && book_.usable(*w, steady::now())) {
          w->acq->rw_checked.store(true);
          return w;
        }
      } catch (const connection_lost&) {
        if (!waits) throw;
        last_error = std::current_exception();
      }
      // Lost, or past its loss point (the read answered late): never handed out.
      if (!book_.usable(*w, steady::now())) {
        throw lease_lost("the write lock of '" + name + "' was lost while its readers drained",
                         std::string(db_->kind()), "", "lease_live_in_range");
      }
      if (steady::now() >= deadline) {
        if (last_error) std::rethrow_exception(last_error);
        if (!throw_on_timeout) {
          release_quietly(*w, give_back_by);
          return nullptr;
        }
        std::string msg = what + " not acquired within " + format_ms(timeout.value_or(milliseconds(0))) +
                          ": readers hold it";
        if (reader) msg += ", the last to end by " + reader->holder + ", " + format_ms(reader->time_left) + " left";
        throw acquire_timeout(msg, name, reader ? reader->holder : "", reader ? reader->time_left : milliseconds(0),
                              std::string(db_->kind()));
      }
      if (!ticket) {
        ticket.emplace(queues_, rw_drain_key(name));
        if (!ticket->wait_until_head(stop, deadline)) continue;  // the deadline: give up above
      }
      const bool known = reader && reader->time_left.count() > 0;
      const auto pause = next_poll_delay(backoff, known, reader ? reader->time_left : milliseconds(0), false,
                                         options_.poll_min, options_.poll_max, uniform(rng));
      ticket->sleep(stop, std::min(deadline, steady::now() + pause), events_before);
      if (ticket->events() != events_before) backoff.polls = 0;
    }
  } catch (const cancelled&) {
    release_quietly(*w, give_back_by);
    throw cancelled("acquire of " + what + " cancelled while its readers drained");
  } catch (...) {
    release_quietly(*w, give_back_by);
    throw;
  }
}

std::shared_ptr<lease_state> lease_engine::acquire_read(std::string_view name_view, const lease_options& options,
                                                        std::optional<milliseconds> timeout, std::stop_token stop,
                                                        bool throw_on_timeout) {
  const rw_call call = begin_rw(name_view, options, timeout, stop, "read");
  const std::string& name = call.name;
  const std::string& what = call.what;
  const auto deadline = call.deadline;
  const bool waits = call.waits;
  const auto& give_back_by = call.give_back_by;
  const std::uint64_t scope = current_scope();
  const std::string wrow = rw_writer_row(name);
  const std::string rrow = rw_reader_row(name, nonce_, scope);

  std::optional<lock_info> writer;  // the live writer seen last
  std::optional<wait_queues::ticket> ticket;
  std::optional<watch_hold> watch;
  std::exception_ptr last_error;
  thread_local std::minstd_rand rng{std::random_device{}()};
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  backoff_state backoff;
  bool events = false;
  // `after_guards`: the check after storing the reader row, where no guarded write may commit
  // while a reader holds (look_after_guards); the look while waiting is a plain read.
  auto live_writer = [&](bool after_guards) -> bool {
    const auto live = [](const std::optional<lock_info>& r) { return r && r->time_left.count() > 0; };
    const auto by = [&] { return call.read_deadline(options.ttl); };
    if (after_guards) {
      writer = look_after_guards(
          *db_, false, [&] { return db_->inspect(wrow, by()); },
          [&](lock_wait mode) { return db_->inspect_writer_after_guards(wrow, mode, by()); }, live);
    } else {
      writer = db_->inspect(wrow, by());
    }
    return live(writer);
  };
  auto give_up = [&]() -> std::shared_ptr<lease_state> {
    if (last_error) std::rethrow_exception(last_error);
    if (!throw_on_timeout) return nullptr;
    std::string msg = what + " not acquired within " + format_ms(timeout.value_or(milliseconds(0)));
    if (writer) msg += ": the write lock is held by " + writer->holder + ", " + format_ms(writer->time_left) + " left";
    throw acquire_timeout(msg, name, writer ? writer->holder : "", writer ? writer->time_left : milliseconds(0),
                          std::string(db_->kind()));
  };
  try {
    for (bool first = true;; first = false) {
      const auto events_before = ticket ? ticket->events() : 0;
      const auto now = steady::now();
      const bool downgrade = book_.holds_live_in_scope(wrow, scope, now);
      const bool reentry = book_.holds_live_in_scope(rrow, scope, now);
      // After a wait, look at the writer before taking a row (no row churn while it holds on).
      bool take = first || downgrade || reentry;
      if (!take) {
        try {
          take = !live_writer(false);
          last_error = nullptr;
        } catch (const connection_lost&) {
          last_error = std::current_exception();  // waiting: ride it out until the deadline
        }
      }
      if (take) {
        auto h = acquire_row(rrow, name, what, options, remaining(timeout, deadline), stop, throw_on_timeout, name);
        if (!h) return nullptr;
        h->rw_name = name;
        h->rw_side = 'r';
        // Re-entered once checked (never waits behind a writer: that would deadlock), or a
        // downgrade (the writer row is this scope's own live lease: nobody else can hold it). A
        // re-entry while another thread of this scope is still between storing the row and its
        // check is checked here too: a writer of another client may hold.
        if ((h->hold_count > 1 && h->acq->rw_checked.load()) || book_.holds_live_in_scope(wrow, scope, steady::now())) {
          h->acq->rw_checked.store(true);
          return h;
        }
        // Store, then check: the reader row is committed; a writer that took its row before this
        // read is seen here, one that takes it after sees the reader row when it drains.
        bool blocked = true;
        bool dropped = false;
        try {
          blocked = live_writer(true);
          last_error = nullptr;
        } catch (const connection_lost&) {
          release_quietly(*h, give_back_by);
          dropped = true;
          if (!waits) throw;
          last_error = std::current_exception();
        } catch (...) {
          release_quietly(*h, give_back_by);
          throw;
        }
        // Not handed out lost, nor past its loss point (the read answered late): not acquired. A
        // re-entry that another thread of this scope checked meanwhile keeps it, writer or not.
        if (!dropped && (!blocked || h->acq->rw_checked.load()) && book_.usable(*h, steady::now())) {
          h->acq->rw_checked.store(true);
          return h;
        }
        // Writer preference: step aside until the writer is gone.
        if (!last_error) release_quietly(*h, give_back_by);
      }
      if (!waits || steady::now() >= deadline) return give_up();
      if (!ticket) {
        ticket.emplace(queues_, rw_reader_wait_key(name));
        watch.emplace(watches_, wrow, deadline);
        events = watch->events;
        if (!ticket->wait_until_head(stop, deadline)) return give_up();
        continue;  // head of this client's waiting readers (maybe after the one before left): look again
      }
      const bool known = writer && writer->time_left.count() > 0;
      const auto pause = next_poll_delay(backoff, known, writer ? writer->time_left : milliseconds(0), events,
                                         options_.poll_min, options_.poll_max, uniform(rng));
      ticket->sleep(stop, std::min(deadline, steady::now() + pause), events_before);
      if (ticket->events() != events_before) backoff.polls = 0;
    }
  } catch (const cancelled&) {
    throw cancelled("acquire of " + what + " cancelled");
  }
}

void lease_engine::release(lease_state& hold, std::optional<steady::time_point> by, bool floor_by) {
  bool notices_queued = false;
  auto request = book_.drop(hold, notices_queued);
  if (notices_queued) renewer_->poke();  // the deadline thread runs the on_lost of holds drop() ended
  if (!request) return;  // finished already, or an inner hold: the lease stays
  auto& a = *hold.acq;
  // No lease statement keeps the lease's connection, or its caller, busy past the lease's loss
  // point (DESIGN, Safety): by then another client may take the name over, and this release can
  // only be re-sent (the outbox does, on a connection_lost). A release that starts past that point
  // still gets release_floor to free the row early.
  const auto now = steady::now();
  request->deadline = std::min(now + io_timeout, std::max(book_.loss_point(a), now + release_floor));
  // The caller's own bound (a reader-writer wait giving back at its deadline), with the same floor;
  // without it (a multi-lock giving back its set within one bound) the bound as given.
  if (by) request->deadline = std::min(request->deadline, floor_by ? std::max(*by, now + release_floor) : *by);
  // A transaction guarding this lease (transaction::require_lease) is still open: freeing the row
  // now would let the next holder in before that transaction commits. On PostgreSQL nothing would
  // stop it (the guard's FOR KEY SHARE does not hold off a plain UPDATE, and a reader-writer check
  // does not look at a freed row); on MariaDB and SQLite the release would wait for the guard, on
  // this caller's thread, which may be the one that is to commit. So the release waits in the
  // outbox, sent when the last guard ends (guard_ended() pokes the renewer), or given up once the
  // lease, no longer renewed, has expired.
  // The release waits in the outbox (`held_off`: until this client's guards end) instead.
  // A fair release kept by min_hold is no hand-over: the releaser's ticket is deleted after it
  // (below), and by the outbox when the release goes there.
  const bool leave_queue = a.fair && !request->hand_over;
  // The outbox gives a release up once the lease has certainly expired; with the ticket's deletion
  // to send too, not before the ticket has (its fair_ticket_ttl may be the longer). Sent late, an
  // owner-checked release of a unique owner id frees nothing else.
  const auto give_up_at = std::max(a.valid_until_time() + a.last_ttl,
                                   leave_queue ? now + hold.options.fair_ticket_ttl : steady::time_point::min()) +
                          milliseconds(1000);
  const auto hold_back = [&](std::shared_ptr<const std::atomic<int>> held_off, const char* why) {
    outbox_.add(*request, give_up_at, std::move(held_off), leave_queue);
    renewer_->poke();
    if (options_.log) {
      log_message(options_, log_level::debug,
                  "release of '" + a.ref.name + "' (token " + std::to_string(a.ref.token) + ") waits for " + why);
    }
  };
  if (a.guards.load() > 0) {
    hold_back(std::shared_ptr<const std::atomic<int>>(hold.acq, &a.guards), "the transaction guarding it to end");
    return;
  }
  if (request->deadline <= now) {
    // The caller's bound is used up (by the releases before this one of a set given back into a
    // partition): not sent on the caller's lane, where it could only wait; the outbox sends it.
    outbox_.add(*request, give_up_at, nullptr, leave_queue);
    renewer_->poke();
    const connection_lost e("release of '" + a.ref.name + "': its caller's bound was used up; it is sent in the background",
                            std::string(db_->kind()), "", "lease_release");
    events_->emit_error(e, a.ref.name, a.ref.token);
    throw e;
  }
  bool released = false;
  try {
    released = db_->release(*request, lane::caller);
  } catch (const release_guarded&) {
    // A transaction this client does not know of, or cannot see end, still locks the row (an
    // adopted connection's transaction guarding the lease): as a held-off release, the outbox
    // sends it again until that transaction has ended, and the caller's release is done.
    hold_back(nullptr, "a transaction locking its row to end");
    return;
  } catch (const error& e) {
    // Not applied, or not known to be (no answer, busy past its bound, rolled back): the outbox
    // sends it again, so the row is freed in moments, not left to its TTL.
    if (worth_sending_again(e)) {
      outbox_.add(*request, give_up_at, nullptr, leave_queue);
      renewer_->poke();
    }
    events_->emit_error(e, a.ref.name, a.ref.token);
    throw;
  }
  if (leave_queue && released) {
    // A fair release kept by min_hold is no hand-over (the row is shortened, not given on), and
    // the plain release leaves the releaser's ticket: still live from its last poll, it would
    // count as a waiter ahead of every other once the row ends, until its fair_ticket_ttl ran
    // out. Left unanswered, the outbox sends the leave again (the release is done).
    try {
      db_->queue_leave(a.ref.owner, request->deadline);
    } catch (const error& e) {
      const bool again = worth_sending_again(e);
      if (again) {
        outbox_.add_leave(*request, give_up_at);  // past the ticket's own expiry (above)
        renewer_->poke();
      }
      if (options_.log) {
        log_message(options_, log_level::debug,
                    "the ticket of '" + a.ref.name + "' (token " + std::to_string(a.ref.token) +
                        ") was not deleted after its release: " + e.what() +
                        (again ? "; sent again in the background" : "; it expires by itself"));
      }
    }
  }
  if (released) {
    queues_.wake(a.ref.name);
    wake_fair(a.ref.name);
    if (options_.log) {
      log_message(options_, log_level::debug,
                  "released '" + a.ref.name + "' (token " + std::to_string(a.ref.token) + ") after " +
                      format_ms(std::chrono::duration_cast<milliseconds>(steady::now() - a.started)));
    }
    if (events_->enabled()) {
      events_->emit(event_kind::released, a.ref.name, a.ref.token,
                    {.held = std::chrono::duration_cast<milliseconds>(steady::now() - a.started)});
    }
    return;
  }
  const bool was_lost = a.lost.load();
  book_.mark_lost(a, "the owner check failed on release");
  throw lease_lost("lease '" + a.ref.name + "' (token " + std::to_string(a.ref.token) + ") was " +
                       (was_lost ? "lost earlier" : "lost") + ": expired and taken over, or force-released",
                   std::string(db_->kind()), "", "lease_release");
}

void lease_engine::renew_now(acquisition& a, milliseconds ttl, const char* statement) {
  auto fail_lost = [&](const std::string& why) {
    book_.mark_lost(a, why);
    throw lease_lost("lease '" + a.ref.name + "' (token " + std::to_string(a.ref.token) + ") " + why,
                     std::string(db_->kind()), "", statement);
  };
  if (a.lost.load()) fail_lost("was lost earlier");
  renew_batch batch;
  batch.items.push_back({a.ref, ttl});
  std::shared_ptr<acquisition> keep(std::shared_ptr<acquisition>{}, &a);  // non-owning alias
  batch.acquisitions.push_back(keep);
  for (int attempt = 0;; ++attempt) {
    const auto loss_at = book_.loss_point(a);  // last_ttl is the book's: the watchdog renews too
    const auto t0 = steady::now();
    if (t0 >= loss_at) fail_lost("ran out before it could be renewed");
    try {
      auto matched = db_->renew(batch.items, loss_at);
      if (matched.empty()) fail_lost("was lost: the owner check failed on renew");
      book_.renewed(batch, matched, t0, false, "");
      // Answered after the deadline thread reported the lease lost: that report stands.
      if (a.lost.load()) fail_lost("was reported lost before its renewal was answered");
      if (options_.log) {
        log_message(options_, log_level::debug,
                    "renewed '" + a.ref.name + "' (token " + std::to_string(a.ref.token) + ") for " +
                        std::to_string(ttl.count()) + "ms");
      }
      return;
    } catch (const connection_lost& e) {
      events_->emit_error(e, a.ref.name, a.ref.token);
      // Renewal is idempotent, so one more try on the connection the backend re-opens is safe.
      if (attempt == 0 && steady::now() < loss_at) continue;
      if (steady::now() >= book_.loss_point(a)) {
        fail_lost(std::string("ran out before it could be renewed: ") + e.what());
      }
      throw;
    }
  }
}

bool lease_engine::usable(const lease_state& hold) const noexcept {
  return book_.usable(hold, steady::now());
}

void lease_engine::renew(lease_state& hold) {
  if (hold.finished.load()) {
    throw not_holder("renew: lease '" + hold.acq->ref.name + "' was already released by this guard", std::string(db_->kind()),
                     "", "lease_renew");
  }
  // What the deadline thread reports at this moment is reported now, whether or not it has come
  // round (it may run late): a hold past its max_hold is lost, and renewing it would extend the
  // lease past the bound the user set.
  book_.expire(*hold.acq, steady::now());
  if (hold.lost.load()) {
    throw lease_lost("lease '" + hold.acq->ref.name + "' (token " + std::to_string(hold.acq->ref.token) +
                         "): this hold passed its max_hold and was reported lost (the lease stays with its other holds)",
                     std::string(db_->kind()), "", "lease_renew");
  }
  renew_now(*hold.acq, hold.options.ttl, "lease_renew");
}

std::optional<lock_info> lease_engine::inspect(const std::string& name) {
  validate_lock_name(name);
  auto info = db_->inspect(name, steady::now() + io_timeout);
  if (info) {
    if (const int holds = book_.holds_of(info->owner); holds > 0) info->hold_count = holds;
  }
  return info;
}

std::optional<lock_info> lease_engine::inspect_read_write(std::string_view name) {
  validate_lock_name(name);
  return live_under(name, rw_rows_range(name));
}

std::optional<lock_info> lease_engine::inspect_semaphore(std::string_view name) {
  validate_lock_name(name);
  return live_under(name, permit_rows_range(name));
}

std::optional<lock_info> lease_engine::live_under(std::string_view name, const std::pair<std::string, std::string>& rows) {
  auto info = db_->live_in_range(rows.first, rows.second, steady::now() + io_timeout);
  if (info) {
    if (const int holds = book_.holds_of(info->owner); holds > 0) info->hold_count = holds;
    info->name = std::string(name);
  }
  return info;
}

std::vector<lock_info> lease_engine::list_locks() {
  auto locks = db_->list_locks();
  for (auto& l : locks) {
    if (const int holds = book_.holds_of(l.owner); holds > 0) l.hold_count = holds;
  }
  return locks;
}

void lease_engine::log_waiting(const std::string& what, const std::string& holder, milliseconds time_left,
                               bool notified) const {
  std::string msg = "waiting for " + (what.starts_with("a permit") ? what : "'" + what + "'");
  if (!holder.empty()) msg += ": held by " + holder + ", " + format_ms(time_left) + " left on its lease";
  msg += notified ? " (woken by the database, polling as a safety net)" : " (polling)";
  log_message(options_, log_level::debug, msg);
}

bool lease_engine::force_release(const std::string& name) {
  validate_lock_name(name);
  const bool released = db_->force_release(name);
  queues_.wake(name);
  return released;
}

}  // namespace sqllock::detail
