// The client: lease bookkeeping, in-process FIFO wait queues, wake-ups, and the renewal watchdog.
#include "sqllock/client.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "core/backend.hpp"

namespace sqllock {
namespace detail {

using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct lease_state {
  std::shared_ptr<client_state> owner;
  std::uint64_t id = 0;
  std::string name;
  std::string holder;
  std::int64_t token = 0;
  std::int64_t hold_count = 0;
  milliseconds ttl{0};
  bool auto_renew = true;
  std::function<void(const std::string&, std::int64_t)> on_lost;
  std::atomic<bool> lost{false};
  std::atomic<bool> released{false};
  // Guarded by client_state::mu:
  steady::time_point expires_estimate;  // local, conservative: start of last good renew + ttl
  steady::time_point next_renew;
  bool registered = false;  // in client_state::held: renewed by the watchdog
  bool counted = false;     // in client_state::held_keys: this holder holds the name locally
};

namespace {

std::string default_holder_id() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "host");
  std::random_device rd;
  std::uint64_t r = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char buf[400];
  std::snprintf(buf, sizeof buf, "%s:%ld:%016llx", host, static_cast<long>(getpid()),
                static_cast<unsigned long long>(r));
  return buf;
}

// A small per-process number for the calling thread, stable for its lifetime.
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

}  // namespace

struct client_state : wake_sink {
  struct name_queue {
    std::deque<std::uint64_t> tickets;  // FIFO of waiting acquires; the front one polls
    std::uint64_t events = 0;           // bumped by every local release / backend wake
    std::condition_variable_any cv;
  };

  std::unique_ptr<backend> db;
  client_options opts;
  std::string holder_base;

  std::mutex mu;
  std::map<std::uint64_t, std::shared_ptr<lease_state>> held;
  // name + '\0' + holder -> guards that hold it or are still releasing it. An acquire that the
  // database answers as reentrant while this count is zero met stale holds (see acquire_impl).
  std::unordered_map<std::string, int> held_keys;
  // name + '\0' + holder whose last hold may still be counted by the database: its release threw
  // (the answer was lost with the connection) or its renewals failed until it ran out.
  std::set<std::string> uncertain_holds;
  // The hold count the database last reported for each acquisition of ours (name, holder, token).
  using lease_key = std::tuple<std::string, std::string, std::int64_t>;
  std::map<lease_key, std::int64_t> db_holds;
  // Releases that failed without an answer (connection lost, database busy), to be sent again
  // with the hold count they expect, before the next lease statement or by the watchdog.
  struct pending_release {
    lease_key key;
    std::int64_t expected_holds;
  };
  std::deque<pending_release> pending_releases;
  std::atomic<std::size_t> pending_count{0};  // pending_releases.size(), read without mu
  std::mutex flush_mu;  // one re-sender at a time; taken before mu, never inside it
  std::uint64_t next_id = 1;
  std::map<std::string, std::shared_ptr<name_queue>> queues;
  std::condition_variable watchdog_cv;
  std::thread watchdog;
  bool stopping = false;

  std::mutex watch_mu;  // orders watch()/unwatch(); never held together with mu
  struct watch_state {
    int waiters = 0;
    bool events = false;  // the backend accepted the watch: a release elsewhere will wake us
  };
  std::unordered_map<std::string, watch_state> watches;

  client_state(std::unique_ptr<backend> b, const client_options& o)
      : db(std::move(b)), opts(o), holder_base(o.holder_id.empty() ? default_holder_id() : o.holder_id) {
    db->set_wake_sink(this);
  }

  ~client_state() override {
    flush_pending_releases();  // a last try for releases whose answer was lost
    {
      std::lock_guard lk(mu);
      stopping = true;
    }
    watchdog_cv.notify_all();
    if (watchdog.joinable()) watchdog.join();
    db->set_wake_sink(nullptr);
    db.reset();
  }

  static std::string key(const std::string& name, const std::string& holder) { return name + '\0' + holder; }

  std::string holder() const {
    if (opts.scope == holder_scope::per_client) return holder_base;
    return holder_base + "#" + std::to_string(thread_number());
  }

