// The process that starts CMD for `sqllock run` and makes sure nothing CMD started outlives the
// lease, even when `sqllock run` itself dies (SIGKILL included).
//
// `sqllock run` forks the supervisor; the supervisor becomes a child subreaper (every orphaned
// descendant of CMD, also one that left CMD's process group or session, is re-parented to it) and
// forks CMD in a process group of its own. It reports CMD's start, stops and exit (with whether its
// own SIGTERM/SIGKILL reached CMD before CMD had exited) on a pipe, and stops every descendant
// (SIGTERM, SIGCONT, then SIGKILL until none is left) when
//  - `sqllock run` asks for it (lease lost or about to expire), with a SIGKILL deadline;
//  - `sqllock run` dies: the supervisor sees end-of-file on a pipe whose write end only `run`
//    holds, and kills by the last lease deadline `run` published in shared memory;
//  - CMD exits: what CMD left behind is stopped before `run` releases the lock.
// It exits when it has no child left; `run` releases the lease only after that.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sqllock_cli {

struct supervisor_spec {
  std::vector<std::string> command;      ///< CMD and its arguments (PATH is searched)
  std::vector<std::string> environment;  ///< CMD's environment
  std::vector<int> inherited_fds;        ///< descriptors (besides 0-2) CMD inherits
  bool take_terminal = false;            ///< give the terminal's foreground to CMD's group
  const bool* default_in_command = nullptr;  ///< [65]: signals reset to SIG_DFL in CMD (ours)
  sigset_t command_mask{};                   ///< CMD's initial signal mask
  std::chrono::milliseconds grace{0};        ///< SIGTERM to SIGKILL when `run` died or CMD exited
  std::chrono::milliseconds kill_margin{0};  ///< SIGKILL this long before the lease's end
  /// SIGTERM this long before kill_margin before the published lease end, on the supervisor's own
  /// clock, also while `run` lives but does not act (stopped, blocked writing to stderr).
  std::chrono::milliseconds term_lead{0};
  std::chrono::steady_clock::time_point valid_until{};  ///< the lease's end when CMD starts
};

/// What the supervisor reported.
struct supervisor_event {
  enum class kind { stopped, exited, closed } what = kind::closed;
  int value = 0;  ///< stopped: the signal; exited: CMD's wait status
  /// exited: CMD had not exited when the supervisor sent it SIGTERM or SIGKILL (stop_all, the
  /// lease's deadline, run's death), so the stop ended it; false when CMD ended by itself, also
  /// by a signal from anyone else (signal_command included).
  bool stopped = false;
};

/// The supervisor ended before it said whether CMD was executed (it was killed): CMD may have run
/// and started processes that nobody can reach now.
class supervisor_lost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class supervisor {
 public:
  /// Fork the supervisor and, through it, CMD. Returns once CMD was executed or failed to be;
  /// throws supervisor_lost when the supervisor ended before it said which.
  explicit supervisor(const supervisor_spec& spec);
  ~supervisor();
  supervisor(const supervisor&) = delete;
  supervisor& operator=(const supervisor&) = delete;

  pid_t command_pid() const { return command_pid_; }  ///< also CMD's process group
  int exec_errno() const { return exec_errno_; }      ///< non-zero: CMD could not be executed
  int event_fd() const { return status_read_; }       ///< readable when an event is pending

  /// The next event; call when event_fd() is readable (closed: the supervisor has exited).
  supervisor_event read_event();
  /// Where the supervisor finds the lease's end should `run` die (only ever moves forward).
  void publish_valid_until(std::chrono::steady_clock::time_point until);
  /// SIGTERM and SIGCONT to every process CMD started, now; SIGKILL to all at `kill_at` (at once,
  /// without SIGTERM or SIGCONT, when `kill_at` has passed).
  void stop_all(std::chrono::steady_clock::time_point kill_at);
  /// `signo` to CMD's process group, sent by the supervisor only while CMD is not reaped (so never
  /// to a reused process group id); dropped once CMD has exited or the supervisor is gone.
  void signal_command(int signo);
  /// Wait for the supervisor to exit (everything CMD started is gone then). Its wait status.
  int wait();

 private:
  void send(std::int64_t kind, std::int64_t value);
  pid_t pid_ = -1;
  pid_t command_pid_ = -1;
  int exec_errno_ = 0;
  int control_write_ = -1;
  int status_read_ = -1;
  void* shared_ = nullptr;
  bool reaped_ = false;
  int status_ = 0;
};

}  // namespace sqllock_cli
