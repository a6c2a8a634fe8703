// The SQLite waker: OFD byte-range locks on `<db>-sqllock-wait`, held by holders, probed by waiters.
#include "sqlite/sqlite_waker.hpp"

#include "core/text.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace sqllock::detail::sqlite {

namespace {

bool lock_byte(int fd, off_t off, short type, int cmd, struct flock* out = nullptr) {
  struct flock fl;
  std::memset(&fl, 0, sizeof fl);
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = off;
  fl.l_len = 1;
  const bool ok = fcntl(fd, cmd, &fl) == 0;
  if (out) *out = fl;
  return ok;
}

}  // namespace

waker::waker(std::string wait_file) : wait_file_(std::move(wait_file)) {}

waker::~waker() {
  {
    std::lock_guard lk(probe_mu_);
    stopping_ = true;
  }
  probe_cv_.notify_all();
  if (prober_.joinable()) prober_.join();
  if (hold_fd_ >= 0) close(hold_fd_);
  if (probe_fd_ >= 0) close(probe_fd_);
}

off_t waker::byte_of(const std::string& name) const { return static_cast<off_t>(fnv1a(name) % (1u << 20)); }

void waker::hold(const std::string& name, const std::string& owner) {
  if (wait_file_.empty()) return;
  std::lock_guard lk(hold_mu_);
  if (hold_fd_ < 0) {
    hold_fd_ = open(wait_file_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (hold_fd_ < 0) return;  // no events; waiters poll
  }
  const off_t off = byte_of(name);
  if (!holders_.emplace(owner, off).second) return;  // the same acquisition returned again
  if (held_bytes_[off]++ == 0) lock_byte(hold_fd_, off, F_WRLCK, F_OFD_SETLK);
}

void waker::drop(const std::string& owner) {
  std::lock_guard lk(hold_mu_);
  auto h = holders_.find(owner);
  if (h == holders_.end() || hold_fd_ < 0) return;
  const off_t off = h->second;
  holders_.erase(h);
  auto it = held_bytes_.find(off);
  if (it == held_bytes_.end()) return;
  if (--it->second == 0) {
    held_bytes_.erase(it);
    lock_byte(hold_fd_, off, F_UNLCK, F_OFD_SETLK);
  }
}

void waker::set_sink(wake_sink* sink) {
  std::lock_guard lk(probe_mu_);
  sink_ = sink;
}

bool waker::watch(const std::string& name) {
  if (wait_file_.empty()) return false;
  std::lock_guard lk(probe_mu_);
  if (probe_fd_ < 0) {
    probe_fd_ = open(wait_file_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (probe_fd_ < 0) return false;  // no events; polling still works
  }
  watched_[name] = false;
  if (!prober_.joinable()) prober_ = std::thread([this] { probe_loop(); });
  probe_cv_.notify_all();
  return true;
}

void waker::unwatch(const std::string& name) {
  std::lock_guard lk(probe_mu_);
  watched_.erase(name);
}

void waker::probe_loop() {
  std::unique_lock lk(probe_mu_);
  while (!stopping_) {
    if (watched_.empty()) {
      probe_cv_.wait(lk);
      continue;
    }
    std::vector<std::string> freed;
    for (auto& [name, was_held] : watched_) {
      struct flock fl;
      if (!lock_byte(probe_fd_, byte_of(name), F_WRLCK, F_OFD_GETLK, &fl)) continue;
      const bool held_now = fl.l_type != F_UNLCK;
      if (was_held && !held_now) freed.push_back(name);
      was_held = held_now;
    }
    if (sink_) {
      for (const auto& n : freed) sink_->wake(n);
    }
    probe_cv_.wait_for(lk, std::chrono::milliseconds(2));
  }
}

}  // namespace sqllock::detail::sqlite
