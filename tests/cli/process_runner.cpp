// Test helper: run the sqllock binary (or anything) with arguments, environment and a deadline.
#include "process_runner.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

namespace cli_test {
namespace {

std::atomic<int> output_counter{0};

std::string temp_output_path(const char* kind) {
  return "/tmp/sqllock-cli-test-" + std::to_string(::getpid()) + "-" + std::to_string(output_counter++) + "." + kind;
}

}  // namespace

std::string cli_path() { return SQLLOCK_CLI_PATH; }

background_process::background_process(const std::vector<std::string>& argv, const process_options& options)
    : out_path_(temp_output_path("out")), err_path_(temp_output_path("err")) {
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  started_ = std::chrono::steady_clock::now();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ > 0) ::setpgid(pid_, 0);  // also here, so the group exists before anyone signals it
  if (pid_ == 0) {
    // A process group of its own, so that the destructor can kill helpers' subshells as well.
    ::setpgid(0, 0);
    ::unsetenv("SQLLOCK_URL");
    for (const auto& [k, v] : options.env) ::setenv(k.c_str(), v.c_str(), 1);
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) ::_exit(200);
    const int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int in = ::open(options.stdin_path.c_str(), O_RDONLY);
    if (out < 0 || err < 0 || in < 0) ::_exit(201);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    for (int fd : {in, out, err}) {
      if (fd > 2) ::close(fd);
    }
    // Default dispositions and mask, whatever the test runner had.
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGPIPE}) ::signal(s, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvp(cargv[0], cargv.data());
    ::_exit(202);
  }
}

background_process::~background_process() {
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);  // stragglers of the group too (ESRCH when none are left)
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  ::unlink(out_path_.c_str());
  ::unlink(err_path_.c_str());
}

process_result background_process::wait(std::chrono::milliseconds timeout) {
  process_result result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      ADD_FAILURE() << "process " << pid_ << " still running after " << timeout.count() << " ms; killing it";
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  reaped_ = true;
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  result.out = read_file(out_path_);
  result.err = read_file(err_path_);
  return result;
}

bool background_process::exited() const {
  if (reaped_) return true;
  siginfo_t info{};
  // WNOWAIT: the exit stays to be collected by wait().
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return errno == ECHILD;
  return info.si_pid == pid_;
}

std::string background_process::describe() const {
  std::string text = "process " + std::to_string(pid_);
  siginfo_t info{};
  if (!reaped_ && ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
      info.si_pid == pid_) {
    text += info.si_code == CLD_EXITED ? " exited " + std::to_string(info.si_status)
                                       : " killed by signal " + std::to_string(info.si_status);
  } else {
    text += reaped_ ? " reaped" : " running";
  }
  return text + "; stdout: " + read_file(out_path_) + "; stderr: " + read_file(err_path_);
}

process_result run_process(const std::vector<std::string>& argv, const process_options& options) {
  background_process p(argv, options);
  return p.wait(options.timeout);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool wait_for_file(const std::string& path, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && st.st_size > 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

bool wait_for_file(const std::string& path, const background_process& writer, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto written = [&] {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && st.st_size > 0;
  };
  while (std::chrono::steady_clock::now() < deadline) {
    if (written()) return true;
    if (writer.exited()) return written();  // it may have written the file just before its exit
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace cli_test
