// The MySQL waker: one connection that blocks on holders' GET_LOCK keys and wakes local waiters.
#include "mysql/mysql_waker.hpp"

#include <cppconn/connection.h>

#include <algorithm>
#include <optional>
#include <vector>

namespace sqllock::detail::mysql {

waker::waker(connect_params params, client_options options, std::string scope, std::string table)
    : params_(std::move(params)),
      options_(std::move(options)),
      scope_(std::move(scope)),
      wait_sql_(statement_text("wake_wait", table)),
      release_sql_(statement_text("wake_lock_release", table)),
      row_free_sql_(statement_text("wake_row_free", table)),
      row_state_sql_(statement_text("wake_row_state", table)),
      mark_sql_(statement_text("wake_waker_mark", table)) {}

waker::~waker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void waker::set_sink(wake_sink* sink) {
  // Waits for a wake() in progress: after set_sink(nullptr) the old sink is never called.
  std::lock_guard lock(sink_mutex_);
  sink_ = sink;
}

bool waker::watch(const std::string& name) {
  {
    std::lock_guard lock(mutex_);
    if (watched_[name]++ == 0) {
      newly_watched_.insert(name);
      counts_.erase(name);
    }
    if (!thread_.joinable() && !stopping_) thread_ = std::thread([this] { loop(); });
  }
  cv_.notify_all();
  return true;
}

void waker::unwatch(const std::string& name) {
  std::lock_guard lock(mutex_);
  auto it = watched_.find(name);
  if (it != watched_.end() && --it->second <= 0) {
    watched_.erase(it);
    counts_.erase(name);
  }
}

namespace {
/// A row state of wake_row_state.sql ("<token> held" / "<token> free"; "none": no row).
struct row_state {
  long long token = 0;
  bool held = false;
  bool ok = false;
};
row_state parse_state(const std::string& s) {
  row_state r;
  // No row yet: the name was never acquired, so it counts as free with token 0 (the first
  // acquisition inserts token 1). Releases from there are counted like any others: a waiter that
  // first looked before the row existed and next after several hand-overs is woken once for each.
  if (s == "none") {
    r.ok = true;
    return r;
  }
  const auto sp = s.find(' ');
  if (sp == std::string::npos) return r;
  try {
    r.token = std::stoll(s.substr(0, sp));
  } catch (...) {
    return r;
  }
  r.held = s.compare(sp + 1, std::string::npos, "held") == 0;
  r.ok = true;
  return r;
}

/// The releases from row state `from` to row state `to`: every acquisition (a fair hand-over too)
/// raises the token by one, so they are the acquisitions in between, plus the holder seen in
/// `from`, minus the one seen in `to` (negative: `to` is the older). Nothing when either cannot be
/// read or the token went down.
std::optional<long long> releases_between(const std::string& from, const std::string& to) {
  const row_state was = parse_state(from), now = parse_state(to);
  if (from.empty() || to.empty() || !was.ok || !now.ok || now.token < was.token) return std::nullopt;
  return now.token - was.token + (was.held ? 1 : 0) - (now.held ? 1 : 0);
}
}  // namespace

void waker::note_state(const std::string& name, const std::string& state) {
  long long missed = 0;
  {
    std::lock_guard lock(mutex_);
    if (!watched_.count(name)) return;
    auto [it, fresh] = counts_.try_emplace(name);
    release_count& c = it->second;
    if (fresh) {  // not looked at yet: count from the poll
      c.woken_at = state;
      c.noted = true;
      return;
    }
    if (c.noted) return;  // a later poll of the same wait: the count goes on
    c.noted = true;
    // The loop looked first (its answer came before the poll's): it woke c.woken times since the
    // watch, the waiter counts from its poll. Releases between the poll's state and the one the
    // loop woke through that it did not wake for are woken now; a look older than the poll counts
    // from the poll.
    const auto since = releases_between(state, c.woken_at);
    if (!since) return;
    if (*since < 0) {
      c.woken_at = state;
    } else {
      missed = std::min<long long>(64, *since - c.woken);
    }
  }
  for (long long i = 0; i < missed; ++i) wake_name(name);
}

void waker::wake_name(const std::string& name) {
  {
    std::lock_guard lock(mutex_);
    if (!watched_.count(name)) return;
  }
  std::lock_guard lock(sink_mutex_);
  if (sink_) sink_->wake(name);
}

void waker::wake_all_watched() {
  std::vector<std::string> names;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [n, count] : watched_) names.push_back(n);
  }
  for (const auto& n : names) wake_name(n);
}

