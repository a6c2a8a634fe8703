// The supervisor of `sqllock run`'s command: a subreaper that stops everything CMD started before
// the lease can expire, also when `run` dies. See supervisor.hpp for the process model.
//
// Between fork and _exit the supervisor (a child of a multi-threaded process) makes only
// async-signal-safe calls: raw system calls, no allocation, no stdio; all it needs is prepared
// before the fork.
#include "supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace sqllock_cli {
namespace {

using steady = std::chrono::steady_clock;

/// Shared between `run` and the supervisor (an anonymous shared mapping).
struct shared_page {
  std::atomic<std::int64_t> valid_until_ns{0};  ///< steady_clock (CLOCK_MONOTONIC) nanoseconds
};
static_assert(std::atomic<std::int64_t>::is_always_lock_free);

/// Supervisor -> run.
struct event_message {
  std::int32_t kind;
  std::int32_t value;
};
constexpr std::int32_t msg_started = 1;      // value: CMD's pid (and process group)
constexpr std::int32_t msg_exec_failed = 2;  // value: errno
constexpr std::int32_t msg_stopped = 3;      // value: signal
constexpr std::int32_t msg_exited = 4;       // value: wait status; CMD ended by itself
/// value: wait status; CMD ended after this supervisor had sent it SIGTERM or SIGKILL (a stop)
constexpr std::int32_t msg_exited_stopped = 5;

/// run -> supervisor.
struct control_message {
  std::int64_t kind;
  std::int64_t value;
};
constexpr std::int64_t ctl_stop = 1;    // value: SIGKILL deadline (steady_clock nanoseconds)
constexpr std::int64_t ctl_signal = 2;  // value: a signal for CMD's process group

std::int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::int64_t to_ns(steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void write_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

/// Read exactly `size` bytes; the count read (less at end-of-file).
std::size_t read_all(int fd, void* data, std::size_t size) {
  char* p = static_cast<char*>(data);
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, p + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  return got;
}

// ---------------------------------------------------------------------------------------------
// The supervisor's side (after fork: async-signal-safe only).

/// Everything the supervisor needs, prepared before the fork.
struct supervisor_context {
  char** argv;
  char** envp;
  const int* keep_fds;  // sorted
  std::size_t keep_count;
  bool take_terminal;
  const bool* default_in_command;
  const sigset_t* command_mask;
  std::int64_t grace_ns;
  std::int64_t kill_margin_ns;
  std::int64_t term_lead_ns;
  shared_page* shared;
  int control_read;   // run -> supervisor: control_message; EOF when run is gone
  int control_write;  // run's end, closed here
  int status_write;   // supervisor -> run: event_message
  int status_read;    // run's end, closed here
  pid_t run_pid;
};

constexpr std::size_t max_processes = 1 << 16;
pid_t scan_pid[max_processes];
pid_t scan_ppid[max_processes];
bool scan_mine[max_processes];

/// Parent pid from /proc/PID/stat ("pid (comm) state ppid ..."; comm may hold any byte).
pid_t parent_of(const char* pid_text) {
  char path[64] = "/proc/";
  std::size_t len = 6;
  for (const char* c = pid_text; *c != '\0' && len < sizeof path - 6; ++c) path[len++] = *c;
  std::memcpy(path + len, "/stat", 6);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* close_paren = nullptr;
  for (ssize_t i = 0; i < n; ++i) {
    if (buf[i] == ')') close_paren = buf + i;
  }
  if (close_paren == nullptr || close_paren + 4 >= buf + n) return -1;
  const char* p = close_paren + 4;  // ") S " then ppid
  pid_t ppid = 0;
  while (*p >= '0' && *p <= '9') ppid = ppid * 10 + (*p++ - '0');
  return ppid;
}

struct linux_dirent64_header {
  std::uint64_t d_ino;
  std::int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];
};

bool all_digits(const char* s) {
  if (*s == '\0') return false;
  for (; *s != '\0'; ++s) {
    if (*s < '0' || *s > '9') return false;
  }
  return true;
}

/// Call f(name) for every entry of a directory (getdents64: no allocation).
template <typename F>
void for_each_entry(const char* dir, F f) {
  const int fd = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buf[8192];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      const auto* d = reinterpret_cast<const linux_dirent64_header*>(buf + off);
      f(d->d_name, fd);
      off += d->d_reclen;
    }
  }
  ::close(fd);
}

