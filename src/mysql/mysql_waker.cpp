// The MySQL waker: one connection that blocks on holders' GET_LOCK keys and wakes local waiters.
#include "mysql/mysql_waker.hpp"

#include <cppconn/connection.h>

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
    if (watched_[name]++ == 0) newly_watched_.insert(name);
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
    noted_.erase(name);
  }
}

void waker::note_state(const std::string& name, std::string state) {
  std::lock_guard lock(mutex_);
  if (watched_.count(name)) noted_[name] = std::move(state);
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

void waker::wake_if_changed(connection& conn, const std::string& name,
                            std::map<std::string, std::string>& woken_at) {
  std::string state;  // empty: unreadable (wake)
  try {
    result_rows s = conn.query(row_state_sql_, {name}, "wake_row_state", true);
    state = (!s.empty() && s[0][0]) ? *s[0][0] : std::string("none");
  } catch (const std::exception&) {
    if (conn.broken()) throw;
  }
  wake_if_state_changed(name, state, woken_at);
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
}  // namespace

void waker::wake_if_state_changed(const std::string& name, const std::string& state,
                                  std::map<std::string, std::string>& woken_at) {
  auto [it, fresh] = woken_at.try_emplace(name);
  if (!fresh && !state.empty() && it->second == state) return;
  // One wake-up per release since the last look: a fair waiter counts them to know when it is
  // next. Every acquisition (a fair hand-over too) raises the token by one, so the releases in
  // between are the acquisitions plus the holder seen before minus the one seen now; a row that
  // cannot be compared wakes once.
  int releases = 1;
  const row_state was = parse_state(it->second), now = parse_state(state);
  if (!fresh && was.ok && now.ok && now.token >= was.token) {
    releases = static_cast<int>(std::min<long long>(64, now.token - was.token + (was.held ? 1 : 0) - (now.held ? 1 : 0)));
  }
  it->second = state;
  for (int i = 0; i < releases; ++i) wake_name(name);
}

void waker::loop() noexcept {
  std::unique_ptr<connection> conn;
  bool had_connection = false;
  std::map<std::string, std::chrono::steady_clock::time_point> quiet_until;
  std::map<std::string, std::string> woken_at;  // the row's state at the name's last wake-up here
  std::map<std::string, int> unkeyed_looks;     // looks in a row that found a holder without its key
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
      // A name newly watched has no state here yet: its first look wakes (a release may have come
      // between the acquire that found it held and that look), and comes before any other name's,
      // so that the state later wake-ups are counted from is close to the acquire's (a fair
      // waiter counts releases from its poll).
      for (const auto& n : newly_watched_) {
        woken_at.erase(n);
        quiet_until.erase(n);
        unkeyed_looks.erase(n);
      }
      newly_watched_.clear();
      for (auto it = woken_at.begin(); it != woken_at.end();) {
        it = watched_.count(it->first) ? std::next(it) : woken_at.erase(it);
      }
      for (auto it = unkeyed_looks.begin(); it != unkeyed_looks.end();) {
        it = watched_.count(it->first) ? std::next(it) : unkeyed_looks.erase(it);
      }
      std::vector<std::string> ready;
      std::vector<std::string> first;  // never looked at since watched
      for (const auto& [n, count] : watched_) {
        if (!woken_at.count(n) && !quiet_until.count(n)) first.push_back(n);
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
        woken_at.clear();
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
      {
        // A poll's state for a name not looked at yet is where its releases are counted from.
        std::lock_guard lock(mutex_);
        auto n = noted_.find(name);
        if (n != noted_.end()) {
          woken_at.try_emplace(name, n->second);
          noted_.erase(n);
        }
      }
      if (got != "-3") unkeyed_looks.erase(name);
      if (got == "1") {
        // The key was let go: by its holder (a release, or its connection died), or by another
        // client's waiter connection passing the release on. Let it go again at once; wake when
        // the row changed since the last wake-up here (one release, one wake-up).
        conn->query(release_sql_, {k}, "wake_lock_release");
        wake_if_changed(*conn, name, woken_at);
      } else if (got == "0") {
        woken_at.try_emplace(name, state);  // held all along: count releases from here
      } else if (got == "-2" || got == "-3") {
        // A release being passed on by waiter connections, or a holder that has no key yet (right
        // after a fair hand-over): wake if the row changed, look again soon; a holder that never
        // takes its key is looked at less and less often (2, 4, 8 ... 50 ms).
        wake_if_state_changed(name, state, woken_at);
        int& n = unkeyed_looks[name];
        const auto quiet = got == "-2" ? std::chrono::milliseconds(2)
                                       : std::min(std::chrono::milliseconds(50), std::chrono::milliseconds(2 << std::min(n, 5)));
        if (got == "-3") ++n;
        quiet_until[name] = now + quiet;
      } else if (got == "-1") {
        // Nothing holds the name: wake if it changed (a release since the last look); nothing to
        // block on, look again later (the client polls meanwhile).
        wake_if_state_changed(name, state, woken_at);
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