/// The waiter connection's loop: one GET_LOCK wait at a time, round-robin over watched names.
/// A name whose key was seen held (or is newly watched, so presumed held) and is later found
/// free (released between two slices, or while another name was waited on) is woken too: every
/// held -> free transition wakes.
void waker::wake_free_rows(connection& conn) {
  std::vector<std::string> names;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [n, count] : watched_) names.push_back(n);
    newly_watched_.clear();
  }
  for (const auto& n : names) {
    if (!conn.query(row_free_sql_, {n}, "wake_row_free", true).empty()) wake_name(n);
  }
}

void waker::release_and_wake_if_changed(connection& conn, const std::string& name, const std::string& key) {
  std::string state;  // empty: unreadable (wake)
  try {
    result_rows s = conn.query(row_state_sql_, {name, key}, "wake_row_state", true);
    state = (!s.empty() && s[0][0]) ? *s[0][0] : std::string("none");
  } catch (const std::exception&) {
    if (conn.broken()) throw;
    // The key may still be held here: let it go on its own (a failure goes to the loop's handler).
    conn.query(release_sql_, {key}, "wake_lock_release");
  }
  wake_if_state_changed(name, state);
}

void waker::wake_if_state_changed(const std::string& name, const std::string& state) {
  long long releases = 1;
  {
    std::lock_guard lock(mutex_);
    if (!watched_.count(name)) return;  // a look sent while it was watched: nobody to wake
    auto [it, fresh] = counts_.try_emplace(name);
    release_count& c = it->second;
    if (!fresh && !state.empty() && c.woken_at == state) return;
    // One wake-up per release since the state the last ones account for: a fair waiter counts
    // them to know when it is next. A look older than that state with the same token (sent
    // before a new wait's poll) changes nothing; a row that cannot be compared (unreadable, or a
    // lower token: an older look, or a row reset) wakes once and is counted from.
    if (!fresh) {
      if (const auto since = releases_between(c.woken_at, state)) {
        if (*since < 0) return;
        releases = std::min<long long>(64, *since);
      }
    }
    c.woken_at = state;
    if (!c.noted) c.woken += releases;
  }
  for (long long i = 0; i < releases; ++i) wake_name(name);
}

void waker::start_count(const std::string& name, const std::string& state) {
  {
    std::lock_guard lock(mutex_);
    if (!watched_.count(name)) return;
    if (counts_.find(name) == counts_.end()) {
      counts_[name].woken_at = state;
      return;
    }
  }
  wake_if_state_changed(name, state);
}

