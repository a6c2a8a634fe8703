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
  /// The row state (wake_row_state.sql) a fair waiter's poll of `name` just saw: the name's
  /// releases are counted from there. The first one since watch() is used: when the loop already
  /// looked at the name (its answer came first), the releases between this state and the one it
  /// woke through that it has not woken for yet are woken here, on the caller's thread.
  void note_state(const std::string& name, const std::string& state);

  /// The GET_LOCK key of `name` (before hashing): "db.table/name".
  static std::string key(const std::string& scope, const std::string& name) { return scope + '/' + name; }

 private:
  /// How often the watched rows are read on a Galera node.
  static constexpr std::chrono::milliseconds galera_poll{25};

  void loop() noexcept;
  /// One Galera round: wake every watched name whose row is free or expired.
  void wake_free_rows(connection& conn);
  void wake_name(const std::string& name);
  /// Let `key` go (held after a GET_LOCK that answered 1) and, in the same statement, read the
  /// row: wake `name` once per release since the state its wake-ups so far account for, or once
  /// when the row cannot be read or compared.
  void release_and_wake_if_changed(connection& conn, const std::string& name, const std::string& key);
  /// The same with the state already read (wake_wait.sql's second column).
  void wake_if_state_changed(const std::string& name, const std::string& state);
  /// A look that found the key held all along: a name not counted yet counts from `state` and
  /// wakes nobody; else as wake_if_state_changed (the key went from holder to holder unseen).
  void start_count(const std::string& name, const std::string& state);
  void wake_all_watched();

  /// Where the releases of a watched name are counted from; reset by watch() when the name starts
  /// being watched, so a look sent during an earlier wait counts for the new one from the new
  /// poll's state, never from the old wait's.
  struct release_count {
    std::string woken_at;  // the row's state the wake-ups so far account for ("": unreadable)
    bool noted = false;    // woken_at is, or has been reconciled with, a poll's state
    long long woken = 0;   // wake-ups since watched while not noted
  };

  connect_params params_;
  client_options options_;
  std::string scope_;
  std::string wait_sql_;
  std::string release_sql_;
  std::string row_free_sql_;
  std::string row_state_sql_;
  std::string mark_sql_;

  std::mutex mutex_;  // watched_, newly_watched_, counts_, stopping_
  std::condition_variable cv_;
  std::map<std::string, int> watched_;
  std::set<std::string> newly_watched_;  // not yet looked at by the loop
  std::map<std::string, release_count> counts_;  // of watched names only
  bool stopping_ = false;
  std::thread thread_;
  std::mutex sink_mutex_;  // guards sink_ and every call through it
  wake_sink* sink_ = nullptr;
};

}  // namespace sqllock::detail::mysql