  void log(log_level level, const std::string& message) { log_message(opts, level, message); }

  void wake(const std::string& name) noexcept override {
    std::lock_guard lk(mu);
    wake_locked(name);
  }

  void wake_locked(const std::string& name) {
    auto it = queues.find(name);
    if (it == queues.end()) return;
    ++it->second->events;
    it->second->cv.notify_all();
  }

  // Returns true when a release of `name` by another client will wake this one (an event), so
  // that polling is only the safety net.
  bool add_watch(const std::string& name) {
    if (!opts.notifications) return false;
    std::lock_guard lk(watch_mu);
    auto& w = watches[name];
    if (w.waiters++ == 0) {
      try {
        db->watch(name);
        w.events = true;
      } catch (const std::exception& e) {
        w.events = false;
        log(log_level::warning, std::string("could not watch lock for wake-ups (polling only): ") + e.what());
      }
    }
    return w.events;
  }

  void remove_watch(const std::string& name) {
    if (!opts.notifications) return;
    std::lock_guard lk(watch_mu);
    auto it = watches.find(name);
    if (it == watches.end() || --it->second.waiters > 0) return;
    watches.erase(it);
    try {
      db->unwatch(name);
    } catch (const std::exception& e) {
      log(log_level::warning, std::string("could not stop watching lock: ") + e.what());
    }
  }

  // Register a new acquisition; called with mu held.
  std::shared_ptr<lease_state> register_lease(std::shared_ptr<client_state> self, const std::string& name,
                                              const std::string& holder, const acquire_outcome& o,
                                              const lease_options& lo, steady::time_point t0) {
    auto s = std::make_shared<lease_state>();
    s->owner = std::move(self);
    s->id = next_id++;
    s->name = name;
    s->holder = holder;
    s->token = o.token;
    s->hold_count = o.hold_count;
    s->ttl = lo.ttl;
    s->auto_renew = lo.auto_renew;
    s->on_lost = lo.on_lost;
    s->expires_estimate = t0 + lo.ttl;
    s->next_renew = t0 + lo.ttl / 3;
    s->registered = true;
    s->counted = true;
    held[s->id] = s;
    ++held_keys[key(name, holder)];
    db_holds[{name, holder, o.token}] = o.hold_count;
    if (s->auto_renew) watchdog_started_locked();
    return s;
  }

  // Start the watchdog thread if needed and have it look at its work again; called with mu held.
  void watchdog_started_locked() {
    if (!watchdog.joinable()) watchdog = std::thread([this] { watchdog_loop(); });
    watchdog_cv.notify_all();
  }

  // Remove from the renewal registry; called with mu held.
  void deregister_locked(lease_state& s) {
    if (!s.registered) return;
    s.registered = false;
    held.erase(s.id);
  }

  // This guard no longer holds the name locally; called with mu held.
  void uncount_locked(lease_state& s) {
    if (!s.counted) return;
    s.counted = false;
    auto it = held_keys.find(key(s.name, s.holder));
    if (it != held_keys.end() && --it->second == 0) held_keys.erase(it);
  }

  // True when the database may count a hold of this holder that no local guard owns any more.
  bool stale_hold_possible(const std::string& name, const std::string& holder) {
    std::lock_guard lk(mu);
    auto k = key(name, holder);
    return held_keys.count(k) == 0 && uncertain_holds.count(k) > 0;
  }

  void settle_hold(const std::string& name, const std::string& holder) {
    std::lock_guard lk(mu);
    uncertain_holds.erase(key(name, holder));
  }

  struct lost_notice {
    std::function<void(const std::string&, std::int64_t)> callback;
    std::string name;
    std::int64_t token;
  };

  // Mark lost; called with mu held. Returns the callback to run after unlocking.
  lost_notice mark_lost_locked(lease_state& s, const std::string& why) {
    deregister_locked(s);
    uncount_locked(s);
    lost_notice n;
    if (!s.lost.exchange(true)) {
      n = {s.on_lost, s.name, s.token};
      log_message(opts, log_level::warning, "lease '" + s.name + "' (token " + std::to_string(s.token) +
                                                ") lost: " + why);
    }
    return n;
  }

