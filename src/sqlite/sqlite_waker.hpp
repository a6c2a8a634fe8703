// The SQLite waker: byte-range locks on a sidecar file tell waiters in other processes of releases.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "core/backend.hpp"

namespace sqllock::detail::sqlite {

/// `<db>-sqllock-wait` beside the database: while a client holds a lease it keeps an open file
/// description lock (F_OFD_SETLK) on the byte its name hashes to; the kernel drops it when the
/// client releases or its process dies. Waiters probe the bytes of the names they wait for every
/// 2 ms (F_OFD_GETLK, no I/O on the database) and wake on a held -> free transition. A hold shorter
/// than the probe interval is invisible to that sampling, so every release also increments a
/// 64-bit counter per slot in a shared mapping of the same file (after the 1 MiB of lock bytes);
/// a probe that finds its slot's counter moved wakes once per release (a dead holder, which
/// increments nothing, is still seen by the lock byte).
class waker {
 public:
  /// `wait_file` empty (in-memory database): no events.
  explicit waker(std::string wait_file);
  ~waker();
  waker(const waker&) = delete;
  waker& operator=(const waker&) = delete;

  /// Holder side: this client holds / no longer holds the acquisition `owner` of `name` (counted
  /// per byte; dropping an acquisition that was never held does nothing).
  void hold(const std::string& name, const std::string& owner);
  void drop(const std::string& owner);

  /// Waiter side.
  void set_sink(wake_sink* sink);
  bool watch(const std::string& name);
  void unwatch(const std::string& name);

 private:
  off_t byte_of(const std::string& name) const;
  std::uint64_t* counter_of(off_t byte);  ///< the release counter of a byte's slot (nullptr: unmapped)
  void map_counters(int fd);              ///< under hold_mu_ or probe_mu_; idempotent
  void probe_loop();

  std::string wait_file_;

  std::mutex hold_mu_;  // hold_fd_, held_bytes_, holders_
  int hold_fd_ = -1;
  std::map<off_t, int> held_bytes_;
  std::map<std::string, off_t> holders_;  // owner id -> its byte

  std::mutex probe_mu_;  // everything below
  std::condition_variable probe_cv_;
  std::thread prober_;
  bool stopping_ = false;
  int probe_fd_ = -1;
  struct watched_name {
    bool held = false;       // its byte was held at the last probe
    std::uint64_t seen = 0;  // its slot's release counter at the last probe
  };
  std::map<std::string, watched_name> watched_;
  std::mutex map_mu_;  // counters_
  std::uint64_t* counters_ = nullptr;  // MAP_SHARED over the file's counter area
  wake_sink* sink_ = nullptr;
};

}  // namespace sqllock::detail::sqlite
