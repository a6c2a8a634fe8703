// The SQLite waker: byte-range locks on a sidecar file tell waiters in other processes of releases.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "core/backend.hpp"

namespace sqllock::detail::sqlite {

/// `<db>-sqllock-wait` beside the database: while a client holds a lease it keeps an open file
/// description lock (F_OFD_SETLK) on the byte its name hashes to; the kernel drops it when the
/// client releases or its process dies. Waiters probe the bytes of the names they wait for every
/// 2 ms (F_OFD_GETLK, no I/O on the database) and wake on a held -> free transition.
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
  std::map<std::string, bool> watched_;  // name -> its byte was held at the last probe
  wake_sink* sink_ = nullptr;
};

}  // namespace sqllock::detail::sqlite