  static void run_notices(std::vector<lost_notice>& notices) {
    for (auto& n : notices) {
      if (!n.callback) continue;
      try {
        n.callback(n.name, n.token);
      } catch (...) {
        // An on_lost callback that throws must not kill the watchdog thread.
      }
    }
  }

  // The hold count the database last reported for an acquisition: 0 forgets it.
  void note_holds_locked(const lease_key& k, std::int64_t holds) {
    if (holds > 0) {
      db_holds[k] = holds;
    } else {
      db_holds.erase(k);
    }
  }

  // Send again the releases that failed without an answer. Each applies at most once: only while
  // the row still counts the holds it counted before (a lost release that was applied after all
  // left one fewer). Never throws: still unreachable, they wait for the next call.
  void flush_pending_releases() noexcept {
    if (pending_count.load() == 0) return;
    std::unique_lock fl(flush_mu, std::try_to_lock);
    if (!fl.owns_lock()) return;  // another thread is sending them
    for (;;) {
      pending_release p;
      {
        std::lock_guard lk(mu);
        if (pending_releases.empty()) return;
        p = pending_releases.front();
      }
      const auto& [name, holder, token] = p.key;
      bool drop = true;
      try {
        auto r = db->release(name, holder, token, p.expected_holds);
        std::lock_guard lk(mu);
        if (r.released) {
          log(log_level::info, "lock '" + name + "': a release whose answer was lost was sent again and applied");
          note_holds_locked(p.key, r.remaining_holds);
          if (r.remaining_holds == 0) {
            if (held_keys.count(key(name, holder)) == 0) uncertain_holds.erase(key(name, holder));
            wake_locked(name);
          }
        }
      } catch (const connection_lost&) {
        drop = false;
      } catch (const lock_not_available&) {
        drop = false;
      } catch (const std::exception& e) {
        log(log_level::warning, "lock '" + name + "': dropping a release that could not be sent again: " + e.what());
      }
      if (!drop) return;
      std::lock_guard lk(mu);
      if (!pending_releases.empty()) pending_releases.pop_front();
      pending_count.store(pending_releases.size());
    }
  }

  void watchdog_loop() {
    std::unique_lock lk(mu);
    while (!stopping) {
      if (!pending_releases.empty()) {
        lk.unlock();
        flush_pending_releases();
        lk.lock();
        if (stopping) break;
      }
      auto earliest = steady::time_point::max();
      for (auto& [id, s] : held) {
        if (s->auto_renew) earliest = std::min(earliest, s->next_renew);
      }
      // A release still waiting to be sent again: retry it at the longest poll interval.
      if (!pending_releases.empty()) earliest = std::min(earliest, steady::now() + opts.poll_max);
      if (earliest == steady::time_point::max()) {
        watchdog_cv.wait(lk);
        continue;
      }
      if (steady::now() < earliest) {
        watchdog_cv.wait_until(lk, earliest);
        continue;  // re-evaluate: leases may have come, gone, or be due now
      }
      // Batch every lease due within the next sixth of its TTL into one renewal call.
      const auto t0 = steady::now();
      std::vector<renew_item> items;
      std::vector<std::vector<std::uint64_t>> item_leases;
      std::map<std::tuple<std::string, std::string, std::int64_t>, std::size_t> index;
      for (auto& [id, s] : held) {
        if (!s->auto_renew || s->next_renew > t0 + s->ttl / 6) continue;
        auto k = std::make_tuple(s->name, s->holder, s->token);
        auto [it, fresh] = index.emplace(k, items.size());
        if (fresh) {
          items.push_back({s->name, s->holder, s->token, s->ttl});
          item_leases.emplace_back();
        } else {
          items[it->second].ttl = std::max(items[it->second].ttl, s->ttl);
        }
        item_leases[it->second].push_back(id);
      }
      lk.unlock();
      std::vector<std::size_t> matched;
      std::string failure;
      try {
        matched = db->renew(items);
      } catch (const std::exception& e) {
        failure = e.what();
      }
      lk.lock();
      std::vector<bool> ok(items.size(), false);
      for (auto i : matched) {
        if (i < ok.size()) ok[i] = true;
      }
      std::vector<lost_notice> notices;
      const auto now = steady::now();
      for (std::size_t i = 0; i < items.size(); ++i) {
        for (auto id : item_leases[i]) {
          auto it = held.find(id);
          if (it == held.end()) continue;  // released meanwhile
          auto& s = *it->second;
          if (!failure.empty()) {
            if (now >= s.expires_estimate) {
              uncertain_holds.insert(key(s.name, s.holder));
              notices.push_back(mark_lost_locked(s, "renewal failed until the lease ran out: " + failure));
            } else {
              s.next_renew = now + std::clamp(s.ttl / 10, milliseconds(5), milliseconds(1000));
            }
          } else if (ok[i]) {
            s.expires_estimate = t0 + s.ttl;
            s.next_renew = t0 + s.ttl / 3;
          } else {
            notices.push_back(mark_lost_locked(s, "the owner check failed (expired and taken over, or deleted)"));
          }
        }
      }
      if (!failure.empty()) log(log_level::warning, "lease renewal failed, retrying: " + failure);
      if (!notices.empty()) {
        lk.unlock();
        run_notices(notices);
        lk.lock();
      }
    }
  }

