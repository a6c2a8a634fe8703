// The MySQL waker: one connection that blocks on holders' GET_LOCK keys and wakes local waiters.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "mysql/mysql_connection.hpp"

namespace sqllock::detail::mysql {

/// A holder's lease connection keeps `GET_LOCK('sqllock:' + SHA1(db.table/name))` while it holds the
/// name (taken inside the acquire statement, released inside the release statement or with its
/// connection). The waker's own connection loops over the watched names with
/// `IF(IS_USED_LOCK(k) IS NULL, -1, GET_LOCK(k, slice))`: 1 means the holder let go (or died), so
/// the name's local waiters are woken, once per change of the row (token, held or free): the waiter
/// connections of several clients queued on one key pass it on to each other after a release, so
/// one connection can see 1 several times for one release, and a fair waiter counts its wake-ups.
/// Missed cases only fall back to the client's polling.
/// On a Galera node (wsrep_on) GET_LOCK is local to the node and holders may be on another one, so
/// the loop instead reads the watched lease rows every `galera_poll` and wakes the names found free
/// or expired (the holders then take no GET_LOCK at all).
class waker {
 public:
  waker(connect_params params, client_options options, std::string scope, std::string table);
  ~waker();
  waker(const waker&) = delete;
  waker& operator=(const waker&) = delete;

  /// Where wake-ups go (nullptr: nowhere). After it returns, the old sink is no longer called.
  void set_sink(wake_sink* sink);
  /// Start watching `name` (counted); true: wake-ups will come.
  bool watch(const std::string& name);
  void unwatch(const std::string& name);
  /// The row state (wake_row_state.sql) a fair waiter's poll of `name` just saw: a name the loop
  /// has not looked at yet counts its releases from there, so none between that poll and the
  /// loop's first look goes uncounted.
  void note_state(const std::string& name, std::string state);

  /// The GET_LOCK key of `name` (before hashing): "db.table/name".
  static std::string key(const std::string& scope, const std::string& name) { return scope + '/' + name; }

 private:
  /// How often the watched rows are read on a Galera node.
  static constexpr std::chrono::milliseconds galera_poll{25};

  void loop() noexcept;
  /// One Galera round: wake every watched name whose row is free or expired.
  void wake_free_rows(connection& conn);
  void wake_name(const std::string& name);
  /// Wake `name` when its row changed since its last wake-up here (`woken_at`), or cannot be read.
  void wake_if_changed(connection& conn, const std::string& name, std::map<std::string, std::string>& woken_at);
  /// The same with the state already read (wake_wait.sql's second column).
  void wake_if_state_changed(const std::string& name, const std::string& state,
                             std::map<std::string, std::string>& woken_at);
  void wake_all_watched();

  connect_params params_;
  client_options options_;
  std::string scope_;
  std::string wait_sql_;
  std::string release_sql_;
  std::string row_free_sql_;
  std::string row_state_sql_;
  std::string mark_sql_;

  std::mutex mutex_;  // watched_, newly_watched_, stopping_
  std::condition_variable cv_;
  std::map<std::string, int> watched_;
  std::set<std::string> newly_watched_;  // not yet looked at by the loop
  std::map<std::string, std::string> noted_;  // note_state() not yet taken by the loop
  bool stopping_ = false;
  std::thread thread_;
  std::mutex sink_mutex_;  // guards sink_ and every call through it
  wake_sink* sink_ = nullptr;
};

}  // namespace sqllock::detail::mysql
