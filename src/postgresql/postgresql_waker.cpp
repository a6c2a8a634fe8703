// The PostgreSQL waker: LISTEN on one connection, a thread poll()s it and a wake pipe; reconnect and re-LISTEN.
#include "postgresql/postgresql_waker.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <set>
#include <thread>

namespace sqllock::detail::pg {

namespace {

std::string listen_sql(const char* verb, const std::string& channel) {
  // Channels are "sqllock_" + hex digits; quoted anyway.
  return std::string(verb) + " \"" + channel + "\"";
}

// LISTEN answers at once unless the server is unreachable: bounded, so that a waiter about to
// wait (or the thread) is never stuck in a partition; polling covers the gap. `unlisten`: channels
// nobody watches any more, dropped in the same round trip. `until`: a waiter's own deadline.
void listen_until(PGconn* c, const std::set<std::string>& listen, const std::set<std::string>& unlisten = {},
                  std::chrono::steady_clock::time_point until = std::chrono::steady_clock::time_point::max()) {
  std::string sql;
  for (const auto& ch : unlisten) sql += listen_sql("UNLISTEN", ch) + "; ";
  for (const auto& ch : listen) sql += listen_sql("LISTEN", ch) + "; ";
  if (sql.empty()) return;
  exec_simple_until(c, sql, "listen", std::min(until, std::chrono::steady_clock::now() + std::chrono::seconds(2)));
}

// Takes `lock` by `by`. Tries again every millisecond or so, not with a timed lock: the lock is
// held for long only across a LISTEN into a slow network, and ThreadSanitizer does not follow
// pthread_mutex_clocklock (std::timed_mutex's steady-clock wait), which would fail its runs.
bool lock_by(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point by) {
  while (!lock.try_lock()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= by) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(by - now, std::chrono::milliseconds(1)));
  }
  return true;
}

}  // namespace

waker::waker(conn_target target, client_options options) : target_(std::move(target)), options_(std::move(options)) {
  if (::pipe2(pipe_, O_NONBLOCK | O_CLOEXEC) != 0) {
    pipe_[0] = pipe_[1] = -1;
    log_message(options_, log_level::warning,
                "postgresql: cannot create the notification wake pipe; waiting falls back to polling");
  }
}

waker::~waker() {
  stop_.store(true);
  poke();
  if (thread_.joinable()) thread_.join();
  if (pipe_[0] >= 0) ::close(pipe_[0]);
  if (pipe_[1] >= 0) ::close(pipe_[1]);
}

void waker::set_sink(wake_sink* sink) {
  std::lock_guard lock(sink_mutex_);
  sink_ = sink;
}

void waker::poke() noexcept {
  if (pipe_[1] < 0) return;
  const char c = 1;
  [[maybe_unused]] auto n = ::write(pipe_[1], &c, 1);
}

void waker::deliver(const std::vector<std::string>& names) noexcept {
  if (names.empty()) return;
  std::lock_guard lock(sink_mutex_);
  if (!sink_) return;
  for (const auto& n : names) sink_->wake(n);
}

void waker::drain_notifies_locked(std::vector<std::string>& out) {
  if (!conn_) return;
  while (PGnotify* n = PQnotifies(conn_.get())) {
    if (n->extra) out.emplace_back(n->extra);
    PQfreemem(n);
  }
}

void waker::apply_changes_locked() {
  std::vector<change> todo;
  {
    std::lock_guard lock(changes_mutex_);
    todo.swap(changes_);
  }
  const bool connected = conn_ && PQstatus(conn_.get()) == CONNECTION_OK;
  for (const auto& c : todo) {
    if (c.delta > 0) {
      ++names_[c.name];
      // A channel still listened to since its last watcher left needs nothing sent. Without a
      // connection, the next one listens on every watched channel.
      if (channels_[c.channel]++ == 0 && !(connected && stale_.erase(c.channel) > 0)) to_listen_.insert(c.channel);
      continue;
    }
    if (auto it = names_.find(c.name); it != names_.end() && --it->second <= 0) names_.erase(it);
    auto it = channels_.find(c.channel);
    if (it == channels_.end() || --it->second > 0) continue;
    channels_.erase(it);
    // Never listened to: nothing to drop.
    if (to_listen_.erase(c.channel) > 0) continue;
    // No statement here: unwatch() runs when a wait ends, often at its deadline, and an UNLISTEN
    // into a partition would hold the caller up to 2 s past it (a 3 s wait returned after 5.25 s).
    // The channel stays listened to until the next LISTEN drops it in the same round trip (or the
    // connection is replaced); its notifications meanwhile wake no one, as nobody waits on it.
    if (connected) stale_.insert(c.channel);
  }
}

