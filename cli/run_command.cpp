// `sqllock run`: acquire a lease, run CMD under it with the watchdog renewing, forward signals,
// stop CMD when the lease is lost or about to expire, release when CMD ends and pass on CMD's
// exit code.
//
// Process model: CMD is started by a supervisor (supervisor.hpp), a subreaper that stops every
// process CMD started, in CMD's process group or not, when asked, when CMD exits, and when sqllock
// itself dies (even by SIGKILL). CMD gets a process group of its own. Signals sqllock receives
// (INT, TERM, HUP, QUIT) go to that whole group. When the lease is not renewed in time, everything
// gets SIGTERM and then SIGKILL kill_margin before the local expiry estimate (lease_timing); when
// it is found taken over, SIGTERM, then SIGKILL after --grace.
// When sqllock runs in the foreground of a terminal, the terminal's foreground is handed to CMD's
// group while it runs (as a shell does for a job), so interactive commands can read the terminal
// and Ctrl-C reaches CMD once, directly; Ctrl-Z suspends CMD and sqllock together (see
// suspend_with).
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "lease_timing.hpp"
#include "output_format.hpp"
#include "supervisor.hpp"
#include "sqllock/client.hpp"
#include "sqllock/error.hpp"
#include "sqllock/events.hpp"
#include "sqllock/multi_lock.hpp"
#include "sqllock/parse.hpp"

extern char** environ;