  // Owner-checked release of one guard's acquisition. Throws lease_lost when the check fails.
  void release(lease_state& s) {
    if (s.released.exchange(true)) return;
    bool was_lost;
    {
      std::lock_guard lk(mu);
      deregister_locked(s);
      was_lost = s.lost.load();
    }
    flush_pending_releases();
    const lease_key k{s.name, s.holder, s.token};
    release_outcome r;
    try {
      r = db->release(s.name, s.holder, s.token);
    } catch (const std::exception& e) {
      const bool unanswered = dynamic_cast<const connection_lost*>(&e) || dynamic_cast<const lock_not_available*>(&e);
      std::lock_guard lk(mu);
      uncount_locked(s);
      uncertain_holds.insert(key(s.name, s.holder));
      if (auto it = db_holds.find(k); it != db_holds.end()) {
        if (unanswered) {
          // Queued in order: a later lost release of the same lease expects one hold fewer.
          pending_releases.push_back({k, it->second});
          pending_count.store(pending_releases.size());
          watchdog_started_locked();
          note_holds_locked(k, it->second - 1);
        } else {
          db_holds.erase(it);
        }
      }
      throw;
    }
    {
      std::lock_guard lk(mu);
      uncount_locked(s);
      if (r.released) {
        note_holds_locked(k, r.remaining_holds);
      } else {
        db_holds.erase(k);
      }
      if (r.released && r.remaining_holds == 0) wake_locked(s.name);
    }
    if (!r.released) {
      s.lost = true;
      throw lease_lost(std::string("lease '") + s.name + "' (token " + std::to_string(s.token) + ") was " +
                           (was_lost ? "lost earlier" : "lost") + ": expired and taken over, or force-released",
                       std::string(db->kind()), "", "lease_release");
    }
  }

