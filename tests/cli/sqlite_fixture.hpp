// The fixture every end-to-end CLI test program shares: a fresh temporary directory with a
// migrated SQLite lock database, and helpers to run the sqllock binary on it.
#pragma once

#include <stdlib.h>
#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "process_runner.hpp"

namespace cli_test {

class sqlite_fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = "/tmp/sqllock-" + std::string(dir_prefix()) + "-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    url_ = "sqlite:" + dir_ + "/locks.db";
    if (migrate_in_setup()) {
      const auto r = sqllock({"migrate", "--url", url_});
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  /// The temporary directory is /tmp/sqllock-<dir_prefix()>-XXXXXX.
  virtual const char* dir_prefix() const { return "cli"; }
  virtual bool migrate_in_setup() const { return true; }

  static std::vector<std::string> with_binary(std::vector<std::string> args) {
    args.insert(args.begin(), cli_path());
    return args;
  }
  /// Run `sqllock ARGS` to completion.
  process_result sqllock(std::vector<std::string> args, process_options options = {}) {
    return run_process(with_binary(std::move(args)), options);
  }
  /// Start `sqllock ARGS` in the background.
  std::unique_ptr<background_process> start(std::vector<std::string> args, process_options options = {}) {
    return std::make_unique<background_process>(with_binary(std::move(args)), options);
  }
  /// `run --url U --name NAME EXTRA -- /bin/sh -c SCRIPT` on this test's database.
  std::vector<std::string> run_args(const std::string& name, std::vector<std::string> extra,
                                    const std::string& shell_script) {
    std::vector<std::string> args{"run", "--url", url_, "--name", name};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--", "/bin/sh", "-c", shell_script});
    return args;
  }
  std::string path(const std::string& file) const { return dir_ + "/" + file; }
  void write_file(const std::string& file, const std::string& content) const {
    std::ofstream out(path(file), std::ios::binary);
    out << content;
  }
  /// The file's content without trailing newlines and spaces.
  std::string trimmed_file(const std::string& file) {
    std::string s = read_file(path(file));
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }

  /// A CMD script that ignores SIGTERM, writes its pid to "pid" and its child's (`sleep 300`) to
  /// "pid2", then waits forever: only SIGKILL of both stops it.
  std::string stubborn_command() const {
    return "trap '' TERM; echo $$ > " + path("pid") + "; sleep 300 & echo $! > " + path("pid2") +
           "; while :; do wait; done";
  }
  /// The pids stubborn_command wrote, {CMD, its child}, once both files exist; empty when they
  /// did not appear in time (a test then fails on it).
  std::vector<pid_t> stubborn_pids() {
    if (!wait_for_file(path("pid")) || !wait_for_file(path("pid2"))) return {};
    return {std::stoi(trimmed_file("pid")), std::stoi(trimmed_file("pid2"))};
  }

  std::string dir_;
  std::string url_;
};

}  // namespace cli_test
