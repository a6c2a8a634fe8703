// One LISTEN connection per client and its thread: notifications of released names -> wake_sink.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "postgresql/postgresql_connection.hpp"

namespace sqllock::detail::pg {

/// One LISTEN connection per client and its thread: notifications of released names -> wake_sink.
class waker {
 public:
  waker(conn_target target, client_options options);
  ~waker();
  waker(const waker&) = delete;
  waker& operator=(const waker&) = delete;

  /// Where wake-ups go (nullptr: nowhere). After it returns, the old sink is no longer called.
  void set_sink(wake_sink* sink);
  /// Start listening on `channel` for `name` (counted). The LISTEN is in effect when this returns,
  /// unless the server did not answer by `until` (the waiter's deadline; at most 2 s) or is
  /// unreachable: then the thread keeps retrying and polling covers it. Returns whether the
  /// connection is listening. Returns by `until` (at most 2 s) also while another watch() holds
  /// the lock across its LISTEN: the watch is then queued, applied and listened to by the next
  /// holder (a watch(), or the thread, poked), and false is returned. Never throws.
  bool watch(const std::string& name, const std::string& channel, std::chrono::steady_clock::time_point until) noexcept;
  /// Stop listening once the last watcher of `channel` is gone: no statement, the UNLISTEN goes
  /// with the next LISTEN. Never blocks: while a watch() holds the lock for its LISTEN, the unwatch
  /// is queued and applied by the next holder (that watch, or the thread). Never throws.
  void unwatch(const std::string& name, const std::string& channel) noexcept;

 private:
  void run();
  void poke() noexcept;
  void deliver(const std::vector<std::string>& names) noexcept;
  // With mutex_ held: collect queued notifications of the connection.
  void drain_notifies_locked(std::vector<std::string>& out);
  void start_thread_locked();
  // With mutex_ held: apply the watches and unwatches queued meanwhile, in order.
  void apply_changes_locked();
  // With mutex_ held: LISTEN on the channels of to_listen_ (and UNLISTEN stale_) by `until`; on a
  // failure the connection is dropped (the thread reconnects and listens on every channel).
  void listen_pending_locked(std::chrono::steady_clock::time_point until);
  // With mutex_ held: drop the connection (its protocol state is unknown, or no time was left).
  void drop_connection_locked();

  conn_target target_;
  client_options options_;

  std::mutex mutex_;  // conn_, channels_, names_, pending_, stale_, to_listen_
  conn_ptr conn_;
  std::map<std::string, int> channels_;
  std::map<std::string, int> names_;
  std::vector<std::string> pending_;  // notifications read by watch()/unwatch(), for the thread
  std::set<std::string> stale_;       // channels conn_ still listens to that nobody watches
  std::set<std::string> to_listen_;   // watched channels conn_ does not listen to yet

  struct change {
    std::string name;
    std::string channel;
    int delta;  // +1 watch, -1 unwatch
  };
  std::mutex changes_mutex_;     // a leaf: taken alone, or inside mutex_
  std::vector<change> changes_;  // watches and unwatches not applied yet, in order

  std::mutex sink_mutex_;
  wake_sink* sink_ = nullptr;

  int pipe_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sqllock::detail::pg