  void renew(lease_state& s) {
    if (s.released) throw invalid_argument("renew: the lease was already released");
    flush_pending_releases();
    renew_item item{s.name, s.holder, s.token, s.ttl};
    auto t0 = steady::now();
    std::vector<std::size_t> matched;
    try {
      try {
        matched = db->renew(std::span<const renew_item>(&item, 1));
      } catch (const connection_lost&) {
        // Renewal is idempotent (an owner-checked extension), so one more try on the connection
        // the backend re-opens is safe; it answers the owner check if the server is back.
        t0 = steady::now();
        matched = db->renew(std::span<const renew_item>(&item, 1));
      }
    } catch (const std::exception& e) {
      std::vector<lost_notice> notices;
      {
        std::lock_guard lk(mu);
        // Past the conservative local expiry the lease cannot be trusted whatever the database
        // would answer: report it lost, as the watchdog does, instead of a bare connection error.
        if (!s.lost && steady::now() < s.expires_estimate) throw;
        if (!s.lost) {
          uncertain_holds.insert(key(s.name, s.holder));
          notices.push_back(mark_lost_locked(s, std::string("renewal failed after the lease ran out: ") + e.what()));
        }
      }
      run_notices(notices);
      throw lease_lost("lease '" + s.name + "' (token " + std::to_string(s.token) +
                           ") ran out before it could be renewed: " + e.what(),
                       std::string(db->kind()), "", "lease_renew");
    }
    std::vector<lost_notice> notices;
    {
      std::lock_guard lk(mu);
      if (!matched.empty()) {
        s.expires_estimate = t0 + s.ttl;
        s.next_renew = t0 + s.ttl / 3;
        return;
      }
      notices.push_back(mark_lost_locked(s, "the owner check failed on renew"));
    }
    run_notices(notices);
    throw lease_lost("lease '" + s.name + "' (token " + std::to_string(s.token) + ") was lost",
                     std::string(db->kind()), "", "lease_renew");
  }
};

}  // namespace detail

using detail::steady;
using std::chrono::milliseconds;

// ---- lease_guard ----

lease_guard::lease_guard() noexcept = default;
lease_guard::lease_guard(std::shared_ptr<detail::lease_state> s) noexcept : state_(std::move(s)) {}
lease_guard::lease_guard(lease_guard&&) noexcept = default;

lease_guard& lease_guard::operator=(lease_guard&& other) noexcept {
  if (this != &other) {
    lease_guard old(std::move(*this));
    state_ = std::move(other.state_);
  }
  return *this;
}

lease_guard::~lease_guard() {
  if (!state_ || state_->released) return;
  auto& s = *state_;
  try {
    s.owner->release(s);
  } catch (const std::exception& e) {
    s.owner->log(log_level::error, std::string("release in guard destructor failed: ") + e.what());
  } catch (...) {
    s.owner->log(log_level::error, "release in guard destructor failed with an unknown exception");
  }
}

namespace {
const detail::lease_state& checked(const std::shared_ptr<detail::lease_state>& s) {
  if (!s) throw invalid_argument("empty lease_guard");
  return *s;
}
}  // namespace

const std::string& lease_guard::name() const { return checked(state_).name; }
const std::string& lease_guard::holder_id() const { return checked(state_).holder; }
std::int64_t lease_guard::fencing_token() const { return checked(state_).token; }
std::int64_t lease_guard::hold_count() const { return checked(state_).hold_count; }
bool lease_guard::lost() const noexcept { return state_ && state_->lost.load(); }
bool lease_guard::owns() const noexcept { return state_ && !state_->released.load(); }

void lease_guard::renew() {
  checked(state_);
  state_->owner->renew(*state_);
}

void lease_guard::release() {
  checked(state_);
  auto s = std::move(state_);
  s->owner->release(*s);
}

// ---- client ----

client::client(std::unique_ptr<detail::backend> b, const client_options& options)
    : state_(std::make_shared<detail::client_state>(std::move(b), options)) {
  if (options.require_schema) {
    int v = state_->db->schema_version();
    if (v < required_schema_version()) {
      throw schema_missing(v == 0 ? "the lock tables are missing: run `sqllock migrate` first"
                                  : "the lock tables are at schema version " + std::to_string(v) + ", need " +
                                        std::to_string(required_schema_version()) + ": run `sqllock migrate`",
                           std::string(state_->db->kind()), "", "schema_version");
    }
  }
}

client::client(client&&) noexcept = default;
client& client::operator=(client&&) noexcept = default;
client::~client() = default;

int client::required_schema_version() noexcept { return detail::required_schema_version; }

namespace {
detail::client_state& live(const std::shared_ptr<detail::client_state>& s) {
  if (!s) throw invalid_argument("use of a moved-from sqllock::client");
  return *s;
}
}  // namespace

std::string_view client::backend_name() const noexcept { return state_ ? state_->db->kind() : ""; }
std::string client::holder_id() const { return live(state_).holder(); }
std::uint64_t client::statement_count() const noexcept { return state_ ? state_->db->statements() : 0; }