/// Whether the child `pid` (not reaped yet) has not exited. WNOWAIT leaves an exited child a
/// zombie, so its pid cannot be reused before reap() collects it.
bool not_exited(pid_t pid) {
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0) return info.si_pid == 0;
    if (errno != EINTR) return false;
  }
}

/// Send `signo` to every descendant of this process. As a subreaper it is the ancestor of all
/// that CMD started and that still runs, whatever process group or session they moved to.
/// `command` (CMD's pid while not reaped, else -1): `command_hit` is set when `signo` went to CMD
/// while it had not exited, checked just before the kill (a CMD that ended by itself and waits to
/// be reaped, a zombie, does not count). Returns how many were signalled.
std::size_t signal_descendants(int signo, pid_t command = -1, bool* command_hit = nullptr) {
  std::size_t count = 0;
  for_each_entry("/proc", [&](const char* name, int) {
    if (count >= max_processes || !all_digits(name)) return;
    const pid_t ppid = parent_of(name);
    if (ppid <= 0) return;
    pid_t pid = 0;
    for (const char* c = name; *c != '\0'; ++c) pid = pid * 10 + (*c - '0');
    scan_pid[count] = pid;
    scan_ppid[count] = ppid;
    scan_mine[count] = false;
    ++count;
  });
  const pid_t self = ::getpid();
  std::size_t signalled = 0;
  for (bool grew = true; grew;) {
    grew = false;
    for (std::size_t i = 0; i < count; ++i) {
      if (scan_mine[i]) continue;
      bool mine = scan_ppid[i] == self;
      for (std::size_t j = 0; j < count && !mine; ++j) mine = scan_mine[j] && scan_pid[j] == scan_ppid[i];
      if (mine) {
        scan_mine[i] = true;
        grew = true;
        if (command_hit != nullptr && scan_pid[i] == command && not_exited(command)) *command_hit = true;
        ::kill(scan_pid[i], signo);
        ++signalled;
      }
    }
  }
  return signalled;
}

void send_event(const supervisor_context& c, std::int32_t kind, std::int32_t value) {
  const event_message m{kind, value};
  write_all(c.status_write, &m, sizeof m);  // SIGPIPE is ignored: run may be gone
}

/// Reap every child that has changed state; report CMD's stops and exit (`command_stopped`: this
/// supervisor had sent CMD SIGTERM or SIGKILL before it exited). False when no child is left
/// (ECHILD).
bool reap(const supervisor_context& c, pid_t command, bool& command_done, bool command_stopped) {
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(-1, &status, WNOHANG | WUNTRACED);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) return true;
    if (r != command) continue;  // an orphan re-parented to us
    if (WIFSTOPPED(status)) {
      send_event(c, msg_stopped, WSTOPSIG(status));
    } else if (!command_done) {
      command_done = true;
      send_event(c, command_stopped ? msg_exited_stopped : msg_exited, status);
    }
  }
}

extern "C" void on_supervisor_sigchld(int) {}

/// `run`'s pid while it lives: CMD's parent is the supervisor now, so a signal a script sends to
/// its parent ($PPID) is passed on to `run`, which forwards it to CMD's group as before.
volatile sig_atomic_t relay_to = 0;
extern "C" void on_supervisor_relay(int signo) {
  if (relay_to > 0) ::kill(static_cast<pid_t>(relay_to), signo);
}

