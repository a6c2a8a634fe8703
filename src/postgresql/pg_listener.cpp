// The notification thread: poll() on the LISTEN socket and a wake pipe, reconnect and re-LISTEN.
#include "postgresql/pg_listener.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

namespace sqllock::detail::pg {

namespace {

std::string listen_sql(const char* verb, const std::string& channel) {
  // Channels are "sqllock_" + hex digits; quoted anyway.
  return std::string(verb) + " \"" + channel + "\"";
}

}  // namespace

listener::listener(conn_target target, client_options options)
    : target_(std::move(target)), options_(std::move(options)) {
  if (::pipe2(pipe_, O_NONBLOCK | O_CLOEXEC) != 0) {
    pipe_[0] = pipe_[1] = -1;
    log_message(options_, log_level::warning,
                "postgresql: cannot create the notification wake pipe; waiting falls back to polling");
  }
}

listener::~listener() {
  stop_.store(true);
  poke();
  if (thread_.joinable()) thread_.join();
  if (pipe_[0] >= 0) ::close(pipe_[0]);
  if (pipe_[1] >= 0) ::close(pipe_[1]);
}

void listener::set_sink(wake_sink* sink) {
  std::lock_guard lock(sink_mutex_);
  sink_ = sink;
}

void listener::poke() noexcept {
  if (pipe_[1] < 0) return;
  const char c = 1;
  [[maybe_unused]] auto n = ::write(pipe_[1], &c, 1);
}

void listener::deliver(const std::vector<std::string>& names) noexcept {
  if (names.empty()) return;
  std::lock_guard lock(sink_mutex_);
  if (!sink_) return;
  for (const auto& n : names) sink_->wake(n);
}

void listener::drain_notifies_locked(std::vector<std::string>& out) {
  if (!conn_) return;
  while (PGnotify* n = PQnotifies(conn_.get())) {
    if (n->extra) out.emplace_back(n->extra);
    PQfreemem(n);
  }
}

void listener::start_thread_locked() {
  if (thread_.joinable() || pipe_[0] < 0) return;
  thread_ = std::thread([this] { run(); });
}

void listener::watch(const std::string& name, const std::string& channel) noexcept {
  try {
    std::lock_guard lock(mutex_);
    ++names_[name];
    if (channels_[channel]++ == 0) {
      if (conn_ && !idle_connection_alive(conn_.get())) drain_notifies_locked(pending_);
      if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK) {
        conn_.reset();
        try {
          // Bounded: the caller is a waiter about to wait; polling covers a slow server.
          conn_ = connect(target_, &options_, std::chrono::milliseconds(2000));
          // A fresh connection listens on every watched channel, this one included.
          for (const auto& [ch, count] : channels_) exec_simple(conn_.get(), listen_sql("LISTEN", ch), "listen");
          // Releases of the other watched names may have gone unheard meanwhile.
          for (const auto& [n, count] : names_) pending_.push_back(n);
        } catch (const std::exception& e) {
          conn_.reset();
          log_message(options_, log_level::warning, e.what());
        }
      } else {
        try {
          exec_simple(conn_.get(), listen_sql("LISTEN", channel), "listen");
        } catch (const std::exception& e) {
          log_message(options_, log_level::warning, e.what());
          if (PQstatus(conn_.get()) != CONNECTION_OK) conn_.reset();
        }
      }
      drain_notifies_locked(pending_);
    }
    start_thread_locked();
  } catch (...) {
    // Out of memory or thread creation failure: waiting still polls.
  }
  poke();
}

void listener::unwatch(const std::string& name, const std::string& channel) noexcept {
  try {
    std::lock_guard lock(mutex_);
    if (auto it = names_.find(name); it != names_.end() && --it->second <= 0) names_.erase(it);
    auto it = channels_.find(channel);
    if (it == channels_.end()) return;
    if (--it->second > 0) return;
    channels_.erase(it);
    if (conn_ && PQstatus(conn_.get()) == CONNECTION_OK) {
      try {
        exec_simple(conn_.get(), listen_sql("UNLISTEN", channel), "unlisten");
      } catch (const std::exception& e) {
        log_message(options_, log_level::debug, e.what());
        if (PQstatus(conn_.get()) != CONNECTION_OK) conn_.reset();
      }
      drain_notifies_locked(pending_);
    }
  } catch (...) {
  }
  poke();
}

void listener::run() {
  using namespace std::chrono_literals;
  auto backoff = 100ms;
  while (!stop_.load()) {
    std::vector<std::string> wakes;
    int fd = -1;
    bool need_connect = false;
    {
      std::lock_guard lock(mutex_);
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
        std::lock_guard lock(mutex_);
        for (const auto& [ch, count] : channels_) exec_simple(fresh.get(), listen_sql("LISTEN", ch), "listen");
        conn_ = std::move(fresh);
        // Releases may have happened while we were not listening: let every waiter look again.
        for (const auto& [n, count] : names_) wakes.push_back(n);
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
          log_message(options_, log_level::info,
                      "postgresql: the notification connection was lost; reconnecting");
          drain_notifies_locked(wakes);
          conn_.reset();
        } else {
          drain_notifies_locked(wakes);
        }
      }
    }
    deliver(wakes);
  }
}

}  // namespace sqllock::detail::pg