std::optional<lease_guard> client::try_acquire(std::string_view name, const lease_options& options) {
  return acquire_impl(name, options, milliseconds(0), {}, false);
}

std::optional<lease_guard> client::try_acquire_for(std::string_view name, milliseconds timeout,
                                                   const lease_options& options) {
  if (timeout.count() < 0) throw invalid_argument("try_acquire_for: negative timeout");
  return acquire_impl(name, options, timeout, {}, false);
}

lease_guard client::acquire_for(std::string_view name, milliseconds timeout, const lease_options& options,
                                std::stop_token stop) {
  if (timeout.count() < 0) throw invalid_argument("acquire_for: negative timeout");
  return std::move(*acquire_impl(name, options, timeout, std::move(stop), true));
}

lease_guard client::acquire(std::string_view name, const lease_options& options, std::stop_token stop) {
  return std::move(*acquire_impl(name, options, std::nullopt, std::move(stop), true));
}

std::optional<lease_guard> client::acquire_impl(std::string_view name_view, const lease_options& options,
                                                std::optional<milliseconds> timeout, std::stop_token stop,
                                                bool throw_on_timeout) {
  auto& st = live(state_);
  validate_lock_name(name_view);
  validate_ttl(options.ttl);
  const std::string name(name_view);
  const std::string holder = st.holder();
  // "Forever" is ten years, so deadline arithmetic in the condition variables never overflows.
  const auto deadline = steady::now() + (timeout ? *timeout : std::chrono::hours(24 * 3650));
  detail::acquire_outcome last;

  auto attempt = [&]() -> std::optional<lease_guard> {
    st.flush_pending_releases();
    auto t0 = steady::now();
    last = st.db->acquire(name, holder, options.ttl);
    if (last.acquired && last.hold_count > 1 && st.stale_hold_possible(name, holder)) {
      // The database counts holds that no guard of this holder has: releases whose answer was
      // lost with a connection. Free them and acquire afresh, so that this is a new acquisition
      // with a new token, not a re-entry into a hold nobody owns.
      st.log(log_level::info, "lock '" + name + "': freeing " + std::to_string(last.hold_count - 1) +
                                  " stale hold(s) left by a release whose answer was lost");
      for (std::int64_t i = 0; i < last.hold_count; ++i) {
        auto r = st.db->release(name, holder, last.token);
        if (!r.released || r.remaining_holds == 0) break;
      }
      t0 = steady::now();
      last = st.db->acquire(name, holder, options.ttl);
    }
    if (last.acquired) st.settle_hold(name, holder);
    if (!last.acquired) return std::nullopt;
    std::lock_guard lk(st.mu);
    return lease_guard(st.register_lease(state_, name, holder, last, options, t0));
  };
  auto give_up = [&]() -> std::optional<lease_guard> {
    if (!throw_on_timeout) return std::nullopt;
    std::string msg = "lock '" + name + "' not acquired within " + detail::format_ms(*timeout);
    if (!last.holder.empty()) {
      msg += ": held by " + last.holder + ", " + detail::format_ms(last.time_left) + " left on its lease";
    }
    throw acquire_timeout(msg, name, last.holder, last.time_left);
  };

  bool reentrant;
  bool others_waiting;
  {
    std::lock_guard lk(st.mu);
    reentrant = st.held_keys.count(detail::client_state::key(name, holder)) > 0;
    auto q = st.queues.find(name);
    others_waiting = q != st.queues.end() && !q->second->tickets.empty();
  }
  // A reentrant acquire never queues (it would wait for itself); a lone one tries at once;
  // otherwise FIFO: queue behind the local waiters already there.
  if (reentrant || !others_waiting || (timeout && timeout->count() == 0)) {
    if (auto g = attempt()) return g;
    if (reentrant || (timeout && steady::now() >= deadline)) return give_up();
  }

  std::unique_lock lk(st.mu);
  auto& qptr = st.queues[name];
  if (!qptr) qptr = std::make_shared<detail::client_state::name_queue>();
  auto q = qptr;
  const std::uint64_t ticket = st.next_id++;
  q->tickets.push_back(ticket);
  lk.unlock();
  const bool events = st.add_watch(name);
  lk.lock();

  // Leave the queue however we exit; the next waiter becomes head and starts polling.
  struct ticket_guard {
    detail::client_state& st;
    std::shared_ptr<detail::client_state::name_queue> q;
    const std::string& name;
    std::uint64_t ticket;
    std::unique_lock<std::mutex>& lk;
    ~ticket_guard() {
      if (!lk.owns_lock()) lk.lock();
      auto it = std::find(q->tickets.begin(), q->tickets.end(), ticket);
      if (it != q->tickets.end()) q->tickets.erase(it);
      q->cv.notify_all();
      if (q->tickets.empty()) {
        auto qi = st.queues.find(name);
        if (qi != st.queues.end() && qi->second == q) st.queues.erase(qi);
      }
      lk.unlock();
      st.remove_watch(name);
    }
  } leave{st, q, name, ticket, lk};

  thread_local std::minstd_rand rng{std::random_device{}()};
  int polls = 0;
  int unknown = 0;  // consecutive failed tries that named no live holder
  for (;;) {
    // Wait to be the head of the local queue.
    bool head = q->cv.wait_until(lk, stop, deadline, [&] { return q->tickets.front() == ticket; });
    if (stop.stop_requested()) throw cancelled("acquire of lock '" + name + "' cancelled");
    if (!head) return give_up();

    const std::uint64_t events_before = q->events;
    lk.unlock();
    auto g = attempt();
    lk.lock();
    if (g) return g;
    if (steady::now() >= deadline) return give_up();

    // Sleep a jittered back-off, never past the holder's lease end, unless woken by an event.
    // Where the database wakes waiters, polling is only the safety net: no ramp from poll_min.
    // A failed try that names no live holder saw a free or expired name (freed between the
    // statements, or the database too busy to take it: SQLite's single write lock, after the
    // backend's own short busy wait). No release event will follow: retry after poll_min,
    // doubling at most twice while it lasts.
    const bool holder_known = !last.holder.empty() && last.time_left.count() > 0;
    unknown = holder_known ? 0 : unknown + 1;
    const int doublings = holder_known ? std::min(polls, 20) : std::min(unknown - 1, 2);
    auto base = holder_known && events ? st.opts.poll_max
                                       : std::min(st.opts.poll_max, milliseconds(st.opts.poll_min.count() << doublings));
    std::uniform_int_distribution<std::int64_t> dist(base.count() / 2, base.count());
    auto pause = milliseconds(dist(rng));
    if (holder_known) {
      pause = std::min(pause, last.time_left + milliseconds(1));
      ++polls;
    }
    auto wake_at = std::min(deadline, steady::now() + pause);
    q->cv.wait_until(lk, stop, wake_at, [&] { return q->events != events_before; });
    if (stop.stop_requested()) throw cancelled("acquire of lock '" + name + "' cancelled");
    if (q->events != events_before) polls = 0;  // something was released: start the back-off over
  }
}

std::optional<lock_info> client::inspect(std::string_view name) {
  validate_lock_name(name);
  auto& st = live(state_);
  st.flush_pending_releases();
  return st.db->inspect(std::string(name));
}

std::vector<lock_info> client::list_locks() {
  auto& st = live(state_);
  st.flush_pending_releases();
  return st.db->list_locks();
}

bool client::force_release(std::string_view name) {
  validate_lock_name(name);
  auto& st = live(state_);
  st.flush_pending_releases();
  bool released = st.db->force_release(std::string(name));
  st.wake(std::string(name));
  return released;
}

transaction client::begin(const transaction_options& options) {
  if (options.lock_timeout && options.lock_timeout->count() < 0) {
    throw invalid_argument("transaction_options: negative lock_timeout");
  }
  return transaction(live(state_).db->begin(options));
}

int client::migrate() { return live(state_).db->migrate(); }
int client::schema_version() { return live(state_).db->schema_version(); }

}  // namespace sqllock