[[noreturn]] void supervise(const supervisor_context& c) {
  // Every signal is blocked (the parent blocked all across fork).
  ::setpgid(0, 0);  // out of run's group: a signal to run's job does not stop the cleanup
#ifdef __linux__
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
  ::close(c.control_write);
  ::close(c.status_read);
  // Hold nothing of the library's (database sockets, files): only what CMD inherits and our pipes.
  for_each_entry("/proc/self/fd", [&](const char* name, int dir_fd) {
    if (!all_digits(name)) return;
    int fd = 0;
    for (const char* ch = name; *ch != '\0'; ++ch) fd = fd * 10 + (*ch - '0');
    if (fd <= 2 || fd == dir_fd || fd == c.control_read || fd == c.status_write) return;
    if (std::binary_search(c.keep_fds, c.keep_fds + c.keep_count, fd)) return;
    ::close(fd);
  });

  // Our own dispositions: run's handlers write to run's pipe, so none of them here. The signals run
  // forwards go to run (they are meant for CMD, through run); SIGPIPE is ignored (run may be gone).
  relay_to = c.run_pid;
  struct sigaction old_pipe {};
  ::sigaction(SIGPIPE, nullptr, &old_pipe);
  struct sigaction sa {};
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = on_supervisor_relay;
  for (int s = 1; s < 65; ++s) {
    if (c.default_in_command[s] && s != SIGCHLD) ::sigaction(s, &sa, nullptr);
  }
  sa.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &sa, nullptr);
  sa.sa_handler = on_supervisor_sigchld;
  ::sigaction(SIGCHLD, &sa, nullptr);

  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    send_event(c, msg_exec_failed, errno);
    ::_exit(0);
  }
  const pid_t self = ::getpid();
  const pid_t command = ::fork();
  if (command == 0) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int s = 1; s < 65; ++s) {
      if (c.default_in_command[s] || s == SIGCHLD) ::sigaction(s, &dfl, nullptr);
    }
    ::sigaction(SIGPIPE, &old_pipe, nullptr);
    ::setpgid(0, 0);
    if (c.take_terminal) ::tcsetpgrp(STDIN_FILENO, ::getpid());  // SIGTTOU is blocked here
#ifdef __linux__
    // Should the supervisor itself be killed, nobody is left to stop CMD later.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != self) ::_exit(76);