void waker::drop_connection_locked() {
  conn_.reset();
  stale_.clear();
  to_listen_.clear();  // a fresh connection listens on every watched channel
}

void waker::listen_pending_locked(std::chrono::steady_clock::time_point until) {
  if (to_listen_.empty() || !conn_ || PQstatus(conn_.get()) != CONNECTION_OK) return;
  try {
    listen_until(conn_.get(), to_listen_, stale_, until);
    to_listen_.clear();
    stale_.clear();
  } catch (const std::exception& e) {
    log_message(options_, log_level::warning, e.what());
    drop_connection_locked();  // its protocol state is unknown; the thread reconnects and listens again
  }
}

void waker::start_thread_locked() {
  if (thread_.joinable() || pipe_[0] < 0) return;
  thread_ = std::thread([this] { run(); });
}

bool waker::watch(const std::string& name, const std::string& channel,
                  std::chrono::steady_clock::time_point until) noexcept {
  bool listening = false;
  try {
    {
      std::lock_guard lock(changes_mutex_);
      changes_.push_back({name, channel, +1});
    }
    // Bounded by the waiter's own deadline too (at most 2 s): a bounded wait keeps its bound in a
    // partition, also while another watch() holds the lock across its LISTEN into it. Not taken in
    // time, this watch is applied (and listened to) by the next holder: a watch(), or the thread,
    // poked below. The waiter polls meanwhile.
    const auto left = std::min(std::chrono::milliseconds(2000), time_until(until));
    std::unique_lock lock(mutex_, std::defer_lock);
    if (!lock_by(lock, std::chrono::steady_clock::now() + left)) {
      poke();
      return false;
    }
    apply_changes_locked();  // this watch, and every wait that has ended before it
    if (to_listen_.count(channel) > 0) {
      if (conn_ && !idle_connection_alive(conn_.get())) drain_notifies_locked(pending_);
      const auto now_left = std::min(std::chrono::milliseconds(2000), time_until(until));
      if (now_left.count() <= 0) {
        // No time for I/O: the channel stays queued for the thread (poked below), which listens on
        // it, or for a fresh connection, which listens on every channel. The connection is kept:
        // dropping it cost a server connection per short wait, and the client's other waiters went
        // unheard until the thread had connected again.
      } else if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK) {
        drop_connection_locked();
        try {
          // Bounded: the caller is a waiter about to wait; polling covers a slow server.
          conn_ = connect(target_, &options_, now_left);
          // A fresh connection listens on every watched channel, this one included.
          std::set<std::string> all;
          for (const auto& [ch, count] : channels_) all.insert(ch);
          listen_until(conn_.get(), all, {}, until);
          // Releases of the other watched names may have gone unheard meanwhile.
          for (const auto& [n, count] : names_) pending_.push_back(n);
        } catch (const std::exception& e) {
          drop_connection_locked();
          log_message(options_, log_level::warning, e.what());
        }
      } else {
        listen_pending_locked(until);  // this channel, and any queued by a watch that gave up the lock
      }
      drain_notifies_locked(pending_);
    }
    // Listening: not while this channel is still queued (the waiter polls until its next watch).
    listening = conn_ && PQstatus(conn_.get()) == CONNECTION_OK && to_listen_.count(channel) == 0;
    start_thread_locked();
  } catch (...) {
    // Out of memory or thread creation failure: waiting still polls.
  }
  poke();
  return listening;
}