namespace sqllock_cli {
namespace {

using steady = std::chrono::steady_clock;

/// Signals sqllock passes on to CMD's process group.
constexpr int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
/// Bytes on the wake pipe that are not signal numbers (signal numbers are below 65).
constexpr unsigned char lease_lost_byte = 0xFF;
constexpr unsigned char stop_watcher_byte = 0xFE;
constexpr unsigned char at_risk_byte = 0xFD;
constexpr unsigned char renewed_byte = 0xFC;
constexpr unsigned char released_byte = 0xFB;

/// Write end of the self-pipe; the signal handlers and the on_lost callback write one byte each.
std::atomic<int> wake_write_fd{-1};

void wake(unsigned char byte) {
  const int saved_errno = errno;
  const int fd = wake_write_fd.load();
  if (fd >= 0) {
    // Non-blocking: if 64 KiB of wake-ups are pending, one more changes nothing.
    [[maybe_unused]] const ssize_t n = ::write(fd, &byte, 1);
  }
  errno = saved_errno;
}

extern "C" void on_signal(int signo) { wake(static_cast<unsigned char>(signo)); }

bool is_forwarded(int signo) {
  for (int s : forwarded_signals) {
    if (s == signo) return true;
  }
  return false;
}

/// The self-pipe: signal handlers, the watchdog's on_lost and the acquire phase all wake one poll.
class wake_pipe {
 public:
  wake_pipe() {
    if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
      throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
    }
    wake_write_fd.store(fds_[1]);
  }
  ~wake_pipe() {
    wake_write_fd.store(-1);
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  wake_pipe(const wake_pipe&) = delete;
  wake_pipe& operator=(const wake_pipe&) = delete;

  int read_fd() const { return fds_[0]; }

  /// Wait up to timeout_ms (-1: forever) and return the bytes that arrived.
  std::vector<unsigned char> wait(int timeout_ms) const {
    pollfd p{fds_[0], POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return {};  // timeout or EINTR: the caller re-checks
    std::vector<unsigned char> bytes;
    unsigned char buf[256];
    for (;;) {
      const ssize_t n = ::read(fds_[0], buf, sizeof buf);
      if (n > 0) {
        bytes.insert(bytes.end(), buf, buf + n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      break;  // EAGAIN: drained
    }
    return bytes;
  }

 private:
  int fds_[2] = {-1, -1};
};

/// Which signals have our handler (indexed by number); set before any fork, read in the child.
bool handled[65] = {};

/// Installs the handlers for the forwarded signals and SIGCHLD; restores the old ones on exit.
/// A forwarded signal that was ignored when sqllock started stays ignored, for sqllock and CMD
/// alike, as a shell would do (so `nohup sqllock run ...` keeps CMD immune to SIGHUP).
class signal_handlers {
 public:
  /// `job_control`: also wake on CMD stopping (for Ctrl-Z at a terminal), not only on its exit.
  explicit signal_handlers(bool job_control) {
    for (int s : forwarded_signals) install(s, 0);
    install(SIGCHLD, job_control ? 0 : SA_NOCLDSTOP);
  }
  ~signal_handlers() {
    for (const auto& [signo, old] : saved_) {
      ::sigaction(signo, &old, nullptr);
      handled[signo] = false;
    }
  }
  signal_handlers(const signal_handlers&) = delete;
  signal_handlers& operator=(const signal_handlers&) = delete;

  /// Once CMD runs: a SIGTSTP to sqllock wakes the waiting loop instead of stopping sqllock alone,
  /// and the loop passes it on to CMD (see there). A Ctrl-Z reaches sqllock while its group has the
  /// terminal (after `fg` of a job that `bg` left running, until CMD touches the terminal); `kill
  /// -TSTP` from elsewhere at any time. (Before CMD runs, Ctrl-Z stops sqllock as it would any
  /// command; ignored when sqllock started, it stays ignored.)
  void catch_terminal_stop() { install(SIGTSTP, 0); }

 private:
  void install(int signo, int extra_flags) {
    struct sigaction old {};
    ::sigaction(signo, nullptr, &old);
    if (signo != SIGCHLD && old.sa_handler == SIG_IGN) return;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | extra_flags;
    ::sigaction(signo, &sa, nullptr);
    saved_.emplace_back(signo, old);
    handled[signo] = true;
  }
  std::vector<std::pair<int, struct sigaction>> saved_;
};

/// File descriptors open when sqllock started (the caller's, e.g. `3<file`): CMD inherits those
/// and nothing the library opened since (database files, sockets, lock files).
std::set<int> open_descriptors() {
  std::set<int> fds;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    const int own = ::dirfd(dir);
    while (const dirent* entry = ::readdir(dir)) {
      if (entry->d_name[0] == '.') continue;
      const int fd = std::atoi(entry->d_name);
      if (fd > 2 && fd != own) fds.insert(fd);
    }
    ::closedir(dir);
  }
  return fds;
}

void mark_close_on_exec_except(const std::set<int>& keep) {
  for (int fd : open_descriptors()) {
    if (keep.count(fd) != 0) continue;
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) == 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

/// The signal mask CMD starts with: sqllock's own at startup, whatever sqllock blocks later.
sigset_t command_signal_mask;

/// Give the terminal's foreground to `pgid`; SIGTTOU is blocked so a background caller may do it.
void set_terminal_foreground(pid_t pgid) {
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  ::pthread_sigmask(SIG_BLOCK, &ttou, &old);
  ::tcsetpgrp(STDIN_FILENO, pgid);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

/// Stop sqllock with `stop_signal` as its default action does, whatever handler it has for it
/// (SIGTSTP, see catch_terminal_stop) and although it may be blocked (SIGTTOU is, in every thread,
/// at a terminal): unblocked in this thread alone, it is delivered to this thread before kill()
/// returns, which stops the process; the handler and the mask are back once it is continued. In an
/// orphaned process group the kernel discards the signal and this returns at once; a signal that
/// is ignored (inherited SIG_IGN) stops nothing, as before. (With SIGTTOU blocked, a CMD stopped
/// by it in the background, `stty tostop`, used to be continued at once, over and over, and the
/// job never showed as stopped.)
void stop_self(int stop_signal) {
  struct sigaction dfl {}, old {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(stop_signal, &dfl, &old);
  if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) {
    ::sigaction(stop_signal, &old, nullptr);
    return;
  }
  sigset_t just_this, old_mask;
  sigemptyset(&just_this);
  sigaddset(&just_this, stop_signal);
  ::pthread_sigmask(SIG_UNBLOCK, &just_this, &old_mask);
  ::kill(::getpid(), stop_signal);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::sigaction(stop_signal, &old, nullptr);
}

/// CMD was stopped at the terminal (Ctrl-Z): do what a shell's job does, as sudo does. Take the
/// terminal back if CMD's group `command_group` has it, and stop sqllock with the same signal so the
/// user's shell sees the job stopped. A job continued in the background (`bg`) whose CMD reads the
/// terminal (SIGTTIN) or writes to it with `stty tostop` (SIGTTOU) does not have the terminal: the
/// shell does, and keeps it (sqllock, with SIGTTOU blocked, could take it from the background, and
/// the shell could then not read the next command).
/// Returns once sqllock is continued (fg or bg): true if CMD is to be continued then (the caller
/// first checks that the lease still holds, see the waiting loop). While stopped, nothing renews
/// the lease: a stop longer than the TTL can lose it, and the supervisor stops CMD by itself before
/// the lease can expire. A stop by anything else (SIGSTOP from another process) is left alone.
bool suspend_with(int stop_signal, pid_t command_group) {
  if (stop_signal != SIGTSTP && stop_signal != SIGTTIN && stop_signal != SIGTTOU) return false;
  if (::tcgetpgrp(STDIN_FILENO) == command_group) set_terminal_foreground(::getpgrp());
  stop_self(stop_signal);
  return true;
}

/// The names as messages show them: 'a' or 'a', 'b'.
std::string shown_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "'" : ", '") + printable(n) + "'";
  return out;
}

/// What `run` holds: the leases of its names (a multi-lock; one name is a set of one), or one
/// permit of a semaphore (--permits).
class held_leases {
 public:
  explicit held_leases(sqllock::multi_lease_guard g) : multi_(std::move(g)) {}
  explicit held_leases(sqllock::lease_guard g) : permit_(std::move(g)) {}

  /// A lease of the set (they all carry the same holder label).
  const sqllock::lease_guard& first() const { return permit_ ? *permit_ : (*multi_)[0]; }
  /// The slot of the permit held; -1 for locks.
  int permit() const { return permit_ ? permit_->permit() : -1; }
  /// The earliest local expiry estimate of the set (every lease must still be held).
  steady::time_point valid_until() const {
    if (permit_) return permit_->valid_until();
    auto t = steady::time_point::max();
    for (std::size_t i = 0; i < multi_->size(); ++i) t = std::min(t, (*multi_)[i].valid_until());
    return t;
  }
  /// The fencing tokens of the names in the order given (comma-separated when several).
  std::string fences(const std::vector<std::string>& names) const {
    if (permit_) return std::to_string(permit_->fencing_token());
    std::string out;
    for (const auto& n : names) {
      if (!out.empty()) out += ',';
      out += std::to_string(multi_->lease(n).fencing_token());
    }
    return out;
  }
  bool lost() const noexcept { return permit_ ? permit_->lost() : multi_->lost(); }
  /// (name, fencing token) of each lease of a multi-lock; std::nullopt for a permit or reader-writer
  /// lease.
  std::optional<std::vector<std::pair<std::string, std::int64_t>>> leases() const {
    if (permit_) return std::nullopt;
    std::vector<std::pair<std::string, std::int64_t>> out;
    for (std::size_t i = 0; i < multi_->size(); ++i) out.emplace_back((*multi_)[i].name(), (*multi_)[i].fencing_token());
    return out;
  }
  /// Every lease may be relied on now: not lost and before its loss point and max_hold by this
  /// process's clock, even when the library's deadline thread has not yet reported it lost.
  bool usable() const noexcept { return permit_ ? permit_->usable() : multi_->usable(); }
  /// Renew every lease now (the watchdog renews on its own schedule).
  void renew() {
    if (permit_) {
      permit_->renew();
    } else {
      multi_->renew();
    }
  }
  void release() {
    if (permit_) {
      permit_->release();
    } else {
      multi_->release();
    }
  }

 private:
  std::optional<sqllock::multi_lease_guard> multi_;
  std::optional<sqllock::lease_guard> permit_;
};

/// Which on_lost reports are losses of what run holds. A multi-lock gives back a lease lost while
/// it waited for the other names and takes that name again (a new acquisition, a greater token): the
/// given-back lease's on_lost, whenever it comes, is no loss of the set run got. Reports that come
/// before the set is known are kept and matched once it is.
class loss_filter {
 public:
  explicit loss_filter(std::atomic<bool>& lost) : lost_(lost) {}
  /// From on_lost (the library's threads).
  void report(const std::string& name, std::int64_t token) {
    std::lock_guard lk(m_);
    if (!known_) {
      early_.emplace_back(name, token);
    } else if (counts(name, token)) {
      lost_.store(true);
    }
  }
  /// What run holds: the (name, fencing token) of each lease of a multi-lock; std::nullopt for a
  /// permit or a reader-writer lease (one acquisition: each of its reports counts).
  void held(std::optional<std::vector<std::pair<std::string, std::int64_t>>> set) {
    std::lock_guard lk(m_);
    known_ = true;
    set_ = std::move(set);
    for (const auto& [name, token] : early_) {
      if (counts(name, token)) lost_.store(true);
    }
    early_.clear();
  }

 private:
  bool counts(const std::string& name, std::int64_t token) const {
    return !set_ || std::find(set_->begin(), set_->end(), std::pair(name, token)) != set_->end();
  }
  std::atomic<bool>& lost_;
  std::mutex m_;
  bool known_ = false;
  std::optional<std::vector<std::pair<std::string, std::int64_t>>> set_;
  std::vector<std::pair<std::string, std::int64_t>> early_;
};

std::vector<std::string> child_environment(const held_leases& guard, const std::vector<std::string>& names) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.starts_with("SQLLOCK_FENCE=") || entry.starts_with("SQLLOCK_HOLDER=") ||
        entry.starts_with("SQLLOCK_PERMIT=")) {
      continue;
    }
    env.emplace_back(entry);
  }
  env.push_back("SQLLOCK_FENCE=" + guard.fences(names));
  env.push_back("SQLLOCK_HOLDER=" + guard.first().holder_id());
  if (guard.permit() >= 0) env.push_back("SQLLOCK_PERMIT=" + std::to_string(guard.permit()));
  return env;
}

/// Release what run holds once CMD has ended (or could not start), on a thread of its own, while
/// this thread watches the wake pipe. In a partition the release waits for the database up to 10 s
/// (the library's io_timeout, or less: the lease's loss point). A forwarded signal (INT, TERM, HUP,
/// QUIT) in that time ends the wait at once: run exits 128+N without the release's answer and the
/// lock, released or not, is left to expire at its TTL (nothing CMD started is left by now). The
/// exit is _exit: the release's thread still uses the client, which no destructor may touch.
/// The release's own error, if any, is rethrown here.
void release_after_command(held_leases& guard, const wake_pipe& pipe, const std::string& shown) {
  std::exception_ptr failure;
  std::thread releaser([&] {
    try {
      guard.release();
    } catch (...) {
      failure = std::current_exception();
    }
    wake(released_byte);
  });
  for (;;) {
    for (unsigned char byte : pipe.wait(-1)) {
      if (byte == released_byte) {
        releaser.join();
        if (failure) std::rethrow_exception(failure);
        return;
      }
      if (byte == SIGTSTP) stop_self(SIGTSTP);  // a Ctrl-Z now (CMD is gone): sqllock stops, as it would have
      if (is_forwarded(byte)) {
        print_error("interrupted (" + std::string(::strsignal(byte)) + ") while releasing " + shown +
                    " after the command ended; the lock is left to expire at its TTL");
        std::fflush(nullptr);
        ::_exit(128 + byte);
      }
    }
  }
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return exit_code::software;
}

}  // namespace

