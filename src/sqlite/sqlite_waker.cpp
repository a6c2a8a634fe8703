// The SQLite waker: OFD byte-range locks on `<db>-sqllock-wait`, held by holders, probed by waiters.
#include "sqlite/sqlite_waker.hpp"

#include "core/text.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace sqllock::detail::sqlite {

namespace {

constexpr off_t counter_base = off_t{1} << 20;  // after the lock bytes; page aligned
constexpr std::size_t counter_slots = std::size_t{1} << 16;
constexpr std::size_t counter_bytes = counter_slots * sizeof(std::uint64_t);

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
  if (counters_) munmap(counters_, counter_bytes);
}

void waker::map_counters(int fd) {
  std::lock_guard lk(map_mu_);
  if (counters_ || fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) != 0) return;
  // Only ever grown (processes race to the same size); the area is sparse until written.
  if (st.st_size < counter_base + static_cast<off_t>(counter_bytes) &&
      ftruncate(fd, counter_base + static_cast<off_t>(counter_bytes)) != 0) {
    return;  // no counters: the lock byte alone still wakes on holds the prober sees
  }
  void* p = mmap(nullptr, counter_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, counter_base);
  if (p != MAP_FAILED) counters_ = static_cast<std::uint64_t*>(p);
}

std::uint64_t* waker::counter_of(off_t byte) {
  std::lock_guard lk(map_mu_);
  return counters_ ? counters_ + (static_cast<std::size_t>(byte) % counter_slots) : nullptr;
}

off_t waker::byte_of(const std::string& name) const { return static_cast<off_t>(fnv1a(name) % (1u << 20)); }

void waker::hold(const std::string& name, const std::string& owner) {
  if (wait_file_.empty()) return;
  std::lock_guard lk(hold_mu_);
  if (hold_fd_ < 0) {
    hold_fd_ = open(wait_file_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (hold_fd_ < 0) return;  // no events; waiters poll
    map_counters(hold_fd_);
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
  if (auto* c = counter_of(off)) __atomic_fetch_add(c, 1, __ATOMIC_SEQ_CST);  // after the unlock
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
    map_counters(probe_fd_);
  }
  watched_name w;
  if (auto* c = counter_of(byte_of(name))) w.seen = __atomic_load_n(c, __ATOMIC_SEQ_CST);
  watched_[name] = w;
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
    for (auto& [name, w] : watched_) {
      const off_t off = byte_of(name);
      std::uint64_t releases = 0;
      if (auto* c = counter_of(off)) {
        const std::uint64_t now = __atomic_load_n(c, __ATOMIC_SEQ_CST);
        releases = now - w.seen;
        w.seen = now;
      }
      struct flock fl;
      if (!lock_byte(probe_fd_, off, F_WRLCK, F_OFD_GETLK, &fl)) continue;
      const bool held_now = fl.l_type != F_UNLCK;
      if (releases == 0 && w.held && !held_now) releases = 1;  // a holder that died (no count)
      // One wake per release (fair waiters count them), bounded.
      for (std::uint64_t i = 0; i < std::min<std::uint64_t>(releases, 64); ++i) freed.push_back(name);
      w.held = held_now;
    }
    if (sink_) {
      for (const auto& n : freed) sink_->wake(n);
    }
    probe_cv_.wait_for(lk, std::chrono::milliseconds(2));
  }
}

}  // namespace sqllock::detail::sqlite