void waker::loop() noexcept {
  std::unique_ptr<connection> conn;
  bool had_connection = false;
  std::map<std::string, std::chrono::steady_clock::time_point> quiet_until;
  std::set<std::string> unlooked;            // watched names not looked at since watched
  // Looks in a row that found the same holder (the row's state) without its key.
  std::map<std::string, std::pair<int, std::string>> unkeyed_looks;
  std::size_t turn = 0;
  for (;;) {
    std::string name;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !watched_.empty(); });
      if (stopping_) break;
      const auto now = std::chrono::steady_clock::now();
      for (auto it = quiet_until.begin(); it != quiet_until.end();) {
        it = (it->second <= now || !watched_.count(it->first)) ? quiet_until.erase(it) : std::next(it);
      }
      // A name newly watched has no state yet, unless a fair waiter's poll gave one (note_state):
      // its first look wakes (a release may have come between the acquire that found it held and
      // that look), and comes before any other name's, so that the state later wake-ups are
      // counted from is close to the acquire's.
      for (const auto& n : newly_watched_) {
        unlooked.insert(n);
        quiet_until.erase(n);
        unkeyed_looks.erase(n);
      }
      newly_watched_.clear();
      for (auto it = unlooked.begin(); it != unlooked.end();) {
        it = watched_.count(*it) ? std::next(it) : unlooked.erase(it);
      }
      for (auto it = unkeyed_looks.begin(); it != unkeyed_looks.end();) {
        it = watched_.count(it->first) ? std::next(it) : unkeyed_looks.erase(it);
      }
      std::vector<std::string> ready;
      std::vector<std::string> first;  // never looked at since watched
      for (const auto& [n, count] : watched_) {
        if (unlooked.count(n) && !quiet_until.count(n)) first.push_back(n);
      }
      auto earliest = now + std::chrono::milliseconds(50);
      for (const auto& [n, count] : watched_) {
        auto q = quiet_until.find(n);
        if (q == quiet_until.end()) {
          ready.push_back(n);
        } else if (q->second < earliest) {
          earliest = q->second;
        }
      }
      if (ready.empty()) {
        cv_.wait_until(lock, earliest);
        continue;
      }
      name = first.empty() ? ready[turn++ % ready.size()] : first.front();
    }
    if (!conn) {
      try {
        auto raw = open_connection(params_, false, 0);
        conn = std::make_unique<connection>(std::move(raw));
        // Galera takes no GET_LOCK at all (node-local); elsewhere a failed mark only means that
        // other waiter connections may queue behind this one (-2 is not seen).
        if (!conn->traits().wsrep_on) {
          try {
            conn->query(mark_sql_, {}, "wake_waker_mark");
          } catch (const std::exception& e) {
            if (conn->broken()) throw;
            log_message(options_, log_level::info, std::string("mysql: waiter connection not marked: ") + e.what());
          }
        }
      } catch (const std::exception& e) {
        conn.reset();
        log_message(options_, log_level::warning,
                    std::string("mysql: waiter connection failed (polling continues): ") + e.what());
        std::unique_lock lock(mutex_);
        cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_; });
        continue;
      }
      if (had_connection) {
        // Releases while the connection was down went unseen: let every waiter look now.
        {
          std::lock_guard lock(mutex_);
          counts_.clear();
        }
        wake_all_watched();
      }
      had_connection = true;
    }
    try {
      if (conn->traits().wsrep_on) {
        wake_free_rows(*conn);
        std::unique_lock lock(mutex_);
        cv_.wait_for(lock, galera_poll, [&] { return stopping_; });
        continue;
      }
      const std::string k = key(scope_, name);
      const value slice = conn->traits().mariadb ? value(0.25) : value(std::int64_t{1});
      result_rows r = conn->query(wait_sql_, {k, name, k, k, slice, name}, "wake_wait");
      const std::string got = (!r.empty() && r[0][0]) ? *r[0][0] : std::string("NULL");
      const std::string state = (!r.empty() && r[0].size() > 1 && r[0][1]) ? *r[0][1] : std::string("none");
      const auto now = std::chrono::steady_clock::now();
      unlooked.erase(name);
      if (got != "-3") unkeyed_looks.erase(name);
      if (got == "1") {
        // The key was let go: by its holder (a release, or its connection died), or by another
        // client's waiter connection passing the release on. Let it go again at once, in the
        // statement that reads the row; wake when the row changed since the last wake-up here (one
        // release, one wake-up).
        release_and_wake_if_changed(*conn, name, k);
      } else if (got == "0") {
        // Held all along. A first look counts releases from here; a later one wakes for releases
        // since the last wake-up (the key went from holder to holder, never to this connection).
        start_count(name, state);
      } else if (got == "-2" || got == "-3") {
        // A release being passed on by waiter connections, or a holder that has no key yet (right
        // after a fair hand-over): wake if the row changed, look again soon; a holder that never
        // takes its key is looked at less and less often (2, 4, 8 ... 50 ms). A new holder (the row
        // changed since the last look) starts again at 2 ms: a fair hand-over's new holder takes its
        // key when its client is woken, often by this look, and a wait that kept the back-off
        // of an earlier holder saw neither that key nor its release (the next hand-over was then
        // found up to 50 ms late, on every hand-over once the loop fell into it).
        wake_if_state_changed(name, state);
        auto& [n, seen] = unkeyed_looks[name];
        if (got == "-3" && seen != state) {
          n = 0;
          seen = state;
        }
        const auto quiet = got == "-2" ? std::chrono::milliseconds(2)
                                       : std::min(std::chrono::milliseconds(50), std::chrono::milliseconds(2 << std::min(n, 5)));
        if (got == "-3") ++n;
        quiet_until[name] = now + quiet;
      } else if (got == "-1") {
        // Nothing holds the name: wake if it changed (a release since the last look); nothing to
        // block on, look again later (the client polls meanwhile).
        wake_if_state_changed(name, state);
        quiet_until[name] = now + std::chrono::milliseconds(50);
      }
    } catch (const std::exception& e) {
      if (conn->broken()) {
        conn.reset();
        log_message(options_, log_level::info, "mysql: waiter connection lost; reconnecting");
      } else {
        log_message(options_, log_level::warning, std::string("mysql: wake_wait failed: ") + e.what());
      }
      quiet_until[name] = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    }
  }
}

}  // namespace sqllock::detail::mysql
