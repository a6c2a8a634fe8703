// Job control at a terminal, for the end-to-end tests of Ctrl-Z / fg: an interactive bash on a
// pseudo-terminal typed into like a user would, and waits for states one can observe (text on
// the screen, a process group stopped) instead of sleeps that a loaded machine outlasts.
//
// Commands run as jobs here must not be dash scripts that fork in a loop: dash starts simple
// commands with vfork() and blocks every signal while its child has not exec'd yet, so a Ctrl-Z
// landing in that window stops the child and leaves dash waiting for it, never stopped: no shell
// then sees the job stop (plain bash running `sh -c 'while :; do sleep 0.05; done'` hangs the same
// way, 7 of 60 Ctrl-Z under load). bash forks (no vfork): use `bash -c` for such commands.
#pragma once

#include <dirent.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "process_runner.hpp"

namespace cli_test {

/// An interactive bash on a pseudo-terminal (prompt "$ "), killed with its terminal at the end.
class terminal_session {
 public:
  terminal_session() {
    pid_ = ::forkpty(&master_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      ::setenv("PS1", "$ ", 1);
      ::unsetenv("SQLLOCK_URL");
      ::execlp("bash", "bash", "--norc", "--noprofile", "-i", static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~terminal_session() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    if (master_ >= 0) ::close(master_);
  }
  terminal_session(const terminal_session&) = delete;
  terminal_session& operator=(const terminal_session&) = delete;

  bool started() const { return pid_ > 0 && master_ >= 0; }
  void type(const std::string& text) { [[maybe_unused]] auto n = ::write(master_, text.data(), text.size()); }
  /// Wait until the terminal has shown `needle` after what was already consumed; consume up to it.
  bool wait_for(const std::string& needle, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (const auto at = screen_.find(needle, seen_); at != std::string::npos) {
        seen_ = at + needle.size();
        return true;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{master_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(master_, buf, sizeof buf);
      if (n <= 0) return false;
      screen_.append(buf, static_cast<std::size_t>(n));
    }
  }
  const std::string& screen() const { return screen_; }
  /// For failure messages: everything the terminal shows until it is quiet for `quiet`, also what
  /// no wait_for read yet (typed input echoed, a later prompt).
  const std::string& drained(std::chrono::milliseconds quiet = std::chrono::milliseconds(300)) {
    for (;;) {
      pollfd p{master_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(quiet.count())) <= 0) break;
      char buf[4096];
      const ssize_t n = ::read(master_, buf, sizeof buf);
      if (n <= 0) break;
      screen_.append(buf, static_cast<std::size_t>(n));
    }
    return screen_;
  }
  pid_t shell_pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int master_ = -1;
  std::string screen_;
  std::size_t seen_ = 0;
};

/// A command line that runs `sqllock ARGS` as a foreground job once its process group owns the
/// terminal. sqllock takes part in job control only when it finds its group in the terminal's
/// foreground at start; the subshell (bash: $BASHPID is its pid, /proc/PID/stat fields 5 and 8
/// are its process group and the terminal's foreground group) waits for that, instead of
/// sleeping for a time a loaded machine may outlast.
inline std::string in_foreground(const std::string& args) {
  return "(until read -r s < /proc/$BASHPID/stat && set -- ${s##*) } && [ \"$3\" = \"$6\" ]; do sleep 0.01; "
         "done; exec " +
         cli_path() + args + ")\n";
}

/// The state letter (R, S, D, T, Z, ...) of every process in process group `pgid`.
inline std::string process_group_states(pid_t pgid) {
  std::string states;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return states;
  while (const dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string stat = read_file(std::string("/proc/") + e->d_name + "/stat");
    const auto paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(stat.substr(paren + 1));
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (fields >> state >> ppid >> pgrp && pgrp == pgid) states += state;
  }
  ::closedir(proc);
  return states;
}

/// The terminal's foreground process group as process `pid` sees it (-1 if unknown).
inline pid_t terminal_foreground_of(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(stat.substr(paren + 1));
  char state = 0;
  long ppid = 0, pgrp = 0, session = 0, tty = 0, tpgid = -1;
  if (!(fields >> state >> ppid >> pgrp >> session >> tty >> tpgid)) return -1;
  return static_cast<pid_t>(tpgid);
}

/// For failure messages: pid, name, state, parent, process group, the terminal's foreground group
/// as it sees it, and its signal masks (pending, blocked, ignored, caught) of `pid`, its parent and
/// its parent's parent (for CMD: the supervisor and sqllock run), and of every other process of
/// `pid`'s group.
inline std::string process_report(pid_t pid) {
  auto one = [](pid_t p, long* parent, long* group) {
    const std::string stat = read_file("/proc/" + std::to_string(p) + "/stat");
    const auto open = stat.find('(');
    const auto paren = stat.rfind(')');
    if (open == std::string::npos || paren == std::string::npos) return std::to_string(p) + " gone\n";
    std::istringstream fields(stat.substr(paren + 1));
    char state = 0;
    long ppid = 0, pgrp = 0, session = 0, tty = 0, tpgid = -1;
    fields >> state >> ppid >> pgrp >> session >> tty >> tpgid;
    if (parent != nullptr) *parent = ppid;
    if (group != nullptr) *group = pgrp;
    std::string out = std::to_string(p) + " " + stat.substr(open, paren - open + 1) + " " + state +
                      " ppid=" + std::to_string(ppid) + " pgrp=" + std::to_string(pgrp) +
                      " tpgid=" + std::to_string(tpgid);
    std::istringstream status(read_file("/proc/" + std::to_string(p) + "/status"));
    for (std::string line; std::getline(status, line);) {
      for (const char* key : {"SigPnd:", "ShdPnd:", "SigBlk:", "SigIgn:", "SigCgt:"}) {
        const std::string k(key);
        if (line.rfind(k, 0) != 0) continue;
        const auto value = line.find_first_not_of(" \t", k.size());
        out += " " + k.substr(0, k.size() - 1) + "=" + (value == std::string::npos ? "" : line.substr(value));
      }
    }
    return out + "\n";
  };
  std::string out;
  long parent = 0, group = 0;
  out += "cmd " + one(pid, &parent, &group);
  long grand = 0;
  if (parent > 1) out += "parent " + one(static_cast<pid_t>(parent), &grand, nullptr);
  if (grand > 1) out += "grandparent " + one(static_cast<pid_t>(grand), nullptr, nullptr);
  if (DIR* proc = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(proc)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      const pid_t p = static_cast<pid_t>(std::atol(e->d_name));
      long g = 0;
      if (p == pid) continue;
      const std::string line = one(p, nullptr, &g);
      if (g == pid) out += "in group " + line;
    }
    ::closedir(proc);
  }
  return out;
}

/// True once every process of group `pgid` is stopped (T) or a zombie, and there is at least one.
inline bool process_group_stopped(pid_t pgid) {
  const std::string s = process_group_states(pgid);
  return !s.empty() && s.find_first_not_of("TtZ") == std::string::npos;
}

/// At scope exit, SIGKILL the process group CMD leads if CMD still runs and still leads it: a
/// failing test must not leave a stopped CMD behind (and sqllock renewing its lease for it).
struct command_group_killer {
  pid_t leader = -1;
  ~command_group_killer() {
    if (leader <= 0) return;
    const std::string stat = read_file("/proc/" + std::to_string(leader) + "/stat");
    const auto paren = stat.rfind(')');
    if (paren == std::string::npos) return;
    std::istringstream fields(stat.substr(paren + 1));
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (fields >> state >> ppid >> pgrp && pgrp == leader && state != 'Z') ::kill(-leader, SIGKILL);
  }
};

/// Poll `condition` every 10 ms until it holds; false at the timeout.
inline bool wait_until(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace cli_test