int run_run(const common_options& common, const run_options& run_flags) {
  const std::string url = resolve_url(common.url);
  std::string redacted = "(invalid URL)";
  run_options options = run_flags;
  // Duplicates count once; the order given is kept for SQLLOCK_FENCE and messages.
  options.names.clear();
  for (const auto& n : run_flags.names) {
    if (std::find(options.names.begin(), options.names.end(), n) == options.names.end()) options.names.push_back(n);
  }
  const std::string shown = shown_names(options.names);
  try {
    redacted = checked_redacted_url(url);
    if (options.names.empty()) throw sqllock::invalid_argument("run: --name is required");
    for (const auto& n : options.names) sqllock::validate_lock_name(n);
    // Before connecting: a bad count is a usage error (64) even when the database is unreachable.
    if (options.permits) {
      try {
        sqllock::validate_permits(*options.permits);
      } catch (const sqllock::invalid_argument& e) {
        throw sqllock::invalid_argument(std::string("--permits: ") + e.what());
      }
    }
    if (options.permits && options.names.size() != 1) {
      throw sqllock::invalid_argument("--permits takes one --name (the semaphore), not a multi-lock");
    }
    if (options.fair && (options.permits || options.names.size() != 1)) {
      throw sqllock::invalid_argument("--fair takes one --name (a lock), not a multi-lock or --permits");
    }
    if (options.fair && options.rw != run_options::rw_mode::none) {
      throw sqllock::invalid_argument("--fair is for a plain lock, not with --shared/--exclusive");
    }
    if (options.rw != run_options::rw_mode::none && (options.permits || options.names.size() != 1)) {
      throw sqllock::invalid_argument("--shared/--exclusive take one --name and no --permits");
    }
    sqllock::validate_ttl(options.ttl);
    if (options.holder) {
      try {
        sqllock::validate_lock_name(*options.holder);
      } catch (const sqllock::invalid_argument&) {
        throw sqllock::invalid_argument("--holder: a holder id must be 1 to 255 bytes of UTF-8 without NUL");
      }
    }
  } catch (...) {
    return report_exception(redacted);
  }
  if (options.command.empty()) {
    print_error("run: no command given (usage: sqllock run --name NAME [options] -- CMD ARGS...)");
    return exit_code::usage;
  }

  // Before the library opens anything: what CMD may inherit.
  const std::set<int> inherited_fds = open_descriptors();
  const bool take_terminal = ::isatty(STDIN_FILENO) == 1 && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
  ::pthread_sigmask(SIG_SETMASK, nullptr, &command_signal_mask);
  if (take_terminal) {
    // Once CMD has the terminal, sqllock is in the background: with `stty tostop` a message
    // written then would stop it (SIGTTOU). Blocked here, before the library starts its threads,
    // so that every thread inherits the block; CMD gets the original mask.
    sigset_t ttou;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    ::pthread_sigmask(SIG_BLOCK, &ttou, nullptr);
  }

  wake_pipe pipe;
  signal_handlers handlers(take_terminal);
  std::atomic<bool> lost{false};
  loss_filter losses(lost);
  std::atomic<int> pending_signal{0};

  try {
    auto client_options = make_client_options(common);
    client_options.scope = sqllock::holder_scope::per_client;
    client_options.on_event = [](const sqllock::lease_event& e) {
      // A renewal wakes the main loop, which tells the supervisor the lease's new end at once: the
      // supervisor stops CMD by itself term_lead + kill_margin (a third of the TTL) before the end
      // it last learnt, so an end learnt only at the next periodic publish (TTL/6 later, or later
      // still on a loaded machine) left a healthy lease's CMD stopped. From the library's notice
      // thread: no writing to a possibly stalled stderr here.
      if (e.kind == sqllock::event_kind::renewed) wake(renewed_byte);
    };
    if (options.holder) client_options.holder_id = *options.holder;
    sqllock::client client = sqllock::connect(url, client_options);

    const lease_timing timing = lease_timing_for(options.ttl, options.grace);
    sqllock::lease_options lease;
    lease.ttl = options.ttl;
    lease.auto_renew = true;
    lease.min_hold = options.min_hold;
    lease.fair = options.fair;
    if (options.max_hold.count() > 0) {
      // run itself stops CMD --max-hold after acquire_for returned and has it gone --grace later
      // (hold_end + grace, below). The library stops renewing max_hold after the start of the
      // acquiring statement, which began at most a TTL before it returned (a lease statement never
      // runs longer than the TTL). With max_hold = --max-hold + --grace + TTL + kill_margin the
      // lease in the database therefore lasts at least until hold_end + grace + kill_margin: run's
      // deadlines (capped there) come first, and a run that hangs still lets the lock go.
      lease.max_hold = options.max_hold + options.grace + options.ttl + timing.kill_margin;
    }
    lease.on_at_risk = [](const std::string&, std::int64_t) {
      // From the library's deadline thread: no writing to a possibly stalled stderr here.
      wake(at_risk_byte);
    };
    lease.on_lost = [&losses](const std::string& name, std::int64_t token) {
      // Called from the watchdog thread: set the flag (a loss of what run holds), then wake the main loop.
      losses.report(name, token);
      wake(lease_lost_byte);
    };

    // While waiting for the lock, a watcher thread turns SIGINT/SIGTERM into a cancellation.
    std::optional<held_leases> guard;
    {
      std::stop_source cancel;
      std::jthread watcher([&](std::stop_token stop) {
        while (!stop.stop_requested()) {
          for (unsigned char byte : pipe.wait(-1)) {
            if (byte == stop_watcher_byte) return;
            if (is_forwarded(byte)) {
              pending_signal.store(byte);
              cancel.request_stop();
            }
          }
        }
      });
      struct stop_watcher {
        std::jthread& t;
        ~stop_watcher() {
          t.request_stop();
          wake(stop_watcher_byte);
        }
      } stopper{watcher};
      try {
        if (options.permits) {
          guard.emplace(client.acquire_permit_for(options.names[0], *options.permits, options.wait, lease,
                                                  cancel.get_token()));
        } else if (options.rw == run_options::rw_mode::shared) {
          guard.emplace(client.acquire_read_for(options.names[0], options.wait, lease, cancel.get_token()));
        } else if (options.rw == run_options::rw_mode::exclusive) {
          guard.emplace(client.acquire_write_for(options.names[0], options.wait, lease, cancel.get_token()));
        } else {
          guard.emplace(sqllock::acquire_all(client, options.names, options.wait, lease, cancel.get_token()));
        }
      } catch (const sqllock::acquire_timeout& e) {
        std::string who = e.holder().empty() ? std::string("an unknown holder") : "'" + printable(e.holder()) + "'";
        // A multi-lock's timeout names the lock that was busy.
        const std::string what = options.permits ? "all " + std::to_string(*options.permits) + " permits of semaphore '" +
                                                       printable(options.names[0]) + "'"
                                 : options.rw == run_options::rw_mode::shared    ? "read lock of '" + printable(e.lock_name()) + "'"
                                 : options.rw == run_options::rw_mode::exclusive ? "write lock of '" + printable(e.lock_name()) + "'"
                                                                                  : "lock '" + printable(e.lock_name()) + "'";
        const std::string held = options.permits
                                     ? "the soonest to end held by " + who + " for another " + human_duration(e.time_left())
                                     : "held by " + who + " for another " + human_duration(e.time_left());
        print_error(options.wait.count() == 0
                        ? what + (options.permits ? " are busy: " : " is busy: ") + held + " (--wait 0s)"
                        : (options.permits ? "no permit of semaphore '" + printable(options.names[0]) + "'"
                                           : what + " not") +
                              " acquired within " + human_duration(options.wait) + ": " + held);
        return exit_code::not_acquired;
      } catch (const sqllock::lease_lost& e) {
        // An acquire answered only after the lease's own max_hold (lease_options::max_hold): the
        // lease ended before CMD could use it and the library has freed the row. As for a lease
        // lost before CMD starts (below): not acquired, not a database error.
        print_error("lease on " + shown + " ended as it was acquired (" + e.what() + "); the command was not run");
        return exit_code::not_acquired;
      } catch (const sqllock::cancelled&) {
        const int signo = pending_signal.load();
        print_error("interrupted (" + std::string(::strsignal(signo)) + ") while waiting for " + shown);
        return 128 + signo;
      }
    }
    losses.held(guard->leases());
    if (const int signo = pending_signal.load(); signo != 0) {
      // The signal came just as the lock was acquired: do not start CMD.
      try {
        guard->release();
      } catch (const sqllock::error& e) {
        print_error(std::string("release failed: ") + e.what());
      }
      print_error("interrupted (" + std::string(::strsignal(signo)) + ") before starting the command");
      return 128 + signo;
    }
    // A plain lock, a reader-writer lease and a semaphore of one name are different rows and do not
    // exclude each other: a run in one mode refuses to start beside a live holder in another. Each
    // side has stored its own row before it looks at the others' (as reader and writer do), so two
    // runs of different modes are never both running CMD (both may refuse).
    try {
      std::optional<sqllock::lock_info> other;
      std::string other_mode;
      const bool plain = options.rw == run_options::rw_mode::none && !options.permits;
      const bool rw = options.rw != run_options::rw_mode::none;
      for (const auto& n : options.names) {
        if (!plain) {
          other = client.inspect(n);
          if (other && other->time_left.count() <= 0) other.reset();
          other_mode = "as a plain lock (sqllock run without --shared/--exclusive/--permits)";
        }
        if (!other && !rw) {
          other = client.inspect_read_write(n);
          other_mode = "as a reader-writer lease (sqllock run --shared/--exclusive)";
        }
        if (!other && !options.permits) {
          other = client.inspect_semaphore(n);
          other_mode = "as a semaphore (sqllock run --permits)";
        }
        if (other) break;
      }
      if (other) {
        try {
          guard->release();
        } catch (const sqllock::error&) {
        }
        print_error("'" + printable(other->name) + "' is held " + other_mode + " by '" + printable(other->holder) +
                    "': a plain lock, a reader-writer lease and a semaphore of one name do not exclude each other, "
                    "so this run refuses to start; use one mode per name");
        return exit_code::usage;
      }
    } catch (const sqllock::error& e) {
      try {
        guard->release();
      } catch (const sqllock::error&) {
      }
      print_error(std::string("could not check the name's other mode: ") + e.what());
      return exit_code::not_acquired;
    }
    if (options.fair && !lost.load() && guard->usable() && guard->valid_until() - steady::now() < options.ttl / 2) {
      // A fair lock handed over by its last holder is taken from the read that finds it, at the
      // ticket's short TTL (fair_ticket_ttl), and the watchdog extends it to --ttl only a third of
      // the way into that (lease_book::add). run
      // derives CMD's deadlines from valid_until: extend it here, before CMD starts, so CMD gets
      // the lease it asked for. A failed renewal leaves the lease as the checks below find it.
      // Only for --fair: with the renewal for every run, cli.ctrl_z_suspends_the_job_and_fg_resumes_it
      // failed in 6 of 9 full cli_test runs (Ctrl-C after Ctrl-Z and fg never reached CMD); cause
      // not found.
      try {
        guard->renew();
      } catch (const sqllock::error&) {
      }
    }
    if (lost.load() || !guard->usable()) {
      // Lost between the acquisition and now (acquire_all already refuses a set with a lease lost
      // while it waited), or past its loss point with the deadline thread not yet there (a process
      // stopped or starved that long): CMD must not start unprotected.
      try {
        guard->release();
      } catch (const sqllock::error&) {
      }
      print_error("lease on " + shown + " was lost before the command could start; the command was not run");
      return exit_code::not_acquired;
    }
    if (common.verbosity >= 1 && guard->permit() >= 0) {
      print_error("acquired permit " + std::to_string(guard->permit()) + " of " + shown + " as '" +
                  printable(guard->first().holder_id()) + "', fence " + guard->fences(options.names));
    } else if (common.verbosity >= 1) {
      print_error("acquired " + shown + " as '" + printable(guard->first().holder_id()) + "', fence " +
                  guard->fences(options.names));
    }

    std::fflush(nullptr);
    mark_close_on_exec_except(inherited_fds);
    // --max-hold counts from here; the lease's end as run and the supervisor count it is capped
    // at the moment CMD must be gone by then (see lease.max_hold above).
    const auto acquired = steady::now();
    const auto hold_end = options.max_hold.count() > 0 ? acquired + options.max_hold : steady::time_point::max();
    const auto hold_cap =
        options.max_hold.count() > 0 ? hold_end + options.grace + timing.kill_margin : steady::time_point::max();
    const auto lease_end = [&] { return std::min(guard->valid_until(), hold_cap); };
    supervisor_spec spec;
    spec.command = options.command;
    spec.environment = child_environment(*guard, options.names);
    spec.inherited_fds.assign(inherited_fds.begin(), inherited_fds.end());
    spec.take_terminal = take_terminal;
    spec.default_in_command = handled;
    spec.command_mask = command_signal_mask;
    spec.grace = timing.grace;
    spec.kill_margin = timing.kill_margin;
    spec.term_lead = timing.term_lead;
    spec.valid_until = lease_end();
    std::optional<supervisor> supervised;
    try {
      supervised.emplace(spec);
    } catch (const supervisor_lost& e) {
      // Killed after it started CMD but before it said so: CMD got SIGKILL by its death signal,
      // but what CMD started outside its group may still run. As below, the lock is left to
      // expire at its TTL; before, the exception reached the guard's destructor, which released
      // it at once.
      print_error(std::string(e.what()) + "; lock " + shown +
                  " is left to expire at its TTL, since processes the command started may outlive it");
      std::fflush(nullptr);
      ::_exit(exit_code::software);  // no destructor may release the lease (the guard's would)
    }
    supervisor& child = *supervised;
    if (child.exec_errno() != 0) {
      child.wait();
      if (take_terminal) set_terminal_foreground(::getpgrp());
      print_error(printable(options.command.front()) + ": " + std::strerror(child.exec_errno()));
      try {
        release_after_command(*guard, pipe, shown);
      } catch (const sqllock::error& e) {
        print_error(std::string("release failed: ") + e.what());
      }
      return child.exec_errno() == ENOENT || child.exec_errno() == ENOTDIR ? exit_code::command_not_found
                                                                           : exit_code::cannot_execute;
    }
    const pid_t cmd = child.command_pid();
    if (take_terminal) handlers.catch_terminal_stop();

    // The waiting loop: forward signals, relay CMD's stops, and stop everything CMD started when
    // the lease is lost or about to run out, or --max-hold is reached, until the supervisor
    // reports that nothing is left. Every signal to CMD goes through the supervisor, which sends
    // it only while CMD is not reaped (a reaped CMD's process group id may be reused).
    enum class stop_reason { none, lost, not_renewed, max_hold };
    stop_reason stopped_for = stop_reason::none;
    std::optional<int> status;
    // The supervisor's SIGTERM or SIGKILL reached CMD before CMD had exited (its report of the
    // exit says so): with --max-hold, the stop ended CMD, not CMD itself. When run learnt of the
    // exit does not tell: run may read a CMD's own exit only after hold_end (a loaded machine), and
    // the supervisor may stop CMD on its own at hold_end before run's check.
    bool command_stopped = false;
    bool max_hold_announced = false;        // run said it stops CMD for --max-hold
    bool resume_pending = false;            // CMD was stopped at the terminal and sqllock continued
    bool resume_foreground = false;         // ... in the foreground: CMD gets the terminal back
    int interrupted_after = 0;              // a forwarded signal that came after CMD's exit
    steady::time_point kill_at = steady::time_point::max();
    for (;;) {
      const auto now = steady::now();
      const auto valid_until = lease_end();
      child.publish_valid_until(valid_until);
      const auto kill_by = valid_until - timing.kill_margin;
      const auto term_at = kill_by - timing.term_lead;
      if (stopped_for == stop_reason::none) {
        const std::string fence = guard->fences(options.names);
        if (lost.load() && now < kill_by) {
          // Taken over or released by force: the lease is gone already; CMD gets the full grace.
          stopped_for = stop_reason::lost;
          kill_at = now + options.grace;
          print_error("lease on " + shown + " (fence " + fence +
                      ") was lost: sending SIGTERM to the command, SIGKILL in " + human_duration(options.grace));
        } else if (lost.load() || now >= term_at || now >= hold_end) {
          // Not renewed in time, or held for --max-hold: everything must be gone kill_margin before
          // the lease can expire. After a Ctrl-Z that outlasted the lease, kill_at has passed: CMD
          // is killed without being continued first.
          const bool renewed = !lost.load() && now < guard->valid_until() - timing.kill_margin - timing.term_lead;
          stopped_for = now >= hold_end && renewed ? stop_reason::max_hold : stop_reason::not_renewed;
          kill_at = std::min(now + options.grace, kill_by);
          const auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(kill_at - now),
                                     std::chrono::milliseconds(0));
          // With --max-hold after CMD's exit was read, CMD is not stopped: say nothing (what it left
          // running is stopped as after any exit).
          if (stopped_for != stop_reason::max_hold || !status) {
            max_hold_announced = stopped_for == stop_reason::max_hold;
            print_error("lease on " + shown + " (fence " + fence + ") " +
                        (stopped_for == stop_reason::max_hold
                             ? "was held for --max-hold " + human_duration(options.max_hold)
                             : std::string("was not renewed in time and may expire")) +
                        ": sending SIGTERM to the command, SIGKILL in " + human_duration(left));
          }
        }
        if (stopped_for != stop_reason::none) {
          // SIGTERM and SIGCONT to all, SIGKILL at kill_at, from the supervisor (on its own clock,
          // also should run stall); with kill_at passed, SIGKILL only.
          child.stop_all(kill_at);
        }
      }
      if (resume_pending) {
        // Continue CMD after Ctrl-Z and fg/bg only now that the lease was checked above: a CMD
        // whose lease ran out while it was stopped is killed, never continued for one more pass.
        resume_pending = false;
        if (!status && steady::now() < std::min(kill_at, kill_by)) {
          if (resume_foreground) set_terminal_foreground(cmd);
          child.signal_command(SIGCONT);
        }
      }
      const auto wake_at = stopped_for != stop_reason::none ? steady::time_point::max()
                                                            : std::min({term_at, hold_end, now + timing.publish_every});
      int timeout_ms = -1;
      if (wake_at != steady::time_point::max()) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(wake_at - steady::now());
        timeout_ms = static_cast<int>(std::clamp<long long>(left.count(), 0, 1'000'000));
      }
      pollfd fds[2] = {{pipe.read_fd(), POLLIN, 0}, {child.event_fd(), POLLIN, 0}};
      if (::poll(fds, 2, timeout_ms) <= 0) continue;  // timeout or EINTR
      bool stop_passed_on = false;  // this pass sent CMD a SIGTSTP (see the stopped event below)
      if (fds[0].revents != 0) {
        bool stopped_self = false;
        for (unsigned char byte : pipe.wait(0)) {
          if (byte == SIGTSTP) {
            // Ctrl-Z while sqllock's group has the terminal (CMD has not touched it since `fg`):
            // CMD is stopped, and sqllock with it once the supervisor reports the stop (as after
            // a Ctrl-Z that reached CMD); it used to stop sqllock alone and leave CMD running.
            // Once CMD is gone, or being stopped (its --grace to end after SIGTERM, which a stop
            // would cut short), sqllock stops alone, as it would have; once per batch of bytes.
            if (!status && stopped_for == stop_reason::none) {
              if (!stop_passed_on) child.signal_command(SIGTSTP);
              stop_passed_on = true;
            } else if (!stopped_self) {
              stop_self(SIGTSTP);
              stopped_self = true;
            }
          }
          if (is_forwarded(byte) && !status) child.signal_command(byte);
          if (is_forwarded(byte) && status && interrupted_after == 0) {
            // CMD has exited and the supervisor is stopping what it left running (SIGTERM sent,
            // SIGKILL after --grace). The lock can be released only once all of it is gone, so
            // an interruption now has it killed at once instead of waiting out the grace.
            interrupted_after = byte;
            print_error("interrupted (" + std::string(::strsignal(byte)) +
                        ") while stopping what the command left running: sending it SIGKILL now");
            child.stop_all(steady::now());
          }
          if (byte == at_risk_byte && stopped_for == stop_reason::none && !status) {
            const auto left =
                std::max(std::chrono::duration_cast<std::chrono::milliseconds>(guard->valid_until() - steady::now()),
                         std::chrono::milliseconds(0));
            print_error("lease on " + shown + " (fence " + guard->fences(options.names) +
                        ") is at risk: not renewed, " + human_duration(left) + " left");
          }
        }
      }
      if (fds[1].revents != 0) {
        const supervisor_event event = child.read_event();
        if (event.what == supervisor_event::kind::closed) break;  // the supervisor is done
        if (event.what == supervisor_event::kind::stopped && take_terminal && !status) {
          if ((event.value == SIGTTIN || event.value == SIGTTOU) && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp() &&
              !stop_passed_on) {
            // CMD touched the terminal while sqllock's group has it: `fg` of a job that Ctrl-Z and
            // `bg` left running (bash gives the terminal to the job's group, sqllock's, and sends
            // no SIGCONT to a running job, so sqllock learns of it only now). The job is in the
            // foreground: CMD gets the terminal and goes on, instead of the job stopping (unless
            // its lease is past the point where CMD must be gone: it then gets SIGKILL only).
            set_terminal_foreground(cmd);
            if (steady::now() < std::min(kill_at, kill_by)) child.signal_command(SIGCONT);
          } else if (suspend_with(stop_passed_on ? SIGTSTP : event.value, cmd)) {
            // (A Ctrl-Z passed on in this same pass to a CMD the terminal had just stopped: the
            // SIGTSTP, pending in a stopped CMD, would be discarded by the SIGCONT above, so the
            // job is stopped as after a Ctrl-Z instead.)
            resume_pending = true;
            resume_foreground = ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
          }
        } else if (event.what == supervisor_event::kind::exited) {
          status = event.value;
          command_stopped = event.stopped;
          if (take_terminal) set_terminal_foreground(::getpgrp());
        }
      }
    }
    const int supervisor_status = child.wait();
    if (take_terminal) set_terminal_foreground(::getpgrp());
    // The supervisor's only own exit is _exit(0), once nothing CMD started is left. Any other end
    // (it was killed) means what CMD started outside its group may still run, and nobody can reach
    // it now: also after CMD itself had exited and been reported, while the supervisor was still
    // stopping what CMD left behind (its --grace). So the lock is not released: it expires at its
    // TTL, as a dead holder's would, and no next holder overlaps. Before, a supervisor killed in
    // that grace let run release the lock with CMD's exit code.
    const bool supervisor_done = WIFEXITED(supervisor_status) && WEXITSTATUS(supervisor_status) == 0;
    const bool wait_failed = !status.has_value();
    if (wait_failed || !supervisor_done) {
      print_error("the command's supervisor ended unexpectedly (wait status " + std::to_string(supervisor_status) +
                  (wait_failed ? "); the command was killed" : "); the command had ended") + "; lock " + shown +
                  " is left to expire at its TTL, since processes the command started may outlive it");
      std::fflush(nullptr);
      ::_exit(exit_code::software);  // no destructor may release the lease (the guard's would)
    }

    if (stopped_for == stop_reason::none && command_stopped) {
      // A stop reached CMD, yet run asked for none: the supervisor's own deadline (a third of the
      // TTL before the lease's end as run last told it) came first, while run was stalled or had
      // not yet told it of a renewal. CMD's exit code is then the stop's, not CMD's own: the
      // outcome is run's own stop at that deadline, --max-hold or not renewed in time.
      stopped_for = steady::now() >= hold_end ? stop_reason::max_hold : stop_reason::not_renewed;
      if (stopped_for == stop_reason::not_renewed) {
        print_error("lease on " + shown + " (fence " + guard->fences(options.names) +
                    ") was not renewed in time by the command's deadline: the command was stopped");
      }
    }
    if (stopped_for == stop_reason::max_hold && command_stopped) {
      // Still ours (unless lost since): release it now that nothing CMD started is left.
      try {
        release_after_command(*guard, pipe, shown);
      } catch (const sqllock::error& e) {
        print_error(std::string("release after --max-hold failed (") + e.what() + "); it expires by its TTL");
      }
      print_error("lock " + shown + " was held for --max-hold " + human_duration(options.max_hold) +
                  "; the command was stopped (exit " + std::to_string(exit_code::lease_lost) + ")");
      return exit_code::lease_lost;
    }
    if (lost.load() || guard->lost() || stopped_for == stop_reason::lost || stopped_for == stop_reason::not_renewed) {
      // Not renewed in time and not (yet) found lost: the release may still find it ours.
      bool released = false;
      const bool found_lost = lost.load() || guard->lost() || stopped_for == stop_reason::lost;
      try {
        release_after_command(*guard, pipe, shown);
        released = !found_lost && !guard->lost();
      } catch (const sqllock::error&) {
        // Expected: the owner check refuses a lost lease.
      }
      print_error("lease on " + shown +
                  (released ? " was released after the command was stopped for it" : " was lost while the command ran") +
                  " (exit " + std::to_string(exit_code::lease_lost) + ")");
      return exit_code::lease_lost;
    }
    const int cmd_code = wait_failed ? exit_code::software : exit_code_of(*status);
    if (max_hold_announced) {
      // CMD's exit was read only after --max-hold, but nothing had stopped CMD: it ended by itself.
      print_error("the command had ended by itself before it was stopped; its exit code " + std::to_string(cmd_code) +
                  " is passed on");
    }
    try {
      release_after_command(*guard, pipe, shown);
    } catch (const sqllock::lease_lost& e) {
      print_error("lease on " + shown +
                  " was found lost at release; the command may have run unprotected: " + e.what());
      return exit_code::lease_lost;
    } catch (const sqllock::not_holder& e) {
      print_error("lease on " + shown +
                  " was found lost at release; the command may have run unprotected: " + e.what());
      return exit_code::lease_lost;
    } catch (const sqllock::error& e) {
      print_error("warning: release of " + shown + " failed (" + e.what() +
                  "); it expires by its TTL");
    }
    // Interrupted while what CMD left running was stopped: 128+N, as for a signal during the release.
    return interrupted_after != 0 ? 128 + interrupted_after : cmd_code;
  } catch (...) {
    return report_exception(redacted);
  }
}

}  // namespace sqllock_cli