void waker::unwatch(const std::string& name, const std::string& channel) noexcept {
  try {
    {
      std::lock_guard lock(changes_mutex_);
      changes_.push_back({name, channel, -1});
    }
    // Applied now, unless another waiter's watch() holds the lock across its LISTEN (up to its own
    // deadline or 2 s): a wait that ended must not wait for that (the fault soak saw two 3 s waits
    // of one process return after 5.3 and 5.9 s). Its holder or the thread (poked) applies it then.
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (lock.owns_lock()) apply_changes_locked();
  } catch (...) {
  }
  poke();
}

void waker::run() {
  using namespace std::chrono_literals;
  auto backoff = 100ms;
  while (!stop_.load()) {
    std::vector<std::string> wakes;
    int fd = -1;
    bool need_connect = false;
    {
      std::lock_guard lock(mutex_);
      apply_changes_locked();
      // Watches queued by waiters that could not take the lock in time: listened to here (bounded).
      listen_pending_locked(std::chrono::steady_clock::time_point::max());
      drain_notifies_locked(pending_);
      wakes.swap(pending_);
      if (conn_ && PQstatus(conn_.get()) == CONNECTION_OK)
        fd = PQsocket(conn_.get());
      else
        need_connect = !channels_.empty();
    }
    deliver(wakes);
    wakes.clear();

    if (need_connect) {
      conn_ptr fresh;
      try {
        fresh = connect(target_, &options_);
        // The LISTENs go out without the lock (the fresh connection is this thread's alone until it
        // is installed): a waiter's watch() or unwatch() must not wait for these round trips, up to
        // 2 s each into a partition. Channels watched meanwhile are listened to in the next round.
        std::set<std::string> listened;
        for (;;) {
          std::vector<std::string> todo;
          {
            std::lock_guard lock(mutex_);
            apply_changes_locked();
            if (conn_ && PQstatus(conn_.get()) == CONNECTION_OK) break;  // a watch() connected meanwhile
            for (const auto& [ch, count] : channels_) {
              if (listened.count(ch) == 0) todo.push_back(ch);
            }
            if (todo.empty()) {
              conn_ = std::move(fresh);
              // Listened to here but no longer watched: dropped with the next LISTEN.
              stale_.clear();
              to_listen_.clear();  // every watched channel is
              for (const auto& ch : listened) {
                if (channels_.count(ch) == 0) stale_.insert(ch);
              }
              // Releases may have happened while we were not listening: let every waiter look again.
              for (const auto& [n, count] : names_) wakes.push_back(n);
              break;
            }
          }
          listen_until(fresh.get(), std::set<std::string>(todo.begin(), todo.end()));
          listened.insert(todo.begin(), todo.end());
        }
        backoff = 100ms;
      } catch (const std::exception& e) {
        log_message(options_, log_level::debug, e.what());
        pollfd p{pipe_[0], POLLIN, 0};
        ::poll(&p, 1, static_cast<int>(backoff.count()));
        backoff = std::min<std::chrono::milliseconds>(backoff * 2, 2000ms);
        if (p.revents & POLLIN) {
          char buf[64];
          while (::read(pipe_[0], buf, sizeof buf) > 0) {
          }
        }
        continue;
      }
      deliver(wakes);
      continue;
    }

    pollfd fds[2] = {{pipe_[0], POLLIN, 0}, {fd, POLLIN, 0}};
    const nfds_t count = fd >= 0 ? 2 : 1;
    const int rc = ::poll(fds, count, fd >= 0 ? -1 : 1000);
    if (rc < 0 && errno != EINTR) {
      log_message(options_, log_level::warning, "postgresql: poll() on the notification socket failed");
      std::this_thread::sleep_for(100ms);
      continue;
    }
    if (fds[0].revents & POLLIN) {
      char buf[64];
      while (::read(pipe_[0], buf, sizeof buf) > 0) {
      }
    }
    if (count == 2 && fds[1].revents != 0) {
      std::lock_guard lock(mutex_);
      if (conn_ && PQsocket(conn_.get()) == fd) {
        if (!PQconsumeInput(conn_.get()) || PQstatus(conn_.get()) != CONNECTION_OK) {
          log_message(options_, log_level::info, "postgresql: the notification connection was lost; reconnecting");
          drain_notifies_locked(wakes);
          drop_connection_locked();
        } else {
          drain_notifies_locked(wakes);
        }
      }
    }
    deliver(wakes);
  }
}

}  // namespace sqllock::detail::pg