#endif
    ::sigprocmask(SIG_SETMASK, c.command_mask, nullptr);
    ::execvpe(c.argv[0], c.argv, c.envp);
    const int err = errno;
    write_all(exec_pipe[1], &err, sizeof err);
    ::_exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
  }
  ::close(exec_pipe[1]);
  if (command < 0) {
    send_event(c, msg_exec_failed, errno);
    ::_exit(0);
  }
  ::setpgid(command, command);
  if (c.take_terminal) ::tcsetpgrp(STDIN_FILENO, command);
  int err = 0;
  const bool failed = read_all(exec_pipe[0], &err, sizeof err) == sizeof err;
  ::close(exec_pipe[0]);
  if (failed) {
    send_event(c, msg_exec_failed, err);
    int status = 0;
    while (::waitpid(command, &status, 0) < 0 && errno == EINTR) {
    }
    ::_exit(0);
  }
  send_event(c, msg_started, command);

  sigset_t wait_mask;
  sigfillset(&wait_mask);
  sigdelset(&wait_mask, SIGCHLD);
  for (int s = 1; s < 65; ++s) {
    if (c.default_in_command[s]) sigdelset(&wait_mask, s);  // relayed to run
  }
  bool command_done = false;
  // SIGTERM or SIGKILL went to CMD while it had not exited (whoever asked for the stop: run, the
  // lease's deadline, run's death). A signal run forwards (ctl_signal) is the user's, not a stop.
  bool command_stopped = false;
  auto stop_signal = [&](int signo) { signal_descendants(signo, command_done ? -1 : command, &command_stopped); };
  bool stopping = false;
  std::int64_t kill_at = INT64_MAX;
  int control = c.control_read;
  auto begin_stop = [&](std::int64_t deadline) {
    kill_at = std::min(kill_at, deadline);
    if (stopping) return;
    stopping = true;
    // Past the SIGKILL deadline already (run resumed after the lease ran out): no SIGTERM and above
    // all no SIGCONT, which would let a stopped CMD run again; the SIGKILL loop below follows.
    if (now_ns() >= kill_at) return;
    stop_signal(SIGTERM);
    signal_descendants(SIGCONT);  // a stopped process must be able to act on SIGTERM
  };
  auto deadline_from_lease = [&]() {
    // SIGTERM now, SIGKILL after the grace but never later than kill_margin before the lease's end.
    return std::min(now_ns() + c.grace_ns,
                    c.shared->valid_until_ns.load(std::memory_order_acquire) - c.kill_margin_ns);
  };
  for (;;) {
    if (!reap(c, command, command_done, command_stopped)) ::_exit(0);  // no child left: everything is gone
    if (command_done) begin_stop(deadline_from_lease());  // what CMD left behind
    if (stopping && now_ns() >= kill_at) {
      // SIGKILL until no descendant is left (one may have forked while we scanned).
      for (;;) {
        stop_signal(SIGKILL);
        if (!reap(c, command, command_done, command_stopped)) ::_exit(0);
        const timespec pause{0, 2'000'000};
        ::nanosleep(&pause, nullptr);
      }
    }
    // The lease's own deadline, whatever `run` does: a run that is stopped (SIGSTOP) or blocked
    // (writing to a stalled stderr) neither renews nor asks for the stop, so the supervisor starts
    // it itself at the moment run would have (the published end only moves forward, and lags the
    // real one by at most run's publishing period, so a healthy lease never reaches it).
    const std::int64_t term_at =
        c.shared->valid_until_ns.load(std::memory_order_acquire) - c.kill_margin_ns - c.term_lead_ns;
    if (!stopping && now_ns() >= term_at) {
      begin_stop(deadline_from_lease());
      continue;
    }
    pollfd p{control, POLLIN, 0};
    const std::int64_t left = std::max<std::int64_t>((stopping ? kill_at : term_at) - now_ns(), 0);
    const timespec timeout{static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
    const int ready = ::ppoll(&p, 1, &timeout, &wait_mask);
    if (ready <= 0 || control < 0 || (p.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    control_message m{};
    if (read_all(control, &m, sizeof m) == sizeof m) {
      if (m.kind == ctl_stop) {
        begin_stop(m.value);
      } else if (m.kind == ctl_signal && m.value > 0 && m.value < 65) {
        // Only while CMD is not reaped: until this process (its parent) reaps it, its pid, and so
        // its process group id, cannot be reused. Once CMD is reaped, what is left of its group is
        // stopped by begin_stop above, and a signal to -command could reach an unrelated group.
        reap(c, command, command_done, command_stopped);
        if (!command_done) ::kill(-command, static_cast<int>(m.value));
      }
    } else {
      // run is gone: nobody renews the lease any more.
      relay_to = 0;
      ::close(control);
      control = -1;
      begin_stop(deadline_from_lease());
    }
  }
}

}  // namespace

supervisor::supervisor(const supervisor_spec& spec) {
  auto command = spec.command;
  auto environment = spec.environment;
  auto argv = c_strings(command);
  auto envp = c_strings(environment);
  std::vector<int> keep = spec.inherited_fds;
  std::sort(keep.begin(), keep.end());

  void* mem = ::mmap(nullptr, sizeof(shared_page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw std::runtime_error(std::string("mmap: ") + std::strerror(errno));
  shared_ = mem;
  auto* shared = new (mem) shared_page;
  shared->valid_until_ns.store(to_ns(spec.valid_until));

  int control[2], status[2];
  if (::pipe2(control, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  if (::pipe2(status, O_CLOEXEC) != 0) {
    ::close(control[0]);
    ::close(control[1]);
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  }
  const supervisor_context context{argv.data(),
                                   envp.data(),
                                   keep.data(),
                                   keep.size(),
                                   spec.take_terminal,
                                   spec.default_in_command,
                                   &spec.command_mask,
                                   std::chrono::duration_cast<std::chrono::nanoseconds>(spec.grace).count(),
                                   std::chrono::duration_cast<std::chrono::nanoseconds>(spec.kill_margin).count(),
                                   std::chrono::duration_cast<std::chrono::nanoseconds>(spec.term_lead).count(),
                                   shared,
                                   control[0],
                                   control[1],
                                   status[1],
                                   status[0],
                                   ::getpid()};

  // Block every signal across fork so the child cannot run our handlers before it reset them.
  sigset_t all, old_mask;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old_mask);
  const pid_t pid = ::fork();
  if (pid == 0) supervise(context);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::close(control[0]);
  ::close(status[1]);
  control_write_ = control[1];
  status_read_ = status[0];
  if (pid < 0) {
    ::close(control_write_);
    ::close(status_read_);
    ::munmap(shared_, sizeof(shared_page));
    throw std::runtime_error(std::string("fork: ") + std::strerror(fork_errno));
  }
  pid_ = pid;
  ::setpgid(pid, pid);  // also here, whichever runs first

  event_message first{};
  if (read_all(status_read_, &first, sizeof first) != sizeof first) {
    wait();
    throw supervisor_lost("the supervisor of the command ended before it reported the command started");
  }
  if (first.kind == msg_exec_failed) {
    exec_errno_ = first.value;
    return;
  }
  command_pid_ = first.value;
}

supervisor::~supervisor() {
  if (control_write_ >= 0) ::close(control_write_);
  if (pid_ > 0 && !reaped_) wait();
  if (status_read_ >= 0) ::close(status_read_);
  if (shared_ != nullptr) ::munmap(shared_, sizeof(shared_page));
}

supervisor_event supervisor::read_event() {
  event_message m{};
  if (read_all(status_read_, &m, sizeof m) != sizeof m) return {supervisor_event::kind::closed, 0};
  if (m.kind == msg_stopped) return {supervisor_event::kind::stopped, m.value};
  if (m.kind == msg_exited) return {supervisor_event::kind::exited, m.value, false};
  if (m.kind == msg_exited_stopped) return {supervisor_event::kind::exited, m.value, true};
  return {supervisor_event::kind::closed, 0};
}

void supervisor::publish_valid_until(steady::time_point until) {
  auto* shared = static_cast<shared_page*>(shared_);
  const std::int64_t ns = to_ns(until);
  if (ns > shared->valid_until_ns.load(std::memory_order_relaxed)) {
    shared->valid_until_ns.store(ns, std::memory_order_release);
  }
}

void supervisor::stop_all(steady::time_point kill_at) { send(ctl_stop, to_ns(kill_at)); }

void supervisor::signal_command(int signo) { send(ctl_signal, signo); }

void supervisor::send(std::int64_t kind, std::int64_t value) {
  // The supervisor may have finished already (it stopped everything on its own, e.g. while run was
  // frozen): the write then fails with EPIPE, and the SIGPIPE it raises must not kill run. SIGPIPE
  // is blocked around the write and a pending one consumed; run's disposition (inherited by
  // nothing: CMD is the supervisor's child) stays as it was.
  sigset_t pipe_set, old_mask;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  const control_message m{kind, value};
  write_all(control_write_, &m, sizeof m);
  const timespec zero{0, 0};
  while (::sigtimedwait(&pipe_set, nullptr, &zero) == SIGPIPE) {
  }
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
}

int supervisor::wait() {
  if (reaped_) return status_;
  while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  return status_;
}

}  // namespace sqllock_cli
