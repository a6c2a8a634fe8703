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
      row_free_sql_(statement_text("wake_row_free", table)) {}

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
  if (it != watched_.end() && --it->second <= 0) watched_.erase(it);
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

void waker::loop() noexcept {
  std::unique_ptr<connection> conn;
  bool had_connection = false;
  std::map<std::string, std::chrono::steady_clock::time_point> quiet_until;
  std::set<std::string> seen_held;
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
      // A name is watched because an acquire found it held: presume it held until seen free,
      // so a release before the first look (the loop may be busy with other names) still wakes.
      seen_held.insert(newly_watched_.begin(), newly_watched_.end());
      newly_watched_.clear();
      for (auto it = seen_held.begin(); it != seen_held.end();) {
        it = watched_.count(*it) ? std::next(it) : seen_held.erase(it);
      }
      std::vector<std::string> ready;
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
      name = ready[turn++ % ready.size()];
    }
    if (!conn) {
      try {
        auto raw = open_connection(params_, false, 0);
        conn = std::make_unique<connection>(std::move(raw));
      } catch (const std::exception& e) {
        log_message(options_, log_level::warning,
                    std::string("mysql: waiter connection failed (polling continues): ") + e.what());
        std::unique_lock lock(mutex_);
        cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_; });
        continue;
      }
      if (had_connection) {
        // Releases while the connection was down went unseen: let every waiter look now.
        seen_held.clear();
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
      result_rows r = conn->query(wait_sql_, {k, k, slice}, "wake_wait");
      const std::string got = (!r.empty() && r[0][0]) ? *r[0][0] : std::string("NULL");
      if (got == "1") {
        // The holder released it (or its connection died): let it go again at once and wake.
        conn->query(release_sql_, {k}, "wake_lock_release");
        seen_held.erase(name);
        wake_name(name);
      } else if (got == "0") {
        seen_held.insert(name);  // still held at the end of the slice
      } else if (got == "-1") {
        // Nobody holds it. If it was held when last seen, it was released since: wake. Either
        // way there is nothing to block on; look again shortly (the client polls meanwhile).
        if (seen_held.erase(name)) wake_name(name);
        quiet_until[name] = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
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
