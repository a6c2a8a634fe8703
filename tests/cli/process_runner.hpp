// Test helper: run the sqllock binary (or anything) with arguments, environment and a deadline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cli_test {

struct process_result {
  int exit_code = -1;  ///< 128+signal when killed by one
  std::string out;
  std::string err;
  std::chrono::milliseconds elapsed{0};
};

struct process_options {
  std::map<std::string, std::string> env;  ///< added to the environment (SQLLOCK_URL is unset first)
  std::string cwd;                         ///< working directory ("" = inherit)
  std::string stdin_path = "/dev/null";    ///< what the process reads
  std::chrono::milliseconds timeout{20000};
};

/// A started process whose stdout and stderr go to files; killed (SIGKILL) if still running when
/// destroyed.
class background_process {
 public:
  background_process(const std::vector<std::string>& argv, const process_options& options);
  ~background_process();
  background_process(const background_process&) = delete;
  background_process& operator=(const background_process&) = delete;

  pid_t pid() const { return pid_; }
  /// Wait until it exits (SIGKILL and a failed expectation at the timeout).
  process_result wait(std::chrono::milliseconds timeout = std::chrono::milliseconds{20000});
  /// Whether it has exited, without waiting and without reaping it (wait() still reports it).
  bool exited() const;
  /// Its exit (when exited()), stdout and stderr so far, for failure messages.
  std::string describe() const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string out_path_;
  std::string err_path_;
  std::chrono::steady_clock::time_point started_;
};

/// Run to completion.
process_result run_process(const std::vector<std::string>& argv, const process_options& options = {});

/// The sqllock binary under test.
std::string cli_path();

std::string read_file(const std::string& path);
bool file_exists(const std::string& path);
/// Wait until `path` exists and is non-empty; false at the timeout.
bool wait_for_file(const std::string& path, std::chrono::milliseconds timeout = std::chrono::milliseconds{10000});
/// The same for a file `writer` writes: false also as soon as `writer` has exited without it (a
/// failed start is then told from a slow one without waiting out the timeout).
bool wait_for_file(const std::string& path, const background_process& writer,
                   std::chrono::milliseconds timeout = std::chrono::milliseconds{10000});

}  // namespace cli_test
